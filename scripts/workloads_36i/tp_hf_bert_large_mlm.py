"""Pure tensor parallel (degree 4) training of a Hugging Face BERT-large masked-LM encoder.

Parallelism: one 1-D device mesh of 4 ranks used only for tensor parallelism (no data
parallelism: every rank sees the same batch).  ``parallelize_module`` is applied to each of the
24 ``BertLayer``s: ``attention.self.query/key/value`` -> ``ColwiseParallel`` (each rank owns 4 of
the 16 heads; BERT's ``view(..., -1, head_dim)`` picks up the local head count),
``attention.output.dense`` -> ``RowwiseParallel``, ``intermediate.dense`` -> ``ColwiseParallel``,
``output.dense`` -> ``RowwiseParallel``.  Embeddings, LayerNorms, the pooler-free MLM head and its
decoder (tied to the word embeddings) stay replicated as ordinary tensors.

Model: ``BertForMaskedLM(BertConfig(...))`` built from config, random weights: vocab 30522,
hidden 1024, 24 layers, 16 heads, intermediate 4096, max positions 512, SDPA attention
(about 335 M parameters), fp32 weights, dropout 0.1.

Precision / optimizer: forward under ``torch.autocast(bfloat16)``; ``torch.optim.AdamW``
(lr 1e-4, wd 0.01, foreach) with two param groups (TP-sharded DTensor parameters, replicated
plain parameters) because foreach kernels cannot mix the two; global-norm gradient clipping at
1.0 written out by hand (DTensor norms are all-reduced with ``full_tensor()``).

Data: synthetic token ids, batch 16 sequences x 512 tokens (same on all ranks), 15% of the
positions masked with [MASK] and labelled, the rest labelled -100.  6 steps.
"""
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)
from transformers import BertConfig, BertForMaskedLM

HIDDEN = 1024
LAYERS = 24
HEADS = 16
INTERMEDIATE = 4096
VOCAB = 30522
SEQ = 512
BATCH = 16
STEPS = 6
MASK_ID = 103


@torch.no_grad()
def clip_grad_norm_tp(sharded, replicated, max_norm):
    """Global-norm clipping over TP-sharded DTensor grads plus replicated plain grads."""
    sharded_grads = [p.grad for p in sharded if p.grad is not None]
    plain_grads = [p.grad for p in replicated if p.grad is not None]
    sq = torch.zeros((), device=plain_grads[0].device, dtype=torch.float32)
    for norm in torch._foreach_norm(sharded_grads):
        sq += norm.full_tensor().float() ** 2  # DTensor norm -> all-reduced scalar
    for norm in torch._foreach_norm(plain_grads):
        sq += norm.float() ** 2
    total = sq.sqrt()
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in sharded_grads:
        g.mul_(coef.item())
    torch._foreach_mul_(plain_grads, coef)
    return total


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    tp_mesh = init_device_mesh("cuda", (dist.get_world_size(),), mesh_dim_names=("tp",))
    device = torch.device("cuda", local_rank)

    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE,
        max_position_embeddings=SEQ,
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    model = BertForMaskedLM(config).to(device)

    layer_plan = {
        "attention.self.query": ColwiseParallel(),
        "attention.self.key": ColwiseParallel(),
        "attention.self.value": ColwiseParallel(),
        "attention.output.dense": RowwiseParallel(),
        "intermediate.dense": ColwiseParallel(),
        "output.dense": RowwiseParallel(),
    }
    for layer in model.bert.encoder.layer:
        parallelize_module(layer, tp_mesh, layer_plan)

    n_dtensor = sum(isinstance(p, DTensor) for p in model.parameters())
    if rank == 0:
        print(f"{n_dtensor} DTensor parameters of {len(list(model.parameters()))}", flush=True)

    # foreach kernels cannot mix DTensor and plain tensors, so keep them in separate groups.
    sharded = [p for p in model.parameters() if isinstance(p, DTensor)]
    replicated = [p for p in model.parameters() if not isinstance(p, DTensor)]
    optimizer = torch.optim.AdamW(
        [{"params": sharded}, {"params": replicated}], lr=1e-4, weight_decay=0.01, foreach=True
    )

    # Tensor parallel: all ranks must see the same batch, so the data seed is shared.
    gen = torch.Generator(device="cpu").manual_seed(42)
    model.train()
    for step in range(STEPS):
        input_ids = torch.randint(1000, VOCAB, (BATCH, SEQ), generator=gen)
        mask = torch.rand(BATCH, SEQ, generator=gen) < 0.15
        labels = torch.where(mask, input_ids, torch.full_like(input_ids, -100))
        input_ids = torch.where(mask, torch.full_like(input_ids, MASK_ID), input_ids)
        input_ids, labels = input_ids.to(device), labels.to(device)
        attention_mask = torch.ones_like(input_ids)

        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        out.loss.backward()
        clip_grad_norm_tp(sharded, replicated, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if rank == 0:
            print(f"step {step} loss {out.loss.item():.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
