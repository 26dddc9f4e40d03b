"""How long vramlab.trace takes on a model of about a billion parameters (issue 25: "one training
step traces in seconds on one core"): a Hugging Face Llama of 0.95 B parameters built from its
config, one AdamW step on 2 x 512 tokens, traced for an H100. Prints the time to build the model
(on the CPU then moved, as most programs do; and under `torch.device("cuda")`, where the weights
are made without values) and the time of the step. Run: taskset -c 0 python scripts/trace_speed.py"""

import time
import warnings

import torch
from transformers import LlamaConfig, LlamaForCausalLM

import vramlab

warnings.filterwarnings("ignore")
config = LlamaConfig(
    num_hidden_layers=16,
    hidden_size=2048,
    num_attention_heads=16,
    num_key_value_heads=16,
    intermediate_size=5632,
    vocab_size=32000,
    max_position_embeddings=2048,
)
config._attn_implementation = "eager"
for where in ["on the CPU, then .cuda()", 'under torch.device("cuda")']:
    with vramlab.trace(gpu="h100") as t:
        start = time.perf_counter()
        if where.startswith("on the CPU"):
            model = LlamaForCausalLM(config).cuda()
        else:
            with torch.device("cuda"):
                model = LlamaForCausalLM(config)
        built = time.perf_counter()
        opt = torch.optim.AdamW(model.parameters())
        ids = torch.randint(0, 32000, (2, 512), device="cuda")
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad()
        stepped = time.perf_counter()
    params = sum(p.numel() for p in model.parameters())
    events = len(t.snapshot()["device_traces"][0])
    print(f"{params / 1e9:.2f} B parameters, built {where}: build {built - start:.2f} s, one training step {stepped - built:.2f} s, {events} events")
