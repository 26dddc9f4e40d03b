"""DDP EfficientNetV2-S fed by DistributedSampler + DataLoader, per-epoch eval with object collectives.

Parallelism: ``DistributedDataParallel`` over 2 ranks (default buckets, BatchNorm buffers
broadcast from rank 0 every forward).  Input comes from a ``torch.utils.data.DataLoader``
over a CPU ``TensorDataset`` of uint8 images with a ``DistributedSampler`` (shuffle, seed 0,
``set_epoch`` each epoch, drop_last), 2 worker processes and ``pin_memory=True``; batches are
copied with ``non_blocking=True`` and normalised on the GPU.  After each epoch a validation
pass (``DistributedSampler(shuffle=False)``) runs under ``torch.no_grad()`` in ``eval()``
mode; per-rank metric dicts are collected with ``dist.all_gather_object``, rank 0 decides
whether it is the best epoch, the decision is shared with ``dist.broadcast_object_list``, and
after every epoch rank 0 serialises ``model.module.state_dict()`` (plus the best-epoch record)
with ``torch.save`` into an in-memory buffer.

Model: ``torchvision.models.efficientnet_v2_s(weights=None)`` (1000 classes, stochastic depth
0.2, dropout 0.2), about 21.5 M parameters, ``channels_last``.

Precision: fp32 weights, forward under ``torch.autocast(bfloat16)``, cross entropy with label
smoothing 0.1.
Optimizer: SGD (lr 0.2, momentum 0.9, nesterov, weight decay 2e-5) with a linear warm-up
``LambdaLR``; ``clip_grad_norm_(2.0)``.
Data: synthetic 224x224 images; 384 training images (3 steps per epoch of batch 64 per rank),
2 epochs = 6 training steps; 128 validation images (one batch of 64 per rank) per epoch.
"""
import io
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

NUM_CLASSES = 1000
SIZE = 224
BATCH = 64
TRAIN_IMAGES = 384
VAL_IMAGES = 128
EPOCHS = 2
WORKERS = 2

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1) * 255
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1) * 255


def make_dataset(n, seed):
    g = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (n, 3, SIZE, SIZE), dtype=torch.uint8, generator=g)
    labels = torch.randint(0, NUM_CLASSES, (n,), generator=g)
    return TensorDataset(images, labels)


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)

    train_set = make_dataset(TRAIN_IMAGES, seed=1)
    val_set = make_dataset(VAL_IMAGES, seed=2)
    train_sampler = DistributedSampler(train_set, num_replicas=world_size, rank=rank, shuffle=True, seed=0,
                                       drop_last=True)
    val_sampler = DistributedSampler(val_set, num_replicas=world_size, rank=rank, shuffle=False)
    train_loader = DataLoader(train_set, batch_size=BATCH, sampler=train_sampler, num_workers=WORKERS,
                              pin_memory=True, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=BATCH, sampler=val_sampler, num_workers=WORKERS, pin_memory=True)

    torch.manual_seed(0)
    model = torchvision.models.efficientnet_v2_s(weights=None, num_classes=NUM_CLASSES)
    model = model.to(device, memory_format=torch.channels_last)
    model = DDP(model, device_ids=[local_rank])
    mean, std = MEAN.to(device), STD.to(device)

    optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, nesterov=True, weight_decay=2e-5)
    total_steps = EPOCHS * len(train_loader)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / total_steps))

    torch.manual_seed(100 + rank)  # stochastic depth / dropout differ per rank
    best = {"epoch": -1, "acc": -1.0}
    step = 0
    for epoch in range(EPOCHS):
        train_sampler.set_epoch(epoch)
        model.train()
        for images, labels in train_loader:
            images = images.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
            labels = labels.to(device, non_blocking=True)
            x = (images.float() - mean) / std
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(x)
            loss = F.cross_entropy(logits.float(), labels, label_smoothing=0.1)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 2.0)
            optimizer.step()
            scheduler.step()
            if rank == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}", flush=True)
            step += 1

        model.eval()
        correct, seen, loss_sum = 0, 0, 0.0
        with torch.no_grad():
            for images, labels in val_loader:
                images = images.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
                labels = labels.to(device, non_blocking=True)
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    logits = model((images.float() - mean) / std).float()
                loss_sum += F.cross_entropy(logits, labels, reduction="sum").item()
                correct += (logits.argmax(1) == labels).sum().item()
                seen += labels.numel()

        gathered = [None] * world_size
        dist.all_gather_object(gathered, {"rank": rank, "correct": correct, "seen": seen, "loss_sum": loss_sum})
        decision = [None]
        if rank == 0:
            tot_seen = sum(r["seen"] for r in gathered)
            acc = sum(r["correct"] for r in gathered) / tot_seen
            val_loss = sum(r["loss_sum"] for r in gathered) / tot_seen
            print(f"epoch {epoch} val loss {val_loss:.4f} acc {acc:.4f} per-rank seen {[r['seen'] for r in gathered]}",
                  flush=True)
            decision[0] = {"epoch": epoch, "acc": acc, "is_best": acc > best["acc"]}
        dist.broadcast_object_list(decision, src=0)
        if decision[0]["is_best"]:
            best = {"epoch": decision[0]["epoch"], "acc": decision[0]["acc"]}
        if rank == 0:
            buf = io.BytesIO()
            torch.save({"model": model.module.state_dict(), "epoch": epoch, "best": best}, buf)
            print(f"checkpoint after epoch {epoch}: {buf.tell() / 2**20:.1f} MiB, best so far {best}", flush=True)

    if rank == 0:
        print(f"best epoch {best['epoch']} acc {best['acc']:.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
