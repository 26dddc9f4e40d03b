"""Post-local SGD: DDP with ``post_localSGD_hook`` and ``PostLocalSGDOptimizer`` (periodic model averaging) on RegNetY-3.2GF.

Parallelism: ``DistributedDataParallel(device_ids=[local_rank])`` over 2 ranks with the
communication hook ``post_localSGD_hook`` registered with
``PostLocalSGDState(process_group=None, subgroup=None, start_localSGD_iter=3,
post_local_gradient_allreduce=False)``: for the first 3 iterations every gradient bucket is
all-reduced (averaged) globally as in plain DDP; from iteration 3 on the hook returns the
local bucket untouched (no gradient communication at all). The optimizer is
``torch.distributed.optim.PostLocalSGDOptimizer`` wrapping SGD with a
``PeriodicModelAverager(period=2, warmup_steps=3)``, which after each local step from step 3
on, every 2nd step, flattens all parameters into one buffer, all-reduces it and copies the
average back (``average_parameters``). Buffers (BatchNorm running statistics) are broadcast
from rank 0 by DDP at every forward (``broadcast_buffers=True``, the default).

Model: torchvision ``regnet_y_3_2gf`` (about 19.4 M parameters, BatchNorm, squeeze-excitation),
1000 classes, random init, ``channels_last``.
Precision: fp32 parameters, ``torch.autocast("cuda", dtype=torch.bfloat16)``.
Optimizer: SGD (lr 0.4, momentum 0.9, nesterov, weight decay 5e-5) inside
``PostLocalSGDOptimizer``, linear warm-up then cosine LR via ``LambdaLR`` on the inner SGD,
``clip_grad_norm_(2.0)``, label-smoothed (0.1) cross entropy.
Data: synthetic normalized images 96 x 3 x 224 x 224 per rank (different per rank), 8 training
steps, loss all-reduced (AVG) and printed on rank 0; then the ranks' parameter checksums are
compared with ``all_gather`` and one evaluation batch of 128 per rank is run in ``eval()``
under ``torch.no_grad()`` with the correct count all-reduced (SUM).
"""
import math
import os

import torch
import torch.distributed as dist
import torch.distributed.algorithms.model_averaging.averagers as averagers
import torch.nn.functional as F
import torchvision
from torch.distributed.algorithms.ddp_comm_hooks.post_localSGD_hook import PostLocalSGDState, post_localSGD_hook
from torch.distributed.optim import PostLocalSGDOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

BATCH = 96
EVAL_BATCH = 128
IMAGE = 224
CLASSES = 1000
STEPS = 8
START_LOCAL_SGD = 3
AVERAGE_PERIOD = 2
WARMUP = 2


def make_images(generator, n, device):
    x = torch.randn(n, 3, IMAGE, IMAGE, generator=generator, device=device)
    y = torch.randint(0, CLASSES, (n,), generator=generator, device=device)
    return x.contiguous(memory_format=torch.channels_last), y


def lr_lambda(step):
    if step < WARMUP:
        return (step + 1) / WARMUP
    progress = (step - WARMUP) / max(1, STEPS - WARMUP)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)
    torch.backends.cudnn.benchmark = False

    torch.manual_seed(0)
    model = torchvision.models.regnet_y_3_2gf(weights=None, num_classes=CLASSES)
    model = model.to(device).to(memory_format=torch.channels_last)
    model = DDP(model, device_ids=[local_rank])

    state = PostLocalSGDState(
        process_group=None,
        subgroup=None,
        start_localSGD_iter=START_LOCAL_SGD,
        post_local_gradient_allreduce=False,
    )
    model.register_comm_hook(state, post_localSGD_hook)

    local_optim = torch.optim.SGD(model.parameters(), lr=0.4, momentum=0.9, nesterov=True, weight_decay=5e-5)
    scheduler = torch.optim.lr_scheduler.LambdaLR(local_optim, lr_lambda)
    optimizer = PostLocalSGDOptimizer(
        optim=local_optim,
        averager=averagers.PeriodicModelAverager(period=AVERAGE_PERIOD, warmup_steps=START_LOCAL_SGD),
    )
    if rank == 0:
        n_params = sum(p.numel() for p in model.parameters())
        print(f"params {n_params / 1e6:.2f} M, local SGD from iter {START_LOCAL_SGD}, "
              f"averaging every {AVERAGE_PERIOD}", flush=True)

    gen = torch.Generator(device=device)
    gen.manual_seed(1000 + rank)

    model.train()
    for step in range(STEPS):
        images, labels = make_images(gen, BATCH, device)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            logits = model(images)
        loss = F.cross_entropy(logits.float(), labels, label_smoothing=0.1)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=2.0)
        optimizer.step()
        scheduler.step()

        reported = loss.detach().clone()
        dist.all_reduce(reported, op=dist.ReduceOp.AVG)
        if rank == 0:
            phase = "global" if step < START_LOCAL_SGD else "local"
            print(f"step {step} ({phase}) loss {reported.item():.4f} "
                  f"lr {scheduler.get_last_lr()[0]:.4f} averager step {optimizer.averager.step}", flush=True)

    with torch.no_grad():
        checksum = torch.stack([p.detach().float().sum() for p in model.parameters()]).sum().reshape(1)
        gathered = [torch.zeros_like(checksum) for _ in range(world_size)]
        dist.all_gather(gathered, checksum)
    if rank == 0:
        print("parameter checksums per rank: " + ", ".join(f"{g.item():.4f}" for g in gathered), flush=True)

    model.eval()
    with torch.no_grad():
        images, labels = make_images(gen, EVAL_BATCH, device)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            preds = model(images).argmax(dim=-1)
        correct = torch.stack([(preds == labels).sum(), torch.tensor(EVAL_BATCH, device=device)]).to(torch.int64)
        dist.all_reduce(correct, op=dist.ReduceOp.SUM)
    if rank == 0:
        print(f"eval top1 {correct[0].item()}/{correct[1].item()}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
