"""Measures, on a GPU, what PyTorch's flash attention allocates in its forward and backward, with
the flash backend forced (on an H100 torch 2.11 puts cuDNN attention first for half precision,
so flash runs there only when asked for; its allocations are flash_api.cpp's, the same code an
A100 or an RTX 4090 runs by default, but for the split-KV heuristic's SM count). For a grid of
shapes, layouts, dropout, grouped key heads and deterministic algorithms: every allocation and
free during the forward call and during the backward call, in order, with the ATen operator that
made it. Writes JSON lines, to hold rules/attention.py's flash rule to (not yet run: the session
that wrote it could not send its tree to the GPU machine). Run on a GPU machine:
python scripts/measure_flash_attention.py OUT.jsonl"""

import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure_efficient_attention import recorded_events  # noqa: E402

# (b, h, hk, lq, lk, d, causal, dropout, query layout, grad layout, deterministic)
CASES = [
    (2, 8, 8, 200, 200, 64, False, 0.0, "bhsd", "bhsd", False),
    (2, 8, 8, 200, 200, 64, True, 0.0, "bshd", "bshd", False),
    (4, 12, 12, 1024, 1024, 64, True, 0.0, "bshd", "bshd", False),
    (2, 8, 8, 333, 333, 96, False, 0.0, "bhsd", "bshd", False),
    (2, 8, 8, 130, 130, 128, True, 0.0, "bshd", "bhsd", False),
    (1, 4, 4, 100, 100, 256, False, 0.0, "bhsd", "bhsd", False),
    (1, 4, 4, 100, 100, 160, False, 0.0, "bhsd", "bhsd", False),
    (2, 8, 8, 200, 200, 60, False, 0.0, "bhsd", "bhsd", False),
    (2, 8, 8, 200, 200, 64, False, 0.1, "bhsd", "bhsd", False),
    (2, 8, 2, 200, 200, 64, True, 0.0, "bhsd", "bhsd", False),
    (1, 2, 2, 64, 4096, 64, False, 0.0, "bhsd", "bhsd", False),
    (1, 4, 4, 32, 8192, 128, False, 0.0, "bhsd", "bhsd", False),
    (1, 8, 2, 1, 2048, 64, False, 0.0, "bhsd", "bhsd", False),
    (2, 8, 8, 200, 200, 64, False, 0.0, "bhsd", "bhsd", True),
]


def events_during(fn):
    return [[e["action"], e["size"], op] for e, op, _ in recorded_events(fn, ("alloc", "free_requested"))]


def made(b, h, s, d, layout, grad=False):
    if layout == "bshd":
        t = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=not grad).transpose(1, 2)
    else:
        t = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=not grad)
    if not grad:
        t.retain_grad()
    return t


def main():
    sink = open(sys.argv[1], "w")
    for case in CASES:
        b, h, hk, lq, lk, d, causal, dropout, qlayout, glayout, deterministic = case
        record = dict(zip(["b", "h", "hk", "lq", "lk", "d", "causal", "dropout", "query_layout", "grad_layout", "deterministic"], case))
        try:
            torch.use_deterministic_algorithms(deterministic)
            q = made(b, h, lq, d, qlayout)
            k = made(b, hk, lk, d, "bhsd")
            v = made(b, hk, lk, d, "bhsd")
            grad = made(b, h, lq, d, glayout, grad=True)
            holder = {}

            def forward():
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    holder["out"] = F.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=dropout, enable_gqa=hk != h)

            def backward():
                holder["out"].backward(grad)

            record["forward"] = events_during(forward)
            record["out_strides"] = list(holder["out"].stride())
            record["backward"] = events_during(backward)
        except Exception as e:  # a case flash refuses is recorded, not fatal
            record["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        finally:
            torch.use_deterministic_algorithms(False)
        sink.write(json.dumps(record) + "\n")
        sink.flush()
        holder = q = k = v = grad = None
        torch.cuda.empty_cache()
    print(len(CASES), "cases; torch", torch.__version__, torch.cuda.get_device_name(), torch.cuda.get_device_properties(0).multi_processor_count, "SMs")


if __name__ == "__main__":
    main()
