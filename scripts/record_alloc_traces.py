#!/usr/bin/env python3
"""Records PyTorch allocator traces on a GPU: every workload under every allocator setting.

Run on a GPU machine with PyTorch (no vramlab needed):

    python3 scripts/record_alloc_traces.py OUT_DIR [--jobs 8] [--steps 20]

Each (workload, setting) runs in its own process, because PyTorch reads PYTORCH_ALLOC_CONF once,
at the first CUDA allocation. Each writes into OUT_DIR/<workload>/<setting>.pickle.gz
(torch.cuda.memory._snapshot(), pickled and gzipped) and <setting>.json: PyTorch's own
torch.cuda.memory_stats() taken before the snapshot (the reference a replay is checked
against), the setting string, the memory cap (set_per_process_memory_fraction) and the bytes
it allows, cudaMemGetInfo's total, and the device. Nothing here borrows vramlab's model.

Settings with a cap are sized from the same workload's uncapped run (its peak allocated bytes
times a factor), so the default runs go first. OUT_DIR/settings-parse.json records which
setting strings PyTorch itself accepts or rejects, with its message.
"""
import argparse
import gzip
import json
import os
import pickle
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

# name -> (PYTORCH_ALLOC_CONF, cap factor over the uncapped peak allocated, or None)
SETTINGS = {
    "default": ("", None),
    "expandable": ("expandable_segments:True", None),
    "max_split": ("max_split_size_mb:64", None),
    "max_split_rounding": ("max_split_size_mb:64,max_non_split_rounding_mb:256", None),
    "roundup4": ("roundup_power2_divisions:4", None),
    "roundup_list": ("roundup_power2_divisions:[64:8,256:4,1024:2,>:1]", None),
    "roundup_list2": ("roundup_power2_divisions:[2:16,32:4,>:8]", None),
    "non_memory_keys": (
        "release_lock_on_cudamalloc:True,pinned_use_cuda_host_register:True,pinned_num_register_threads:8",
        None,
    ),
    "cap": ("", 1.05),
    "gc": ("garbage_collection_threshold:0.7", 1.05),
    "max_split_cap": ("max_split_size_mb:64", 1.05),
    "expandable_cap": ("expandable_segments:True", 1.02),
    "combo_cap": ("roundup_power2_divisions:4,max_split_size_mb:128,garbage_collection_threshold:0.6", 1.10),
    "oom": ("", 0.85),
}

WORKLOADS = ["resnet18", "gpt", "serve", "random"]
# Held out: written and committed (with the allocator model frozen) before any of them ran.
HOLDOUT_WORKLOADS = ["unet", "lstm"]

# Strings whose acceptance by PyTorch itself is recorded (torch.cuda.memory._set_allocator_settings).
PARSE_CASES = [
    "",
    "max_split_size_mb:20",
    "max_split_size_mb:19",
    "max_split_size_mb:0",
    "max_split_size_mb:abc",
    "max_non_split_rounding_mb:19",
    "roundup_power2_divisions:3",
    "roundup_power2_divisions:0",
    "roundup_power2_divisions:1",
    "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
    "roundup_power2_divisions:[3:2]",
    "roundup_power2_divisions:[2:3]",
    "roundup_power2_divisions:[2:0,>:4]",
    "roundup_power2_divisions:[256:1,512:2",
    "garbage_collection_threshold:0",
    "garbage_collection_threshold:1",
    "garbage_collection_threshold:1.0",
    "garbage_collection_threshold:0.5",
    "garbage_collection_threshold:-0.1",
    "expandable_segments:true",
    "expandable_segments:False",
    "backend:native",
    "backend:foo",
    "colour:blue",
    "max_split_size_mb",
    "max_split_size_mb:64,",
    "max_split_size_mb:64 , roundup_power2_divisions : 4",
    "max_split_size_mb:64;roundup_power2_divisions:4",
    "release_lock_on_cudamalloc:True",
    "release_lock_on_cudamalloc:yes",
    "pinned_use_cuda_host_register:True",
    "pinned_num_register_threads:3",
    "pinned_num_register_threads:8",
    "pinned_use_background_threads:True",
    "graph_capture_record_stream_reuse:True",
    "large_segment_size_mb:40",
    "max_split_size_mb:64,max_split_size_mb:128",
]


def run_workload(name, steps):
    import numpy as np
    import torch
    import torch.nn.functional as F

    rng = np.random.default_rng(1234)
    torch.manual_seed(1234)
    torch.backends.cudnn.benchmark = False
    dev = "cuda"

    if name == "resnet18":
        import torchvision

        model = torchvision.models.resnet18(num_classes=100).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        for _ in range(steps):
            bs = int(rng.choice([16, 24, 32, 48, 64]))
            px = int(rng.choice([96, 128, 160, 192, 224]))
            x = torch.randn(bs, 3, px, px, device=dev)
            y = torch.randint(0, 100, (bs,), device=dev)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    elif name == "gpt":
        vocab, d, layers, heads = 8192, 512, 6, 8

        class Block(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.ln1 = torch.nn.LayerNorm(d)
                self.qkv = torch.nn.Linear(d, 3 * d)
                self.proj = torch.nn.Linear(d, d)
                self.ln2 = torch.nn.LayerNorm(d)
                self.fc1 = torch.nn.Linear(d, 4 * d)
                self.fc2 = torch.nn.Linear(4 * d, d)

            def forward(self, x):
                b, t, _ = x.shape
                q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
                return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

        emb = torch.nn.Embedding(vocab, d)
        model = torch.nn.Sequential(*[Block() for _ in range(layers)], torch.nn.LayerNorm(d)).to(dev)
        emb = emb.to(dev)
        params = list(model.parameters()) + list(emb.parameters())
        opt = torch.optim.AdamW(params, lr=3e-4)
        for _ in range(steps):
            bs = int(rng.choice([4, 8, 12, 16, 24]))
            t = int(rng.choice([64, 128, 192, 256, 384, 512]))
            tok = torch.randint(0, vocab, (bs, t + 1), device=dev)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                h = model(emb(tok[:, :-1]))
                logits = h @ emb.weight.t()
            loss = F.cross_entropy(logits.float().view(-1, vocab), tok[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    elif name == "serve":
        # Variable-batch inference on two streams: inputs made on the default stream and used on
        # a side stream (record_stream), so frees complete later than they are requested.
        layers = [torch.nn.Linear(2048, 2048).to(dev) for _ in range(6)]
        side = torch.cuda.Stream()
        outputs = []
        with torch.no_grad():
            for step in range(steps * 4):
                bs = int(rng.integers(1, 700))
                x = torch.randn(bs, 2048, device=dev)
                stream = side if step % 2 else torch.cuda.current_stream()
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    x.record_stream(stream)
                    h = x
                    for layer in layers:
                        h = F.relu(layer(h))
                    scratch = torch.empty(int(rng.integers(1, 48)) << 20, dtype=torch.uint8, device=dev)
                    scratch.fill_(1)
                    outputs.append(h.sum(dim=1))
                del x, h, scratch
                if len(outputs) > 8:
                    outputs.pop(0)
            torch.cuda.synchronize()
    elif name == "random":
        # Tensors of log-uniform sizes (100 B .. 400 MiB) with random lifetimes.
        live = []
        for _ in range(steps * 60):
            if live and rng.random() < 0.45:
                live.pop(int(rng.integers(0, len(live))))
            else:
                nbytes = int(np.exp(rng.uniform(np.log(100), np.log(400 << 20))))
                live.append(torch.empty(nbytes, dtype=torch.uint8, device=dev))
            if len(live) > 40:
                live.pop(0)
        del live
    elif name == "unet":
        # An encoder-decoder with skip connections, Adam, bf16 autocast, varying image sizes.
        def block(cin, cout):
            return torch.nn.Sequential(
                torch.nn.Conv2d(cin, cout, 3, padding=1), torch.nn.BatchNorm2d(cout), torch.nn.ReLU(),
                torch.nn.Conv2d(cout, cout, 3, padding=1), torch.nn.BatchNorm2d(cout), torch.nn.ReLU(),
            )

        class UNet(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.downs = torch.nn.ModuleList([block(3, 32), block(32, 64), block(64, 128), block(128, 256)])
                self.ups = torch.nn.ModuleList([block(256 + 128, 128), block(128 + 64, 64), block(64 + 32, 32)])
                self.head = torch.nn.Conv2d(32, 2, 1)

            def forward(self, x):
                skips = []
                for i, down in enumerate(self.downs):
                    x = down(x if i == 0 else F.max_pool2d(x, 2))
                    skips.append(x)
                for up, skip in zip(self.ups, reversed(skips[:-1])):
                    x = up(torch.cat([F.interpolate(x, scale_factor=2.0), skip], dim=1))
                return self.head(x)

        model = UNet().to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for _ in range(steps):
            bs = int(rng.choice([2, 4, 6, 8]))
            px = int(rng.choice([128, 192, 256, 320]))
            x = torch.randn(bs, 3, px, px, device=dev)
            y = torch.randint(0, 2, (bs, px, px), device=dev)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x).float(), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    elif name == "lstm":
        # A two-layer LSTM language model over variable-length batches, gradient clipping.
        vocab, hidden = 10000, 768
        emb = torch.nn.Embedding(vocab, hidden).to(dev)
        lstm = torch.nn.LSTM(hidden, hidden, num_layers=2, batch_first=True).to(dev)
        out = torch.nn.Linear(hidden, vocab).to(dev)
        params = list(emb.parameters()) + list(lstm.parameters()) + list(out.parameters())
        opt = torch.optim.SGD(params, lr=0.1)
        for _ in range(steps):
            bs = int(rng.choice([8, 16, 32, 48]))
            t = int(rng.choice([32, 64, 96, 128, 200]))
            tok = torch.randint(0, vocab, (bs, t + 1), device=dev)
            h, _ = lstm(emb(tok[:, :-1]))
            loss = F.cross_entropy(out(h).reshape(-1, vocab), tok[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
    else:
        raise SystemExit(f"unknown workload {name}")
    torch.cuda.synchronize()


def child(args):
    import torch

    workload, setting, out, fraction, steps = args.child, args.setting, args.out, args.fraction, args.steps
    free, total = torch.cuda.mem_get_info()
    if fraction is not None:
        torch.cuda.set_per_process_memory_fraction(fraction)
    torch.cuda.memory._record_memory_history(max_entries=2_000_000, context=None, stacks="python")
    oom = None
    start = time.time()
    try:
        run_workload(workload, steps)
    except torch.cuda.OutOfMemoryError as e:
        oom = str(e).splitlines()[0]
    elapsed = time.time() - start
    stats = torch.cuda.memory_stats()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    os.makedirs(os.path.join(out, workload), exist_ok=True)
    with gzip.open(os.path.join(out, workload, f"{setting}.pickle.gz"), "wb", compresslevel=9) as f:
        pickle.dump(snapshot, f, protocol=4)
    events = sum(len(t) for t in snapshot["device_traces"])
    meta = {
        "workload": workload,
        "setting": setting,
        "alloc_conf": os.environ.get("PYTORCH_ALLOC_CONF", ""),
        "memory_fraction": fraction,
        "allowed_memory_maximum": int(fraction * total) if fraction is not None else None,
        "device_total_bytes": total,
        "device_free_bytes_at_start": free,
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "steps": steps,
        "out_of_memory": oom,
        "trace_events": events,
        "workload_seconds": round(elapsed, 2),
        "allocator_settings_in_snapshot": snapshot.get("allocator_settings"),
        "memory_stats": stats,
    }
    with open(os.path.join(out, workload, f"{setting}.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)


def parse_cases(out):
    import torch

    torch.empty(1, device="cuda")
    results = []
    for case in PARSE_CASES:
        try:
            torch.cuda.memory._set_allocator_settings(case)
            results.append({"setting": case, "accepted": True})
        except Exception as e:  # PyTorch's own verdict, recorded as it was said
            results.append({"setting": case, "accepted": False, "error": type(e).__name__, "message": str(e).splitlines()[0]})
    torch.cuda.memory._set_allocator_settings("")
    with open(os.path.join(out, "settings-parse.json"), "w") as f:
        json.dump({"torch": torch.__version__, "cases": results}, f, indent=1)


def spawn(out, workload, setting, fraction, steps):
    conf, _ = SETTINGS[setting]
    env = dict(os.environ, PYTORCH_ALLOC_CONF=conf)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    cmd = [sys.executable, __file__, out, "--child", workload, "--setting", setting, "--steps", str(steps)]
    if fraction is not None:
        cmd += ["--fraction", repr(fraction)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    status = "ok" if p.returncode == 0 else f"exit {p.returncode}: {p.stderr.strip().splitlines()[-1:]}"
    print(f"{workload:9s} {setting:20s} {status}", flush=True)
    return p.returncode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--child")
    ap.add_argument("--setting")
    ap.add_argument("--fraction", type=float)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--parse-only", action="store_true")
    args = ap.parse_args()
    if args.child:
        return child(args)
    os.makedirs(args.out, exist_ok=True)
    parse_cases(args.out)
    if args.parse_only:
        return
    workloads = args.workloads.split(",")
    import torch

    total = torch.cuda.mem_get_info()[1]
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(lambda w: spawn(args.out, w, "default", None, args.steps), workloads))
        jobs = []
        for w in workloads:
            with open(os.path.join(args.out, w, "default.json")) as f:
                peak = json.load(f)["memory_stats"]["allocated_bytes.all.peak"]
            for s, (_, factor) in SETTINGS.items():
                if s == "default":
                    continue
                fraction = None if factor is None else peak * factor / total
                jobs.append((w, s, fraction))
        codes = list(pool.map(lambda j: spawn(args.out, j[0], j[1], j[2], args.steps), jobs))
    sys.exit(1 if any(codes) else 0)


if __name__ == "__main__":
    main()
