"""Issue 36's second held-out group of distributed workloads (kinds the first group,
trace_workloads_36.py, did not have): DDP with no_sync accumulation and bucket views, DDP with a
static graph and checkpointing, DDP finding unused parameters, FSDP2 over a Hugging Face Llama,
FSDP2 with gradient clipping, HSDP on a 2-D mesh, and tensor parallelism with sequence parallel
norms. Committed before they were recorded on a GPU; written after the DTensor mend of the tracer,
which the first group showed.

Each is a function of (rank, world_size) doing what a torchrun script does on that rank. Recorded
per rank by ``python scripts/record_distributed.py OUT --workloads trace_workloads_36b``; traced by
``vramlab.trace(world_size=N, rank=r)`` (scripts/compare_distributed_36.py --workloads ...)."""

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from trace_workloads_36 import _setup, _Stack, _steps


def ddp_accumulate_no_sync(rank, world_size):
    """DDP with gradient_as_bucket_view=True and 10 MiB buckets; two micro-batches per step, the
    first under no_sync(); SGD with momentum in fp32; two steps."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    device = _setup(rank, world_size)
    model = DDP(_Stack(layers=3).to(device), device_ids=[device.index], gradient_as_bucket_view=True, bucket_cap_mb=10)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    for _ in range(2):
        for micro in range(2):
            x = torch.randn(16, 128, 1024, device=device)
            target = torch.randint(0, 1001, (16, 128), device=device)
            if micro == 0:
                with model.no_sync():
                    (F.cross_entropy(model(x).flatten(0, 1), target.flatten()) / 2).backward()
            else:
                (F.cross_entropy(model(x).flatten(0, 1), target.flatten()) / 2).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def ddp_static_graph_checkpoint(rank, world_size):
    """DDP(static_graph=True) over a stack whose blocks are checkpointed (non-reentrant), bf16
    autocast, AdamW; three steps."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    device = _setup(rank, world_size)
    model = DDP(_Stack(layers=4, checkpointed=True).to(device), device_ids=[device.index], static_graph=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    _steps(model, optimizer, device, batch=24, autocast=torch.bfloat16, steps=3)


class _TwoHeads(nn.Module):
    """A trunk and two heads, one of them unused in forward."""

    def __init__(self, d=1024):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.used = nn.Linear(d, 1001)
        self.unused = nn.Linear(d, 1001)

    def forward(self, x):
        return self.used(self.trunk(x))


def ddp_find_unused(rank, world_size):
    """DDP(find_unused_parameters=True) over a model whose second head never runs; Adam; two
    steps."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    device = _setup(rank, world_size)
    model = DDP(_TwoHeads().to(device), device_ids=[device.index], find_unused_parameters=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    _steps(model, optimizer, device, batch=32)


def fsdp2_hf_llama(rank, world_size):
    """A Hugging Face Llama from its config (4 layers, hidden 1024), FSDP2 per decoder layer and
    the root with bf16 params and fp32 reduce, AdamW; two steps at batch 8 x 256."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from transformers import LlamaConfig, LlamaForCausalLM

    device = _setup(rank, world_size)
    config = LlamaConfig(
        hidden_size=1024, intermediate_size=2816, num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=4,
        vocab_size=16000, max_position_embeddings=512,
    )
    model = LlamaForCausalLM(config).to(device)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 16000, (8, 256), device=device)
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def fsdp2_clip_grad(rank, world_size):
    """FSDP2 in fp32 per block and root (the root not resharded after forward), the gradients'
    norm clipped with clip_grad_norm_ (DTensor gradients), AdamW; two steps."""
    from torch.distributed.fsdp import fully_shard

    device = _setup(rank, world_size)
    model = _Stack(layers=4).to(device)
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model, reshard_after_forward=False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        x = torch.randn(16, 128, 1024, device=device)
        target = torch.randint(0, 1001, (16, 128), device=device)
        F.cross_entropy(model(x).flatten(0, 1), target.flatten()).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def hsdp_2d(rank, world_size):
    """HSDP on 4 GPUs: fully_shard over a (2, 2) mesh ("replicate", "shard"), parameters sharded
    over two ranks and replicated over the other two, bf16 params, AdamW."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    if world_size != 4:
        raise SystemExit("hsdp_2d needs 4 ranks")
    device = _setup(rank, world_size)
    mesh = init_device_mesh("cuda", (2, 2), mesh_dim_names=("replicate", "shard"))
    model = _Stack(layers=4).to(device)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    _steps(model, optimizer, device, batch=16)


class _SPBlock(nn.Module):
    def __init__(self, d=1024, hidden=4096):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, hidden)
        self.down = nn.Linear(hidden, d)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


class _SPModel(nn.Module):
    def __init__(self, d=1024, layers=3, out=1000):
        super().__init__()
        self.blocks = nn.ModuleList(_SPBlock(d) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, out)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def tp_sequence_parallel(rank, world_size):
    """Tensor parallelism with sequence parallelism, Megatron style: the input sharded on the
    sequence dimension, each LayerNorm SequenceParallel, the MLP's up projection ColwiseParallel
    (its input all-gathered from the sequence shards) and its down projection RowwiseParallel
    (reduce-scattered back to sequence shards), the head's output replicated; AdamW, two steps."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, SequenceParallel, parallelize_module

    device = _setup(rank, world_size)
    mesh = init_device_mesh("cuda", (world_size,))
    model = _SPModel().to(device)
    plan = {
        "norm": SequenceParallel(),
        "head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
    }
    for i in range(len(model.blocks)):
        plan[f"blocks.{i}.norm"] = SequenceParallel()
        plan[f"blocks.{i}.up"] = ColwiseParallel(input_layouts=Shard(1))
        plan[f"blocks.{i}.down"] = RowwiseParallel(output_layouts=Shard(1))
    model = parallelize_module(model, mesh, plan)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        # Each rank holds its own slice of the sequence, as a data loader for sequence parallelism
        # gives it; the residual stream stays local, the plan's styles make DTensors of it.
        x = torch.randn(16, 128 // world_size, 1024, device=device)
        target = torch.randint(0, 1000, (16, 128), device=device)
        F.cross_entropy(model(x).flatten(0, 1), target.flatten()).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

ALL = {
    f.__name__: f
    for f in (
        ddp_accumulate_no_sync,
        ddp_static_graph_checkpoint,
        ddp_find_unused,
        fsdp2_hf_llama,
        fsdp2_clip_grad,
        hsdp_2d,
        tp_sequence_parallel,
    )
}
WORLD_SIZES = {name: (2, 4) for name in ALL}
WORLD_SIZES["hsdp_2d"] = (4,)

if __name__ == "__main__":
    import os
    import sys

    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    ALL[sys.argv[1]](rank, world_size)
    dist.destroy_process_group()
