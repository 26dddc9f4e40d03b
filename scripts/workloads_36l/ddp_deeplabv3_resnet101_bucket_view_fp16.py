"""DDP semantic segmentation: torchvision DeepLabV3-ResNet101 with an auxiliary FCN head, ``gradient_as_bucket_view=True`` and a 100 MB bucket cap, fp16 autocast + GradScaler.

Parallelism: ``torch.nn.parallel.DistributedDataParallel`` over 2 ranks (one GPU each) with
``gradient_as_bucket_view=True`` (parameter ``.grad`` tensors are views into the communication
buckets) and ``bucket_cap_mb=100`` (instead of the default 25 MB).
Model: ``torchvision.models.segmentation.deeplabv3_resnet101(weights=None,
weights_backbone=None, num_classes=21, aux_loss=True)`` (ResNet-101 backbone with dilated layer3
/layer4, output stride 8, ASPP head, auxiliary FCN head on layer3), about 61.0 M parameters,
BatchNorm in train mode (not synchronised).
Precision: fp32 parameters, ``torch.autocast("cuda", dtype=torch.float16)`` for forward and loss,
``torch.amp.GradScaler("cuda")``; gradients unscaled before ``clip_grad_norm_(1.0)``;
``optimizer.zero_grad(set_to_none=False)`` so the bucket-view gradients are zeroed in place.
Loss: as torchvision's segmentation reference: cross entropy (``ignore_index=255``) on the main
output plus 0.5 x cross entropy on the auxiliary output, both upsampled to the crop size.
Optimizer: SGD (momentum 0.9, weight decay 1e-4), lr 0.02 for backbone and ASPP head and 0.2 for
the auxiliary head, ``PolynomialLR(power=0.9)``.
Data: synthetic 480 x 480 crops, batch 8 per rank (different per rank), labels in [0, 21) with a
16-pixel border of ignore value 255; 6 training steps with the loss all-reduced (AVG) and
printed on rank 0, then one evaluation batch of 4 under ``torch.no_grad()`` in ``eval()`` with a
21 x 21 confusion matrix all-reduced (SUM) and the mean IoU printed on rank 0.
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torchvision.models.segmentation import deeplabv3_resnet101

NUM_CLASSES = 21
CROP = 480
BATCH = 8
EVAL_BATCH = 4
STEPS = 6
BORDER = 16


def make_batch(generator, device, batch):
    images = torch.randn(batch, 3, CROP, CROP, generator=generator, device=device)
    target = torch.randint(0, NUM_CLASSES, (batch, CROP, CROP), generator=generator, device=device)
    target[:, :BORDER, :] = 255
    target[:, -BORDER:, :] = 255
    target[:, :, :BORDER] = 255
    target[:, :, -BORDER:] = 255
    return images, target


def criterion(outputs, target):
    losses = {name: F.cross_entropy(x, target, ignore_index=255) for name, x in outputs.items()}
    return losses["out"] + 0.5 * losses["aux"]


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)

    torch.manual_seed(0)
    model = deeplabv3_resnet101(weights=None, weights_backbone=None, num_classes=NUM_CLASSES, aux_loss=True)
    model.to(device)
    n_params = sum(p.numel() for p in model.parameters())

    model = nn.parallel.DistributedDataParallel(
        model,
        device_ids=[local_rank],
        gradient_as_bucket_view=True,
        bucket_cap_mb=100,
    )
    model_without_ddp = model.module

    base_lr = 0.02
    params_to_optimize = [
        {"params": [p for p in model_without_ddp.backbone.parameters() if p.requires_grad]},
        {"params": [p for p in model_without_ddp.classifier.parameters() if p.requires_grad]},
        {"params": [p for p in model_without_ddp.aux_classifier.parameters() if p.requires_grad], "lr": base_lr * 10},
    ]
    optimizer = torch.optim.SGD(params_to_optimize, lr=base_lr, momentum=0.9, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.PolynomialLR(optimizer, total_iters=STEPS, power=0.9)
    scaler = torch.amp.GradScaler("cuda")

    if rank == 0:
        print(f"world {world_size} params {n_params / 1e6:.1f} M", flush=True)

    gen = torch.Generator(device=device)
    gen.manual_seed(1000 + rank)

    model.train()
    for step in range(STEPS):
        images, target = make_batch(gen, device, BATCH)
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            output = model(images)
            loss = criterion(output, target)
        optimizer.zero_grad(set_to_none=False)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()

        reported = loss.detach().float().clone()
        dist.all_reduce(reported, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(
                f"step {step} loss {reported.item():.4f} grad_norm {grad_norm.item():.3f} "
                f"lr {optimizer.param_groups[0]['lr']:.5f} scale {scaler.get_scale():.0f}",
                flush=True,
            )

    model.eval()
    confmat = torch.zeros(NUM_CLASSES, NUM_CLASSES, dtype=torch.int64, device=device)
    with torch.no_grad():
        images, target = make_batch(gen, device, EVAL_BATCH)
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            output = model(images)["out"]
        pred = output.argmax(1).flatten()
        true = target.flatten()
        keep = (true >= 0) & (true < NUM_CLASSES)
        confmat += torch.bincount(
            NUM_CLASSES * true[keep] + pred[keep], minlength=NUM_CLASSES**2
        ).reshape(NUM_CLASSES, NUM_CLASSES)
    dist.all_reduce(confmat, op=dist.ReduceOp.SUM)
    if rank == 0:
        h = confmat.double()
        iou = torch.diag(h) / (h.sum(1) + h.sum(0) - torch.diag(h)).clamp(min=1)
        acc = torch.diag(h).sum() / h.sum()
        print(f"eval pixel acc {acc.item():.4f} mean IoU {iou.mean().item():.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
