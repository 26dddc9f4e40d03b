"""Measures, on a GPU, what CUDA reductions allocate beyond their results: gpu_reduce_kernel's
global staging buffer and semaphores (ATen/native/cuda/Reduce.cuh), for a seeded random draw of
reductions (min and max of a whole tensor, amin, amax, all, any and sum, over some or all
dimensions, of contiguous and permuted inputs in several dtypes), or with --moments of variances
and standard deviations, with and without the mean, of floating-point inputs (Welford's reduction,
ReduceMomentKernel.cu). Each line: the call and every allocation and completed free the caching
allocator saw during it, in order. Run on a GPU machine:
    python scripts/measure_reduction_scratch.py OUT.jsonl --seed N --random K [--moments]"""

import json
import random
import sys

import torch

from allocator_events import events_during

OPS = ["min", "max", "amin", "amax", "all", "any", "sum"]
DTYPES = ["float32", "float16", "bfloat16", "bool", "int64", "uint8"]
MOMENTS = ["var", "std", "var_mean", "std_mean"]
FLOATS = ["float32", "float16", "bfloat16", "float64"]


def make_input(shape, dtype, permute):
    x = torch.randn(shape, device="cuda") if dtype not in ("bool", "int64", "uint8") else torch.randint(0, 3, shape, device="cuda")
    x = x.to(getattr(torch, dtype))
    if permute:
        x = x.permute(*reversed(range(x.dim())))
    return x


def call_of(op, x, dims):
    """The reduction as a program writes it; `dims` None reduces everything."""
    if op in ("min", "max"):
        return lambda: getattr(torch, op)(x)
    if op == "sum":
        return (lambda: x.sum()) if dims is None else (lambda: x.sum(dim=dims))
    if op in MOMENTS:
        fn = getattr(torch, op)
        return (lambda: fn(x)) if dims is None else (lambda: fn(x, dim=dims))
    if op in ("all", "any"):
        if dims is None:
            return lambda: getattr(torch, op)(x)
        return lambda: getattr(torch, op)(x, dim=dims[0] if len(dims) == 1 else dims)
    return (lambda: getattr(torch, op)(x)) if dims is None else (lambda: getattr(torch, op)(x, dim=dims))


def draw(rng, ops=OPS):
    ndim = rng.choice([1, 1, 2, 2, 3, 4])
    budget = rng.choice([10 ** 3, 10 ** 4, 10 ** 5, 10 ** 6, 10 ** 7, 5 * 10 ** 7])
    shape = []
    left = budget
    for i in range(ndim):
        n = max(1, int(round(left ** (1 / (ndim - i)) * rng.uniform(0.3, 2.5))))
        shape.append(n)
        left = max(1, left // n)
    op = rng.choice(ops)
    dtype = rng.choice(FLOATS if op in MOMENTS else DTYPES)
    if op == "sum" and dtype in ("bool", "uint8"):
        dtype = "float32"
    dims = None
    if op not in ("min", "max") and ndim > 1 and rng.random() < 0.6:
        k = 1 if op in ("all", "any") and rng.random() < 0.5 else rng.randint(1, ndim - 1)
        dims = sorted(rng.sample(range(ndim), k))
    return {"op": op, "dtype": dtype, "shape": shape, "dims": dims, "permute": rng.random() < 0.3}


def main():
    sink = open(sys.argv[1], "w")
    seed = int(sys.argv[sys.argv.index("--seed") + 1])
    count = int(sys.argv[sys.argv.index("--random") + 1])
    rng = random.Random(seed)
    ops = MOMENTS if "--moments" in sys.argv else OPS
    done = 0
    for _ in range(count):
        row = draw(rng, ops)
        try:
            x = make_input(row["shape"], row["dtype"], row["permute"])
            call = call_of(row["op"], x, row["dims"])
            call()
            out, events = events_during(call)
            out = out[0] if isinstance(out, tuple) else out
            row.update(strides=list(x.stride()), output_bytes=out.numel() * out.element_size(), events=events)
        except (RuntimeError, torch.OutOfMemoryError) as e:
            row["error"] = str(e).splitlines()[0][:200]
        sink.write(json.dumps(row) + "\n")
        sink.flush()
        done += 1
        torch.cuda.empty_cache()
    print(f"{done} measured", flush=True)


if __name__ == "__main__":
    main()
