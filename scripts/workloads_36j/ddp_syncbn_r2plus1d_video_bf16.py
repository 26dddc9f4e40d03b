"""Video classification: torchvision R(2+1)D-18 with SyncBatchNorm under DDP, channels_last_3d, bf16.

Parallelism: ``DistributedDataParallel`` over 2 ranks after
``nn.SyncBatchNorm.convert_sync_batchnorm`` (every BatchNorm3d becomes a SyncBatchNorm, so
each BN forward and backward all-gathers batch statistics across the ranks).

Model: ``torchvision.models.video.r2plus1d_18(weights=None, num_classes=400)`` (factorised
3-D convs, about 31.5 M parameters), converted to ``torch.channels_last_3d``.

Precision: fp32 weights, forward under ``torch.autocast(bfloat16)``; cross entropy with label
smoothing 0.1 in fp32.
Optimizer: SGD (lr 0.05, momentum 0.9, nesterov, weight decay 1e-4) with a cosine schedule
(``CosineAnnealingLR`` over the 6 steps), ``clip_grad_norm_(5.0)``.
Data: synthetic clips, batch 16 x 3 x 16 frames x 112 x 112 per rank (channels_last_3d), 6
training steps with the loss printed on rank 0; then one evaluation batch of 16 clips per rank
under ``torch.no_grad()`` with ``model.eval()`` (running BN statistics), top-1 correct counts
all-reduced (SUM).
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP

NUM_CLASSES = 400
BATCH = 16
FRAMES = 16
SIZE = 112
STEPS = 6


def make_clips(device):
    x = torch.randn(BATCH, 3, FRAMES, SIZE, SIZE, device=device)
    y = torch.randint(0, NUM_CLASSES, (BATCH,), device=device)
    return x.contiguous(memory_format=torch.channels_last_3d), y


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)

    torch.manual_seed(0)
    model = torchvision.models.video.r2plus1d_18(weights=None, num_classes=NUM_CLASSES)
    model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    model = model.to(device, memory_format=torch.channels_last_3d)
    model = DDP(model, device_ids=[local_rank])

    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=STEPS)

    torch.manual_seed(1 + rank)
    model.train()
    for step in range(STEPS):
        clips, labels = make_clips(device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(clips)
        loss = F.cross_entropy(logits.float(), labels, label_smoothing=0.1)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        scheduler.step()
        if rank == 0:
            print(f"step {step} loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.4f}", flush=True)

    model.eval()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        clips, labels = make_clips(device)
        pred = model(clips).argmax(dim=1)
        counts = torch.stack([(pred == labels).sum(), torch.tensor(BATCH, device=device)]).float()
    dist.all_reduce(counts, op=dist.ReduceOp.SUM)
    if rank == 0:
        print(f"eval top1 {counts[0].item() / counts[1].item():.4f} over {int(counts[1].item())} clips "
              f"({world_size} ranks)", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
