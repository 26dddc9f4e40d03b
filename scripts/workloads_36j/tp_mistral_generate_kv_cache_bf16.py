"""Inference only: 2-way tensor-parallel HF Mistral, prompt scoring plus greedy generate() with a KV cache.

Parallelism: pure tensor parallel over a 1-D DeviceMesh of 2 ranks with
``torch.distributed.tensor.parallel.parallelize_module`` applied per decoder layer:
q_proj / k_proj / v_proj and gate_proj / up_proj ``ColwiseParallel``, o_proj and down_proj
``RowwiseParallel`` (so each rank holds half of the attention heads, half of the KV heads and
half of the MLP; the KV cache of ``DynamicCache`` is therefore sharded by head).  Token
embeddings, RMSNorms and ``lm_head`` stay replicated as plain tensors on every rank.  Both
ranks feed identical prompts.

Model: ``MistralForCausalLM`` built with ``AutoModelForCausalLM.from_config`` directly on the
GPU in bfloat16 (no download): hidden 4096, 16 layers, 32 query heads / 8 KV heads (head dim
128), MLP 14336, vocab 32768, untied lm_head, no sliding window, SDPA attention; about
3.8 B parameters, i.e. about 7.5 GB of bf16 weights before sharding.

Precision: bf16 weights and activations.  No optimizer, no gradients.
Work: under ``torch.inference_mode()``: one scoring forward of 8 prompts x 512 tokens with
``labels`` (cross entropy over the replicated logits, printed on rank 0), then
``model.generate`` with greedy decoding, ``max_new_tokens=min_new_tokens=128``, ``use_cache=True``,
for the same 8 x 512 prompts; rank 0 prints the generated shape and checks that both ranks
produced the same tokens via ``all_gather_into_tensor``.
"""
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from transformers import AutoModelForCausalLM, MistralConfig

VOCAB = 32768
HIDDEN = 4096
LAYERS = 16
HEADS = 32
KV_HEADS = 8
MLP = 14336
BATCH = 8
PROMPT = 512
NEW_TOKENS = 128


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)
    tp_mesh = init_device_mesh("cuda", (world_size,), mesh_dim_names=("tp",))

    torch.manual_seed(0)
    config = MistralConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=MLP,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HIDDEN // HEADS,
        max_position_embeddings=4096,
        sliding_window=None,
        tie_word_embeddings=False,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa")
    model.eval()

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
    torch.cuda.empty_cache()

    gen = torch.Generator(device=device)
    gen.manual_seed(42)  # same prompts on both ranks
    prompts = torch.randint(3, VOCAB, (BATCH, PROMPT), device=device, generator=gen)
    prompts[:, 0] = config.bos_token_id
    attention_mask = torch.ones_like(prompts)

    with torch.inference_mode():
        nll = model(input_ids=prompts, attention_mask=attention_mask, labels=prompts).loss
        if rank == 0:
            print(f"prompt nll {nll.item():.4f}", flush=True)

        out = model.generate(
            input_ids=prompts,
            attention_mask=attention_mask,
            do_sample=False,
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            use_cache=True,
            pad_token_id=config.pad_token_id,
        )

    new_tokens = out[:, PROMPT:].contiguous()
    gathered = torch.empty((world_size * BATCH, NEW_TOKENS), dtype=new_tokens.dtype, device=device)
    dist.all_gather_into_tensor(gathered, new_tokens)
    if rank == 0:
        per_rank = gathered.view(world_size, BATCH, NEW_TOKENS)
        same = all(torch.equal(per_rank[0], per_rank[r]) for r in range(world_size))
        print(f"generated {tuple(out.shape)} ranks agree {same} first row tail {new_tokens[0, -8:].tolist()}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
