"""2-D parallelism on a 2x2 DeviceMesh ("dp", "tp") over a hand-written ViT-B/16 image classifier
(768 wide, 12 blocks, 12 heads, MLP 3072, 196 patch tokens, mean pooling, 1000 classes). Inside
each TP pair the blocks use sequence parallelism: LayerNorms are SequenceParallel (tokens sharded
over the 2 ranks), attention q/k/v and MLP fc1 are ColwiseParallel, attention out-projection and
fc2 are RowwiseParallel with sequence-sharded (reduce-scattered) outputs; the first block's input
is split from replicated to sequence-sharded and the classifier head gathers the tokens back. Each
block is recomputed in backward (torch.utils.checkpoint, non-reentrant). FSDP2 `fully_shard` over
the "dp" dimension per block and at the root (patch embedding, position embedding, head) with
MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32). AdamW; four steps of 64 synthetic
224x224 images per data-parallel rank (the two TP ranks of a pair see the same images)."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)
from torch.utils.checkpoint import checkpoint


class Attention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.head_dim = dim // n_heads
        self.wq = nn.Linear(dim, dim)
        self.wk = nn.Linear(dim, dim)
        self.wv = nn.Linear(dim, dim)
        self.wo = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, _ = x.shape
        q = self.wq(x).view(b, n, -1, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, n, -1, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, n, -1, self.head_dim).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.wo(out.transpose(1, 2).reshape(b, n, -1))


class MLP(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim, n_heads, hidden):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, n_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim, hidden)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Head(nn.Module):
    def __init__(self, dim, num_classes):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, num_classes)

    def forward(self, x):
        return self.fc(self.norm(x.mean(dim=1)))


class ViT(nn.Module):
    def __init__(self, dim=768, depth=12, n_heads=12, hidden=3072, patch=16, image=224, num_classes=1000):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)
        self.pos_embed = nn.Parameter(torch.randn(1, (image // patch) ** 2, dim) * 0.02)
        self.blocks = nn.ModuleList([Block(dim, n_heads, hidden) for _ in range(depth)])
        self.head = Head(dim, num_classes)

    def forward(self, images):
        x = self.patch_embed(images).flatten(2).transpose(1, 2) + self.pos_embed
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False)
        return self.head(x)


local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
mesh = init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp", "tp"))
dp_mesh, tp_mesh = mesh["dp"], mesh["tp"]
torch.manual_seed(0)

model = ViT().cuda()

block_plan = {
    "norm1": SequenceParallel(),
    "attn": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
    "attn.wq": ColwiseParallel(),
    "attn.wk": ColwiseParallel(),
    "attn.wv": ColwiseParallel(),
    "attn.wo": RowwiseParallel(output_layouts=Shard(1)),
    "norm2": SequenceParallel(),
    "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
    "mlp.fc1": ColwiseParallel(),
    "mlp.fc2": RowwiseParallel(output_layouts=Shard(1)),
}
for block in model.blocks:
    parallelize_module(block, tp_mesh, block_plan)
parallelize_module(
    model,
    tp_mesh,
    {
        "blocks.0": PrepareModuleInput(
            input_layouts=(Replicate(),), desired_input_layouts=(Shard(1),), use_local_output=True
        ),
        "head": PrepareModuleInput(
            input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),), use_local_output=True
        ),
    },
)

mp_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
for block in model.blocks:
    fully_shard(block, mesh=dp_mesh, mp_policy=mp_policy)
fully_shard(model, mesh=dp_mesh, mp_policy=mp_policy)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)

torch.manual_seed(1000 + dp_mesh.get_local_rank())  # same images within a TP pair
for step in range(4):
    images = torch.randn(64, 3, 224, 224, device="cuda")
    labels = torch.randint(0, 1000, (64,), device="cuda")
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if dist.get_rank() == 0:
        print(f"step {step} loss {loss.item():.4f}")

dist.destroy_process_group()
