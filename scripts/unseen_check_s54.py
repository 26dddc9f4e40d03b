"""Two programs written at the end of stop 54, after every mend of that stop, for its final check
on programs no table was built on: a hand-written ConvNeXt-style network trained with PyTorch's own
Adafactor and a cosine-similarity head (F.normalize), and Hugging Face GPT-2 moved to the GPU in
bf16 with tied embeddings, gradient clipping and label smoothing. Committed before either ran on a
GPU. Run on a GPU: OUT=dir python scripts/unseen_check_s54.py NAME (records memory_stats and the
snapshot to $OUT)."""
import json
import os
import pickle
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


def hand_convnext_adafactor_cosine_head(device):
    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
            self.norm = nn.LayerNorm(c)
            self.pw1, self.pw2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

        def forward(self, x):
            y = self.norm(self.dw(x).permute(0, 2, 3, 1))
            return x + self.pw2(F.gelu(self.pw1(y))).permute(0, 3, 1, 2)

    stem = nn.Conv2d(3, 64, 4, stride=4)
    stages = nn.Sequential(Block(64), Block(64), nn.Conv2d(64, 128, 2, stride=2), Block(128), Block(128))
    weights = nn.Parameter(torch.randn(40, 128) * 0.02)
    model = nn.ModuleDict({"stem": stem, "stages": stages}).to(device)
    weights = nn.Parameter(weights.detach().to(device))
    opt = torch.optim.Adafactor(list(model.parameters()) + [weights], lr=1e-2)
    for _ in range(2):
        x, y = torch.randn(32, 3, 96, 96, device=device), torch.randint(0, 40, (32,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            features = model["stages"](model["stem"](x)).mean((2, 3))
        logits = 16 * F.normalize(features.float(), dim=1) @ F.normalize(weights, dim=1).t()
        F.cross_entropy(logits, y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_gpt2_bf16_tied_clip_smoothing(device):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=6, n_embd=384, n_head=6, vocab_size=16000, n_positions=512)).to(device=device, dtype=torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    for _ in range(3):
        ids = torch.randint(0, 16000, (12, 320), device=device)
        logits = model(input_ids=ids).logits[:, :-1]
        F.cross_entropy(logits.reshape(-1, 16000).float(), ids[:, 1:].reshape(-1), label_smoothing=0.1).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)


PROGRAMS = {f.__name__: f for f in [hand_convnext_adafactor_cosine_head, hf_gpt2_bf16_tied_clip_smoothing]}

if __name__ == "__main__":
    name = sys.argv[1]
    torch.cuda.memory._record_memory_history(max_entries=1_000_000)
    PROGRAMS[name]("cuda")
    torch.cuda.synchronize()
    setting = os.environ.get("PYTORCH_ALLOC_CONF", "")
    label = "expandable" if setting else "default"
    p = torch.cuda.get_device_properties(0)
    out = {"workload": name, "alloc_conf": setting, "torch": torch.__version__, "device": p.name,
           "memory_stats": {k: v for k, v in torch.cuda.memory_stats().items() if isinstance(v, (int, float))}}
    with open(os.path.join(os.environ["OUT"], f"{name}-{label}.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
    with open(os.path.join(os.environ["OUT"], f"{name}-{label}.pickle"), "wb") as f:
        pickle.dump(torch.cuda.memory._snapshot(), f)
