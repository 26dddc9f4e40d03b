"""Tensor parallelism through transformers' own loader: rank 0 writes a random Qwen3 checkpoint with ``save_pretrained``, then both ranks reload it with ``from_pretrained(..., distributed_config=DistributedConfig(tp_size=2))`` (the model's built-in TP plan), train in pure bf16 and generate.

Parallelism: 2-way tensor parallelism on a 1-D DeviceMesh created by transformers
(``DistributedConfig(tp_size=2)``, the model's ``base_model_tp_plan``): q/k/v, gate and up
projections column-wise, o and down projections row-wise, per-head q/k RMSNorms replicated with
gradient all-reduce, ``lm_head`` column-wise with the logits gathered; the token embedding and
the other norms stay replicated. Both ranks see the same batch (no data parallelism).
Checkpoint round trip: rank 0 builds ``Qwen3ForCausalLM`` from config directly in bf16 on its
GPU, ``save_pretrained`` writes safetensors (about 1.5 GB) to a temporary folder whose name is
broadcast with ``broadcast_object_list``; rank 0 frees that model (``empty_cache``), both ranks
``barrier()`` and load the folder with ``dtype=torch.bfloat16``; the folder is removed at the end.
Model: Qwen3 decoder (hidden 1024, 28 layers, 16 query / 8 key-value heads of dim 128,
SwiGLU MLP 3072, vocab 151936, untied ``lm_head``, SDPA attention), about 751 M parameters.
Precision: pure bf16 (bf16 parameters, gradients and AdamW states, no autocast); the loss is
the model's own causal-LM cross entropy.
Optimizer: AdamW (lr 1e-5, weight decay 0.0) over the mix of DTensor and plain parameters;
gradient norm clipped at 1.0 by hand (the squared local/full norms are combined per parameter).
Data: synthetic token ids, batch 4 x 2048 tokens, identical on both ranks (shared seed), 5
training steps with the loss printed on rank 0; then one evaluation batch under
``torch.no_grad()`` in ``eval()`` and greedy ``generate`` of 48 new tokens for 4 prompts of
128 tokens (identical on both ranks) with a KV cache.
"""
import os
import shutil
import tempfile

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor
from transformers import DistributedConfig, Qwen3Config, Qwen3ForCausalLM

VOCAB = 151936
HIDDEN = 1024
LAYERS = 28
HEADS = 16
KV_HEADS = 8
HEAD_DIM = 128
INTERMEDIATE = 3072
BATCH = 4
SEQ = 2048
STEPS = 5
GEN_BATCH = 4
PROMPT = 128
NEW_TOKENS = 48


def clip_grad_norm(params, max_norm):
    squares = []
    for p in params:
        if p.grad is None:
            continue
        g = p.grad
        if isinstance(g, DTensor):
            g = g.full_tensor()
        squares.append(g.float().pow(2).sum())
    total = torch.stack(squares).sum().sqrt()
    scale = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for p in params:
        if p.grad is not None:
            p.grad.mul_(scale.to(p.grad.dtype))
    return total


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)
    torch.manual_seed(0)

    config = Qwen3Config(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        intermediate_size=INTERMEDIATE,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        use_cache=False,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=1,
    )

    folder = [tempfile.mkdtemp(prefix="qwen3_tp_") if rank == 0 else None]
    dist.broadcast_object_list(folder, src=0)
    folder = folder[0]
    if rank == 0:
        with torch.device(device):
            source = Qwen3ForCausalLM(config).to(torch.bfloat16)
        source.save_pretrained(folder)
        del source
        torch.cuda.empty_cache()
    dist.barrier()

    model = Qwen3ForCausalLM.from_pretrained(
        folder,
        dtype=torch.bfloat16,
        attn_implementation="sdpa",
        distributed_config=DistributedConfig(tp_size=world_size),
    )
    n_local = sum(p.to_local().numel() if isinstance(p, DTensor) else p.numel() for p in model.parameters())
    n_dtensor = sum(1 for p in model.parameters() if isinstance(p, DTensor))
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-5, weight_decay=0.0)
    if rank == 0:
        print(f"world {world_size} local params {n_local / 1e6:.1f} M, {n_dtensor} DTensor params", flush=True)

    gen = torch.Generator(device=device)
    gen.manual_seed(1234)

    model.train()
    for step in range(STEPS):
        input_ids = torch.randint(2, VOCAB, (BATCH, SEQ), generator=gen, device=device)
        loss = model(input_ids=input_ids, labels=input_ids, use_cache=False).loss
        loss.backward()
        grad_norm = clip_grad_norm(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if rank == 0:
            print(f"step {step} loss {loss.float().item():.4f} grad_norm {grad_norm.item():.3f}", flush=True)

    model.eval()
    with torch.no_grad():
        input_ids = torch.randint(2, VOCAB, (BATCH, SEQ), generator=gen, device=device)
        eval_loss = model(input_ids=input_ids, labels=input_ids, use_cache=False).loss.float()
        prompts = torch.randint(2, VOCAB, (GEN_BATCH, PROMPT), generator=gen, device=device)
        generated = model.generate(
            input_ids=prompts,
            attention_mask=torch.ones_like(prompts),
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            do_sample=False,
            use_cache=True,
            pad_token_id=1,
        )
    same = torch.tensor([int(generated.sum().item())], device=device)
    gathered = [torch.zeros_like(same) for _ in range(world_size)]
    dist.all_gather(gathered, same)
    if rank == 0:
        print(
            f"eval loss {eval_loss.item():.4f} generated {tuple(generated.shape)} "
            f"ranks agree {all(int(g.item()) == int(same.item()) for g in gathered)}",
            flush=True,
        )

    dist.barrier()
    if rank == 0:
        shutil.rmtree(folder, ignore_errors=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
