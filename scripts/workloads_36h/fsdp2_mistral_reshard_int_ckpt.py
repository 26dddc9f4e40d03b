"""FSDP2 (`fully_shard`) over a Hugging Face MistralForCausalLM built from a MistralConfig (hidden
1024, 8 layers, 16 query / 4 key-value heads, MLP 3584, 32000-token vocabulary, untied lm_head)
on a 1-D mesh of 4 ranks. Each decoder layer is its own FSDP unit with `reshard_after_forward=2`
(after forward the parameters are kept sharded over groups of 2 ranks rather than 4, so backward
all-gathers within a pair), the root unit covers embeddings, final norm and lm_head; all units use
MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32). Hugging Face gradient checkpointing
(non-reentrant) recomputes each decoder layer in backward. AdamW; five steps of 4 x 1024 tokens
per rank with the model's own causal-LM loss."""
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from transformers import MistralConfig, MistralForCausalLM

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
mesh = init_device_mesh("cuda", (int(os.environ["WORLD_SIZE"]),))
torch.manual_seed(0)

config = MistralConfig(
    vocab_size=32000,
    hidden_size=1024,
    intermediate_size=3584,
    num_hidden_layers=8,
    num_attention_heads=16,
    num_key_value_heads=4,
    max_position_embeddings=2048,
    use_cache=False,
    sliding_window=None,
    tie_word_embeddings=False,
)
config._attn_implementation = "sdpa"
with torch.device("cuda"):
    model = MistralForCausalLM(config)
model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
model.train()

mp_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
for layer in model.model.layers:
    fully_shard(layer, mesh=mesh, reshard_after_forward=2, mp_policy=mp_policy)
fully_shard(model, mesh=mesh, mp_policy=mp_policy)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)

torch.manual_seed(1000 + dist.get_rank())
for step in range(5):
    input_ids = torch.randint(0, config.vocab_size, (4, 1024), device="cuda")
    loss = model(input_ids=input_ids, labels=input_ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if dist.get_rank() == 0:
        print(f"step {step} loss {loss.item():.4f}")

dist.destroy_process_group()
