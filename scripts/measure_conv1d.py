"""Measures, on a GPU, what 1-d convolutions (F.conv1d, nn.Conv1d) allocate beyond their outputs
in their forward and backward: cuDNN's workspaces, which the 2-D measurements
(reports/reference/<gpu>/conv-workspaces) lack. PyTorch runs a 1-d convolution on cuDNN as the
2-D one of height 1 (Convolution.cpp: view1d_as_2d, view4d), so each row is written in the 2-D
measurements' shape, [C, 1, L, K, 1, k, [1, stride], [0, padding], [1, dilation], groups], with
"dims": 1, and the fitted model (scripts/conv_model) can take them beside the 2-D rows.

Two groups of random convolutions, each drawn from the distribution below by its own seed:
  conv1d-heldout  300 draws (random.Random(20261128)), measured first: kept out of the fit, to
                  say how the model does on 1-d convolutions it was not fitted to;
  conv1d-design   draws of random.Random(20261129) until the time is spent: the fit's rows.
Same method as scripts/measure_conv_more.py (every allocation and free the caching allocator saw
during one convolution's forward, then its backward), one convolution at a time, every line
flushed as written.

    python3 measure_conv1d.py OUT.jsonl [--seconds S]

The distribution, drawn in this order per convolution (audio front ends, text CNNs, Whisper-like
stems, pointwise layers, Conformer-style depthwise convolutions):
  dtype    uniform over float32 (TF32 allowed), bfloat16, float16
  n        uniform over 1, 2, 4, 8, 16, 32, 64
  kind     plain 75%, depthwise (groups = C = K) 15%, grouped (groups in 2, 4, 8, 16) 10%
  C, K     round(2 ** uniform(0, 10)); with 60% chance each rounded up to a multiple of 8
           (depthwise: K = C; grouped: both rounded up to a multiple of groups)
  L        round(2 ** uniform(4, 14))
  kernel   1 (20%), 2 (5%), 3 (25%), 4 (5%), 5 (10%), 7 (8%), 9 (5%), 10 (7%), 11 (5%), 15 (5%), 31 (5%)
  stride   1 (70%), 2 (20%), else uniform over 3, 4, 5; at most the kernel (kernel 1: stride 1)
  padding  0 (40%) or kernel // 2 (60%)
  dilation 1.
A draw whose input, output or weight would pass 1 GiB, or whose output is empty, is drawn again."""

import math
import random
import sys

import torch
import torch.nn.functional as F

from measure_conv_more import events_during, measure_groups, pick

DTYPES = (torch.float32, torch.bfloat16, torch.float16)
KERNELS = [(1, 20), (2, 5), (3, 25), (4, 5), (5, 10), (7, 8), (9, 5), (10, 7), (11, 5), (15, 5), (31, 5)]
ELEMENT = {torch.float32: 4, torch.bfloat16: 2, torch.float16: 2}


def draw(rng):
    """One convolution: (dtype, n, [C, L, K, kernel, stride, padding, groups])."""
    while True:
        dtype = rng.choice(DTYPES)
        n = rng.choice([1, 2, 4, 8, 16, 32, 64])
        kind = pick(rng, [("plain", 75), ("depthwise", 15), ("grouped", 10)])
        c = round(2 ** rng.uniform(0, 10))
        k = round(2 ** rng.uniform(0, 10))
        c = -(-c // 8) * 8 if rng.random() < 0.6 else c
        k = -(-k // 8) * 8 if rng.random() < 0.6 else k
        groups = 1
        if kind == "depthwise":
            k = groups = c
        elif kind == "grouped":
            groups = rng.choice([2, 4, 8, 16])
            c, k = -(-c // groups) * groups, -(-k // groups) * groups
        length = round(2 ** rng.uniform(4, 14))
        kernel = pick(rng, KERNELS)
        stride = 1 if kernel == 1 else min(kernel, pick(rng, [(1, 70), (2, 20), (rng.choice([3, 4, 5]), 10)]))
        padding = 0 if rng.random() < 0.4 else kernel // 2
        out = (length + 2 * padding - kernel) // stride + 1
        e = ELEMENT[dtype]
        if out < 1 or max(n * c * length * e, n * k * out * e, k * (c // groups) * kernel * e) > 1 << 30:
            continue
        return dtype, n, [c, length, k, kernel, stride, padding, groups]


def measure(dtype, n, conv):
    c, length, k, kernel, stride, padding, groups = conv
    torch.backends.cudnn.benchmark = False
    x = torch.randn(n, c, length, device="cuda", dtype=dtype)
    weight = torch.randn(k, c // groups, kernel, device="cuda", dtype=dtype)
    backend = str(torch._C._select_conv_backend(x, weight, None, [stride], [padding], [1], False, [0], groups, None))

    def fwd():
        return F.conv1d(x, weight, None, stride, padding, 1, groups)

    def bwd():
        return torch.ops.aten.convolution_backward(grad, x, weight, None, [stride], [padding], [1], False, [0], groups, [True, True, False])

    row = {"dtype": str(dtype).replace("torch.", ""), "n": n, "dims": 1,
           "shape": [c, 1, length, k, 1, kernel, [1, stride], [0, padding], [1, 1], groups],
           "transposed": False, "output_padding": [0, 0], "channels_last": False, "benchmark": False, "backend": backend}
    out, row["forward"] = events_during(fwd)
    grad = torch.randn_like(out)
    del out
    _, row["backward"] = events_during(bwd)
    return row


def main():
    path = sys.argv[1]
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 330.0
    jobs = [("conv1d-heldout", random.Random(20261128), 300), ("conv1d-design", random.Random(20261129), math.inf)]

    def failed(dtype, n, conv, error):
        return {"dtype": str(dtype).replace("torch.", ""), "n": n, "dims": 1, "conv1d": conv, "error": error}

    measure_groups(path, jobs, seconds, draw, measure, failed)


if __name__ == "__main__":
    main()
