"""FSDP2 (fully_shard) over a Hugging Face Llama from its config: each decoder layer sharded, then
the root, with MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32), the last layer
not resharded after forward; AdamW, two steps of batch 4 by 256 tokens."""
import os

import torch
import torch.distributed as dist
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from transformers import LlamaConfig, LlamaForCausalLM

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
torch.manual_seed(0)
config = LlamaConfig(vocab_size=16000, hidden_size=512, intermediate_size=1408, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=512)
model = LlamaForCausalLM(config).cuda()
policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
layers = model.model.layers
for i, layer in enumerate(layers):
    fully_shard(layer, mp_policy=policy, reshard_after_forward=i < len(layers) - 1)
fully_shard(model, mp_policy=policy)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
for _ in range(2):
    ids = torch.randint(0, 16000, (4, 256), device="cuda")
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
dist.destroy_process_group()
