"""Accelerate with its FSDP2 plugin: timm ViT-Huge/14 image classifier, bf16, activation checkpointing,
gradient accumulation over 2 micro-batches.

Parallelism: ``accelerate.Accelerator`` with ``FullyShardedDataParallelPlugin(fsdp_version=2)``
over 4 ranks (accelerate creates the NCCL process group and calls ``fully_shard``):
transformer-based auto wrap on timm's ``Block`` (one FSDP2 unit per block, plus the final
norm and the root), ``reshard_after_forward=True``, ``activation_checkpointing=True`` (every
block wrapped in a non-reentrant checkpoint wrapper before sharding), sharded state dict type.

Mixed precision: ``Accelerator(mixed_precision="bf16")`` with an explicit
``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)``; accelerate also wraps the
model forward in bf16 autocast.  Master weights and AdamW state are fp32 shards.

Model: ``timm.create_model("vit_huge_patch14_224", pretrained=False, num_classes=1000)``
(32 blocks, width 1280, 16 heads, MLP 5120, 257 tokens; about 632 M parameters), random init.
Optimizer: ``torch.optim.AdamW`` (lr 1e-4, wd 0.05), gradient clipping at 1.0 via
``accelerator.clip_grad_norm_``, label-smoothed cross entropy.

Data: synthetic uint8 images in a TensorDataset behind a DataLoader (num_workers=0) that
accelerate shards across ranks; micro-batch 32 images of 3x224x224 per rank,
``gradient_accumulation_steps=2`` (FSDP2 gradient sync skipped on the first micro-batch),
8 micro-batches per rank = 4 optimizer steps.
"""
import os

import timm
import torch
import torch.distributed as dist
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import FullyShardedDataParallelPlugin, set_seed
from torch.distributed.fsdp import MixedPrecisionPolicy
from torch.utils.data import DataLoader, TensorDataset

MODEL_NAME = "vit_huge_patch14_224"
IMAGE = 224
MICRO_BATCH = 32
ACCUM = 2
MICRO_STEPS = 8
NUM_CLASSES = 1000


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)

    fsdp_plugin = FullyShardedDataParallelPlugin(
        fsdp_version=2,
        auto_wrap_policy="transformer_based_wrap",
        transformer_cls_names_to_wrap=["Block"],
        reshard_after_forward=True,
        activation_checkpointing=True,
        mixed_precision_policy=MixedPrecisionPolicy(
            param_dtype=torch.bfloat16, reduce_dtype=torch.float32
        ),
        state_dict_type="SHARDED_STATE_DICT",
    )
    accelerator = Accelerator(
        mixed_precision="bf16",
        gradient_accumulation_steps=ACCUM,
        fsdp_plugin=fsdp_plugin,
    )
    set_seed(0)

    model = timm.create_model(MODEL_NAME, pretrained=False, num_classes=NUM_CLASSES)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05)

    world = accelerator.num_processes
    num_images = MICRO_BATCH * MICRO_STEPS * world
    gen = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (num_images, 3, IMAGE, IMAGE), dtype=torch.uint8, generator=gen)
    labels = torch.randint(0, NUM_CLASSES, (num_images,), generator=gen)
    loader = DataLoader(
        TensorDataset(images, labels), batch_size=MICRO_BATCH, shuffle=True, num_workers=0
    )

    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    mean = torch.tensor([0.5, 0.5, 0.5], device=accelerator.device).view(1, 3, 1, 1)
    std = torch.tensor([0.5, 0.5, 0.5], device=accelerator.device).view(1, 3, 1, 1)

    model.train()
    opt_step = 0
    for micro_step, (x, y) in enumerate(loader):
        x = (x.float().div_(255.0) - mean) / std
        with accelerator.accumulate(model):
            logits = model(x)
            loss = F.cross_entropy(logits, y, label_smoothing=0.1)
            accelerator.backward(loss)
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        if accelerator.sync_gradients:
            opt_step += 1
            if accelerator.is_main_process:
                print(f"micro {micro_step} opt step {opt_step} loss {loss.item():.4f}", flush=True)

    accelerator.wait_for_everyone()
    accelerator.end_training()
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
