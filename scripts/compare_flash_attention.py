"""The tracer's flash attention rule (vramlab/_tracer/rules/attention.py) against what the H100
allocated with the flash backend forced (reports/reference/h100/flash-attention, measured by
scripts/measure_flash_attention.py): each case traced on the CPU as the measurement ran it, its
forward's and backward's allocations and freed sizes compared in order.
Run: python scripts/compare_flash_attention.py [reports/reference/h100/flash-attention/flash-h100.jsonl]"""

import json
import pathlib
import sys
import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import vramlab

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from measure_flash_attention import made  # noqa: E402

warnings.filterwarnings("ignore")


def events(snapshot, start):
    return [[e["action"], e["size"]] for e in snapshot["device_traces"][0][start:] if e["action"] in ("alloc", "free_requested")]


def traced(case):
    b, h, hk, lq, lk, d = (case[k] for k in ("b", "h", "hk", "lq", "lk", "d"))
    torch.use_deterministic_algorithms(case["deterministic"])
    try:
        with vramlab.trace(gpu="h100") as t:
            q = made(b, h, lq, d, case["query_layout"])
            k = made(b, hk, lk, d, "bhsd")
            v = made(b, hk, lk, d, "bhsd")
            grad = made(b, h, lq, d, case["grad_layout"], grad=True)
            start = len(t.snapshot()["device_traces"][0])
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=case["causal"], dropout_p=case["dropout"], enable_gqa=hk != h)
            middle = len(t.snapshot()["device_traces"][0])
            out.backward(grad)
        snapshot = t.snapshot()
        return events(snapshot, start)[: len(events(snapshot, start)) - len(events(snapshot, middle))], events(snapshot, middle)
    finally:
        torch.use_deterministic_algorithms(False)


def main():
    path = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "reports/reference/h100/flash-attention/flash-h100.jsonl")
    same = 0
    cases = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for case in cases:
        label = " ".join(f"{k}={case[k]}" for k in ("b", "h", "hk", "lq", "lk", "d", "causal", "dropout", "query_layout", "grad_layout", "deterministic"))
        if "error" in case:
            print(f"- {label}: refused on the GPU ({case['error']})")
            continue
        forward, backward = traced(case)
        gpu_forward = [e[:2] for e in case["forward"]]
        gpu_backward = [e[:2] for e in case["backward"]]
        ok = forward == gpu_forward and backward == gpu_backward
        same += ok
        print(f"- {label}: {'identical' if ok else 'differs'}")
        if not ok:
            print(f"  - forward GPU {gpu_forward}\n  - forward trace {forward}\n  - backward GPU {gpu_backward}\n  - backward trace {backward}")
    print(f"\n{same} of {len(cases)} cases identical, allocation by allocation")


if __name__ == "__main__":
    main()
