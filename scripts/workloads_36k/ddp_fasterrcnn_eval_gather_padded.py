"""DDP Faster R-CNN (ResNet-50-FPN v2) training with fp16 AMP, then distributed evaluation whose variable-length detections are padded and all-gathered.

Parallelism: ``DistributedDataParallel(device_ids=[local_rank])`` over 2 ranks around torchvision
``fasterrcnn_resnet50_fpn_v2(weights=None, weights_backbone=None, num_classes=21,
box_score_thresh=0.0)`` (about 43.4 M parameters; with no pretrained backbone every stage is
trainable and the backbone uses ordinary BatchNorm, whose buffers DDP broadcasts from rank 0).

Training (as torchvision's detection reference does it with ``--amp``): the model takes a list
of 4 images of 3 x 512 x 683 per rank and their targets (2-8 random boxes each, 20 foreground
classes); ``GeneralizedRCNNTransform`` resizes them to 800 x 1067 and batches them padded to
800 x 1088. The summed RPN + RoI-head losses are computed under
``torch.autocast("cuda", dtype=torch.float16)`` and scaled by ``torch.amp.GradScaler``; SGD
(lr 0.02, momentum 0.9, weight decay 1e-4) with a linear warm-up (``LinearLR`` from 0.001),
``clip_grad_norm_(10.0)`` on the unscaled gradients; 6 steps, the loss dict all-reduced (AVG) and
printed on rank 0.

Evaluation: 13 images split unevenly over the ranks (rank 0 gets 7, rank 1 gets 6, as
``DistributedSampler`` would without padding), run in ``eval()`` under ``torch.no_grad()`` and
fp16 autocast in batches of 4; every image yields up to 100 detections. Each rank packs its
detections as rows (image id, box, score, label), the per-rank row counts are exchanged with
``all_gather``, each rank pads its rows to the maximum and ``all_gather``s them, and rank 0
trims the padding and computes recall at IoU 0.5 against the ground-truth boxes.
"""
import os

import torch
import torch.distributed as dist
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP
from torchvision.ops import box_iou

CLASSES = 21
BATCH = 4
HEIGHT = 512
WIDTH = 683
STEPS = 6
EVAL_IMAGES = 13
EVAL_BATCH = 4


def random_targets(generator, device):
    n = int(torch.randint(2, 9, (1,), generator=generator).item())
    xy = torch.rand(n, 2, generator=generator) * torch.tensor([WIDTH * 0.7, HEIGHT * 0.7])
    wh = 32 + torch.rand(n, 2, generator=generator) * torch.tensor([WIDTH * 0.3, HEIGHT * 0.3])
    boxes = torch.cat([xy, xy + wh], dim=1)
    labels = torch.randint(1, CLASSES, (n,), generator=generator)
    return {"boxes": boxes.to(device), "labels": labels.to(device)}


def make_batch(generator, n, device):
    images = [torch.rand(3, HEIGHT, WIDTH, generator=generator).to(device) for _ in range(n)]
    targets = [random_targets(generator, device) for _ in range(n)]
    return images, targets


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)

    torch.manual_seed(0)
    model = torchvision.models.detection.fasterrcnn_resnet50_fpn_v2(
        weights=None, weights_backbone=None, num_classes=CLASSES, box_score_thresh=0.0)
    model.to(device)
    model = DDP(model, device_ids=[local_rank])

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=0.02, momentum=0.9, weight_decay=1e-4)
    warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.001, total_iters=STEPS)
    scaler = torch.amp.GradScaler("cuda")
    if rank == 0:
        print(f"params {sum(p.numel() for p in params) / 1e6:.1f} M", flush=True)

    gen = torch.Generator()
    gen.manual_seed(1000 + rank)

    model.train()
    for step in range(STEPS):
        images, targets = make_batch(gen, BATCH, device)
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            loss_dict = model(images, targets)
            losses = sum(loss for loss in loss_dict.values())
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(losses).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(params, max_norm=10.0)
        scaler.step(optimizer)
        scaler.update()
        warmup.step()

        names = sorted(loss_dict)
        reported = torch.stack([loss_dict[k].detach().float() for k in names] + [losses.detach().float()])
        dist.all_reduce(reported, op=dist.ReduceOp.AVG)
        if rank == 0:
            parts = " ".join(f"{k} {v:.3f}" for k, v in zip(names, reported[:-1].tolist()))
            print(f"step {step} loss {reported[-1].item():.4f} ({parts}) scale {scaler.get_scale():.0f}", flush=True)

    # evaluation set: identical on all ranks (so rank 0 knows every ground truth), split unevenly
    eval_gen = torch.Generator()
    eval_gen.manual_seed(4242)
    eval_images, eval_targets = make_batch(eval_gen, EVAL_IMAGES, device)
    my_ids = list(range(rank, EVAL_IMAGES, world_size))

    model.eval()
    rows = []
    with torch.no_grad():
        for start in range(0, len(my_ids), EVAL_BATCH):
            ids = my_ids[start:start + EVAL_BATCH]
            with torch.autocast(device_type="cuda", dtype=torch.float16):
                outputs = model([eval_images[i] for i in ids])
            for image_id, out in zip(ids, outputs):
                n = out["boxes"].shape[0]
                rows.append(torch.cat([
                    torch.full((n, 1), float(image_id), device=device),
                    out["boxes"].float(),
                    out["scores"].float().unsqueeze(1),
                    out["labels"].float().unsqueeze(1),
                ], dim=1))
        local = torch.cat(rows, dim=0)

        count = torch.tensor([local.shape[0]], device=device, dtype=torch.int64)
        counts = [torch.zeros_like(count) for _ in range(world_size)]
        dist.all_gather(counts, count)
        max_rows = int(max(c.item() for c in counts))
        padded = torch.zeros(max_rows, local.shape[1], device=device)
        padded[: local.shape[0]] = local
        gathered = [torch.zeros_like(padded) for _ in range(world_size)]
        dist.all_gather(gathered, padded)

    if rank == 0:
        detections = torch.cat([g[: int(c.item())] for g, c in zip(gathered, counts)], dim=0)
        matched = 0
        total = 0
        for image_id in range(EVAL_IMAGES):
            gt = eval_targets[image_id]["boxes"]
            dets = detections[detections[:, 0] == image_id][:, 1:5]
            total += gt.shape[0]
            if dets.numel():
                matched += int((box_iou(gt, dets).max(dim=1).values >= 0.5).sum().item())
        print(f"eval rows per rank {[int(c.item()) for c in counts]} padded to {max_rows}; "
              f"recall@0.5 {matched}/{total}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
