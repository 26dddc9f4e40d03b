"""Hand-written 2-D (data x tensor) parallel residual MLP using DTensor operations directly.

Parallelism: a 2x2 device mesh ("dp", "tp") from ``init_device_mesh``.  No ``parallelize_module``
and no FSDP/DDP: every parameter is created with ``distribute_tensor`` and explicit placements,
e.g. the up projection ``[Replicate(), Shard(0)]`` (column parallel on tp, replicated on dp) and the
down projection ``[Replicate(), Shard(1)]`` (row parallel), LayerNorm weights
``[Replicate(), Replicate()]``, classifier ``[Replicate(), Shard(0)]``.  The input batch of each dp
rank is wrapped with ``DTensor.from_local(..., [Shard(0), Replicate()])`` and the forward is plain
``torch.nn.functional`` code on DTensors with explicit ``redistribute`` calls (tp partial sums ->
replicate after every block, class-sharded logits -> replicated before the loss).  After
backward the gradients are ``Partial`` over dp; they are explicitly redistributed to the
parameters' own placements (the data-parallel all-reduce) before clipping and the optimizer step.
At the end the first block's up-projection is gathered with ``full_tensor()`` on every rank.

Model: input features 4096 -> 8 pre-LayerNorm residual blocks (4096 -> 16384 -> 4096, GELU) ->
LayerNorm -> classifier over 32000 classes (about 1.2 B parameters, about 0.6 B per rank), fp32
weights, TF32 matmuls allowed.

Optimizer: ``torch.optim.Adam`` (lr 1e-4, foreach) on the DTensor parameters, gradient clipping at
1.0 with ``torch.nn.utils.clip_grad_norm_``.

Data: synthetic features and labels, batch 2048 samples per dp rank (the same on both tp ranks of a
dp group), 6 steps.
"""
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

IN_DIM = 4096
HIDDEN = 16384
BLOCKS = 8
CLASSES = 32000
BATCH = 2048
STEPS = 6


def make_param(full, mesh, placements):
    return torch.nn.Parameter(distribute_tensor(full, mesh, placements))


def build_params(mesh, device):
    col = [Replicate(), Shard(0)]  # weight (out, in) sharded on out-features over tp
    row = [Replicate(), Shard(1)]  # weight (out, in) sharded on in-features over tp
    rep = [Replicate(), Replicate()]
    params = {"blocks": []}
    for _ in range(BLOCKS):
        params["blocks"].append(
            {
                "ln_w": make_param(torch.ones(IN_DIM, device=device), mesh, rep),
                "ln_b": make_param(torch.zeros(IN_DIM, device=device), mesh, rep),
                "w_up": make_param(torch.randn(HIDDEN, IN_DIM, device=device) * 0.02, mesh, col),
                "b_up": make_param(torch.zeros(HIDDEN, device=device), mesh, [Replicate(), Shard(0)]),
                "w_down": make_param(torch.randn(IN_DIM, HIDDEN, device=device) * 0.02, mesh, row),
                "b_down": make_param(torch.zeros(IN_DIM, device=device), mesh, rep),
            }
        )
    params["ln_f_w"] = make_param(torch.ones(IN_DIM, device=device), mesh, rep)
    params["ln_f_b"] = make_param(torch.zeros(IN_DIM, device=device), mesh, rep)
    params["w_cls"] = make_param(torch.randn(CLASSES, IN_DIM, device=device) * 0.02, mesh, col)
    return params


def all_params(params):
    out = []
    for blk in params["blocks"]:
        out += list(blk.values())
    out += [params["ln_f_w"], params["ln_f_b"], params["w_cls"]]
    return out


def forward(params, x, mesh):
    # x: DTensor [Shard(0), Replicate()] of shape (global_batch, IN_DIM)
    for blk in params["blocks"]:
        h = F.layer_norm(x, (IN_DIM,), blk["ln_w"], blk["ln_b"])
        h = F.gelu(F.linear(h, blk["w_up"], blk["b_up"]))  # [Shard(0), Shard(1)]
        h = F.linear(h, blk["w_down"])  # [Shard(0), Partial()]
        h = h.redistribute(mesh, [Shard(0), Replicate()])  # all-reduce over tp
        x = x + h + blk["b_down"]
    x = F.layer_norm(x, (IN_DIM,), params["ln_f_w"], params["ln_f_b"])
    logits = F.linear(x, params["w_cls"])  # [Shard(0), Shard(1)]: classes sharded on tp
    return logits.redistribute(mesh, [Shard(0), Replicate()])  # all-gather over tp


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    device = torch.device("cuda", local_rank)
    mesh = init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp", "tp"))
    dp_rank = mesh.get_local_rank("dp")
    torch.backends.cuda.matmul.allow_tf32 = True

    torch.manual_seed(0)  # identical full tensors on every rank before distribute_tensor
    params = build_params(mesh, device)
    plist = all_params(params)
    optimizer = torch.optim.Adam(plist, lr=1e-4, foreach=True)

    gen = torch.Generator(device="cpu").manual_seed(500 + dp_rank)  # same data within a dp group
    for step in range(STEPS):
        x_local = torch.randn(BATCH, IN_DIM, generator=gen).to(device)
        y_local = torch.randint(0, CLASSES, (BATCH,), generator=gen).to(device)
        x = DTensor.from_local(x_local, mesh, [Shard(0), Replicate()])
        y = DTensor.from_local(y_local, mesh, [Shard(0), Replicate()])

        logits = forward(params, x, mesh)
        loss = F.cross_entropy(logits, y)  # [Partial(avg), Replicate()]
        loss.backward()

        # Data-parallel gradient reduction, written as DTensor redistributes.
        for p in plist:
            if p.grad is not None and p.grad.placements != p.placements:
                p.grad = p.grad.redistribute(p.device_mesh, p.placements)
        grad_norm = torch.nn.utils.clip_grad_norm_(plist, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

        loss_value = loss.full_tensor().item()
        if rank == 0:
            gn = grad_norm.full_tensor() if isinstance(grad_norm, DTensor) else grad_norm
            print(f"step {step} loss {loss_value:.4f} grad_norm {gn.item():.4f}", flush=True)

    # Gather one full weight matrix on every rank, e.g. for logging or export.
    w_up0 = params["blocks"][0]["w_up"].full_tensor()
    if rank == 0:
        print(f"block0 w_up {tuple(w_up0.shape)} norm {w_up0.norm().item():.3f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
