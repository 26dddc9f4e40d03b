"""FSDP2 over an HF GPT-NeoX (Pythia-1.4B shape) with the input embedding and the (final norm + untied output head) as separate FSDP2 groups and a ``shard_placement_fn`` that shards wide matrices along dim 1, bf16.

Parallelism: FSDP2 (``torch.distributed.fsdp.fully_shard``) over 2 ranks on a 1-D DeviceMesh,
torchtitan-style explicit grouping:
  * ``fully_shard(model.gpt_neox.embed_in, reshard_after_forward=True)``;
  * each of the 24 ``GPTNeoXLayer`` modules its own group (``reshard_after_forward=True``);
  * ``fully_shard([model.gpt_neox.final_layer_norm, model.lm_head],
    reshard_after_forward=False)`` -- one group built from two modules, kept unsharded between
    forward and backward because backward needs it right away;
  * a root ``fully_shard(model)`` that owns no parameters of its own (rotary buffers only).
Every call passes ``shard_placement_fn``: a 2-D parameter whose second dim is larger than its
first (the MLP ``dense_4h_to_h`` weights, 2048 x 8192) is sharded as ``Shard(1)`` (each rank
holds 2048 x 4096 columns), everything else as the default ``Shard(0)``.
Model: ``GPTNeoXForCausalLM`` built from a ``GPTNeoXConfig`` of the Pythia-1.4B shape (hidden
2048, 24 layers, 16 heads, MLP 8192 GELU, parallel residual, rotary on 25 % of each head, vocab
50304, untied ``lm_head``, SDPA attention), about 1.41 B parameters, random init on the GPU.
Precision: fp32 sharded parameters, ``MixedPrecisionPolicy(param_dtype=bfloat16,
reduce_dtype=float32)`` on every group; the loss is the model's own causal-LM cross entropy.
Optimizer: AdamW (lr 2e-4 after a 2-step linear warm-up, betas (0.9, 0.95), weight decay 0.01),
``clip_grad_norm_(1.0)``.
Data: synthetic token ids, batch 2 x 2048 tokens per rank (different per rank), 6 training steps
with the loss all-reduced (AVG) and printed on rank 0, then one evaluation batch under
``torch.no_grad()`` in ``eval()`` with the loss all-reduced.
"""
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import Shard
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

VOCAB = 50304
HIDDEN = 2048
LAYERS = 24
HEADS = 16
INTERMEDIATE = 8192
BATCH = 2
SEQ = 2048
STEPS = 6
WARMUP = 2


def shard_placement_fn(param):
    if param.ndim == 2 and param.shape[1] > param.shape[0]:
        return Shard(1)
    return None


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)
    mesh = init_device_mesh("cuda", (world_size,), mesh_dim_names=("dp",))

    torch.manual_seed(0)
    config = GPTNeoXConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE,
        hidden_act="gelu",
        rotary_pct=0.25,
        rotary_emb_base=10000,
        max_position_embeddings=2048,
        use_parallel_residual=True,
        tie_word_embeddings=False,
        use_cache=False,
        bos_token_id=0,
        eos_token_id=0,
        attn_implementation="sdpa",
    )
    with torch.device(device):
        model = GPTNeoXForCausalLM(config)
    assert model.lm_head.weight is not model.gpt_neox.embed_in.weight
    n_params = sum(p.numel() for p in model.parameters())

    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    common = dict(mesh=mesh, mp_policy=mp, shard_placement_fn=shard_placement_fn)
    fully_shard(model.gpt_neox.embed_in, reshard_after_forward=True, **common)
    for layer in model.gpt_neox.layers:
        fully_shard(layer, reshard_after_forward=True, **common)
    fully_shard([model.gpt_neox.final_layer_norm, model.lm_head], reshard_after_forward=False, **common)
    fully_shard(model, **common)

    n_dim1 = sum(1 for p in model.parameters() if p.placements[0] == Shard(1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-4, betas=(0.9, 0.95), weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / WARMUP))
    if rank == 0:
        print(f"world {world_size} params {n_params / 1e9:.3f} B, {n_dim1} sharded on dim 1", flush=True)

    gen = torch.Generator(device=device)
    gen.manual_seed(1000 + rank)

    model.train()
    for step in range(STEPS):
        input_ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen, device=device)
        loss = model(input_ids=input_ids, labels=input_ids, use_cache=False).loss
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)

        reported = loss.detach().clone()
        dist.all_reduce(reported, op=dist.ReduceOp.AVG)
        if hasattr(grad_norm, "full_tensor"):
            grad_norm = grad_norm.full_tensor()
        if rank == 0:
            print(f"step {step} loss {reported.item():.4f} grad_norm {grad_norm.item():.3f}", flush=True)

    model.eval()
    with torch.no_grad():
        input_ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen, device=device)
        eval_loss = model(input_ids=input_ids, labels=input_ids, use_cache=False).loss.float()
        dist.all_reduce(eval_loss, op=dist.ReduceOp.AVG)
    if rank == 0:
        print(f"eval loss {eval_loss.item():.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
