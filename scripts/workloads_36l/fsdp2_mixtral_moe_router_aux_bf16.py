"""FSDP2 over an HF Mixtral-style sparse mixture-of-experts decoder (8 experts, top-2 routing) trained with the router load-balancing auxiliary loss, bf16.

Parallelism: FSDP2 (``torch.distributed.fsdp.fully_shard``) over 2 ranks on a 1-D DeviceMesh:
every ``MixtralDecoderLayer`` (attention, router and the fused 3-D expert weights
``gate_up_proj`` [8, 7168, 1024] / ``down_proj`` [8, 1024, 3584], sharded along the expert dim)
is its own FSDP2 group (``reshard_after_forward=True``), then a root ``fully_shard(model)``
holds the token embedding, the untied ``lm_head`` and the final RMSNorm. Every rank runs all
experts on its own tokens (no expert parallelism); transformers' default experts
implementation is used.
Model: ``MixtralForCausalLM`` built from a ``MixtralConfig`` (hidden 1024, 16 layers, 16 query
/ 8 key-value heads, 8 local experts of SwiGLU width 3584, 2 experts per token, no router
jitter, vocab 32000, untied embeddings, no sliding window, SDPA attention),
``output_router_logits=True`` so the model's loss is causal-LM cross entropy + 0.02 x the
Switch-style load-balancing loss over all 16 layers' router logits; about 1.53 B parameters,
random init on the GPU.
Precision: fp32 sharded parameters, ``MixedPrecisionPolicy(param_dtype=bfloat16,
reduce_dtype=float32)``.
Optimizer: AdamW (lr 1e-4, betas (0.9, 0.95), weight decay 0.1), ``clip_grad_norm_(1.0)``.
Data: synthetic token ids, batch 2 x 2048 tokens per rank (different per rank), 6 training steps
with the total and auxiliary losses all-reduced (AVG) and printed on rank 0, then one
evaluation batch under ``torch.no_grad()`` in ``eval()`` with the per-layer top-2 expert token
counts all-reduced (SUM) and the most/least loaded expert shares printed.
"""
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from transformers import MixtralConfig, MixtralForCausalLM

VOCAB = 32000
HIDDEN = 1024
LAYERS = 16
HEADS = 16
KV_HEADS = 8
INTERMEDIATE = 3584
EXPERTS = 8
TOP_K = 2
BATCH = 2
SEQ = 2048
STEPS = 6


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)
    mesh = init_device_mesh("cuda", (world_size,), mesh_dim_names=("dp",))

    torch.manual_seed(0)
    config = MixtralConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        num_local_experts=EXPERTS,
        num_experts_per_tok=TOP_K,
        router_jitter_noise=0.0,
        output_router_logits=True,
        router_aux_loss_coef=0.02,
        max_position_embeddings=4096,
        sliding_window=None,
        tie_word_embeddings=False,
        use_cache=False,
        attn_implementation="sdpa",
    )
    with torch.device(device):
        model = MixtralForCausalLM(config)
    n_params = sum(p.numel() for p in model.parameters())

    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=True)
    fully_shard(model, mesh=mesh, mp_policy=mp)

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    if rank == 0:
        print(f"world {world_size} params {n_params / 1e9:.3f} B", flush=True)

    gen = torch.Generator(device=device)
    gen.manual_seed(1000 + rank)

    model.train()
    for step in range(STEPS):
        input_ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen, device=device)
        out = model(input_ids=input_ids, labels=input_ids, use_cache=False, output_router_logits=True)
        out.loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

        reported = torch.stack([out.loss.detach().float(), out.aux_loss.detach().float()])
        dist.all_reduce(reported, op=dist.ReduceOp.AVG)
        if hasattr(grad_norm, "full_tensor"):
            grad_norm = grad_norm.full_tensor()
        if rank == 0:
            print(
                f"step {step} loss {reported[0].item():.4f} aux {reported[1].item():.4f} "
                f"grad_norm {grad_norm.item():.3f}",
                flush=True,
            )

    model.eval()
    with torch.no_grad():
        input_ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen, device=device)
        out = model(input_ids=input_ids, labels=input_ids, use_cache=False, output_router_logits=True)
        counts = torch.stack(
            [
                torch.bincount(logits.topk(TOP_K, dim=-1).indices.flatten(), minlength=EXPERTS)
                for logits in out.router_logits
            ]
        )
        eval_loss = out.loss.float()
        dist.all_reduce(counts, op=dist.ReduceOp.SUM)
        dist.all_reduce(eval_loss, op=dist.ReduceOp.AVG)
    if rank == 0:
        share = counts.float() / counts.sum(dim=1, keepdim=True)
        print(
            f"eval loss {eval_loss.item():.4f} expert share max {share.max().item():.3f} "
            f"min {share.min().item():.3f}",
            flush=True,
        )

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
