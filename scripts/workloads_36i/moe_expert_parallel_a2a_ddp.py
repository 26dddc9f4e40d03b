"""Expert-parallel mixture-of-experts transformer: token dispatch with all_to_all_single, dense part in DDP.

Parallelism: 4 ranks = 4-way expert parallel and 4-way data parallel at once.  Each MoE layer has
16 experts; rank r owns experts 4r..4r+3 (their weights differ per rank).  Routed tokens are
exchanged with the differentiable ``torch.distributed.nn.functional.all_to_all_single`` (uneven
split sizes, computed from a first all_to_all_single of per-expert counts) on a dedicated
expert-parallel process group, run through the local experts, and sent back the same way.  The
dense (non-expert) parameters are data parallel through ``DistributedDataParallel`` on the whole
model, with the expert parameters excluded via
``DDP._set_params_and_buffers_to_ignore_for_model`` so DDP neither broadcasts nor all-reduces them;
expert gradients are scaled by 1/world_size by hand before the step.

Model: decoder-only MoE transformer written here: vocab 32000, d_model 1024, 4 layers, 16 heads,
causal SDPA, pre-RMSNorm; every layer's FFN is a top-2 token-choice MoE with 16 SwiGLU experts of
hidden 2816 (softmax router, renormalised top-2 weights, load-balancing auxiliary loss 0.01).
About 83 M dense parameters (replicated) plus 35 M expert parameters per layer per rank.

Precision / optimizer: fp32 weights, forward under ``torch.autocast(bfloat16)``; tokens are cast to
bf16 before dispatch.  ``torch.optim.AdamW`` (lr 3e-4, wd 0.1).

Data: synthetic tokens, batch 8 sequences x 1024 tokens per rank (different on every rank, so
every rank receives a different number of routed tokens), 6 steps.
"""
import os

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB = 32000
DIM = 1024
LAYERS = 4
HEADS = 16
EXPERTS = 16
TOP_K = 2
EXPERT_HIDDEN = 2816
SEQ = 1024
BATCH = 8
STEPS = 6
AUX_WEIGHT = 0.01


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


class LocalExperts(nn.Module):
    """The experts this rank owns, stored as stacked SwiGLU weights."""

    def __init__(self, num_local):
        super().__init__()
        self.w_gate = nn.Parameter(torch.randn(num_local, DIM, EXPERT_HIDDEN) * 0.02)
        self.w_up = nn.Parameter(torch.randn(num_local, DIM, EXPERT_HIDDEN) * 0.02)
        self.w_down = nn.Parameter(torch.randn(num_local, EXPERT_HIDDEN, DIM) * 0.02)

    def forward(self, chunks):
        outs = []
        for e, x in enumerate(chunks):
            h = F.silu(x @ self.w_gate[e]) * (x @ self.w_up[e])
            outs.append(h @ self.w_down[e])
        return torch.cat(outs)


class MoE(nn.Module):
    def __init__(self, ep_group):
        super().__init__()
        self.ep_group = ep_group
        self.ep_size = dist.get_world_size(ep_group)
        self.num_local = EXPERTS // self.ep_size
        self.router = nn.Linear(DIM, EXPERTS, bias=False)
        self.experts = LocalExperts(self.num_local)

    def forward(self, x):
        b, s, d = x.shape
        x = x.reshape(-1, d)
        tokens = x.size(0)

        probs = F.softmax(self.router(x).float(), dim=-1)
        top_w, top_e = probs.topk(TOP_K, dim=-1)
        top_w = top_w / top_w.sum(-1, keepdim=True)

        # Switch-style load-balancing loss on this rank's tokens.
        frac = torch.bincount(top_e.reshape(-1), minlength=EXPERTS).float() / (tokens * TOP_K)
        aux = EXPERTS * (frac * probs.mean(0)).sum()

        # Sort the (token, slot) assignments by global expert id.
        flat_e = top_e.reshape(-1)
        order = flat_e.argsort(stable=True)
        token_idx = order // TOP_K
        send = x[token_idx].to(torch.bfloat16)
        send_counts = torch.bincount(flat_e, minlength=EXPERTS)

        # Exchange per-expert counts: recv_counts[src * num_local + j] = tokens from src for local expert j.
        recv_counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv_counts, send_counts, group=self.ep_group)
        in_splits = send_counts.view(self.ep_size, self.num_local).sum(1).tolist()
        recv_matrix = recv_counts.view(self.ep_size, self.num_local)
        out_splits = recv_matrix.sum(1).tolist()

        recv = send.new_empty(sum(out_splits), d)
        recv = dist_fn.all_to_all_single(recv, send, out_splits, in_splits, group=self.ep_group)

        # Regroup the received rows (ordered by source rank, then expert) by local expert.
        local_ids = torch.arange(self.num_local, device=x.device).repeat(self.ep_size)
        local_ids = local_ids.repeat_interleave(recv_counts)
        perm = local_ids.argsort(stable=True)
        per_expert = recv_matrix.sum(0).tolist()
        expert_out = self.experts(recv[perm].split(per_expert))
        back = torch.empty_like(expert_out)
        back[perm] = expert_out

        returned = back.new_empty(send.shape)
        returned = dist_fn.all_to_all_single(returned, back, in_splits, out_splits, group=self.ep_group)

        weights = top_w.reshape(-1)[order].unsqueeze(1)
        y = torch.zeros(tokens, d, device=x.device, dtype=torch.float32)
        y = y.index_add(0, token_idx, returned.float() * weights)
        return y.view(b, s, d), aux


class Block(nn.Module):
    def __init__(self, ep_group):
        super().__init__()
        self.norm1 = nn.RMSNorm(DIM)
        self.attn = Attention()
        self.norm2 = nn.RMSNorm(DIM)
        self.moe = MoE(ep_group)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        y, aux = self.moe(self.norm2(x))
        return x + y, aux


class MoETransformer(nn.Module):
    def __init__(self, ep_group):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList([Block(ep_group) for _ in range(LAYERS)])
        self.norm = nn.RMSNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, tokens):
        x = self.tok(tokens)
        aux_total = x.new_zeros(())
        for layer in self.layers:
            x, aux = layer(x)
            aux_total = aux_total + aux
        return self.head(self.norm(x)), aux_total


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", local_rank)
    ep_group = dist.new_group(list(range(world)))

    # Same seed everywhere for the dense weights (DDP broadcasts them from rank 0 anyway) ...
    torch.manual_seed(0)
    model = MoETransformer(ep_group)
    # ... but each rank's experts are different experts, so re-draw them with a per-rank seed.
    torch.manual_seed(100 + rank)
    for layer in model.layers:
        for p in layer.moe.experts.parameters():
            nn.init.normal_(p, std=0.02)
    model = model.to(device)

    expert_names = [n for n, _ in model.named_parameters() if ".moe.experts." in n]
    DDP._set_params_and_buffers_to_ignore_for_model(model, expert_names)
    ddp_model = DDP(model, device_ids=[local_rank])
    expert_params = [p for n, p in model.named_parameters() if n in set(expert_names)]

    optimizer = torch.optim.AdamW(ddp_model.parameters(), lr=3e-4, weight_decay=0.1)

    torch.manual_seed(1000 + rank)
    for step in range(STEPS):
        tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits, aux = ddp_model(tokens[:, :-1])
        ce = F.cross_entropy(logits.float().reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        loss = ce + AUX_WEIGHT * aux
        loss.backward()
        # Expert grads hold the sum of all ranks' contributions; DDP averaged the dense ones.
        for p in expert_params:
            if p.grad is not None:
                p.grad.div_(world)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if rank == 0:
            print(f"step {step} ce {ce.item():.4f} aux {aux.item():.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
