"""FSDP2 over a Hugging Face Qwen2 from its config (each decoder layer and the root, fp32), two
training steps with AdamW, an evaluation pass under torch.no_grad at a larger batch, then the full
model state dict gathered to the CPU with torch.distributed.checkpoint's get_model_state_dict, as a
checkpoint is saved."""
import os

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.fsdp import fully_shard
from transformers import Qwen2Config, Qwen2ForCausalLM

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
torch.manual_seed(0)

config = Qwen2Config(
    hidden_size=768, intermediate_size=2048, num_hidden_layers=4, num_attention_heads=12, num_key_value_heads=4,
    vocab_size=20000, max_position_embeddings=1024, tie_word_embeddings=False,
)
model = Qwen2ForCausalLM(config).cuda()
for layer in model.model.layers:
    fully_shard(layer)
fully_shard(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

model.train()
for step in range(2):
    ids = torch.randint(0, 20000, (4, 384), device="cuda")
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()

model.eval()
with torch.no_grad():
    ids = torch.randint(0, 20000, (16, 384), device="cuda")
    logits = model(input_ids=ids).logits

state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))

dist.destroy_process_group()
