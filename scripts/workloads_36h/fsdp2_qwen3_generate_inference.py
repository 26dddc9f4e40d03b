"""Inference only (torch.no_grad, eval mode) with FSDP2: a Hugging Face Qwen3ForCausalLM built from
a Qwen3Config (hidden 2048, 12 layers, 16 query / 8 key-value heads of dim 128 with q/k RMSNorm,
MLP 6144, 64000-token vocabulary, tied embeddings) is cast to bf16 parameters and `fully_shard`-ed
per decoder layer and at the root over 4 ranks with `reshard_after_forward=False`, so the first
forward all-gathers every layer once and later forwards reuse the unsharded bf16 weights. Three
rounds, each a greedy `model.generate` of exactly 32 new tokens (dynamic KV cache) from 8 synthetic
128-token prompts per rank, followed by one full forward over the 160-token results to score the
generated tokens' log-probabilities; `model.reshard()` frees the unsharded weights at the end."""
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from transformers import Qwen3Config, Qwen3ForCausalLM

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
mesh = init_device_mesh("cuda", (dist.get_world_size(),))
torch.manual_seed(0)

config = Qwen3Config(
    vocab_size=64000,
    hidden_size=2048,
    intermediate_size=6144,
    num_hidden_layers=12,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    max_position_embeddings=4096,
    tie_word_embeddings=True,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=0,
)
config._attn_implementation = "sdpa"
with torch.device("cuda"):
    model = Qwen3ForCausalLM(config)
model = model.to(torch.bfloat16).eval()
for layer in model.model.layers:
    fully_shard(layer, mesh=mesh, reshard_after_forward=False)
fully_shard(model, mesh=mesh, reshard_after_forward=False)

torch.manual_seed(1000 + dist.get_rank())
with torch.no_grad():
    for round_idx in range(3):
        prompts = torch.randint(3, config.vocab_size, (8, 128), device="cuda")
        attention_mask = torch.ones_like(prompts)
        sequences = model.generate(
            input_ids=prompts,
            attention_mask=attention_mask,
            do_sample=False,
            max_new_tokens=32,
            min_new_tokens=32,
            pad_token_id=config.pad_token_id,
        )
        logits = model(input_ids=sequences, attention_mask=torch.ones_like(sequences)).logits
        log_probs = torch.log_softmax(logits[:, 127:-1].float(), dim=-1)
        token_log_probs = log_probs.gather(-1, sequences[:, 128:].unsqueeze(-1)).squeeze(-1)
        if dist.get_rank() == 0:
            print(f"round {round_idx}: generated {tuple(sequences.shape)}, mean log-prob {token_log_probs.mean().item():.3f}")
model.reshard()

dist.destroy_process_group()
