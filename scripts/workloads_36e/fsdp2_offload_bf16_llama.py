"""FSDP2 with CPUOffloadPolicy and a bf16 MixedPrecisionPolicy over a Hugging Face Llama from its
config, each decoder layer and the root; the optimizer (AdamW) steps on the CPU shards; Hugging
Face's gradient checkpointing on; two steps."""
import os

import torch
import torch.distributed as dist
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
from transformers import LlamaConfig, LlamaForCausalLM

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
torch.manual_seed(0)

config = LlamaConfig(
    hidden_size=1024, intermediate_size=2816, num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=8,
    vocab_size=16000, max_position_embeddings=1024,
)
model = LlamaForCausalLM(config)
model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
policy = dict(mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32), offload_policy=CPUOffloadPolicy())
for layer in model.model.layers:
    fully_shard(layer, **policy)
fully_shard(model, **policy)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

for step in range(2):
    ids = torch.randint(0, 16000, (4, 512), device="cuda")
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    optimizer.zero_grad()

dist.destroy_process_group()
