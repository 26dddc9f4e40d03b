"""FSDP2 over an HF Qwen2 decoder with activation offloading to pinned host memory (``torch.autograd.graph.save_on_cpu``), bf16.

Parallelism: FSDP2 (``torch.distributed.fsdp.fully_shard``) over 2 ranks on a 1-D DeviceMesh:
every ``Qwen2DecoderLayer`` is its own FSDP2 group (``reshard_after_forward=True``), then a root
``fully_shard(model)`` holds the token embedding (tied to ``lm_head``), the final RMSNorm and
the rotary embedding module.
Activation offloading: each training forward and loss run inside
``torch.autograd.graph.save_on_cpu(pin_memory=True)``, so every tensor autograd saves for
backward (activations, the all-gathered bf16 weights saved by the matmuls, the fp32 logits of
the loss) is copied to pinned CPU memory during forward and copied back (non-blocking) when
backward needs it.

Model: ``Qwen2ForCausalLM`` built from a ``Qwen2Config`` of the Qwen2-1.5B shape (hidden 1536,
28 layers, 12 query / 2 key-value heads, MLP 8960, vocab 151936, ``tie_word_embeddings=True``,
SDPA attention), random init on the GPU, about 1.54 B parameters; ``use_cache=False``.

Precision: fp32 sharded parameters, ``MixedPrecisionPolicy(param_dtype=bfloat16,
reduce_dtype=float32)``; the loss is the model's own causal-LM cross entropy (logits upcast to
fp32 by the model) when ``labels`` are given.
Optimizer: ``torch.optim.AdamW`` (lr 2e-5, weight decay 0.0) over the DTensor parameters,
``clip_grad_norm_(1.0)``.
Data: synthetic token ids, batch 2 x 2048 tokens per rank (different per rank), 5 training
steps with the loss all-reduced (AVG) and printed on rank 0, then one evaluation batch under
``torch.no_grad()`` in ``eval()`` without offloading.
"""
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from transformers import Qwen2Config, Qwen2ForCausalLM

VOCAB = 151936
HIDDEN = 1536
LAYERS = 28
HEADS = 12
KV_HEADS = 2
INTERMEDIATE = 8960
BATCH = 2
SEQ = 2048
STEPS = 5


def make_batch(generator, device):
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=generator, device=device)
    return ids, ids.clone()


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)
    mesh = init_device_mesh("cuda", (world_size,), mesh_dim_names=("dp",))

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        intermediate_size=INTERMEDIATE,
        max_position_embeddings=32768,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        use_cache=False,
        attn_implementation="sdpa",
    )
    with torch.device(device):
        model = Qwen2ForCausalLM(config)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    n_params = sum(p.numel() for p in model.parameters())

    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=True)
    fully_shard(model, mesh=mesh, mp_policy=mp)

    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.0)
    if rank == 0:
        print(f"params {n_params / 1e9:.3f} B", flush=True)

    gen = torch.Generator(device=device)
    gen.manual_seed(1000 + rank)

    model.train()
    for step in range(STEPS):
        input_ids, labels = make_batch(gen, device)
        with torch.autograd.graph.save_on_cpu(pin_memory=True):
            loss = model(input_ids=input_ids, labels=labels, use_cache=False).loss
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

    model.eval()
    with torch.no_grad():
        input_ids, labels = make_batch(gen, device)
        eval_loss = model(input_ids=input_ids, labels=labels, use_cache=False).loss.float()
        dist.all_reduce(eval_loss, op=dist.ReduceOp.AVG)
    if rank == 0:
        print(f"eval loss {eval_loss.item():.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
