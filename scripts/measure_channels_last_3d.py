"""Measures, on a GPU, what batch norm and 3-d convolutions allocate for video laid out
channels-last 3-d (clips permuted from [N, T, H, W, C], as S3D's in ISSUE35T): a batch norm's
training forward, backward and evaluation forward (PyTorch's own kernels for bfloat16, for float16
with float16 weights and for float32 with cuDNN off; cuDNN's for float32 and for float16 with
float32 weights), and a 3-d convolution's forward and backward with contiguous weights. Each line:
the configuration and every allocation and completed free the caching allocator saw, in order.
Run on a GPU machine:
    python scripts/measure_channels_last_3d.py OUT.jsonl"""

import json
import sys

import torch
import torch.nn.functional as F

from allocator_events import events_during

# (N, C, D, H, W): small to S3D's first layer.
BN_SHAPES = [(2, 16, 4, 28, 28), (4, 64, 8, 56, 56), (16, 64, 8, 112, 112), (8, 192, 8, 28, 28), (4, 832, 2, 7, 7)]
# (input dtype, weight dtype, cuDNN on)
BN_KINDS = [("bfloat16", "float32", True), ("float16", "float16", True), ("float32", "float32", False), ("float32", "float32", True), ("float16", "float32", True)]
# (N, C, D, H, W, K, kernel, stride, padding)
CONVS = [
    (2, 3, 8, 64, 64, 16, (1, 7, 7), (1, 2, 2), (0, 3, 3)),
    (4, 64, 8, 28, 28, 64, (3, 1, 1), (1, 1, 1), (1, 0, 0)),
    (4, 64, 8, 28, 28, 192, (1, 3, 3), (1, 1, 1), (0, 1, 1)),
    (2, 192, 4, 14, 14, 96, (1, 1, 1), (1, 1, 1), (0, 0, 0)),
]


def clips(n, c, d, h, w, dtype):
    """A channels-last 3-d batch, as a permute of [N, D, H, W, C] makes it."""
    return torch.randn(n, d, h, w, c, device="cuda", dtype=getattr(torch, dtype)).permute(0, 4, 1, 2, 3)


def batch_norm_row(shape, dtype, weight_dtype, cudnn):
    n, c, d, h, w = shape
    with torch.backends.cudnn.flags(enabled=cudnn):
        x = clips(n, c, d, h, w, dtype).requires_grad_()
        weight = torch.randn(c, device="cuda", dtype=getattr(torch, weight_dtype), requires_grad=True)
        bias = torch.randn(c, device="cuda", dtype=getattr(torch, weight_dtype), requires_grad=True)
        mean = torch.zeros(c, device="cuda", dtype=getattr(torch, weight_dtype))
        var = torch.ones(c, device="cuda", dtype=getattr(torch, weight_dtype))
        train = lambda: F.batch_norm(x, mean, var, weight, bias, training=True)
        train()
        out, forward = events_during(train)
        grad = torch.randn_like(out)
        _, backward = events_during(lambda: torch.autograd.grad(out, (x, weight, bias), grad))
        with torch.no_grad():
            _, forward_eval = events_during(lambda: F.batch_norm(x, mean, var, weight, bias, training=False))
    return {"kind": "batch_norm", "shape": list(shape), "dtype": dtype, "weight_dtype": weight_dtype, "cudnn": cudnn,
            "forward": forward, "backward": backward, "forward_eval": forward_eval}


def conv_row(spec, dtype):
    n, c, d, h, w, k, kernel, stride, padding = spec
    x = clips(n, c, d, h, w, dtype).requires_grad_()
    weight = torch.randn(k, c, *kernel, device="cuda", dtype=getattr(torch, dtype), requires_grad=True)
    run = lambda: F.conv3d(x, weight, None, stride, padding)
    run()
    out, forward = events_during(run)
    grad = torch.randn_like(out)
    _, backward = events_during(lambda: torch.autograd.grad(out, (x, weight), grad))
    return {"kind": "conv3d", "spec": [n, c, d, h, w, k, list(kernel), list(stride), list(padding)], "dtype": dtype,
            "out_channels_last_3d": out.is_contiguous(memory_format=torch.channels_last_3d), "forward": forward, "backward": backward}


def main():
    sink = open(sys.argv[1], "w")
    jobs = [(batch_norm_row, (shape, *kind)) for shape in BN_SHAPES for kind in BN_KINDS]
    jobs += [(conv_row, (spec, dtype)) for spec in CONVS for dtype in ("bfloat16", "float32")]
    for fn, args in jobs:
        try:
            row = fn(*args)
        except (RuntimeError, torch.OutOfMemoryError) as e:
            row = {"kind": fn.__name__, "args": repr(args), "error": str(e).splitlines()[0][:200]}
        sink.write(json.dumps(row) + "\n")
        sink.flush()
        torch.cuda.empty_cache()
    print(f"{len(jobs)} measured", flush=True)


if __name__ == "__main__":
    main()
