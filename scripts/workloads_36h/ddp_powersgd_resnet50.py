"""DDP over a torchvision ResNet-50 (1000 classes, fp32) on 4 ranks with the PowerSGD gradient
compression comm hook (rank-2 approximation, error feedback and warm start; plain all-reduce for
the first two iterations, PowerSGD from the third on), SGD with Nesterov momentum and weight decay;
six training steps of 48 synthetic 224x224 images per rank."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torchvision
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
torch.manual_seed(0)

model = torchvision.models.resnet50(num_classes=1000).cuda()
model = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank], bucket_cap_mb=25)
state = powerSGD.PowerSGDState(
    process_group=None,
    matrix_approximation_rank=2,
    start_powerSGD_iter=2,
    min_compression_rate=2,
    use_error_feedback=True,
    warm_start=True,
    orthogonalization_epsilon=1e-8,
)
model.register_comm_hook(state, powerSGD.powerSGD_hook)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
criterion = nn.CrossEntropyLoss()

torch.manual_seed(1000 + dist.get_rank())
for step in range(6):
    images = torch.randn(48, 3, 224, 224, device="cuda")
    labels = torch.randint(0, 1000, (48,), device="cuda")
    loss = criterion(model(images), labels)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    if dist.get_rank() == 0:
        print(f"step {step} loss {loss.item():.4f}")

dist.destroy_process_group()
