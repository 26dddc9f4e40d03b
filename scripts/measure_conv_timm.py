"""Measures, on a GPU, cuDNN's convolution workspaces for the 2-D convolutions of common timm
models, as scripts/measure_conv_workspaces.py does for torchvision's (its `measure`: every
allocation and free the caching allocator saw during one convolution's forward, and during its
backward, one convolution at a time; benchmark and deterministic off, TF32 allowed, contiguous
NCHW, or with --channels-last input and weight in channels-last). The shapes are every F.conv2d call each model makes on the meta device (timm's own
"same"-padding convolutions included, as the padded input reaches cuDNN), per sample, at the
resolutions given. Jobs run in the order: resolution-major over the models' shapes, then the
batches and dtypes given; --shard I/K takes every K-th job from the I-th, so K processes on one
GPU split the grid (the measurement is of allocations, which other processes do not change).

    python scripts/measure_conv_timm.py --list [--models a,b] [--resolutions 224,128] > SHAPES.json
    python scripts/measure_conv_timm.py OUT.jsonl [--shapes SHAPES.json | --models a,b --resolutions 224,128]
        [--shard I/K] [--seconds S] [--batches 32,16] [--dtypes bfloat16,float32] [--channels-last]

Writes JSON lines as measure_conv_workspaces.py does (group "table"), flushed one by one, so a run
stopped by its time keeps what it measured; scripts/build_conv_table.py reads them."""

import gc
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure_conv_workspaces import _listed, measure  # noqa: E402

MODELS = [
    "resnet50", "resnet18", "resnet26d", "resnext50_32x4d", "seresnext26d_32x4d", "regnety_016", "regnety_008",
    "regnetx_016", "regnety_040", "efficientnet_b0", "efficientnet_b2", "tf_efficientnet_b0", "efficientnetv2_rw_t",
    "mobilenetv3_large_100", "mobilenetv3_small_100", "mobilenetv4_conv_small", "convnext_nano", "convnext_tiny",
    "convnextv2_atto", "densenet121", "dla34", "cspdarknet53", "ghostnet_100", "rexnet_100", "mixnet_s", "hrnet_w18_small",
    "inception_v3", "xception41", "res2net50_26w_4s", "repvgg_a2", "nf_resnet26", "dm_nfnet_f0", "lcnet_050",
    "vit_small_patch16_224", "swin_tiny_patch4_window7_224", "mobilevit_xxs", "levit_128s", "edgenext_xx_small",
    "fastvit_t8", "coatnet_nano_rw_224", "poolformer_s12", "vgg16_bn",
]
RESOLUTIONS = (224, 128, 160, 192, 96, 64, 256, 32)
BATCHES = (32, 16, 64, 8, 24, 48, 128, 4, 1, 2)
DTYPES = ("bfloat16", "float16", "float32")


class _Convolutions(TorchFunctionMode):
    """Every F.conv2d call's per-sample shape: (C, H, W, K, R, S, stride, padding, dilation, groups)."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (F.conv2d, torch.conv2d):
            names = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
            bound = dict(zip(names, args), **kwargs)
            x, w = bound["input"], bound["weight"]

            def pair(v, default):
                v = default if v is None else v
                v = list(v) if isinstance(v, (list, tuple)) else [v, v]
                return [int(v[0]), int(v[-1])]

            padding = bound.get("padding", 0)
            if isinstance(padding, str):
                padding = None
            if x.dim() == 4 and padding is not None:
                self.seen.append([int(x.shape[1]), int(x.shape[2]), int(x.shape[3]), int(w.shape[0]), int(w.shape[2]), int(w.shape[3]),
                                  pair(bound.get("stride"), 1), pair(padding, 0), pair(bound.get("dilation"), 1), int(bound.get("groups") or 1)])
        return func(*args, **kwargs)


def model_shapes(models, resolutions):
    """Per resolution, the distinct convolution shapes of the models in the order first met."""
    import timm

    by_resolution = {res: [] for res in resolutions}
    for name in models:
        try:
            # Built on the CPU and moved: some models compute their widths with operators the meta
            # device lacks (RegNet's torch.unique).
            net = timm.create_model(name, pretrained=False).eval().to("meta")
        except Exception as err:  # a model this timm lacks: said, the rest measured
            print(f"skip {name}: {err}", file=sys.stderr)
            continue
        for res in resolutions:
            mode = _Convolutions()
            try:
                with torch.no_grad(), mode:
                    net(torch.empty(1, 3, res, res, device="meta"))
            except Exception as err:  # a resolution the model refuses (fixed-size ViTs)
                print(f"skip {name} at {res}: {type(err).__name__}", file=sys.stderr)
                continue
            shapes = by_resolution[res]
            for s in mode.seen:
                if s not in shapes:
                    shapes.append(s)
    return by_resolution


def main():
    if "--shapes" in sys.argv:
        with open(sys.argv[sys.argv.index("--shapes") + 1]) as f:
            shapes = json.load(f)
    else:
        resolutions = _listed("--resolutions", RESOLUTIONS, int)
        by_resolution = model_shapes(_listed("--models", MODELS), resolutions)
        seen, shapes = set(), []
        for res in resolutions:
            for s in by_resolution[res]:
                if json.dumps(s) not in seen:
                    seen.add(json.dumps(s))
                    shapes.append(s)
        print(len(shapes), "distinct shapes;", {res: len(v) for res, v in by_resolution.items()}, file=sys.stderr)
    if "--list" in sys.argv:
        json.dump(shapes, sys.stdout)
        return
    jobs = [(n, dtype, s) for s in shapes for n in _listed("--batches", BATCHES, int) for dtype in _listed("--dtypes", DTYPES)]
    index, count = (int(v) for v in (sys.argv[sys.argv.index("--shard") + 1].split("/") if "--shard" in sys.argv else ("0", "1")))
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 1e9
    start, done = time.time(), 0
    with open(sys.argv[1], "w") as sink:
        for n, dtype, shape in jobs[index::count]:
            if time.time() - start > seconds:
                break
            t = time.time()
            try:
                row = measure(getattr(torch, dtype), n, shape, channels_last="--channels-last" in sys.argv)
            except Exception as err:  # an out-of-memory or a refused shape: kept as an error row
                row = {"dtype": dtype, "n": n, "shape": shape, "error": f"{type(err).__name__}: {err}"[:300]}
                # The failed job's tensors are freed here, not inside the next job's window.
                del err
                gc.collect()
                torch.cuda.empty_cache()
            row.update(group="table", source="timm", seconds=round(time.time() - t, 4))
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            done += 1
    print(f"shard {index}/{count}: {done} of {len(jobs[index::count])} jobs in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
