"""DDP over a timm ConvNeXt-Small (randomly initialised, 100 classes, stochastic depth 0.2) on 4
ranks, with timm gradient checkpointing of its stages (`set_grad_checkpointing`), channels_last
inputs and weights, bf16 autocast, timm Mixup/CutMix on the GPU batch with SoftTargetCrossEntropy,
and timm's LAMB optimizer from `create_optimizer_v2` (no weight decay on norms and biases);
five steps of 64 synthetic 224x224 images per rank."""
import os

import numpy as np
import timm
import torch
import torch.distributed as dist
import torch.nn as nn
from timm.data import Mixup
from timm.loss import SoftTargetCrossEntropy
from timm.optim import create_optimizer_v2

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
torch.manual_seed(0)
np.random.seed(dist.get_rank())

model = timm.create_model("convnext_small", pretrained=False, num_classes=100, drop_path_rate=0.2)
model.set_grad_checkpointing(True)
model = model.cuda().to(memory_format=torch.channels_last)
optimizer = create_optimizer_v2(model, opt="lamb", lr=2e-3, weight_decay=0.05)
model = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])
mixup = Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1, num_classes=100)
criterion = SoftTargetCrossEntropy()

torch.manual_seed(1000 + dist.get_rank())
for step in range(5):
    images = torch.randn(64, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    labels = torch.randint(0, 100, (64,), device="cuda")
    images, targets = mixup(images, labels)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = criterion(model(images), targets)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    if dist.get_rank() == 0:
        print(f"step {step} loss {loss.item():.4f}")

dist.destroy_process_group()
