"""Measures, on a GPU, what each 2-D convolution allocates beyond its outputs (cuDNN's
workspaces, or another backend's temporaries) in its forward and in its backward, for a list of
convolution shapes: every allocation and free the caching allocator saw, in order. Writes JSON
lines, one per shape and dtype.

The shapes are those of torchvision's classification models (python scripts/measure_conv_workspaces.py
--list writes them: every Conv2d each model runs at 64, 128 and 224 pixels), at batch sizes 1, 8,
16, 32, 64 and 128, in float32 (TF32 allowed, PyTorch's default), bfloat16 and float16, plus the
shapes given with --extra, and sweeps of the batch size and of the image size for a few of them
(--sweep). Run on a GPU machine:
    python scripts/measure_conv_workspaces.py OUT.jsonl [--sweep] [--seconds S] [--models M,..]
        [--resolutions R,..] [--batches N,..] [--dtypes float32,..] [--extra SHAPES.json]"""

import json
import sys
import time

import torch
import torch.nn.functional as F

MODELS = [
    "resnet18", "resnet34", "resnet50", "resnet101", "wide_resnet50_2", "resnext50_32x4d", "vgg11_bn",
    "vgg16", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0", "densenet121",
    "convnext_tiny", "regnet_y_400mf", "shufflenet_v2_x1_0", "squeezenet1_0", "googlenet", "mnasnet1_0",
]
RESOLUTIONS = (64, 128, 224)
BATCHES = (32, 64, 16, 128, 8, 1)
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _listed(flag, default, kind=str):
    """A comma-separated command-line list (`--batches 1,2,4`), or the default."""
    if flag in sys.argv:
        return [kind(v) for v in sys.argv[sys.argv.index(flag) + 1].split(",")]
    return list(default)


def model_shapes(models=MODELS, resolutions=RESOLUTIONS):
    """Every distinct Conv2d call of the models, per sample: (C, H, W, K, R, S, stride, padding,
    dilation, groups)."""
    import torchvision

    shapes = []
    for name in models:
        kwargs = {"aux_logits": False, "init_weights": False} if name == "googlenet" else {}
        net = getattr(torchvision.models, name)(**kwargs).to("meta").eval()
        seen = []

        def hook(mod, inp, out, seen=seen):
            x = inp[0]
            seen.append(
                (x.shape[1], x.shape[2], x.shape[3], mod.out_channels, *mod.kernel_size, list(mod.stride),
                 list(mod.padding), list(mod.dilation), mod.groups)
            )

        for mod in net.modules():
            if isinstance(mod, torch.nn.Conv2d):
                mod.register_forward_hook(hook)
        for res in resolutions:
            with torch.no_grad():
                net(torch.empty(1, 3, res, res, device="meta"))
        for s in seen:
            key = json.dumps(s)
            if key not in shapes:
                shapes.append(key)
    return [json.loads(k) for k in shapes]


def events_during(fn):
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=10_000, stacks="python")
    kept = fn()
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    out = []
    for e in snap["device_traces"][0]:
        if e["action"] in ("alloc", "free_completed"):
            out.append([e["action"][0], e["size"], e["addr"]])
    return kept, out


def measure(dtype, n, shape, channels_last=False):
    """One convolution's events; with channels_last, the input and the weight (and so the output
    and its gradient) in channels-last, as a model moved with .to(memory_format=torch.channels_last)
    runs, said in the row."""
    c, h, w, k, r, s, stride, padding, dilation, groups = shape
    layout = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.randn(n, c, h, w, device="cuda", dtype=dtype).contiguous(memory_format=layout)
    weight = torch.randn(k, c // groups, r, s, device="cuda", dtype=dtype).contiguous(memory_format=layout)
    backend = str(torch._C._select_conv_backend(x, weight, None, stride, padding, dilation, False, [0, 0], groups, None))
    out, forward = events_during(lambda: F.conv2d(x, weight, None, stride, padding, dilation, groups))
    grad = torch.randn_like(out)
    _, backward = events_during(
        lambda: torch.ops.aten.convolution_backward(
            grad, x, weight, None, stride, padding, dilation, False, [0, 0], groups, [True, True, False]
        )
    )
    row = {"dtype": str(dtype).replace("torch.", ""), "n": n, "shape": shape, "backend": backend}
    if channels_last:
        row.update(channels_last=True, out_channels_last=bool(out.is_contiguous(memory_format=torch.channels_last)))
    return {**row, "forward": forward, "backward": backward}


def main():
    if "--list" in sys.argv:
        json.dump(model_shapes(), sys.stdout)
        return
    sink = open(sys.argv[1], "w")
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 1e9
    extra = json.load(open(sys.argv[sys.argv.index("--extra") + 1])) if "--extra" in sys.argv else []
    start = time.time()
    jobs = []
    if "--sweep" in sys.argv:
        for shape in ([64, 32, 32, 128, 3, 3, [1, 1], [1, 1], [1, 1], 1], [64, 56, 56, 64, 3, 3, [1, 1], [1, 1], [1, 1], 1],
                      [256, 56, 56, 64, 1, 1, [1, 1], [0, 0], [1, 1], 1], [3, 224, 224, 64, 7, 7, [2, 2], [3, 3], [1, 1], 1]):
            for dtype in (torch.float32, torch.bfloat16):
                for n in list(range(1, 17)) + [20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 256]:
                    jobs.append(("sweep-n", dtype, n, shape))
        for dtype in (torch.float32, torch.bfloat16):
            for hw in range(8, 97, 4):
                jobs.append(("sweep-hw", dtype, 32, [64, hw, hw, 64, 3, 3, [1, 1], [1, 1], [1, 1], 1]))
    # `--models a,b --resolutions 96,256 --batches 1,2 --dtypes float32,bfloat16` measure another
    # part of the grid (a second run extends the table).
    shapes = extra + model_shapes(_listed("--models", MODELS), _listed("--resolutions", RESOLUTIONS, int))
    for n in _listed("--batches", BATCHES, int):
        for dtype in _listed("--dtypes", DTYPES, lambda name: getattr(torch, name)):
            for shape in shapes:
                jobs.append(("table", dtype, n, shape))
    done = 0
    for group, dtype, n, shape in jobs:
        if time.time() - start > seconds:
            break
        t = time.time()
        try:
            row = measure(dtype, n, shape)
        except torch.OutOfMemoryError:
            row = {"dtype": str(dtype).replace("torch.", ""), "n": n, "shape": shape, "error": "out of memory"}
        except RuntimeError as e:
            row = {"dtype": str(dtype).replace("torch.", ""), "n": n, "shape": shape, "error": str(e).splitlines()[0][:200]}
        row["group"] = group
        row["seconds"] = round(time.time() - t, 4)
        sink.write(json.dumps(row) + "\n")
        sink.flush()
        done += 1
        torch.cuda.empty_cache()
    print(f"{done} of {len(jobs)} measured in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
