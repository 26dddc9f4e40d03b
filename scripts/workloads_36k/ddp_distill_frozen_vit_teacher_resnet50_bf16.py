"""Knowledge distillation: a frozen timm ViT-B/16 teacher replicated on every rank, a DDP ResNet-50 student.

Parallelism: the student, torchvision ``resnet50`` (about 25.6 M parameters, BatchNorm,
``channels_last``), is wrapped in ``DistributedDataParallel(device_ids=[local_rank])``. The
teacher, timm ``vit_base_patch16_224`` (about 86.6 M parameters, built with
``pretrained=False``), is NOT wrapped: every rank holds a full copy cast to bf16
(``.to(dtype=torch.bfloat16)``), in ``eval()`` with ``requires_grad_(False)``, and runs it
under ``torch.no_grad()`` on its own shard of the batch.

Loss: 0.5 x label-smoothed (0.1) cross entropy on the labels + 0.5 x T^2 x KL(student/T ||
teacher/T) with temperature T = 4 (``F.kl_div(log_softmax, log_target=True,
reduction="batchmean")``), computed in fp32 from bf16-autocast student logits.
Precision: student fp32 parameters under ``torch.autocast("cuda", dtype=torch.bfloat16)``;
teacher parameters and activations bf16.
Optimizer: SGD (lr 0.2, momentum 0.9, nesterov, weight decay 5e-5) with cosine LR over the
steps, ``clip_grad_norm_(5.0)``.
Data: synthetic normalized images 96 x 3 x 224 x 224 per rank (``channels_last``) with random
labels over 1000 classes, 6 training steps; the per-step CE and KD terms are all-reduced (AVG)
and printed on rank 0. Then an evaluation batch of 128 images per rank under
``torch.no_grad()`` (student in ``eval()``): student/teacher top-1 agreement counts are
all-reduced (SUM) and printed on rank 0.
"""
import math
import os

import timm
import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP

BATCH = 96
EVAL_BATCH = 128
IMAGE = 224
CLASSES = 1000
STEPS = 6
TEMPERATURE = 4.0
ALPHA = 0.5


def make_images(generator, n, device):
    x = torch.randn(n, 3, IMAGE, IMAGE, generator=generator, device=device)
    y = torch.randint(0, CLASSES, (n,), generator=generator, device=device)
    return x.contiguous(memory_format=torch.channels_last), y


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)
    torch.backends.cudnn.benchmark = False

    torch.manual_seed(0)
    teacher = timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=CLASSES)
    teacher = teacher.to(device=device, dtype=torch.bfloat16).eval()
    teacher.requires_grad_(False)

    student = torchvision.models.resnet50(weights=None, num_classes=CLASSES)
    student = student.to(device).to(memory_format=torch.channels_last)
    student = DDP(student, device_ids=[local_rank])

    optimizer = torch.optim.SGD(student.parameters(), lr=0.2, momentum=0.9, nesterov=True, weight_decay=5e-5)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: 0.5 * (1.0 + math.cos(math.pi * s / STEPS)))
    if rank == 0:
        t_params = sum(p.numel() for p in teacher.parameters())
        s_params = sum(p.numel() for p in student.parameters())
        print(f"teacher {t_params / 1e6:.1f} M (frozen bf16), student {s_params / 1e6:.1f} M", flush=True)

    gen = torch.Generator(device=device)
    gen.manual_seed(1000 + rank)
    t2 = TEMPERATURE * TEMPERATURE

    student.train()
    for step in range(STEPS):
        images, labels = make_images(gen, BATCH, device)
        with torch.no_grad():
            teacher_logits = teacher(images.to(torch.bfloat16)).float()
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            student_logits = student(images)
        student_logits = student_logits.float()
        ce = F.cross_entropy(student_logits, labels, label_smoothing=0.1)
        kd = F.kl_div(
            F.log_softmax(student_logits / TEMPERATURE, dim=-1),
            F.log_softmax(teacher_logits / TEMPERATURE, dim=-1),
            reduction="batchmean",
            log_target=True,
        ) * t2
        loss = (1.0 - ALPHA) * ce + ALPHA * kd
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(student.parameters(), max_norm=5.0)
        optimizer.step()
        scheduler.step()

        terms = torch.stack([ce.detach(), kd.detach(), loss.detach()])
        dist.all_reduce(terms, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"step {step} ce {terms[0].item():.4f} kd {terms[1].item():.4f} "
                  f"loss {terms[2].item():.4f} lr {scheduler.get_last_lr()[0]:.4f}", flush=True)

    student.eval()
    with torch.no_grad():
        images, labels = make_images(gen, EVAL_BATCH, device)
        t_pred = teacher(images.to(torch.bfloat16)).argmax(dim=-1)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            s_pred = student(images).argmax(dim=-1)
        counts = torch.stack([
            (s_pred == t_pred).sum(),
            (s_pred == labels).sum(),
            torch.tensor(EVAL_BATCH, device=device),
        ]).to(torch.int64)
        dist.all_reduce(counts, op=dist.ReduceOp.SUM)
    if rank == 0:
        print(f"eval agreement {counts[0].item()}/{counts[2].item()} "
              f"label top1 {counts[1].item()}/{counts[2].item()}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
