"""Context parallelism (ring attention) plus FSDP2 on a hand-written Llama-style decoder, bf16.

Parallelism: one 1-D DeviceMesh of the 2 ranks, used twice, as torchtitan does when the data
parallel degree is 1 and the context parallel degree is 2: ``fully_shard`` shards the
parameters over it (every decoder block its own FSDP2 group with ``reshard_after_forward=True``,
then a root group holding the embedding, final norm and output projection), and
``torch.distributed.tensor.experimental.context_parallel`` splits each sequence over it. Both
ranks draw the SAME 16384-token sequence; inside the ``context_parallel`` context the token
ids, the labels and the model's RoPE cos/sin buffers are sharded in place along the sequence
dimension (head-tail load balancing, 8192 tokens per rank) and
``F.scaled_dot_product_attention(..., is_causal=True)`` is dispatched to the ring-attention
implementation (key/value shards exchanged by all-gather, ``set_rotate_method("allgather")``).
Forward and backward both run inside the context. FSDP2's reduce-scatter averages the two
ranks' gradients, which is the gradient of the mean loss over the whole sequence.

Model: pre-norm decoder, d_model 2048, 16 layers, 16 heads of 128 (full multi-head attention,
RoPE), SwiGLU MLP 5632, RMSNorm, vocab 32000, untied output, about 953 M parameters, built on
the GPU from the constructor with ``torch.manual_seed(0)`` (identical on both ranks).

Precision: fp32 sharded parameters, ``MixedPrecisionPolicy(param_dtype=bfloat16,
reduce_dtype=float32)``; flash attention in bf16; cross entropy on fp32-upcast logits.
Optimizer: ``torch.optim.AdamW`` (lr 3e-4, betas (0.9, 0.95), weight decay 0.1),
``clip_grad_norm_(1.0)``.
Data: synthetic token ids, batch 1 x 16384 tokens (8192 per rank after sharding), 6 training
steps with the loss all-reduced (AVG) and printed on rank 0, then one evaluation sequence
under ``torch.no_grad()`` whose per-token argmax predictions are put back in order with
``context_parallel_unshard`` and scored on rank 0.
"""
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor.experimental import context_parallel
from torch.distributed.tensor.experimental._attention import context_parallel_unshard, set_rotate_method

VOCAB = 32000
DIM = 2048
LAYERS = 16
HEADS = 16
FFN = 5632
SEQ = 16384
BATCH = 1
STEPS = 6
ROPE_THETA = 10000.0


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return h.type_as(x) * self.weight


def apply_rope(x, cos, sin):
    # x: (B, H, S, D); cos/sin: (S, D)
    cos = cos.to(x.dtype)
    sin = sin.to(x.dtype)
    x1, x2 = x.chunk(2, dim=-1)
    rotated = torch.cat((-x2, x1), dim=-1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.head_dim = DIM // HEADS
        self.wq = nn.Linear(DIM, DIM, bias=False)
        self.wk = nn.Linear(DIM, DIM, bias=False)
        self.wv = nn.Linear(DIM, DIM, bias=False)
        self.wo = nn.Linear(DIM, DIM, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, HEADS, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, s, HEADS, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, s, HEADS, self.head_dim).transpose(1, 2)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        # looked up on the module at call time so that context_parallel's patch applies
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out = out.transpose(1, 2).reshape(b, s, DIM)
        return self.wo(out)


class FeedForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(DIM, FFN, bias=False)
        self.w3 = nn.Linear(DIM, FFN, bias=False)
        self.w2 = nn.Linear(FFN, DIM, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_norm = RMSNorm(DIM)
        self.attention = Attention()
        self.ffn_norm = RMSNorm(DIM)
        self.feed_forward = FeedForward()

    def forward(self, x, cos, sin):
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.feed_forward(self.ffn_norm(x))


class Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.norm = RMSNorm(DIM)
        self.output = nn.Linear(DIM, VOCAB, bias=False)
        head_dim = DIM // HEADS
        inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        t = torch.arange(SEQ, dtype=torch.float32)
        freqs = torch.outer(t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("rope_cos", emb.cos(), persistent=False)
        self.register_buffer("rope_sin", emb.sin(), persistent=False)
        self.reset_parameters()

    def reset_parameters(self):
        std = 0.02
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, mean=0.0, std=std)
                if name.endswith("wo.weight") or name.endswith("w2.weight"):
                    p.data.mul_(1.0 / math.sqrt(2 * LAYERS))

    def forward(self, tokens):
        s = tokens.shape[1]
        cos = self.rope_cos[:s]
        sin = self.rope_sin[:s]
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, cos, sin)
        return self.output(self.norm(h))


def make_sequence(step, device):
    # the same sequence on every rank: context parallelism splits ONE sequence
    g = torch.Generator(device=device)
    g.manual_seed(1234 + step)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g, device=device)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)
    mesh = init_device_mesh("cuda", (world_size,), mesh_dim_names=("cp",))

    torch.manual_seed(0)
    model = Transformer().to(device)
    n_params = sum(p.numel() for p in model.parameters())

    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.layers:
        fully_shard(block, mesh=mesh, mp_policy=mp, reshard_after_forward=True)
    fully_shard(model, mesh=mesh, mp_policy=mp)

    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    set_rotate_method("allgather")
    if rank == 0:
        print(f"params {n_params / 1e6:.1f} M, sequence {SEQ} tokens over {world_size} ranks", flush=True)

    model.train()
    for step in range(STEPS):
        inputs, labels = make_sequence(step, device)
        with context_parallel(
            mesh,
            buffers=[inputs, labels, model.rope_cos, model.rope_sin],
            buffer_seq_dims=[1, 1, 0, 0],
            no_restore_buffers={inputs, labels},
        ):
            logits = model(inputs)
            loss = F.cross_entropy(logits.float().view(-1, VOCAB), labels.view(-1))
            del logits
            loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

        reported = loss.detach().clone()
        dist.all_reduce(reported, op=dist.ReduceOp.AVG)
        if hasattr(grad_norm, "full_tensor"):
            grad_norm = grad_norm.full_tensor()
        if rank == 0:
            print(f"step {step} loss {reported.item():.4f} grad_norm {grad_norm.item():.3f} "
                  f"local tokens {inputs.shape[1]}", flush=True)

    model.eval()
    with torch.no_grad():
        inputs, labels = make_sequence(STEPS, device)
        full_labels = labels.clone()
        with context_parallel(
            mesh,
            buffers=[inputs, labels, model.rope_cos, model.rope_sin],
            buffer_seq_dims=[1, 1, 0, 0],
            no_restore_buffers={inputs, labels},
        ):
            logits = model(inputs)
            eval_loss = F.cross_entropy(logits.float().view(-1, VOCAB), labels.view(-1))
            preds = logits.argmax(dim=-1)
            del logits
        (full_preds,) = context_parallel_unshard(mesh, [preds], [1])
        dist.all_reduce(eval_loss, op=dist.ReduceOp.AVG)
    if rank == 0:
        acc = (full_preds == full_labels).float().mean()
        print(f"eval loss {eval_loss.item():.4f} next-token acc {acc.item():.5f} "
              f"gathered preds {tuple(full_preds.shape)}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
