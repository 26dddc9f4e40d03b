"""Issue 36's fourth held-out group of distributed workloads, committed before they were recorded
on a GPU: the kinds users run that the first three groups (trace_workloads_36.py, _36b, _36c) did
not have. FSDP1 (FullyShardedDataParallel) in fp32 and with a MixedPrecision policy and
use_orig_params over a Hugging Face GPT-2; ZeroRedundancyOptimizer under DDP; DDP with the bf16
compression comm hook; DDP with gradient_as_bucket_view under bf16 autocast; FSDP2 over a peft
LoRA Llama; tensor parallelism with sequence parallelism and loss_parallel over a vocabulary-sharded
embedding and head; FSDP2 with a MixedPrecisionPolicy over a Hugging Face Llama with gradient
accumulation (set_requires_gradient_sync); and 2-D FSDP2 + TP over a Hugging Face Llama on a (2, 2)
mesh.

Each is a function of (rank, world_size) doing what a torchrun script does on that rank. Recorded
per rank by ``python scripts/record_distributed.py OUT --workloads trace_workloads_36d``; compared
by ``python scripts/compare_distributed_36.py DIR --workloads trace_workloads_36d``.

Before recording, each was traced on the CPU for rank 0 of 4 by the tracer of this commit: seven
trace to their end; the two FSDP1 workloads construct and run their first forward but stop in the
first backward (FSDP1's post-backward check that the unsharded flat parameter is on the compute
device sees the stand-in's meta device), and zero_ddp stops where `torch.distributed.optim` is first
imported inside a trace (TorchScript compiles the functional AdamW and meets a stand-in lambda of
the tracer's; imported before the trace, it traces to its end). Nothing here was run on a GPU
before the recording."""

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from trace_workloads_36 import _Block, _setup, _Stack, _steps
from trace_workloads_36c import _gpt2


def _llama(layers=4, tie=False):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=1024, intermediate_size=2816, num_hidden_layers=layers, num_attention_heads=16, num_key_value_heads=4,
        vocab_size=16000, max_position_embeddings=512, tie_word_embeddings=tie,
    )
    return LlamaForCausalLM(config)


def _lm_steps(model, optimizer, device, batch=8, seq=256, vocab=16000, steps=2):
    for _ in range(steps):
        ids = torch.randint(0, vocab, (batch, seq), device=device)
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def fsdp1_full_shard(rank, world_size):
    """FSDP1 (FullyShardedDataParallel, FULL_SHARD, flat parameters) wrapping each block of a
    4-block stack built on the host and moved by device_id, fp32, AdamW; two steps."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    device = _setup(rank, world_size)
    model = FSDP(_Stack(layers=4), auto_wrap_policy=ModuleWrapPolicy({_Block}), device_id=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    _steps(model, optimizer, device, batch=16)


def fsdp1_mixed_gpt2(rank, world_size):
    """FSDP1 over a Hugging Face GPT-2 (6 layers) moved to the GPU first, each GPT2Block wrapped,
    MixedPrecision(bf16 params and buffers, fp32 reduce), use_orig_params=True, AdamW; two steps at
    batch 8 x 256."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import MixedPrecision
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    device = _setup(rank, world_size)
    mp = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, buffer_dtype=torch.bfloat16)
    model = FSDP(_gpt2(n_layer=6).to(device), auto_wrap_policy=ModuleWrapPolicy({GPT2Block}), mixed_precision=mp, use_orig_params=True, device_id=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    _lm_steps(model, optimizer, device)


def zero_ddp(rank, world_size):
    """ZeroRedundancyOptimizer (AdamW's state sharded over the ranks, each rank stepping its own
    parameters and broadcasting them) with DDP over a 4-block stack, fp32; three steps."""
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP

    device = _setup(rank, world_size)
    model = DDP(_Stack(layers=4).to(device), device_ids=[device.index])
    optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-4)
    _steps(model, optimizer, device, batch=16, steps=3)


def ddp_bf16_compress_hook(rank, world_size):
    """DDP with the bf16 compression comm hook (each bucket cast to bf16, all-reduced, cast back),
    fp32 model, AdamW; three steps."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    device = _setup(rank, world_size)
    model = DDP(_Stack(layers=4).to(device), device_ids=[device.index])
    model.register_comm_hook(None, default_hooks.bf16_compress_hook)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    _steps(model, optimizer, device, batch=16, steps=3)


def ddp_bucket_view_autocast(rank, world_size):
    """DDP with gradient_as_bucket_view=True (default buckets) under bf16 autocast, AdamW; three
    steps, one micro-batch each."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    device = _setup(rank, world_size)
    model = DDP(_Stack(layers=4).to(device), device_ids=[device.index], gradient_as_bucket_view=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    _steps(model, optimizer, device, batch=24, autocast=torch.bfloat16, steps=3)


def fsdp2_lora_llama(rank, world_size):
    """peft LoRA (r=16 on q, k, v, o) over a Hugging Face Llama from its config, FSDP2 per decoder
    layer and the root (frozen base weights and trainable adapters in one group) with bf16 params
    and fp32 reduce, AdamW over the adapters; two steps at batch 8 x 256."""
    from peft import LoraConfig, get_peft_model
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    device = _setup(rank, world_size)
    model = get_peft_model(_llama(), LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])).to(device)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.base_model.model.model.layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    _lm_steps(model, optimizer, device)


class _Embedded(nn.Module):
    """Token embedding, MLP blocks with LayerNorms, a final norm and a vocabulary head."""

    def __init__(self, vocab=16000, d=1024, layers=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(_Block(d, 4096) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def tp_sequence_loss_parallel(rank, world_size):
    """Tensor parallelism as torchtitan sets it up: the embedding RowwiseParallel (vocabulary
    sharded, output reduce-scattered to sequence shards), each block's LayerNorm SequenceParallel,
    up ColwiseParallel (input all-gathered) and down RowwiseParallel (output reduce-scattered), the
    final norm SequenceParallel, the head ColwiseParallel with its logits left sharded on the
    vocabulary (a DTensor) and the cross-entropy under loss_parallel(); AdamW, two steps at batch
    8 x 256."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, SequenceParallel, loss_parallel, parallelize_module

    device = _setup(rank, world_size)
    mesh = init_device_mesh("cuda", (world_size,))
    model = _Embedded().to(device)
    plan = {
        "embed": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1), use_local_output=False),
    }
    for i in range(len(model.blocks)):
        plan[f"blocks.{i}.norm"] = SequenceParallel()
        plan[f"blocks.{i}.up"] = ColwiseParallel(input_layouts=Shard(1))
        plan[f"blocks.{i}.down"] = RowwiseParallel(output_layouts=Shard(1))
    model = parallelize_module(model, mesh, plan)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 16000, (8, 256), device=device)
        logits = model(ids)
        with loss_parallel():
            loss = F.cross_entropy(logits.flatten(0, 1), ids.flatten())
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def fsdp2_llama_accumulate(rank, world_size):
    """FSDP2 per decoder layer and root over a Hugging Face Llama from its config (tied
    embeddings), MixedPrecisionPolicy(bf16 params, fp32 reduce), two micro-batches per step with
    the gradient reduction off for the first (set_requires_gradient_sync(False): unsharded fp32
    gradients kept between them), AdamW; two steps at batch 4 x 256."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    device = _setup(rank, world_size)
    model = _llama(tie=True).to(device)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        for micro in range(2):
            model.set_requires_gradient_sync(micro == 1)
            ids = torch.randint(0, 16000, (4, 256), device=device)
            (model(input_ids=ids, labels=ids).loss / 2).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def fsdp_tp_2d_llama(rank, world_size):
    """2-D parallelism over a Hugging Face Llama on 4 GPUs: a (2, 2) mesh ("dp", "tp"); in each
    decoder layer q, k, v, gate and up ColwiseParallel and o and down RowwiseParallel on "tp", the
    embedding RowwiseParallel and the head ColwiseParallel (logits replicated); then FSDP2 per
    layer and root on "dp" with bf16 params and fp32 reduce; AdamW (the norms' weights are 1-D
    DTensors on "dp", the rest 2-D: foreach off); two steps at batch 8 x 256."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    if world_size != 4:
        raise SystemExit("fsdp_tp_2d_llama needs 4 ranks")
    device = _setup(rank, world_size)
    mesh = init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp", "tp"))
    model = _llama().to(device)
    plan = {
        "model.embed_tokens": RowwiseParallel(input_layouts=Replicate()),
        "lm_head": ColwiseParallel(output_layouts=Replicate()),
    }
    for i in range(len(model.model.layers)):
        for name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj"):
            plan[f"model.layers.{i}.{name}"] = ColwiseParallel()
        for name in ("self_attn.o_proj", "mlp.down_proj"):
            plan[f"model.layers.{i}.{name}"] = RowwiseParallel()
    parallelize_module(model, mesh["tp"], plan)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh["dp"], mp_policy=mp)
    fully_shard(model, mesh=mesh["dp"], mp_policy=mp)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    _lm_steps(model, optimizer, device)


ALL = {
    f.__name__: f
    for f in (
        fsdp1_full_shard,
        fsdp1_mixed_gpt2,
        zero_ddp,
        ddp_bf16_compress_hook,
        ddp_bucket_view_autocast,
        fsdp2_lora_llama,
        tp_sequence_loss_parallel,
        fsdp2_llama_accumulate,
        fsdp_tp_2d_llama,
    )
}
WORLD_SIZES = {name: (2, 4) for name in ALL}
WORLD_SIZES["fsdp_tp_2d_llama"] = (4,)

if __name__ == "__main__":
    import os
    import sys

    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    ALL[sys.argv[1]](rank, world_size)
    dist.destroy_process_group()
