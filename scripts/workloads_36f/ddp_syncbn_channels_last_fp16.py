"""DDP (find_unused_parameters=True) over torchvision's ResNet-18 with SyncBatchNorm, channels-last,
fp16 autocast with a GradScaler, SGD; two steps, then an evaluation batch whose correct count is
all-reduced."""
import os

import torch
import torch.distributed as dist
import torchvision

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
torch.manual_seed(0)
model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(torchvision.models.resnet18(num_classes=10))
model = model.cuda().to(memory_format=torch.channels_last)
model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank], find_unused_parameters=True)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
scaler = torch.amp.GradScaler()
for _ in range(2):
    x = torch.randn(32, 3, 96, 96, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (32,), device="cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
model.eval()
with torch.no_grad():
    x = torch.randn(64, 3, 96, 96, device="cuda").to(memory_format=torch.channels_last)
    correct = (model(x).argmax(1) == 0).sum()
dist.all_reduce(correct)
dist.destroy_process_group()
