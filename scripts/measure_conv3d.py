"""Measures, on a GPU, what 3-d convolutions (F.conv3d, nn.Conv3d) allocate beyond their outputs in
their forward and backward: cuDNN's workspaces, which the 2-D and 1-d measurements lack. One JSON
line per convolution, "dims": 3, "shape": [C, D, H, W, K, T, R, S, stride, padding, dilation,
groups] (stride, padding and dilation as [depth, height, width]).

Two groups of random convolutions, each drawn from the distribution below by its own seed:
  conv3d-heldout  300 draws (random.Random(20261130)), measured first: kept out of the fit;
  conv3d-design   draws of random.Random(20261131) until the time is spent: the fit's rows.
Same method as scripts/measure_conv_more.py, one convolution at a time, every line flushed.

    python3 measure_conv3d.py OUT.jsonl [--seconds S]

The distribution (3-D U-Nets and autoencoders for volumes, video networks), in this order:
  dtype    uniform over float32 (TF32 allowed), bfloat16, float16
  n        uniform over 1, 2, 4, 8, 16
  kind     plain 85%, depthwise (groups = C = K) 10%, grouped (groups in 2, 4, 8) 5%
  C, K     round(2 ** uniform(0, 9)); with 70% chance each rounded up to a multiple of 8
  D        round(2 ** uniform(2, 6)); H = W round(2 ** uniform(3, 7)), equal with 80% chance
  kernel   (3,3,3) 50%, (1,1,1) 20%, (1,3,3) 10%, (3,1,1) 5%, (3,7,7) 5%, (2,2,2) 5%, (5,5,5) 5%
  stride   1 (65%), 2 in every dimension (25%), (1,2,2) (10%); at most the kernel per dimension
  padding  kernel // 2 per dimension (70%) or 0
  dilation 1.
A draw whose input, output or weight would pass 1 GiB, or whose output is empty, is drawn again."""

import math
import random
import sys

import torch
import torch.nn.functional as F

from measure_conv_more import events_during, measure_groups, pick

DTYPES = (torch.float32, torch.bfloat16, torch.float16)
KERNELS = [((3, 3, 3), 50), ((1, 1, 1), 20), ((1, 3, 3), 10), ((3, 1, 1), 5), ((3, 7, 7), 5), ((2, 2, 2), 5), ((5, 5, 5), 5)]
STRIDES = [((1, 1, 1), 65), ((2, 2, 2), 25), ((1, 2, 2), 10)]
ELEMENT = {torch.float32: 4, torch.bfloat16: 2, torch.float16: 2}


def draw(rng):
    """One convolution: (dtype, n, shape in the rows' form)."""
    while True:
        dtype = rng.choice(DTYPES)
        n = rng.choice([1, 2, 4, 8, 16])
        kind = pick(rng, [("plain", 85), ("depthwise", 10), ("grouped", 5)])
        c = round(2 ** rng.uniform(0, 9))
        k = round(2 ** rng.uniform(0, 9))
        c = -(-c // 8) * 8 if rng.random() < 0.7 else c
        k = -(-k // 8) * 8 if rng.random() < 0.7 else k
        groups = 1
        if kind == "depthwise":
            k = groups = c
        elif kind == "grouped":
            groups = rng.choice([2, 4, 8])
            c, k = -(-c // groups) * groups, -(-k // groups) * groups
        depth = round(2 ** rng.uniform(2, 6))
        h = round(2 ** rng.uniform(3, 7))
        w = h if rng.random() < 0.8 else round(2 ** rng.uniform(3, 7))
        kernel = pick(rng, KERNELS)
        stride = [min(s, t) for s, t in zip(pick(rng, STRIDES), kernel)]
        padding = [t // 2 for t in kernel] if rng.random() < 0.7 else [0, 0, 0]
        out = [(size + 2 * p - t) // s + 1 for size, p, t, s in zip((depth, h, w), padding, kernel, stride)]
        e = ELEMENT[dtype]
        volume = depth * h * w
        if min(out) < 1 or max(n * c * volume * e, n * k * math.prod(out) * e, k * (c // groups) * math.prod(kernel) * e) > 1 << 30:
            continue
        return dtype, n, [c, depth, h, w, k, *kernel, stride, padding, [1, 1, 1], groups]


def measure(dtype, n, shape):
    c, depth, h, w, k, t, r, s, stride, padding, dilation, groups = shape
    torch.backends.cudnn.benchmark = False
    x = torch.randn(n, c, depth, h, w, device="cuda", dtype=dtype)
    weight = torch.randn(k, c // groups, t, r, s, device="cuda", dtype=dtype)
    backend = str(torch._C._select_conv_backend(x, weight, None, stride, padding, dilation, False, [0, 0, 0], groups, None))

    def fwd():
        return F.conv3d(x, weight, None, stride, padding, dilation, groups)

    def bwd():
        return torch.ops.aten.convolution_backward(grad, x, weight, None, stride, padding, dilation, False, [0, 0, 0], groups, [True, True, False])

    row = {"dtype": str(dtype).replace("torch.", ""), "n": n, "dims": 3, "shape": shape, "transposed": False,
           "channels_last": False, "benchmark": False, "backend": backend}
    out, row["forward"] = events_during(fwd)
    grad = torch.randn_like(out)
    del out
    _, row["backward"] = events_during(bwd)
    return row


def main():
    path = sys.argv[1]
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 330.0
    jobs = [("conv3d-heldout", random.Random(20261130), 300), ("conv3d-design", random.Random(20261131), math.inf)]

    def failed(dtype, n, shape, error):
        return {"dtype": str(dtype).replace("torch.", ""), "n": n, "dims": 3, "shape": shape, "error": error}

    measure_groups(path, jobs, seconds, draw, measure, failed)


if __name__ == "__main__":
    main()
