"""torchtitan's recipe on a small decoder of its own: built on the meta device (RMSNorm, SDPA,
SwiGLU), each block checkpointed (non-reentrant) and sharded with FSDP2 in bf16 (fp32 reduce),
to_empty and trunc_normal_ initialisation on the GPU, AdamW; two steps, then the full model state
dict gathered to the CPU."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, dim=1024, heads=16, hidden=2816):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.RMSNorm(dim, eps=1e-5), nn.RMSNorm(dim, eps=1e-5)
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.w1, self.w2, self.w3 = nn.Linear(dim, hidden, bias=False), nn.Linear(hidden, dim, bias=False), nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        b, s, d = x.shape
        h = self.n1(x)
        q, k, v = (w(h).view(b, s, self.heads, -1).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        x = x + self.wo(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d))
        h = self.n2(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Model(nn.Module):
    def __init__(self, vocab=16000, dim=1024, layers=4):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim) for _ in range(layers))
        self.norm = nn.RMSNorm(dim)
        self.out = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        x = self.tok(ids)
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False)
        return self.out(self.norm(x))


torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
mesh = init_device_mesh("cuda", (int(os.environ["WORLD_SIZE"]),))
with torch.device("meta"):
    model = Model()
mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
for block in model.blocks:
    fully_shard(block, mesh=mesh, mp_policy=mp)
fully_shard(model, mesh=mesh, mp_policy=mp)
model.to_empty(device="cuda")
with torch.no_grad():
    for p in model.parameters():
        nn.init.trunc_normal_(p, std=0.02)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
for _ in range(2):
    ids = torch.randint(0, 16000, (4, 512), device="cuda")
    F.cross_entropy(model(ids).flatten(0, 1).float(), ids.flatten()).backward()
    optimizer.step()
    optimizer.zero_grad()
state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
dist.destroy_process_group()
