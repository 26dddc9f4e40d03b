"""FSDP2 (fully_shard) with regional torch.compile: each transformer block compiled, then sharded.

Parallelism: FSDP2 over a 1-D mesh of 4 ranks.  Following the torchtitan recipe, every
transformer block is wrapped with ``torch.compile(block, fullgraph=True)`` (default inductor
backend, default mode) and the compiled block is then passed to ``fully_shard``; the root
module (embeddings, final norm, LM head) is sharded last.  FSDP's all-gather / reduce-scatter
hooks therefore run eagerly around the compiled block graphs.  ``reshard_after_forward=True``
for the blocks, ``False`` for the root.

Mixed precision: ``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)``; sharded
fp32 master weights.  Optimizer: ``torch.optim.AdamW(fused=True)`` (lr 3e-4, wd 0.1) on the
DTensor shards.

Model: decoder-only transformer written here: vocab 32000, d_model 2048, 8 blocks, 16 heads
(head dim 128), pre-RMSNorm, causal SDPA, SwiGLU MLP with hidden 5632, learned positions,
untied LM head (about 545 M parameters).

Data: synthetic tokens, batch 4 sequences x 2048 tokens per rank, next-token cross entropy,
6 optimizer steps (the first step pays for the compilation).
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

VOCAB = 32000
DIM = 2048
LAYERS = 8
HEADS = 16
FFN = 5632
SEQ = 2048
BATCH = 4
STEPS = 6


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(DIM, 3 * DIM, bias=False)
        self.out = nn.Linear(DIM, DIM, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, s, DIM))


class SwiGLU(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(DIM, FFN, bias=False)
        self.up = nn.Linear(DIM, FFN, bias=False)
        self.down = nn.Linear(FFN, DIM, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.RMSNorm(DIM)
        self.attn = Attention()
        self.norm2 = nn.RMSNorm(DIM)
        self.mlp = SwiGLU()

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(SEQ, DIM)
        self.layers = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.norm = nn.RMSNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, tokens):
        pos = torch.arange(tokens.size(1), device=tokens.device)
        x = self.tok(tokens) + self.pos(pos)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    mesh = init_device_mesh("cuda", (dist.get_world_size(),))
    device = torch.device("cuda", local_rank)

    torch.manual_seed(0)
    with torch.device(device):
        model = Transformer()
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.normal_(p, std=0.02)

    # Regional compilation: compile each block, then shard the compiled block.
    for idx, block in enumerate(model.layers):
        model.layers[idx] = torch.compile(block, fullgraph=True)

    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.layers:
        fully_shard(block, mesh=mesh, mp_policy=mp, reshard_after_forward=True)
    fully_shard(model, mesh=mesh, mp_policy=mp, reshard_after_forward=False)

    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)

    torch.manual_seed(1000 + rank)
    for step in range(STEPS):
        tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), device=device)
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, VOCAB), tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if rank == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
