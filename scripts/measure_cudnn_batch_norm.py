"""Measures, on a GPU, what batch norm allocates where PyTorch hands it to cuDNN
(``_select_batch_norm_backend``, aten/src/ATen/native/Normalization.cpp): every allocation and
completed free of a training forward, its backward and an evaluation forward, for channels-last
and contiguous inputs in float32 and float16 (with float32 weights, as autocast runs it). cuDNN's
persistent spatial mode (training, channels-last: cudnn/BatchNorm.cpp, getCudnnBatchNormMode)
asks for a workspace and a reserve of sizes of its own choosing. Writes JSON lines, one per
configuration: a structured sweep (--sweep) or a seeded random draw (--seed N --random K).
Run on a GPU machine:
    python scripts/measure_cudnn_batch_norm.py OUT.jsonl [--sweep] [--seed N --random K]"""

import json
import random
import sys

import torch

from allocator_events import events_during
import torch.nn.functional as F


def measure(n, c, h, w, dtype, channels_last):
    layout = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.randn(n, c, h, w, device="cuda", dtype=getattr(torch, dtype)).contiguous(memory_format=layout).requires_grad_()
    weight = torch.randn(c, device="cuda", requires_grad=True)
    bias = torch.randn(c, device="cuda", requires_grad=True)
    mean, var = torch.zeros(c, device="cuda"), torch.ones(c, device="cuda")
    train = lambda: F.batch_norm(x, mean, var, weight, bias, training=True)
    train()
    out, forward = events_during(train)
    grad = torch.randn_like(out)
    _, backward = events_during(lambda: torch.autograd.grad(out, (x, weight, bias), grad))
    with torch.no_grad():
        evaluate = lambda: F.batch_norm(x, mean, var, weight, bias, training=False)
        _, forward_eval = events_during(evaluate)
    return {"n": n, "c": c, "h": h, "w": w, "dtype": dtype, "channels_last": channels_last, "x_bytes": x.numel() * x.element_size(),
            "forward": forward, "backward": backward, "forward_eval": forward_eval}


def sweep():
    jobs = []
    for dtype in ("float32", "float16"):
        for cl in (True, False):
            for n in (1, 2, 3, 8, 16, 32, 48, 64, 128):
                jobs.append((n, 64, 56, 56, dtype, cl))
            for c in (1, 3, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 2048):
                jobs.append((32, c, 28, 28, dtype, cl))
            for hw in (1, 2, 4, 7, 8, 14, 16, 28, 32, 56, 64, 112, 224):
                jobs.append((16, 64, hw, hw, dtype, cl))
            for h, w in ((7, 9), (13, 17), (56, 28), (28, 56), (112, 64), (1, 100), (100, 1)):
                jobs.append((16, 128, h, w, dtype, cl))
    return jobs


def draw(count, seed):
    rng = random.Random(seed)
    jobs = []
    while len(jobs) < count:
        n = rng.choice([1, 2, 4, rng.randint(1, 16), rng.randint(1, 128), rng.randint(64, 512)])
        c = rng.choice([rng.randint(1, 64), rng.randint(1, 512), 16 * rng.randint(1, 96), rng.choice([64, 128, 256, 512, 1024])])
        h = rng.choice([rng.randint(1, 16), rng.randint(1, 64), rng.randint(16, 256)])
        w = rng.choice([h, rng.randint(1, 256)])
        if n * c * h * w > 2 ** 28:
            continue
        jobs.append((n, c, h, w, rng.choice(["float32", "float16"]), rng.random() < 0.75))
    return jobs


def main():
    sink = open(sys.argv[1], "w")
    jobs = sweep() if "--sweep" in sys.argv else []
    if "--random" in sys.argv:
        jobs += draw(int(sys.argv[sys.argv.index("--random") + 1]), int(sys.argv[sys.argv.index("--seed") + 1]))
    row = {"meta": {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name(0)}}
    sink.write(json.dumps(row) + "\n")
    for job in jobs:
        try:
            row = measure(*job)
        except (RuntimeError, ValueError, torch.OutOfMemoryError) as e:
            # ValueError: batch norm refuses one value per channel in training.
            row = {"job": list(job), "error": str(e).splitlines()[0][:200]}
        sink.write(json.dumps(row) + "\n")
        sink.flush()
        torch.cuda.empty_cache()
    print(f"{len(jobs)} measured", flush=True)


if __name__ == "__main__":
    main()
