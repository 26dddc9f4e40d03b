"""FSDP2 training of an HF Phi-3-style decoder, then greedy generation with every FSDP2 group unsharded by hand (``unshard(async_op=True)`` / ``set_reshard_after_forward(False)`` / ``reshard()``), bf16.

Parallelism: FSDP2 (``torch.distributed.fsdp.fully_shard``) over 2 ranks on a 1-D DeviceMesh:
every ``Phi3DecoderLayer`` is its own FSDP2 group (``reshard_after_forward=True``), then a root
``fully_shard(model)`` holds the token embedding, the untied ``lm_head``, the final RMSNorm and
the rotary embedding module.
Model: ``Phi3ForCausalLM`` built from a ``Phi3Config`` (hidden 2048, 24 layers, 32 heads with
32 key-value heads, fused ``qkv_proj`` and ``gate_up_proj``, SwiGLU MLP 5632, vocab 32064,
untied embeddings, SDPA attention), about 1.36 B parameters, random init on the GPU.
Precision: fp32 sharded parameters, ``MixedPrecisionPolicy(param_dtype=bfloat16,
reduce_dtype=float32)``; the loss is the model's own causal-LM cross entropy.
Optimizer: AdamW (lr 3e-5, betas (0.9, 0.95), weight decay 0.1), ``clip_grad_norm_(1.0)``.
Training data: synthetic token ids, batch 2 x 2048 tokens per rank (different per rank), 5
steps with the loss all-reduced (AVG) and printed on rank 0.
Generation: ``eval()``, then ``model.set_reshard_after_forward(False)`` (recursive) and
``unshard(async_op=True)`` issued on every FSDP2 module (25 all-gathers of bf16 parameters in
flight, then all waited), so the full bf16 model stays resident and generation issues no
collectives; ``model.generate`` under ``torch.no_grad()`` greedily decodes 8 prompts x 64 tokens
per rank (different per rank) for exactly 128 new tokens with a dynamic KV cache
(``min_new_tokens=max_new_tokens=128``); afterwards every module is ``reshard()``-ed by hand,
``set_reshard_after_forward(True)`` restored on the decoder-layer groups only (the root keeps
False), and one more training step is run.
"""
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from transformers import Phi3Config, Phi3ForCausalLM

VOCAB = 32064
HIDDEN = 2048
LAYERS = 24
HEADS = 32
INTERMEDIATE = 5632
BATCH = 2
SEQ = 2048
STEPS = 5
GEN_BATCH = 8
PROMPT = 64
NEW_TOKENS = 128


def train_step(model, optimizer, gen, device, rank, step):
    input_ids = torch.randint(0, 32000, (BATCH, SEQ), generator=gen, device=device)
    loss = model(input_ids=input_ids, labels=input_ids, use_cache=False).loss
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    reported = loss.detach().clone()
    dist.all_reduce(reported, op=dist.ReduceOp.AVG)
    if hasattr(grad_norm, "full_tensor"):
        grad_norm = grad_norm.full_tensor()
    if rank == 0:
        print(f"step {step} loss {reported.item():.4f} grad_norm {grad_norm.item():.3f}", flush=True)


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)
    mesh = init_device_mesh("cuda", (world_size,), mesh_dim_names=("dp",))

    torch.manual_seed(0)
    config = Phi3Config(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS,
        max_position_embeddings=4096,
        original_max_position_embeddings=4096,
        tie_word_embeddings=False,
        pad_token_id=32000,
        eos_token_id=32000,
        bos_token_id=1,
        attn_implementation="sdpa",
    )
    with torch.device(device):
        model = Phi3ForCausalLM(config)
    n_params = sum(p.numel() for p in model.parameters())

    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=True)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    fsdp_modules = [m for m in model.modules() if isinstance(m, FSDPModule)]

    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5, betas=(0.9, 0.95), weight_decay=0.1)
    if rank == 0:
        print(f"world {world_size} params {n_params / 1e9:.3f} B fsdp groups {len(fsdp_modules)}", flush=True)

    gen = torch.Generator(device=device)
    gen.manual_seed(1000 + rank)

    model.train()
    for step in range(STEPS):
        train_step(model, optimizer, gen, device, rank, step)

    # Generation with the whole model gathered once, by hand.
    model.eval()
    model.set_reshard_after_forward(False)
    handles = [m.unshard(async_op=True) for m in fsdp_modules]
    for handle in handles:
        handle.wait()
    prompts = torch.randint(0, 32000, (GEN_BATCH, PROMPT), generator=gen, device=device)
    with torch.no_grad():
        generated = model.generate(
            input_ids=prompts,
            attention_mask=torch.ones_like(prompts),
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            do_sample=False,
            use_cache=True,
            pad_token_id=32000,
        )
    for m in fsdp_modules:
        m.reshard()
    for layer in model.model.layers:
        layer.set_reshard_after_forward(True, recurse=False)
    new_tokens = torch.tensor([generated.shape[1] - PROMPT], device=device)
    dist.all_reduce(new_tokens, op=dist.ReduceOp.MIN)
    if rank == 0:
        print(
            f"generated {tuple(generated.shape)} min new tokens {new_tokens.item()} "
            f"first row tail {generated[0, -8:].tolist()}",
            flush=True,
        )

    model.train()
    train_step(model, optimizer, gen, device, rank, STEPS)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
