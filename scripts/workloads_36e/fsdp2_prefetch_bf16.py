"""FSDP2 as torchtitan sets it up over a small decoder of its own (RMSNorm, SDPA attention, SwiGLU):
each block and the root sharded with MixedPrecisionPolicy(bf16, bf16 reduce), the last block not
resharded after forward, explicit forward and backward prefetching, clip_grad_norm_ over DTensors,
AdamW; three steps."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


class Block(nn.Module):
    def __init__(self, dim=768, heads=12, hidden=2048):
        super().__init__()
        self.heads = heads
        self.attn_norm = nn.RMSNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.ffn_norm = nn.RMSNorm(dim)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).view(b, s, 3, self.heads, d // self.heads).unbind(2)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.wo(y.transpose(1, 2).reshape(b, s, d))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Decoder(nn.Module):
    def __init__(self, vocab=32000, dim=768, layers=6):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim) for _ in range(layers))
        self.norm = nn.RMSNorm(dim)
        self.out = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        x = self.tok(ids)
        for layer in self.layers:
            x = layer(x)
        return self.out(self.norm(x))


local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
mesh = init_device_mesh("cuda", (int(os.environ["WORLD_SIZE"]),))
torch.manual_seed(0)
with torch.device("meta"):
    model = Decoder()
mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
for i, layer in enumerate(model.layers):
    fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=i < len(model.layers) - 1)
fully_shard(model, mesh=mesh, mp_policy=mp)
model.to_empty(device="cuda")
for p in model.parameters():
    nn.init.normal_(p, std=0.02)
layers = list(model.layers)
for i, layer in enumerate(layers[:-1]):
    layer.set_modules_to_forward_prefetch([layers[i + 1]])
for i, layer in enumerate(layers[1:], start=1):
    layer.set_modules_to_backward_prefetch([layers[i - 1]])
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)

for step in range(3):
    ids = torch.randint(0, 32000, (4, 512), device="cuda")
    logits = model(ids)
    loss = F.cross_entropy(logits.flatten(0, 1).float(), ids.roll(-1, 1).flatten())
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()
    optimizer.zero_grad()

dist.destroy_process_group()
