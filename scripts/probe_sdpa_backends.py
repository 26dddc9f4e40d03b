"""Which backend scaled_dot_product_attention takes on this GPU, for a grid of arguments
(torch._fused_sdp_choice, the function F.scaled_dot_product_attention asks), and what a few of
them allocate, forward and backward, with the attention functions in their C++ frames. Writes
JSON lines. Run on a GPU machine: python scripts/probe_sdpa_backends.py OUT.jsonl"""

import itertools
import json
import sys

import torch
import torch.nn.functional as F

BACKENDS = {0: "math", 1: "flash", 2: "efficient", 3: "cudnn", 4: "overrideable", -1: "error"}


def tensors(dtype, b, hq, hk, lq, lk, d, mask, grad):
    q = torch.randn(b, hq, lq, d, device="cuda", dtype=dtype, requires_grad=grad)
    k = torch.randn(b, hk, lk, d, device="cuda", dtype=dtype, requires_grad=grad)
    v = torch.randn(b, hk, lk, d, device="cuda", dtype=dtype, requires_grad=grad)
    m = None
    if mask == "bool":
        m = torch.ones(b, 1, lq, lk, device="cuda", dtype=torch.bool).tril()
    elif mask == "float":
        m = torch.zeros(b, 1, lq, lk, device="cuda", dtype=dtype)
    elif mask == "float_grad":
        m = torch.zeros(1, hq, lq, lk, device="cuda", dtype=dtype, requires_grad=grad)
    return q, k, v, m


def sequence(fn):
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=100_000)
    kept = fn()
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    out = []
    for e in snap["device_traces"][0]:
        if e["action"] in ("alloc", "free_completed"):
            names = [f.get("name", "") for f in e.get("frames", [])]
            op = next((n.split("(")[0].replace("at::_ops::", "") for n in names if n.startswith("at::_ops::")), "?")
            inner = next((n.split("(")[0] for n in names if ("attention" in n.lower() or "flash" in n.lower()) and "at::_ops" not in n), "")
            out.append([e["action"][0], e["size"], e["addr"], op, inner[:90]])
    return kept, out


def main():
    sink = open(sys.argv[1], "w")
    grid = itertools.product(
        (torch.float32, torch.float16, torch.bfloat16), (32, 64, 80, 128, 160, 256), ((8, 8, False), (8, 2, True), (8, 2, False)),
        (None, "bool", "float", "float_grad"), (False, True), (True, False), (128, 384),
    )
    for dtype, d, (hq, hk, gqa), mask, causal, grad, length in grid:
        if causal and mask is not None or (hq != hk and not gqa and mask is not None):
            continue
        q, k, v, m = tensors(dtype, 2, hq, hk, length, length, d, mask, grad)
        try:
            choice = BACKENDS.get(torch._fused_sdp_choice(q, k, v, m, 0.0, causal, scale=None, enable_gqa=gqa), "?")
        except RuntimeError as e:
            choice = "error: " + str(e).splitlines()[0][:120]
        row = {"kind": "choice", "dtype": str(dtype), "d": d, "hq": hq, "hk": hk, "gqa": gqa, "mask": mask,
               "causal": causal, "grad": grad, "length": length, "backend": choice}
        sink.write(json.dumps(row) + "\n")
    # What the chosen backend allocates, for one shape of each kind.
    for dtype, d, (hq, hk, gqa), mask, causal in [
        (torch.float32, 64, (8, 2, True), None, True),
        (torch.float32, 64, (8, 8, False), "float_grad", False),
        (torch.float32, 64, (8, 8, False), "bool", False),
        (torch.float32, 64, (8, 8, False), "float", False),
        (torch.bfloat16, 64, (8, 8, False), "bool", False),
        (torch.bfloat16, 64, (8, 8, False), "float", False),
        (torch.bfloat16, 256, (8, 8, False), None, True),
        (torch.float16, 160, (8, 8, False), None, False),
        (torch.bfloat16, 64, (8, 2, True), None, True),
    ]:
        q, k, v, m = tensors(dtype, 2, hq, hk, 384, 384, d, mask, True)
        try:
            out, fwd = sequence(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal, enable_gqa=gqa))
            _, bwd = sequence(lambda: out.backward(torch.ones_like(out)))
            row = {"kind": "allocations", "dtype": str(dtype), "d": d, "hq": hq, "hk": hk, "gqa": gqa, "mask": mask,
                   "causal": causal, "forward": fwd, "backward": bwd}
        except RuntimeError as e:
            row = {"kind": "allocations", "dtype": str(dtype), "d": d, "error": str(e).splitlines()[0][:200]}
        sink.write(json.dumps(row) + "\n")
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
