"""DDP over torchvision's ResNet-18 with SyncBatchNorm, bf16 autocast, SGD with momentum and a
DistributedSampler over an in-memory dataset; three steps."""
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
device = torch.device("cuda", local_rank)
torch.manual_seed(0)

model = torchvision.models.resnet18(num_classes=100)
model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model).to(device)
model = DDP(model, device_ids=[local_rank])
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)

data = TensorDataset(torch.randn(192, 3, 96, 96), torch.randint(0, 100, (192,)))
sampler = DistributedSampler(data, shuffle=True, seed=0)
loader = DataLoader(data, batch_size=32, sampler=sampler)
model.train()
for step, (images, labels) in enumerate(loader):
    if step == 3:
        break
    images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(images), labels)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()

dist.destroy_process_group()
