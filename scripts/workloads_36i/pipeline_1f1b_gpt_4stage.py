"""Pipeline parallelism with torch.distributed.pipelining: a 16-layer GPT split into 4 stages, 1F1B.

Parallelism: pure pipeline parallel, one stage per rank (4 stages).  The full model is declared
on the meta device, each rank deletes the layers it does not own (torchtitan style: stage 0
keeps the token/position embeddings and layers 0-3, stage 1 layers 4-7, stage 2 layers 8-11,
stage 3 layers 12-15 plus the final LayerNorm and LM head), materialises its part with
``to_empty`` on its GPU and initialises it.  Each part is a ``PipelineStage`` (shapes inferred at
runtime) driven by ``Schedule1F1B`` with 8 micro-batches; the loss function lives on the last
stage, gradients are scaled by 1/8 by the schedule, and ``return_outputs=False`` so the last
stage does not keep the logits of all micro-batches.

Model: GPT-style decoder written here: vocab 32000, d_model 2048, 16 layers, 16 heads, causal
SDPA, pre-LayerNorm, GELU MLP with hidden 8192, learned positions, untied head (about 200 M
parameters per stage plus 65 M for the embedding on stage 0 and 65 M for the head on stage 3).

Precision / optimizer: fp32 weights, every stage runs its forward under
``torch.autocast(bfloat16)`` (the activations sent between stages are fp32 residual streams);
``torch.optim.AdamW`` (lr 3e-4, wd 0.1) per stage.

Data: synthetic tokens, global batch 16 sequences x 1024 tokens per step (all on stage 0, the
targets on stage 3), split into 8 micro-batches of 2; 5 steps.
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, Schedule1F1B

VOCAB = 32000
DIM = 2048
LAYERS = 16
HEADS = 16
FFN = 8192
SEQ = 1024
BATCH = 16
MICROBATCHES = 8
STEPS = 5


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(DIM)
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)
        self.ln2 = nn.LayerNorm(DIM)
        self.fc1 = nn.Linear(DIM, FFN)
        self.fc2 = nn.Linear(FFN, DIM)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, s, DIM))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(SEQ, DIM)
        # ModuleDict keeps the global layer names when layers are deleted per stage.
        self.layers = nn.ModuleDict({str(i): Block() for i in range(LAYERS)})
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, x):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            if self.tok is not None:
                pos = torch.arange(x.size(1), device=x.device)
                x = self.tok(x) + self.pos(pos)
            for layer in self.layers.values():
                x = layer(x)
            if self.head is not None:
                x = self.head(self.norm(x))
        return x


def build_stage_module(stage_idx, num_stages, device):
    with torch.device("meta"):
        model = GPT()
    per_stage = LAYERS // num_stages
    keep = range(stage_idx * per_stage, (stage_idx + 1) * per_stage)
    for name in list(model.layers.keys()):
        if int(name) not in keep:
            del model.layers[name]
    if stage_idx != 0:
        model.tok = None
        model.pos = None
    if stage_idx != num_stages - 1:
        model.norm = None
        model.head = None
    model.to_empty(device=device)
    torch.manual_seed(stage_idx)
    for mod in model.modules():
        if isinstance(mod, (nn.Linear, nn.Embedding)):
            nn.init.normal_(mod.weight, std=0.02)
            if getattr(mod, "bias", None) is not None:
                nn.init.zeros_(mod.bias)
        elif isinstance(mod, nn.LayerNorm):
            nn.init.ones_(mod.weight)
            nn.init.zeros_(mod.bias)
    return model


def loss_fn(logits, targets):
    return F.cross_entropy(logits.float().reshape(-1, VOCAB), targets.reshape(-1))


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", local_rank)

    module = build_stage_module(rank, world, device)
    n_params = sum(p.numel() for p in module.parameters())
    print(f"rank {rank} stage params {n_params / 1e6:.1f} M", flush=True)

    stage = PipelineStage(module, stage_index=rank, num_stages=world, device=device)
    schedule = Schedule1F1B(stage, n_microbatches=MICROBATCHES, loss_fn=loss_fn)
    optimizer = torch.optim.AdamW(module.parameters(), lr=3e-4, weight_decay=0.1)

    gen = torch.Generator(device="cpu").manual_seed(1234)
    for step in range(STEPS):
        tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=gen)
        inputs = tokens[:, :-1].contiguous().to(device)
        targets = tokens[:, 1:].contiguous().to(device)
        optimizer.zero_grad(set_to_none=True)
        if rank == 0:
            schedule.step(inputs)
        elif rank == world - 1:
            losses = []
            schedule.step(target=targets, losses=losses, return_outputs=False)
            print(f"step {step} loss {torch.stack(losses).mean().item():.4f}", flush=True)
        else:
            schedule.step()
        optimizer.step()

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
