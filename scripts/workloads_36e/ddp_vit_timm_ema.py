"""DDP over timm's ViT-Small (patch 16, 224x224 images) under bf16 autocast, AdamW with a cosine
schedule, and a model EMA kept on the GPU (timm's ModelEmaV3); three steps."""
import os

import timm
import torch
import torch.distributed as dist
import torch.nn.functional as F
from timm.utils import ModelEmaV3
from torch.nn.parallel import DistributedDataParallel as DDP

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
torch.manual_seed(0)

model = timm.create_model("vit_small_patch16_224", num_classes=200, drop_path_rate=0.1).cuda()
ema = ModelEmaV3(model, decay=0.999)
model = DDP(model, device_ids=[local_rank])
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=3)

for step in range(3):
    images = torch.randn(24, 3, 224, 224, device="cuda")
    labels = torch.randint(0, 200, (24,), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(images), labels, label_smoothing=0.1)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    scheduler.step()
    ema.update(model.module, step=step)

dist.destroy_process_group()
