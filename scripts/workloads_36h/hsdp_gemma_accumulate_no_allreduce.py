"""HSDP with FSDP2: a Hugging Face GemmaForCausalLM built from a GemmaConfig (hidden 1024, 6 layers,
8 query / 2 key-value heads of dim 128, MLP 4096, 64000-token vocabulary, tied embeddings) is
`fully_shard`-ed per decoder layer and at the root over a 2x2 DeviceMesh ("replicate", "shard"):
parameters are sharded across the 2 ranks of a shard group and replicated across the 2 groups,
with MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32). Gradient accumulation over 4
micro-batches per optimizer step uses `set_requires_all_reduce(False)` on all but the last
micro-batch (reduce-scatter within the shard group every micro-batch, all-reduce across replicas
only once), then clip_grad_norm_(1.0) over the DTensor gradients and AdamW. Two optimizer steps
(8 forward/backward passes) of 4 x 512 tokens per micro-batch per rank."""
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from transformers import GemmaConfig, GemmaForCausalLM

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
mesh = init_device_mesh("cuda", (2, 2), mesh_dim_names=("replicate", "shard"))
torch.manual_seed(0)

config = GemmaConfig(
    vocab_size=64000,
    hidden_size=1024,
    intermediate_size=4096,
    num_hidden_layers=6,
    num_attention_heads=8,
    num_key_value_heads=2,
    head_dim=128,
    max_position_embeddings=2048,
    use_cache=False,
)
config._attn_implementation = "sdpa"
model = GemmaForCausalLM(config).to(f"cuda:{local_rank}")
model.train()

mp_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
for layer in model.model.layers:
    fully_shard(layer, mesh=mesh, mp_policy=mp_policy)
fully_shard(model, mesh=mesh, mp_policy=mp_policy)
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-4, betas=(0.9, 0.95), weight_decay=0.1)

accumulation = 4
torch.manual_seed(1000 + dist.get_rank())
for step in range(2):
    for micro in range(accumulation):
        model.set_requires_all_reduce(micro == accumulation - 1)
        input_ids = torch.randint(0, config.vocab_size, (4, 512), device="cuda")
        loss = model(input_ids=input_ids, labels=input_ids).loss / accumulation
        loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if dist.get_rank() == 0:
        print(f"step {step} loss {loss.item() * accumulation:.4f} grad norm {grad_norm.full_tensor().item():.3f}")

dist.destroy_process_group()
