"""Tensor and sequence parallelism over a small decoder built on the meta device, the mesh made by
init_device_mesh alone: embedding RowwiseParallel to a sequence-sharded output, norms
SequenceParallel, attention and MLP Colwise/Rowwise, the head ColwiseParallel with loss_parallel;
to_empty and DTensor normal_ initialisation, AdamW; two steps."""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel, PrepareModuleInput, RowwiseParallel, SequenceParallel, loss_parallel, parallelize_module,
)


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))

    def forward(self, h):
        b, s, _ = h.shape
        q, k, v = (w(h).view(b, s, -1, 64).transpose(1, 2) for w in (self.q, self.k, self.v))
        return self.o(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, -1))


class MLP(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, h):
        return self.down(F.gelu(self.up(h)))


class Block(nn.Module):
    def __init__(self, dim=768):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn, self.mlp = Attention(dim), MLP(dim)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Model(nn.Module):
    def __init__(self, vocab=12000, dim=768, layers=4):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        x = self.tok(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
mesh = init_device_mesh("cuda", (int(os.environ["WORLD_SIZE"]),))
with torch.device("meta"):
    model = Model()
parallelize_module(model, mesh, {
    "tok": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
    "norm": SequenceParallel(),
    "head": ColwiseParallel(input_layouts=Shard(1), use_local_output=False),
})
for block in model.blocks:
    parallelize_module(block, mesh, {
        "norm1": SequenceParallel(),
        "norm2": SequenceParallel(),
        "attn": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "attn.q": ColwiseParallel(), "attn.k": ColwiseParallel(), "attn.v": ColwiseParallel(),
        "attn.o": RowwiseParallel(output_layouts=Shard(1)),
        "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "mlp.up": ColwiseParallel(),
        "mlp.down": RowwiseParallel(output_layouts=Shard(1)),
    })
model.to_empty(device="cuda")
with torch.no_grad():
    for p in model.parameters():
        nn.init.normal_(p, std=0.02)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
for _ in range(2):
    ids = torch.randint(0, 12000, (8, 256), device="cuda")
    with loss_parallel():
        F.cross_entropy(model(ids).flatten(0, 1), ids.flatten()).backward()
    optimizer.step()
    optimizer.zero_grad()
