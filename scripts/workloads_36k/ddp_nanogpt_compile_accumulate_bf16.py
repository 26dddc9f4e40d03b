"""nanoGPT-style DDP training of a small GPT compiled with ``torch.compile`` (inductor), bf16.

Parallelism: ``DistributedDataParallel`` over 2 ranks. As nanoGPT's ``train.py`` does, the
model is compiled first (``model = torch.compile(model)``, default inductor backend and mode)
and the compiled module is then wrapped in ``DDP(model, device_ids=[local_rank])`` (default
25 MB buckets). Gradient accumulation over 2 micro-batches per optimizer step is done the
nanoGPT way, by setting ``model.require_backward_grad_sync`` to ``True`` only on the last
micro-batch, so the first backward of every step skips the all-reduce.

Model: GPT-2-style decoder written by hand (nanoGPT's ``GPT``): d_model 1024, 4 layers, 16
heads, MLP 4096 with GELU, LayerNorm with bias, learned position embeddings for 1024
positions, vocab 50304, ``lm_head`` weight tied to the token embedding, causal
``F.scaled_dot_product_attention``; about 103 M parameters, dropout 0.

Precision: fp32 parameters, ``torch.autocast("cuda", dtype=torch.bfloat16)`` around the
forward and loss (inside the compiled graph), TF32 matmuls allowed.
Optimizer: ``torch.optim.AdamW(fused=True)`` (lr 6e-4, betas (0.9, 0.95), weight decay 0.1 on
2-D weights only, 0 on biases and norms), ``clip_grad_norm_(1.0)``.
Data: synthetic token ids, micro-batch 12 x 1024 tokens per rank, 2 micro-batches per step,
6 optimizer steps (the first one includes compilation); the last micro-batch loss is
all-reduced (AVG) and printed on rank 0; then one evaluation micro-batch under
``torch.no_grad()`` through the uncompiled module (``model.module._orig_mod``), in ``eval()``.
"""
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB = 50304
BLOCK = 1024
N_LAYER = 4
N_HEAD = 16
N_EMBD = 1024
MICRO_BATCH = 12
ACCUM = 2
STEPS = 6


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(N_EMBD, 3 * N_EMBD)
        self.c_proj = nn.Linear(N_EMBD, N_EMBD)

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(N_EMBD, dim=2)
        k = k.view(b, t, N_HEAD, c // N_HEAD).transpose(1, 2)
        q = q.view(b, t, N_HEAD, c // N_HEAD).transpose(1, 2)
        v = v.view(b, t, N_HEAD, c // N_HEAD).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(N_EMBD, 4 * N_EMBD)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * N_EMBD, N_EMBD)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(N_EMBD)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(N_EMBD)
        self.mlp = MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(VOCAB, N_EMBD),
            wpe=nn.Embedding(BLOCK, N_EMBD),
            h=nn.ModuleList([Block() for _ in range(N_LAYER)]),
            ln_f=nn.LayerNorm(N_EMBD),
        ))
        self.lm_head = nn.Linear(N_EMBD, VOCAB, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * N_LAYER))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        params = [p for p in self.parameters() if p.requires_grad]
        decay = [p for p in params if p.dim() >= 2]
        no_decay = [p for p in params if p.dim() < 2]
        groups = [
            {"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, fused=True)


def get_batch(generator, device):
    data = torch.randint(0, VOCAB, (MICRO_BATCH, BLOCK + 1), generator=generator, device=device)
    return data[:, :-1].contiguous(), data[:, 1:].contiguous()


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)

    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True

    model = GPT().to(device)
    n_params = sum(p.numel() for p in model.parameters())
    optimizer = model.configure_optimizers(weight_decay=0.1, learning_rate=6e-4, betas=(0.9, 0.95))
    model = torch.compile(model)
    model = DDP(model, device_ids=[local_rank])
    if rank == 0:
        print(f"params {n_params / 1e6:.1f} M, world {world_size}", flush=True)

    gen = torch.Generator(device=device)
    gen.manual_seed(1000 + rank)

    model.train()
    for step in range(STEPS):
        for micro_step in range(ACCUM):
            x, y = get_batch(gen, device)
            model.require_backward_grad_sync = micro_step == ACCUM - 1
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                _, loss = model(x, y)
                loss = loss / ACCUM
            loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

        reported = loss.detach() * ACCUM
        dist.all_reduce(reported, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"step {step} loss {reported.item():.4f} grad_norm {grad_norm.item():.3f}", flush=True)

    raw_model = model.module._orig_mod
    raw_model.eval()
    with torch.no_grad():
        x, y = get_batch(gen, device)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            _, eval_loss = raw_model(x, y)
        eval_loss = eval_loss.float()
        dist.all_reduce(eval_loss, op=dist.ReduceOp.AVG)
    if rank == 0:
        print(f"eval loss {eval_loss.item():.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
