"""Held-out distributed workloads of issue 36 (DDP, FSDP2, tensor parallelism): each a function of
(rank, world_size) that does what a torchrun script does on that rank (set its device, start the
NCCL process group, build a small model, two training steps). Committed before they were recorded
on a GPU or traced.

Recorded per rank on a multi-GPU host by scripts/record_distributed.py; traced per rank without a
GPU by ``python -m vramlab.trace --nproc N``. Run directly under torchrun, this file runs the
workload named on its command line:

    torchrun --nproc_per_node 2 scripts/trace_workloads_36.py ddp_bf16_autocast

Models have 1001- or 1000-row layers on purpose: FSDP2 pads each shard's dim 0 to a multiple of the
world size, and TP's uneven shards differ between ranks."""

import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def _setup(rank, world_size):
    """The device and the process group, as a torchrun script sets them up."""
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    device = torch.device("cuda", local)
    if not dist.is_initialized():
        dist.init_process_group("nccl", rank=rank, world_size=world_size, device_id=device)
    torch.manual_seed(0)
    return device


class _Block(nn.Module):
    """A transformer block's MLP half with a norm: Linear(d, 4d) -> GELU -> Linear(4d, d)."""

    def __init__(self, d=1024, hidden=4004):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, hidden)
        self.down = nn.Linear(hidden, d)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


class _Stack(nn.Module):
    def __init__(self, layers=4, d=1024, hidden=4004, out=1001, checkpointed=False):
        super().__init__()
        self.blocks = nn.ModuleList(_Block(d, hidden) for _ in range(layers))
        self.head = nn.Linear(d, out)
        self.checkpointed = checkpointed

    def forward(self, x):
        for block in self.blocks:
            if self.checkpointed:
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self.head(x)


def _steps(model, optimizer, device, batch=32, seq=128, d=1024, out=1001, autocast=None, steps=2):
    for _ in range(steps):
        x = torch.randn(batch, seq, d, device=device)
        target = torch.randint(0, out, (batch, seq), device=device)
        if autocast is not None:
            with torch.autocast("cuda", dtype=autocast):
                logits = model(x)
        else:
            logits = model(x)
        loss = F.cross_entropy(logits.float().flatten(0, 1), target.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def ddp_bf16_autocast(rank, world_size):
    """DDP (default buckets, gradient_as_bucket_view=False) over a 4-block MLP stack, bf16
    autocast, AdamW: construction broadcast, the one big first bucket, and the rebuild in step 2."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    device = _setup(rank, world_size)
    model = DDP(_Stack().to(device), device_ids=[device.index])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    _steps(model, optimizer, device, autocast=torch.bfloat16)


def _fsdp2(rank, world_size, reshard_after_forward=True, mixed=True, checkpointed=False, offload=False):
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    device = _setup(rank, world_size)
    model = _Stack(checkpointed=checkpointed)
    if not offload:
        model = model.to(device)
    kwargs = {"reshard_after_forward": reshard_after_forward}
    if mixed:
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    if offload:
        kwargs["offload_policy"] = CPUOffloadPolicy(pin_memory=True)
    for block in model.blocks:
        fully_shard(block, **kwargs)
    fully_shard(model, **kwargs)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    _steps(model, optimizer, device)


def fsdp2_mp_reshard(rank, world_size):
    """FSDP2 per block + root, MixedPrecisionPolicy(bf16 params, fp32 reduce),
    reshard_after_forward=True, AdamW."""
    _fsdp2(rank, world_size, reshard_after_forward=True)


def fsdp2_mp_no_reshard(rank, world_size):
    """As fsdp2_mp_reshard with reshard_after_forward=False: unsharded params kept from forward to
    backward."""
    _fsdp2(rank, world_size, reshard_after_forward=False)


def fsdp2_checkpoint(rank, world_size):
    """FSDP2 per block + root in fp32 with non-reentrant activation checkpointing of each block."""
    _fsdp2(rank, world_size, mixed=False, checkpointed=True)


def fsdp2_cpu_offload(rank, world_size):
    """FSDP2 per block + root in fp32 with CPUOffloadPolicy(pin_memory=True): sharded params,
    grads and AdamW's state on the host; the GPU holds all-gather buffers and activations."""
    _fsdp2(rank, world_size, mixed=False, offload=True)


class _TPLayer(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.up = nn.Linear(d, hidden)
        self.down = nn.Linear(hidden, d)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(x)))


class _TPMLP(nn.Module):
    def __init__(self, d=1024, hidden=4096, layers=3, out=1000):
        super().__init__()
        self.layers = nn.ModuleList(_TPLayer(d, hidden) for _ in range(layers))
        self.head = nn.Linear(d, out)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def _tp_plan(model):
    """Every parameter a DTensor (AdamW's foreach path refuses a mix of DTensors and tensors): the
    head ColwiseParallel with its output all-gathered (Replicate)."""
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    plan = {"head": ColwiseParallel(output_layouts=Replicate())}
    for i in range(len(model.layers)):
        plan[f"layers.{i}.up"] = ColwiseParallel()
        plan[f"layers.{i}.down"] = RowwiseParallel()
    return plan


def tp_colwise_rowwise(rank, world_size):
    """Tensor parallelism over all ranks: each MLP's up projection ColwiseParallel, down
    RowwiseParallel (an all-reduce of the activations in forward, and of the input's grad in
    backward); the head ColwiseParallel, its logits all-gathered; AdamW."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module

    device = _setup(rank, world_size)
    mesh = init_device_mesh("cuda", (world_size,))
    model = parallelize_module(_TPMLP().to(device), mesh, _tp_plan(_TPMLP()))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    _steps(model, optimizer, device, batch=16, out=1000)


def fsdp_tp_2d(rank, world_size):
    """2-D parallelism on 4 GPUs: a (2, 2) mesh ("dp", "tp"), TP on "tp" as tp_colwise_rowwise,
    then FSDP2 per layer and root on "dp" (bf16 params, fp32 reduce); AdamW."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.tensor.parallel import parallelize_module

    if world_size != 4:
        raise SystemExit("fsdp_tp_2d needs 4 ranks")
    device = _setup(rank, world_size)
    mesh = init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp", "tp"))
    model = _TPMLP().to(device)
    model = parallelize_module(model, mesh["tp"], _tp_plan(model))
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.layers:
        fully_shard(layer, mesh=mesh["dp"], mp_policy=mp)
    fully_shard(model, mesh=mesh["dp"], mp_policy=mp)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    _steps(model, optimizer, device, batch=16, out=1000)


def lora_ddp(rank, world_size):
    """peft LoRA (r=8 on c_attn) on a small Hugging Face GPT-2 built from its config, under DDP
    (find_unused_parameters=False), AdamW over the adapters only, two steps at batch 8 x 256."""
    from peft import LoraConfig, get_peft_model
    from torch.nn.parallel import DistributedDataParallel as DDP
    from transformers import GPT2Config, GPT2LMHeadModel

    device = _setup(rank, world_size)
    config = GPT2Config(n_layer=4, n_embd=512, n_head=8, vocab_size=8192, n_positions=256, bos_token_id=1, eos_token_id=1)
    model = get_peft_model(GPT2LMHeadModel(config), LoraConfig(r=8, lora_alpha=16, target_modules=["c_attn"], fan_in_fan_out=True)).to(device)
    model = DDP(model, device_ids=[device.index])
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 8192, (8, 256), device=device)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


ALL = {
    f.__name__: f
    for f in (
        ddp_bf16_autocast,
        fsdp2_mp_reshard,
        fsdp2_mp_no_reshard,
        fsdp2_checkpoint,
        fsdp2_cpu_offload,
        tp_colwise_rowwise,
        fsdp_tp_2d,
        lora_ddp,
    )
}
# The world sizes each workload is for (fsdp_tp_2d needs a 2 x 2 mesh).
WORLD_SIZES = {name: (2, 4) for name in ALL}
WORLD_SIZES["fsdp_tp_2d"] = (4,)


def main():
    """Under torchrun: run the workload named on the command line on this rank."""
    name = sys.argv[1]
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    ALL[name](rank, world_size)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
