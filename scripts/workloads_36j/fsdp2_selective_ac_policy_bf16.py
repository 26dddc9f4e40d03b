"""FSDP2 with op-level selective activation checkpointing (SAC policy) on a Llama-style decoder, bf16.

Parallelism: FSDP2 (``fully_shard``) over a 1-D DeviceMesh of 2 ranks.  Each transformer block
is first wrapped with ``checkpoint_wrapper(..., context_fn=partial(
create_selective_checkpoint_contexts, policy))`` (non-reentrant ``torch.utils.checkpoint``)
and then made its own FSDP2 group (``reshard_after_forward=True``); the token embedding and
the final norm + output projection sit in the root group (``reshard_after_forward=False``).
The SAC policy returns ``CheckpointPolicy.MUST_SAVE`` for matmuls (``aten.mm``) and the SDPA
attention kernels, and ``PREFER_RECOMPUTE`` for everything else (RMSNorm, RoPE, SiLU, muls,
adds), so only norms/pointwise ops are recomputed in backward.

Model: hand-written decoder, d_model 2048, 16 layers, 16 heads (head dim 128, rotary
embeddings), SwiGLU MLP 5632, RMSNorm, vocab 32000, untied output; about 950 M parameters.

Precision: fp32 sharded parameters, ``MixedPrecisionPolicy(param_dtype=bfloat16,
reduce_dtype=float32)``; logits upcast to fp32 for the cross entropy.
Optimizer: ``torch.optim.AdamW`` (lr 3e-4, betas 0.9/0.95, weight decay 0.1),
``clip_grad_norm_(1.0)`` on the DTensor parameters.
Data: synthetic next-token batches, 4 sequences x 2048 tokens per rank, 6 steps; loss
all-reduced and printed on rank 0.
"""
import math
import os
from functools import partial

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

VOCAB = 32000
DIM = 2048
LAYERS = 16
HEADS = 16
FFN = 5632
BATCH = 4
SEQ = 2048
STEPS = 6

_SAVE_OPS = {
    torch.ops.aten.mm.default,
    torch.ops.aten._scaled_dot_product_flash_attention.default,
    torch.ops.aten._scaled_dot_product_efficient_attention.default,
    torch.ops.aten._scaled_dot_product_cudnn_attention.default,
}


def sac_policy(ctx, op, *args, **kwargs):
    return CheckpointPolicy.MUST_SAVE if op in _SAVE_OPS else CheckpointPolicy.PREFER_RECOMPUTE


def rope_cache(seq, head_dim, device):
    inv = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    freqs = torch.outer(torch.arange(seq, device=device).float(), inv)
    return torch.cos(freqs), torch.sin(freqs)


def apply_rope(x, cos, sin):
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return out.flatten(-2).type_as(x)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn_norm = nn.RMSNorm(DIM, eps=1e-5)
        self.wq = nn.Linear(DIM, DIM, bias=False)
        self.wk = nn.Linear(DIM, DIM, bias=False)
        self.wv = nn.Linear(DIM, DIM, bias=False)
        self.wo = nn.Linear(DIM, DIM, bias=False)
        self.ffn_norm = nn.RMSNorm(DIM, eps=1e-5)
        self.w1 = nn.Linear(DIM, FFN, bias=False)
        self.w3 = nn.Linear(DIM, FFN, bias=False)
        self.w2 = nn.Linear(FFN, DIM, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        h = self.attn_norm(x)
        q = self.wq(h).view(b, s, HEADS, -1).transpose(1, 2)
        k = self.wk(h).view(b, s, HEADS, -1).transpose(1, 2)
        v = self.wv(h).view(b, s, HEADS, -1).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(a.transpose(1, 2).reshape(b, s, DIM))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_emb = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.norm = nn.RMSNorm(DIM, eps=1e-5)
        self.output = nn.Linear(DIM, VOCAB, bias=False)
        self.register_buffer("cos", torch.empty(0), persistent=False)
        self.register_buffer("sin", torch.empty(0), persistent=False)

    def init_weights(self):
        cos, sin = rope_cache(SEQ, DIM // HEADS, self.tok_emb.weight.device)
        self.cos, self.sin = cos, sin
        std = 0.02
        for name, p in self.named_parameters():
            if p.dim() == 2:
                scale = 1.0 / math.sqrt(2 * LAYERS) if name.endswith(("wo.weight", "w2.weight")) else 1.0
                nn.init.normal_(p, std=std * scale)

    def forward(self, tokens):
        h = self.tok_emb(tokens)
        for layer in self.layers:
            h = layer(h, self.cos, self.sin)
        return self.output(self.norm(h))


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)
    mesh = init_device_mesh("cuda", (world_size,), mesh_dim_names=("fsdp",))

    torch.manual_seed(0)
    with torch.device(device):
        model = Decoder()
        model.init_weights()

    context_fn = partial(create_selective_checkpoint_contexts, sac_policy)
    for i, block in enumerate(model.layers):
        model.layers[i] = checkpoint_wrapper(block, context_fn=context_fn, preserve_rng_state=False)

    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.layers:
        fully_shard(block, mesh=mesh, mp_policy=mp, reshard_after_forward=True)
    fully_shard(model, mesh=mesh, mp_policy=mp, reshard_after_forward=False)

    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)

    gen = torch.Generator(device=device)
    gen.manual_seed(7 + rank)
    for step in range(STEPS):
        data = torch.randint(0, VOCAB, (BATCH, SEQ + 1), device=device, generator=gen)
        inputs, targets = data[:, :-1], data[:, 1:]
        logits = model(inputs)
        loss = F.cross_entropy(logits.float().view(-1, VOCAB), targets.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

        reported = loss.detach().clone()
        dist.all_reduce(reported, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"step {step} loss {reported.item():.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
