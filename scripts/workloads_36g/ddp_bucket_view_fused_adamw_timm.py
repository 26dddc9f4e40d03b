"""DDP with gradient_as_bucket_view=True over timm's ViT-Tiny at 128 pixels, fused AdamW and a
cosine schedule, fp16 autocast with a GradScaler; three steps of batch 32."""
import os

import timm
import torch
import torch.distributed as dist

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
torch.manual_seed(0)
model = timm.create_model("vit_tiny_patch16_224", img_size=128, num_classes=100).cuda()
model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank], gradient_as_bucket_view=True)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=3)
scaler = torch.amp.GradScaler()
for _ in range(3):
    x = torch.randn(32, 3, 128, 128, device="cuda")
    y = torch.randint(0, 100, (32,), device="cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    schedule.step()
    optimizer.zero_grad(set_to_none=True)
dist.destroy_process_group()
