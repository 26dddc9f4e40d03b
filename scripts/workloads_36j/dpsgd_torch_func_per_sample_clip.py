"""DP-SGD with per-sample gradients from torch.func (vmap of grad), gradients all-reduced by hand.

Parallelism: data parallel over 2 ranks without DDP.  Rank 0's initial parameters are
broadcast with ``dist.broadcast``; each step every rank computes per-sample gradients of its
local batch with ``torch.func.vmap(torch.func.grad(loss))`` over ``torch.func.functional_call``,
clips each sample's full gradient to L2 norm 1.0, sums the clipped gradients, rank 0 alone adds
Gaussian noise (noise multiplier 1.0 x clip norm), the sums are ``dist.all_reduce``d (SUM) one
tensor per parameter, divided by the global batch, written into ``p.grad`` and applied by the
optimizer.

Model: WideResNet-16-8 for 32x32 images with GroupNorm(16) instead of BatchNorm (widths
128/256/512, two pre-activation basic blocks per stage, 10 classes), about 11 M parameters.
Per-sample gradients therefore hold batch x 11 M fp32 values per rank.

Precision: fp32 throughout (no autocast).
Optimizer: SGD (lr 0.5, momentum 0.9).
Data: synthetic CIFAR-shaped images, batch 128 x 3 x 32 x 32 per rank, 6 steps; mean loss and
the fraction of clipped samples all-reduced and printed on rank 0; then one evaluation batch
of 256 per rank under ``torch.no_grad()`` with correct counts all-reduced.
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

WIDEN = 8
DEPTH = 16
NUM_CLASSES = 10
BATCH = 128
EVAL_BATCH = 256
STEPS = 6
CLIP_NORM = 1.0
NOISE_MULTIPLIER = 1.0
LR = 0.5


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.gn1 = nn.GroupNorm(16, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.gn2 = nn.GroupNorm(16, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.shortcut = None if (cin == cout and stride == 1) else nn.Conv2d(cin, cout, 1, stride, bias=False)

    def forward(self, x):
        o = F.relu(self.gn1(x))
        y = self.conv1(o)
        y = self.conv2(F.relu(self.gn2(y)))
        return y + (x if self.shortcut is None else self.shortcut(o))


class WideResNet(nn.Module):
    def __init__(self):
        super().__init__()
        n = (DEPTH - 4) // 6
        widths = [16, 16 * WIDEN, 32 * WIDEN, 64 * WIDEN]
        self.conv = nn.Conv2d(3, widths[0], 3, 1, 1, bias=False)
        layers = []
        cin = widths[0]
        for stage, stride in zip(range(3), (1, 2, 2)):
            for i in range(n):
                layers.append(Block(cin, widths[stage + 1], stride if i == 0 else 1))
                cin = widths[stage + 1]
        self.blocks = nn.Sequential(*layers)
        self.gn = nn.GroupNorm(16, cin)
        self.fc = nn.Linear(cin, NUM_CLASSES)

    def forward(self, x):
        h = self.blocks(self.conv(x))
        h = F.adaptive_avg_pool2d(F.relu(self.gn(h)), 1).flatten(1)
        return self.fc(h)


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)

    torch.manual_seed(0)
    model = WideResNet().to(device)
    with torch.no_grad():
        for p in model.parameters():
            dist.broadcast(p, src=0)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    names = [n for n, _ in model.named_parameters()]

    def sample_loss(params, buffers, x, y):
        logits = functional_call(model, (params, buffers), (x.unsqueeze(0),))
        return F.cross_entropy(logits, y.unsqueeze(0))

    per_sample_grad_fn = vmap(grad(sample_loss), in_dims=(None, None, 0, 0))

    torch.manual_seed(10 + rank)
    noise_gen = torch.Generator(device=device)
    noise_gen.manual_seed(1234)
    global_batch = BATCH * world_size

    for step in range(STEPS):
        x = torch.randn(BATCH, 3, 32, 32, device=device)
        y = torch.randint(0, NUM_CLASSES, (BATCH,), device=device)

        params = {n: p.detach() for n, p in model.named_parameters()}
        buffers = {n: b.detach() for n, b in model.named_buffers()}
        per_sample = per_sample_grad_fn(params, buffers, x, y)  # name -> (BATCH, *shape)

        norms = torch.stack([per_sample[n].flatten(1).norm(2, dim=1) for n in names], dim=1).norm(2, dim=1)
        scale = (CLIP_NORM / (norms + 1e-6)).clamp(max=1.0)
        summed = [torch.einsum("b,b...->...", scale, per_sample[n]) for n in names]
        del per_sample

        if rank == 0:
            for g in summed:
                g.add_(torch.randn(g.shape, device=device, generator=noise_gen), alpha=NOISE_MULTIPLIER * CLIP_NORM)
        for g in summed:
            dist.all_reduce(g, op=dist.ReduceOp.SUM)
        for p, g in zip(model.parameters(), summed):
            p.grad = g.div_(global_batch)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

        with torch.no_grad():
            loss = F.cross_entropy(model(x), y)
            stats = torch.stack([loss, (norms > CLIP_NORM).float().mean()])
        dist.all_reduce(stats, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"step {step} loss {stats[0].item():.4f} clipped_frac {stats[1].item():.3f}", flush=True)

    model.eval()
    with torch.no_grad():
        x = torch.randn(EVAL_BATCH, 3, 32, 32, device=device)
        y = torch.randint(0, NUM_CLASSES, (EVAL_BATCH,), device=device)
        correct = (model(x).argmax(1) == y).sum().float()
    dist.all_reduce(correct, op=dist.ReduceOp.SUM)
    if rank == 0:
        print(f"eval acc {correct.item() / (EVAL_BATCH * world_size):.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
