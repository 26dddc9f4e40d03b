"""Measures, on a GPU, what PyTorch's memory-efficient attention allocates in its forward and
backward (the backend scaled_dot_product_attention takes for float32 on an H100), for a grid of
shapes: every allocation's size, in order, with the ATen operator that made it. Writes JSON lines.
Run on a GPU machine: python scripts/measure_efficient_attention.py OUT.jsonl"""

import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def recorded_events(fn, actions):
    """The events of `actions` PyTorch's allocator recorded while `fn` ran, each with the ATen
    operator whose frames made it and the frames' names."""
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=100_000)
    fn()
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    for e in snap["device_traces"][0]:
        if e["action"] not in actions:
            continue
        names = [f.get("name", "") for f in e.get("frames", [])]
        op = next((n.split("(")[0].replace("at::_ops::", "") for n in names if n.startswith("at::_ops::")), "?")
        yield e, op, names


def events_during(fn):
    out = []
    for e, op, names in recorded_events(fn, ("alloc", "free_completed")):
        inner = next((n.split("(")[0] for n in names if "attention" in n.lower() and "at::_ops" not in n), "")
        out.append([e["action"], e["size"], e["addr"], op, inner[:80]])
    return out


def main():
    sink = open(sys.argv[1], "w")
    shapes = []
    for dtype in (torch.float32, torch.bfloat16):
        for b, h in ((1, 1), (2, 8), (4, 12)):
            for lq, lk in ((128, 128), (200, 300), (512, 512), (1000, 1000), (64, 2048)):
                for d in (32, 64, 128):
                    shapes.append((dtype, b, h, lq, lk, d))
    for dtype, b, h, lq, lk, d in shapes:
        q = torch.randn(b, h, lq, d, device="cuda", dtype=dtype, requires_grad=True)
        k = torch.randn(b, h, lk, d, device="cuda", dtype=dtype, requires_grad=True)
        v = torch.randn(b, h, lk, d, device="cuda", dtype=dtype, requires_grad=True)
        grad = torch.randn(b, h, lq, d, device="cuda", dtype=dtype)
        holder = {}

        def forward():
            with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
                holder["out"] = F.scaled_dot_product_attention(q, k, v)

        def backward():
            holder["out"].backward(grad)

        fwd = events_during(forward)
        bwd = events_during(backward)
        sink.write(json.dumps({"dtype": str(dtype), "b": b, "h": h, "lq": lq, "lk": lk, "d": d, "forward": fwd, "backward": bwd}) + "\n")
        sink.flush()
        del q, k, v, grad, holder
        torch.cuda.empty_cache()
    print(len(shapes), "shapes")


if __name__ == "__main__":
    main()
