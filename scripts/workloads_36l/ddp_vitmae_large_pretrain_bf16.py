"""DDP masked-autoencoder pre-training: HF ``ViTMAEForPreTraining`` with a ViT-L/16 encoder, 75 % random patch masking, normalised-pixel loss, bf16 autocast.

Parallelism: ``torch.nn.parallel.DistributedDataParallel`` over 2 ranks (one GPU each), default
buckets.
Model: ``ViTMAEForPreTraining`` built from a ``ViTMAEConfig`` of the MAE ViT-Large/16 shape
(encoder hidden 1024, 24 layers, 16 heads, MLP 4096; decoder hidden 512, 8 layers, 16 heads,
MLP 2048; image 224, patch 16, fixed 2-D sin-cos position embeddings), SDPA attention,
``mask_ratio=0.75`` (the encoder sees 49 of 196 patches plus the CLS token, the decoder all 197
tokens), ``norm_pix_loss=True``; about 329 M parameters, random init.
Masking noise: passed explicitly as ``noise`` (batch x 196 uniform values from a per-rank CUDA
generator), so the kept patches are fixed by the seeds.
Precision: fp32 parameters, ``torch.autocast("cuda", dtype=torch.bfloat16)`` for forward and
loss.
Optimizer: AdamW (lr 1.5e-4 = 1.5e-4 x 256 / 256 for the global batch of 256, betas
(0.9, 0.95), weight decay 0.05 on weights, none on biases, norms, CLS and mask tokens), 2-step
linear warm-up then cosine; no gradient clipping (as the MAE recipe).
Data: synthetic images, batch 128 x 3 x 224 x 224 per rank (different per rank), 6 training
steps with the loss all-reduced (AVG) and printed on rank 0, then one reconstruction batch of
32 under ``torch.no_grad()`` in ``eval()`` with its loss all-reduced and printed.
"""
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from transformers import ViTMAEConfig, ViTMAEForPreTraining

BATCH = 128
EVAL_BATCH = 32
IMAGE = 224
PATCH = 16
STEPS = 6
WARMUP = 2
BASE_LR = 1.5e-4


def make_batch(generator, device, batch):
    pixels = torch.randn(batch, 3, IMAGE, IMAGE, generator=generator, device=device)
    noise = torch.rand(batch, (IMAGE // PATCH) ** 2, generator=generator, device=device)
    return pixels, noise


def lr_at(step):
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

    torch.manual_seed(0)
    config = ViTMAEConfig(
        hidden_size=1024,
        num_hidden_layers=24,
        num_attention_heads=16,
        intermediate_size=4096,
        layer_norm_eps=1e-6,
        image_size=IMAGE,
        patch_size=PATCH,
        decoder_hidden_size=512,
        decoder_num_hidden_layers=8,
        decoder_num_attention_heads=16,
        decoder_intermediate_size=2048,
        mask_ratio=0.75,
        norm_pix_loss=True,
        attn_implementation="sdpa",
    )
    model = ViTMAEForPreTraining(config).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    n_trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    model = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])

    decay, no_decay = [], []
    for name, p in model.module.named_parameters():
        if not p.requires_grad:
            continue
        if p.ndim < 2 or "norm" in name or "cls_token" in name or "mask_token" in name:
            no_decay.append(p)
        else:
            decay.append(p)
    lr = BASE_LR * (BATCH * world_size) / 256
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr,
        betas=(0.9, 0.95),
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)

    if rank == 0:
        print(f"world {world_size} params {n_params / 1e6:.1f} M trainable {n_trainable / 1e6:.1f} M lr {lr:.2e}", flush=True)

    gen = torch.Generator(device=device)
    gen.manual_seed(1000 + rank)

    model.train()
    for step in range(STEPS):
        pixels, noise = make_batch(gen, device, BATCH)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            outputs = model(pixel_values=pixels, noise=noise)
        loss = outputs.loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()

        reported = loss.detach().float().clone()
        dist.all_reduce(reported, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(
                f"step {step} loss {reported.item():.4f} lr {scheduler.get_last_lr()[0]:.2e} "
                f"masked {int(outputs.mask.sum().item())}",
                flush=True,
            )

    model.eval()
    with torch.no_grad():
        pixels, noise = make_batch(gen, device, EVAL_BATCH)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            outputs = model.module(pixel_values=pixels, noise=noise)
        eval_loss = outputs.loss.float().clone()
        reconstruction = model.module.unpatchify(outputs.logits.float())
        dist.all_reduce(eval_loss, op=dist.ReduceOp.AVG)
    if rank == 0:
        print(f"eval loss {eval_loss.item():.4f} reconstruction {tuple(reconstruction.shape)}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
