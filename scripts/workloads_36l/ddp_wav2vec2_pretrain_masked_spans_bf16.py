"""DDP self-supervised wav2vec 2.0 pre-training (contrastive + diversity loss over masked spans of 10 frames), HF ``Wav2Vec2ForPreTraining`` base, bf16 autocast.

Parallelism: ``torch.nn.parallel.DistributedDataParallel`` over 2 ranks (one GPU each), default
buckets; the number of masked frames is all-reduced (SUM) every step and the gradients are
rescaled by ``world_size / total_masked`` after backward, as the HF
``run_wav2vec2_pretraining_no_trainer.py`` example does (the model's loss is a sum).
Model: ``Wav2Vec2ForPreTraining`` built from a ``Wav2Vec2Config`` of the wav2vec2-base shape
(7-layer conv feature encoder with group norm, 512 channels; 12 transformer layers, hidden 768,
12 heads, FFN 3072; Gumbel vector quantizer with 2 groups x 320 codevectors; codevector and
projection dim 256), about 95 M parameters, random init, feature encoder trained.
Masking: ``_compute_mask_indices(mask_prob=0.65, mask_length=10, min_masks=2)`` over the 799
feature frames of each utterance (numpy's global generator seeded per rank) and 100 negatives per frame
from ``_sample_negative_indices``; the Gumbel temperature decays from 2.0 (x 0.999995 per step)
via ``set_gumbel_temperature``.
Precision: fp32 parameters, ``torch.autocast("cuda", dtype=torch.bfloat16)`` for the forward and
loss.
Optimizer: AdamW (lr 5e-4 after a 2-step linear warm-up, betas (0.9, 0.98), eps 1e-6, weight
decay 0.01), ``clip_grad_norm_(1.0)``.
Data: synthetic raw 16 kHz waveforms, batch 8 x 256000 samples (16 s) per rank (different per
rank), no padding; 6 training steps with the contrastive loss per masked frame, the diversity
loss and the codevector perplexity printed on rank 0, then one evaluation batch of 8 under
``torch.no_grad()`` in ``eval()`` (hard codevector choice) with the loss all-reduced.
"""
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from transformers import Wav2Vec2Config, Wav2Vec2ForPreTraining
from transformers.models.wav2vec2.modeling_wav2vec2 import _compute_mask_indices, _sample_negative_indices

BATCH = 8
SAMPLES = 256000
STEPS = 6
WARMUP = 2
LR = 5e-4
MASK_PROB = 0.65
MASK_LENGTH = 10
MAX_GUMBEL = 2.0
MIN_GUMBEL = 0.5
GUMBEL_DECAY = 0.999995


def make_batch(model, generator, device):
    waveforms = torch.randn(BATCH, SAMPLES, generator=generator, device=device)
    waveforms = (waveforms - waveforms.mean(-1, keepdim=True)) / (waveforms.std(-1, keepdim=True) + 1e-7)
    frames = int(model._get_feat_extract_output_lengths(SAMPLES))
    mask = _compute_mask_indices((BATCH, frames), mask_prob=MASK_PROB, mask_length=MASK_LENGTH, min_masks=2)
    negatives = _sample_negative_indices((BATCH, frames), model.config.num_negatives)
    mask = torch.tensor(mask, dtype=torch.long, device=device)
    negatives = torch.tensor(negatives, dtype=torch.long, device=device)
    return waveforms, mask, negatives


def multiply_grads(params, c):
    for p in params:
        if p.grad is not None:
            p.grad.data.mul_(c)


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)

    torch.manual_seed(0)
    config = Wav2Vec2Config(
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        feat_extract_norm="group",
        do_stable_layer_norm=False,
        conv_bias=False,
        num_codevector_groups=2,
        num_codevectors_per_group=320,
        codevector_dim=256,
        proj_codevector_dim=256,
        num_negatives=100,
        contrastive_logits_temperature=0.1,
        diversity_loss_weight=0.1,
        mask_time_prob=MASK_PROB,
        mask_time_length=MASK_LENGTH,
        feat_quantizer_dropout=0.0,
        hidden_dropout=0.1,
        attention_dropout=0.1,
        activation_dropout=0.0,
        feat_proj_dropout=0.1,
        layerdrop=0.0,
    )
    model = Wav2Vec2ForPreTraining(config).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    model = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])

    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim < 2 or "norm" in name else decay).append(p)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
        lr=LR,
        betas=(0.9, 0.98),
        eps=1e-6,
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / WARMUP))

    if rank == 0:
        print(f"world {world_size} params {n_params / 1e6:.1f} M", flush=True)

    gen = torch.Generator(device=device)
    gen.manual_seed(1000 + rank)
    np.random.seed(1000 + rank)

    model.train()
    for step in range(STEPS):
        waveforms, mask, negatives = make_batch(model.module, gen, device)
        num_losses = mask.sum()
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            outputs = model(waveforms, mask_time_indices=mask, sampled_negative_indices=negatives)
        loss = outputs.loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()

        dist.all_reduce(num_losses, op=dist.ReduceOp.SUM)
        multiply_grads(model.module.parameters(), world_size / num_losses)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        scheduler.step()

        gumbel = max(MAX_GUMBEL * GUMBEL_DECAY ** (step + 1), MIN_GUMBEL)
        model.module.set_gumbel_temperature(gumbel)

        stats = torch.stack(
            [
                outputs.contrastive_loss.detach().float(),
                outputs.diversity_loss.detach().float(),
                outputs.codevector_perplexity.detach().float(),
            ]
        )
        dist.all_reduce(stats, op=dist.ReduceOp.SUM)
        if rank == 0:
            print(
                f"step {step} contrastive/frame {stats[0].item() / num_losses.item():.4f} "
                f"diversity/frame {stats[1].item() / num_losses.item():.4f} "
                f"perplexity {stats[2].item() / world_size:.1f} grad_norm {grad_norm.item():.3f} "
                f"masked {num_losses.item()}",
                flush=True,
            )

    model.eval()
    with torch.no_grad():
        waveforms, mask, negatives = make_batch(model.module, gen, device)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            outputs = model.module(waveforms, mask_time_indices=mask, sampled_negative_indices=negatives)
        eval_stats = torch.stack([outputs.loss.float(), mask.sum().float()])
        dist.all_reduce(eval_stats, op=dist.ReduceOp.SUM)
    if rank == 0:
        print(f"eval loss/frame {(eval_stats[0] / eval_stats[1]).item():.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
