"""Measures, on a GPU, the cuDNN convolution workspaces that reports/reference/<gpu>/conv-workspaces
lacks: transposed convolutions, channels-last tensors, depthwise convolutions, cudnn.benchmark on,
and a held-out set of randomly drawn convolutions to check the fitted model
(deliver/conv_model.py) after it is committed. Same method as scripts/measure_conv_workspaces.py:
every allocation and free the caching allocator saw during one convolution's forward, and during
its backward (input gradient, then weight gradient), captured with
torch.cuda.memory._record_memory_history, one convolution at a time.

    python3 measure_conv_more.py OUT.jsonl [--seconds S] [--groups random,transposed,...]

Needs only torch. Time-boxed (default 330 s of measuring, well inside 6 minutes on an H100): jobs
run in the order below and the run stops when the time is spent; every line is flushed as it is
written, so a killed run keeps what it measured. Progress goes to stdout.

One JSON line per convolution and dtype:
    {"group", "dtype", "n", "shape": [C, H, W, K, R, S, stride, padding, dilation, groups],
     "transposed", "output_padding", "channels_last", "benchmark", "backend",
     "forward", "backward": [["a"|"f", bytes, addr], ...],
     ("forward_first", "backward_first": the first call's events, with benchmark on),
     "seconds"}  or, on failure, "error" in place of the events.
For a transposed convolution C is its input's channels and K its output's (weight C x K/groups x R x S,
as torch.nn.ConvTranspose2d holds it); H, W are its input's size.

Groups, in the order run (all with cudnn.benchmark off, deterministic off, TF32 allowed, unless said):
  random       the held-out check: 200 convolutions drawn with numpy-free random.Random(20261127)
               from the distribution below, each at one dtype and batch drawn with it.
  transposed   DCGAN / conv-VAE / U-Net decoder shapes: kernel 4 stride 2 padding 1, kernel 2 stride 2,
               kernel 3 stride 1 padding 1 (and kernel 4 stride 1 padding 0 from 1x1, DCGAN's first
               layer; kernel 3 stride 2 padding 1 output_padding 1), float32/bfloat16/float16,
               batches 8/32/64, NCHW; then the same in channels-last at batch 32.
  channels_last ResNet and ConvNeXt convolutions with channels-last input and weight, three dtypes,
               batches 8/32/64.
  depthwise    groups == C, kernel 3/5/7, stride 1/2, C in 32..768, NCHW and channels-last, three
               dtypes, batches 8/32/64.
  benchmark    a smaller set with cudnn.benchmark on (transposed, channels-last, depthwise and plain
               NCHW ResNet shapes, batch 32, three dtypes): the steady-state call and the first call
               (the benchmarking call, whose trial allocations also reach the caching allocator).

The held-out distribution ("random"), drawn in this order per convolution:
  dtype        uniform over float32, bfloat16, float16
  n            uniform over 1, 2, 4, 8, 16, 32, 64, 128
  kind         plain 55%, depthwise (groups = C = K) 15%, grouped (groups in 2,4,8,32, C and K
               multiples of groups) 10%, transposed 20%
  channels_last 30% (independently of kind)
  C, K         round(2 ** uniform(log2 3, log2 1024)); with 70% chance each rounded up to a
               multiple of 8 (depthwise: K = C; grouped: rounded up to a multiple of groups)
  H = W        uniform over 4, 7, 8, 14, 16, 28, 32, 56, 64, 112, 128, 224 (transposed: its input,
               drawn from 1, 2, 4, 7, 8, 14, 16, 28, 32, 64)
  kernel       plain/grouped/depthwise: 1 (30%), 3 (45%), 5 (8%), 7 (12%), 4 with stride 4 (5%);
               transposed: (4, stride 2, pad 1) 50%, (2, stride 2, pad 0) 25%, (3, stride 1, pad 1) 25%
  stride       non-transposed, kernel 1/3/5/7: 1 (75%) or 2 (25%); padding kernel // 2 (kernel 4: 0)
  dilation 1. A draw whose input, output or weight would pass 1.5 GiB, or whose output is empty, is
  drawn again (the generator's state carries on, so the 200 are fixed by the seed)."""

import json
import math
import random
import sys
import time

import torch
import torch.nn.functional as F

DTYPES = (torch.float32, torch.bfloat16, torch.float16)
BATCHES = (8, 32, 64)


def events_during(fn):
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=100_000, stacks="python")
    kept = fn()
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    out = []
    for e in snap["device_traces"][0]:
        if e["action"] in ("alloc", "free_completed"):
            out.append([e["action"][0], e["size"], e["addr"]])
    return kept, out


def pick(rng, weighted):
    """One value of [(value, weight), ...], drawn by `rng`."""
    total = sum(w for _, w in weighted)
    x = rng.uniform(0, total)
    for value, w in weighted:
        x -= w
        if x <= 0:
            return value
    return weighted[-1][0]


def measure_groups(path, jobs, seconds, draw, measure, failed):
    """Runs each (group, rng, count) of `jobs` in order until `seconds` are spent: `draw(rng)` gives
    (dtype, n, spec), `measure(dtype, n, spec)` its row, `failed(dtype, n, spec, error)` the row of a
    convolution the GPU refuses. Every row is written as a JSON line and flushed at once."""
    start = time.time()
    with open(path, "w") as sink:
        for group, rng, count in jobs:
            done = 0
            while done < count and time.time() - start < seconds:
                dtype, n, spec = draw(rng)
                t0 = time.time()
                try:
                    row = measure(dtype, n, spec)
                except Exception as e:  # noqa: BLE001 - a convolution the GPU refuses is a row too
                    row = failed(dtype, n, spec, str(e)[:300])
                    torch.cuda.empty_cache()
                row["group"] = group
                row["seconds"] = round(time.time() - t0, 4)
                sink.write(json.dumps(row) + "\n")
                sink.flush()
                done += 1
            print(group, done, "rows", round(time.time() - start, 1), "s", flush=True)


def measure(dtype, n, shape, transposed=False, output_padding=(0, 0), channels_last=False, benchmark=False):
    c, h, w, k, r, s, stride, padding, dilation, groups = shape
    torch.backends.cudnn.benchmark = benchmark
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.randn(n, c, h, w, device="cuda", dtype=dtype).to(memory_format=fmt)
    wshape = (c, k // groups, r, s) if transposed else (k, c // groups, r, s)
    weight = torch.randn(*wshape, device="cuda", dtype=dtype).to(memory_format=fmt)
    op = list(output_padding)
    backend = str(torch._C._select_conv_backend(x, weight, None, stride, padding, dilation, transposed, op, groups, None))

    def fwd():
        if transposed:
            return F.conv_transpose2d(x, weight, None, stride, padding, op, groups, dilation)
        return F.conv2d(x, weight, None, stride, padding, dilation, groups)

    def bwd():
        return torch.ops.aten.convolution_backward(
            grad, x, weight, None, stride, padding, dilation, transposed, op, groups, [True, True, False])

    row = {"dtype": str(dtype).replace("torch.", ""), "n": n, "shape": shape, "transposed": transposed,
           "output_padding": op, "channels_last": channels_last, "benchmark": benchmark, "backend": backend}
    if benchmark:
        out, row["forward_first"] = events_during(fwd)
        del out
    out, row["forward"] = events_during(fwd)
    grad = torch.randn_like(out)
    row["out_channels_last"] = bool(out.is_contiguous(memory_format=torch.channels_last)) and not out.is_contiguous()
    del out
    if benchmark:
        _, row["backward_first"] = events_during(bwd)
    _, row["backward"] = events_during(bwd)
    return row


def conv(c, h, k, r, stride=1, padding=None, groups=1, w=None):
    return [c, h, h if w is None else w, k, r, r, [stride, stride],
            [r // 2 if padding is None else padding] * 2, [1, 1], groups]


# (shape, output_padding) of transposed convolutions; C is the input's channels.
TRANSPOSED = [
    # DCGAN generator (nz 100, ngf 64) and its 128-px variant
    (conv(100, 1, 512, 4, 1, 0), (0, 0)), (conv(512, 4, 256, 4, 2, 1), (0, 0)), (conv(256, 8, 128, 4, 2, 1), (0, 0)),
    (conv(128, 16, 64, 4, 2, 1), (0, 0)), (conv(64, 32, 3, 4, 2, 1), (0, 0)), (conv(100, 1, 1024, 4, 1, 0), (0, 0)),
    (conv(1024, 4, 512, 4, 2, 1), (0, 0)), (conv(64, 64, 3, 4, 2, 1), (0, 0)), (conv(128, 32, 64, 4, 2, 1), (0, 0)),
    # conv VAE decoders (32/64 px)
    (conv(256, 2, 128, 4, 2, 1), (0, 0)), (conv(128, 4, 64, 4, 2, 1), (0, 0)), (conv(64, 8, 32, 4, 2, 1), (0, 0)),
    (conv(32, 16, 3, 4, 2, 1), (0, 0)), (conv(32, 32, 1, 4, 2, 1), (0, 0)), (conv(64, 16, 32, 4, 2, 1), (0, 0)),
    (conv(128, 8, 64, 3, 2, 1), (1, 1)), (conv(64, 16, 32, 3, 2, 1), (1, 1)), (conv(32, 32, 3, 3, 2, 1), (1, 1)),
    # U-Net decoder up-convolutions (kernel 2 stride 2)
    (conv(1024, 14, 512, 2, 2, 0), (0, 0)), (conv(512, 28, 256, 2, 2, 0), (0, 0)), (conv(256, 56, 128, 2, 2, 0), (0, 0)),
    (conv(128, 112, 64, 2, 2, 0), (0, 0)), (conv(512, 16, 256, 2, 2, 0), (0, 0)), (conv(256, 32, 128, 2, 2, 0), (0, 0)),
    (conv(128, 64, 64, 2, 2, 0), (0, 0)), (conv(64, 8, 32, 2, 2, 0), (0, 0)),
    # kernel 3 stride 1 padding 1
    (conv(64, 32, 64, 3, 1, 1), (0, 0)), (conv(128, 16, 64, 3, 1, 1), (0, 0)), (conv(64, 64, 3, 3, 1, 1), (0, 0)),
    (conv(32, 64, 3, 3, 1, 1), (0, 0)), (conv(256, 8, 256, 3, 1, 1), (0, 0)), (conv(16, 128, 16, 3, 1, 1), (0, 0)),
]

RESNET = [
    conv(3, 224, 64, 7, 2, 3), conv(64, 56, 64, 3), conv(64, 56, 64, 1, 1, 0), conv(64, 56, 256, 1, 1, 0),
    conv(256, 56, 64, 1, 1, 0), conv(256, 56, 128, 1, 1, 0), conv(128, 56, 128, 3, 2), conv(128, 28, 128, 3),
    conv(128, 28, 512, 1, 1, 0), conv(256, 56, 512, 1, 2, 0), conv(512, 28, 256, 1, 1, 0), conv(256, 28, 256, 3, 2),
    conv(256, 14, 256, 3), conv(256, 14, 1024, 1, 1, 0), conv(1024, 14, 512, 1, 1, 0), conv(512, 14, 512, 3, 2),
    conv(512, 7, 512, 3), conv(512, 7, 2048, 1, 1, 0), conv(2048, 7, 512, 1, 1, 0), conv(64, 56, 128, 3, 2),
    conv(128, 28, 256, 3, 2), conv(64, 32, 64, 3), conv(3, 32, 64, 3), conv(3, 128, 64, 7, 2, 3),
]
CONVNEXT = [
    conv(3, 224, 96, 4, 4, 0), conv(96, 56, 96, 7, 1, 3, 96), conv(96, 56, 192, 2, 2, 0), conv(192, 28, 192, 7, 1, 3, 192),
    conv(192, 28, 384, 2, 2, 0), conv(384, 14, 384, 7, 1, 3, 384), conv(384, 14, 768, 2, 2, 0), conv(768, 7, 768, 7, 1, 3, 768),
    conv(3, 128, 96, 4, 4, 0), conv(96, 32, 96, 7, 1, 3, 96),
]
DEPTHWISE = [conv(c, h, c, r, st, r // 2, c) for (c, h) in ((32, 112), (96, 56), (144, 56), (192, 28), (384, 14), (576, 14), (768, 7), (240, 28))
             for r in (3, 5, 7) for st in (1, 2)]


def random_shapes(count=200, seed=20261127):
    """The held-out draw (see the module docstring): (dtype name, n, shape, transposed, output_padding,
    channels_last)."""
    rnd = random.Random(seed)
    out = []
    while len(out) < count:
        dtype = rnd.choice(["float32", "bfloat16", "float16"])
        n = rnd.choice([1, 2, 4, 8, 16, 32, 64, 128])
        u = rnd.random()
        kind = "plain" if u < 0.55 else "depthwise" if u < 0.70 else "grouped" if u < 0.80 else "transposed"
        cl = rnd.random() < 0.3

        def chans(mult):
            v = max(1, round(2 ** rnd.uniform(math.log2(3), 10)))
            if mult > 1 or rnd.random() < 0.7:
                m = max(mult, 8) if mult == 1 else mult
                v = -(-v // m) * m
            return v

        groups = 1
        if kind == "grouped":
            groups = rnd.choice([2, 4, 8, 32])
        c = chans(groups)
        k = c if kind == "depthwise" else chans(groups)
        if kind == "depthwise":
            groups = c
        op = [0, 0]
        if kind == "transposed":
            h = rnd.choice([1, 2, 4, 7, 8, 14, 16, 28, 32, 64])
            v = rnd.random()
            r, st, pad = (4, 2, 1) if v < 0.5 else (2, 2, 0) if v < 0.75 else (3, 1, 1)
            ho = (h - 1) * st - 2 * pad + r
        else:
            h = rnd.choice([4, 7, 8, 14, 16, 28, 32, 56, 64, 112, 128, 224])
            v = rnd.random()
            r = 1 if v < 0.30 else 3 if v < 0.75 else 5 if v < 0.83 else 7 if v < 0.95 else 4
            if r == 4:
                st, pad = 4, 0
            else:
                st = 1 if rnd.random() < 0.75 else 2
                pad = r // 2
            ho = (h + 2 * pad - r) // st + 1
        e = 4 if dtype == "float32" else 2
        if ho < 1 or max(n * c * h * h, n * k * ho * ho, c * k // groups * r * r) * e > 1.5 * 2 ** 30:
            continue
        shape = [c, h, h, k, r, r, [st, st], [pad, pad], [1, 1], groups]
        out.append((dtype, n, shape, kind == "transposed", op, cl))
    return out


def jobs(groups):
    out = []
    if "random" in groups:
        for dtype, n, shape, tr, op, cl in random_shapes():
            out.append(dict(group="random", dtype=getattr(torch, dtype), n=n, shape=shape, transposed=tr,
                            output_padding=op, channels_last=cl))
    if "transposed" in groups:
        for n in BATCHES:
            for dtype in DTYPES:
                for shape, op in TRANSPOSED:
                    out.append(dict(group="transposed", dtype=dtype, n=n, shape=shape, transposed=True, output_padding=op))
        for dtype in DTYPES:
            for shape, op in TRANSPOSED:
                out.append(dict(group="transposed", dtype=dtype, n=32, shape=shape, transposed=True, output_padding=op,
                                channels_last=True))
    if "channels_last" in groups:
        for n in BATCHES:
            for dtype in DTYPES:
                for shape in RESNET + CONVNEXT:
                    out.append(dict(group="channels_last", dtype=dtype, n=n, shape=shape, channels_last=True))
    if "depthwise" in groups:
        for n in BATCHES:
            for dtype in DTYPES:
                for shape in DEPTHWISE:
                    for cl in (False, True):
                        out.append(dict(group="depthwise", dtype=dtype, n=n, shape=shape, channels_last=cl))
    if "benchmark" in groups:
        for dtype in DTYPES:
            for shape, op in TRANSPOSED[1:5] + TRANSPOSED[18:21]:
                out.append(dict(group="benchmark", dtype=dtype, n=32, shape=shape, transposed=True, output_padding=op, benchmark=True))
            for shape in RESNET[:8]:
                out.append(dict(group="benchmark", dtype=dtype, n=32, shape=shape, benchmark=True))
                out.append(dict(group="benchmark", dtype=dtype, n=32, shape=shape, channels_last=True, benchmark=True))
            for shape in DEPTHWISE[:6]:
                out.append(dict(group="benchmark", dtype=dtype, n=32, shape=shape, benchmark=True))
    return out


def main():
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        raise SystemExit(__doc__)
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 330.0
    groups = (sys.argv[sys.argv.index("--groups") + 1].split(",") if "--groups" in sys.argv
              else ["random", "transposed", "channels_last", "depthwise", "benchmark"])
    todo = jobs(groups)
    sink = open(sys.argv[1], "w")
    start = time.time()
    print(f"{len(todo)} convolutions to measure in at most {seconds:.0f} s on {torch.cuda.get_device_name()} "
          f"(torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()})", flush=True)
    done, last = 0, None
    for job in todo:
        if time.time() - start > seconds:
            print(f"time is up after {done} of {len(todo)} (next group: {job['group']})", flush=True)
            break
        if job["group"] != last:
            print(f"[{time.time() - start:6.1f} s] group {job['group']} ({done} done)", flush=True)
            last = job["group"]
        group = job.pop("group")
        t = time.time()
        try:
            row = measure(**job)
        except torch.OutOfMemoryError:
            row = {"dtype": str(job["dtype"]).replace("torch.", ""), "n": job["n"], "shape": job["shape"], "error": "out of memory"}
        except RuntimeError as e:
            row = {"dtype": str(job["dtype"]).replace("torch.", ""), "n": job["n"], "shape": job["shape"],
                   "error": str(e).splitlines()[0][:200]}
        for key in ("transposed", "output_padding", "channels_last", "benchmark"):
            row.setdefault(key, job.get(key, False if key != "output_padding" else [0, 0]))
        row["group"] = group
        row["seconds"] = round(time.time() - t, 4)
        sink.write(json.dumps(row) + "\n")
        sink.flush()
        done += 1
        if done % 200 == 0:
            print(f"[{time.time() - start:6.1f} s] {done} measured", flush=True)
        torch.backends.cudnn.benchmark = False
        torch.cuda.empty_cache()
    print(f"{done} of {len(todo)} measured in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
