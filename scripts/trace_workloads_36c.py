"""Issue 36's third held-out group of distributed workloads, committed before they were recorded
and after the tracer kept DDP's replaced buckets to the end (the rule the second group showed):
DDP over a Hugging Face GPT-2, DDP with 1 MiB buckets and bf16 parameters, DDP under fp16 autocast
with a GradScaler, tensor parallelism over a Hugging Face Llama's MLPs, and FSDP2 with
activation checkpointing over a Hugging Face GPT-2.

Recorded per rank by ``python scripts/record_distributed.py OUT --workloads trace_workloads_36c``;
compared by ``python scripts/compare_distributed_36.py DIR --workloads trace_workloads_36c``."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from trace_workloads_36 import _setup, _Stack, _steps


def _gpt2(n_layer=4):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=n_layer, n_embd=768, n_head=12, vocab_size=16000, n_positions=512, bos_token_id=1, eos_token_id=1)
    return GPT2LMHeadModel(config)


def ddp_hf_gpt2(rank, world_size):
    """DDP (default buckets) over a Hugging Face GPT-2 from its config, AdamW, three steps at
    batch 8 x 256."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    device = _setup(rank, world_size)
    model = DDP(_gpt2().to(device), device_ids=[device.index])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(3):
        ids = torch.randint(0, 16000, (8, 256), device=device)
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def ddp_small_buckets_bf16(rank, world_size):
    """DDP with 1 MiB buckets over a stack whose parameters are bf16 (model.to(bfloat16)), SGD with
    momentum; two steps."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    device = _setup(rank, world_size)
    model = DDP(_Stack(layers=3).to(device=device, dtype=torch.bfloat16), device_ids=[device.index], bucket_cap_mb=1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    for _ in range(2):
        x = torch.randn(16, 128, 1024, device=device, dtype=torch.bfloat16)
        target = torch.randint(0, 1001, (16, 128), device=device)
        F.cross_entropy(model(x).float().flatten(0, 1), target.flatten()).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def ddp_fp16_scaler(rank, world_size):
    """DDP over a stack under fp16 autocast with a GradScaler, AdamW; three steps."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    device = _setup(rank, world_size)
    model = DDP(_Stack(layers=4).to(device), device_ids=[device.index])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(3):
        x = torch.randn(16, 128, 1024, device=device)
        target = torch.randint(0, 1001, (16, 128), device=device)
        with torch.autocast("cuda", dtype=torch.float16):
            logits = model(x)
        scaler.scale(F.cross_entropy(logits.float().flatten(0, 1), target.flatten())).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)


def tp_hf_llama_mlp(rank, world_size):
    """Tensor parallelism over a Hugging Face Llama's MLPs (gate and up ColwiseParallel, down
    RowwiseParallel), the rest replicated as plain tensors; inference of two batches under
    no_grad in bf16."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    from transformers import LlamaConfig, LlamaForCausalLM

    device = _setup(rank, world_size)
    mesh = init_device_mesh("cuda", (world_size,))
    config = LlamaConfig(hidden_size=1024, intermediate_size=4096, num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=4, vocab_size=16000)
    model = LlamaForCausalLM(config).to(device=device, dtype=torch.bfloat16).eval()
    plan = {}
    for i in range(config.num_hidden_layers):
        plan[f"model.layers.{i}.mlp.gate_proj"] = ColwiseParallel()
        plan[f"model.layers.{i}.mlp.up_proj"] = ColwiseParallel()
        plan[f"model.layers.{i}.mlp.down_proj"] = RowwiseParallel()
    parallelize_module(model, mesh, plan)
    with torch.no_grad():
        for _ in range(2):
            ids = torch.randint(0, 16000, (8, 512), device=device)
            model(input_ids=ids)


def fsdp2_hf_gpt2_checkpointing(rank, world_size):
    """FSDP2 per GPT-2 block and the root, Hugging Face's gradient checkpointing on, bf16 params
    with fp32 reduce, AdamW; two steps at batch 8 x 512."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    device = _setup(rank, world_size)
    model = _gpt2(n_layer=6).to(device)
    model.gradient_checkpointing_enable()
    model.train()
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.transformer.h:
        fully_shard(block, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 16000, (8, 512), device=device)
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


ALL = {
    f.__name__: f
    for f in (
        ddp_hf_gpt2,
        ddp_small_buckets_bf16,
        ddp_fp16_scaler,
        tp_hf_llama_mlp,
        fsdp2_hf_gpt2_checkpointing,
    )
}
WORLD_SIZES = {name: (2, 4) for name in ALL}

if __name__ == "__main__":
    import os
    import sys

    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    ALL[sys.argv[1]](rank, world_size)
    dist.destroy_process_group()
