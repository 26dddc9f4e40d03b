"""4-way tensor parallelism with `parallelize_module` over a whole Hugging Face Qwen2ForCausalLM
built from a Qwen2Config (hidden 1024, 8 layers, 16 query / 4 key-value heads of dim 64 with q/k/v
biases, MLP 2816, 32000-token vocabulary, untied lm_head), fp32 parameters: in every decoder layer
q_proj/k_proj/v_proj and gate_proj/up_proj are ColwiseParallel and o_proj/down_proj RowwiseParallel
(4 query heads and 1 key-value head per rank), the token embedding is RowwiseParallel (vocabulary
sharded, output all-reduced to replicated) and lm_head is ColwiseParallel with its logits
all-gathered to replicated; RMSNorms stay replicated plain tensors. All 4 ranks see the same batch.
bf16 autocast, AdamW (foreach off, as the parameters mix DTensors and plain tensors); five steps
of 4 x 1024 tokens with the model's own causal-LM loss."""
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from transformers import Qwen2Config, Qwen2ForCausalLM

local_rank = int(os.environ["LOCAL_RANK"])
world_size = int(os.environ["WORLD_SIZE"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
tp_mesh = init_device_mesh("cuda", (world_size,), mesh_dim_names=("tp",))
torch.manual_seed(0)

config = Qwen2Config(
    vocab_size=32000,
    hidden_size=1024,
    intermediate_size=2816,
    num_hidden_layers=8,
    num_attention_heads=16,
    num_key_value_heads=4,
    max_position_embeddings=2048,
    tie_word_embeddings=False,
    use_cache=False,
)
config._attn_implementation = "sdpa"
model = Qwen2ForCausalLM(config).cuda()
model.train()

layer_plan = {
    "self_attn.q_proj": ColwiseParallel(),
    "self_attn.k_proj": ColwiseParallel(),
    "self_attn.v_proj": ColwiseParallel(),
    "self_attn.o_proj": RowwiseParallel(),
    "mlp.gate_proj": ColwiseParallel(),
    "mlp.up_proj": ColwiseParallel(),
    "mlp.down_proj": RowwiseParallel(),
}
for layer in model.model.layers:
    parallelize_module(layer, tp_mesh, layer_plan)
parallelize_module(
    model,
    tp_mesh,
    {
        "model.embed_tokens": RowwiseParallel(input_layouts=Replicate()),
        "lm_head": ColwiseParallel(output_layouts=Replicate()),
    },
)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, foreach=False)

torch.manual_seed(1000)  # same data on every TP rank
for step in range(5):
    input_ids = torch.randint(0, config.vocab_size, (4, 1024), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=input_ids, labels=input_ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if dist.get_rank() == 0:
        print(f"step {step} loss {loss.item():.4f}")

dist.destroy_process_group()
