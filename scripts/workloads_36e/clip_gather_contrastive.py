"""A CLIP-style contrastive model trained without DDP's wrapper: parameters broadcast from rank 0
at the start, the features of every rank gathered with torch.distributed.nn's differentiable
all_gather for the global similarity matrix, gradients averaged by hand with all_reduce, Adam;
three steps."""
import os

import torch
import torch.distributed as dist
import torch.distributed.nn
import torch.nn as nn
import torch.nn.functional as F

rank = int(os.environ["RANK"])
world_size = int(os.environ["WORLD_SIZE"])
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl", rank=rank, world_size=world_size)
device = torch.device(f"cuda:{local_rank}")


class Tower(nn.Module):
    def __init__(self, inp, dim=512):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(inp, 2048), nn.GELU(), nn.Linear(2048, 2048), nn.GELU(), nn.Linear(2048, dim))

    def forward(self, x):
        return F.normalize(self.net(x), dim=-1)


class Clip(nn.Module):
    def __init__(self):
        super().__init__()
        self.image = Tower(1536)
        self.text = Tower(768)
        self.logit_scale = nn.Parameter(torch.tensor(2.659))


torch.manual_seed(rank)
model = Clip().to(device)
for p in model.parameters():
    dist.broadcast(p.data, src=0)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)

for step in range(3):
    images = torch.randn(256, 1536, device=device)
    texts = torch.randn(256, 768, device=device)
    img = torch.cat(torch.distributed.nn.all_gather(model.image(images)))
    txt = torch.cat(torch.distributed.nn.all_gather(model.text(texts)))
    logits = model.logit_scale.exp() * img @ txt.t()
    target = torch.arange(logits.shape[0], device=device)
    loss = (F.cross_entropy(logits, target) + F.cross_entropy(logits.t(), target)) / 2
    optimizer.zero_grad()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
        p.grad.div_(world_size)
    optimizer.step()

dist.destroy_process_group()
