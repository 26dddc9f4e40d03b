#!/usr/bin/env python3
"""Records PyTorch memory snapshots the way real jobs make them (issue 21).

Run on a GPU machine with PyTorch (no vramlab needed):

    python3 scripts/record_real_jobs.py OUT_DIR [--jobs 6] [--budget-s 300]

Every case runs in its own process (PyTorch reads PYTORCH_ALLOC_CONF once, at the first CUDA
allocation) and writes OUT_DIR/<case>.pickle.gz (torch.cuda.memory._snapshot(), pickled and
gzipped) and OUT_DIR/<case>.json: PyTorch's own torch.cuda.memory_stats() taken right before the
snapshot, with the case's name, a one-sentence description, max_entries, PYTORCH_ALLOC_CONF, the
seed, torch's version, the device and its total memory. A job's objects (model, optimizer, tensors,
graph, pool) stay alive through the snapshot unless the case deletes them on purpose. Nothing here
borrows vramlab's model.

The cases:

* Lost starts: three training jobs (a small GPT-like transformer with AdamW and variable batch
  shapes, torchvision's resnet18 with SGD+momentum, a two-layer LSTM with Adam) each recorded
  once in full (max_entries large enough to keep every event) and then again, same seed, at three
  max_entries values small enough that the ring buffer drops the job's start. The values are
  chosen from the full run: the smallest holds at least two of the longest steps, the largest
  half the full trace. The GPT job is also run (full and one lost-start value) under
  expandable_segments:True and max_split_size_mb:64. One more lost-start job runs under a
  memory cap (set_per_process_memory_fraction) with a growing batch until PyTorch's
  OutOfMemoryError, which is caught before the snapshot.
* empty-cache-start: work first unrecorded, then recording starts and empty_cache() is called.
* graph-*: torch.cuda.graph capture of a training step, replayed beside eager work; the graph is
  kept, deleted, or deleted and followed by empty_cache().
* mempool-*: torch.cuda.MemPool with use_mem_pool beside eager tensors; the pool kept or deleted.
* compile-reduce-overhead: torch.compile(mode="reduce-overhead") training (cudagraph trees); a
  failure to compile is written into the case's JSON.
* two-streams: work on a side stream with record_stream and wait_stream, so frees are requested
  long before they complete, beside default-stream work.

OUT_DIR also gets record.log (each case: ok or its error), machine.txt, summary.json (per case:
trace events, whether the start was lost, the segment_pool_id values, the peaks) and README.md.
`--summarize DIR` redoes summary.json from the files alone (no torch needed).
"""
import argparse
import gzip
import json
import math
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed

SEED = 1234
FULL_MAX_ENTRIES = 2_000_000  # more than any case here makes: the "full" runs keep everything
OTHER_MAX_ENTRIES = 1_000_000  # the cases that are not about lost starts keep everything too
OOM_MAX_ENTRIES = 4000
OOM_CAP_BYTES = 3 << 29  # 1.5 GiB
FALLBACK_MAX_ENTRIES = [3000, 10000, 40000]  # used only if a family's full run failed
CASE_TIMEOUT_S = 90
COMPILE_TIMEOUT_S = 150

# Training workloads: steps of the full and lost-start runs.
STEPS = {"gpt": 80, "resnet18": 80, "lstm": 300}

# Lost-start families: name -> (workload, PYTORCH_ALLOC_CONF, which of the picked max_entries)
FAMILIES = {
    "gpt": ("gpt", "", "all"),
    "resnet18": ("resnet18", "", "all"),
    "lstm": ("lstm", "", "all"),
    "gpt-expandable": ("gpt", "expandable_segments:True", "mid"),
    "gpt-maxsplit64": ("gpt", "max_split_size_mb:64", "mid"),
}

# Single cases: name -> (job, PYTORCH_ALLOC_CONF, max_entries, timeout)
SINGLES = {
    "compile-reduce-overhead": ("compile", "", OTHER_MAX_ENTRIES, COMPILE_TIMEOUT_S),
    "empty-cache-start": ("empty_cache", "", OTHER_MAX_ENTRIES, CASE_TIMEOUT_S),
    "graph-keep": ("graph_keep", "", OTHER_MAX_ENTRIES, CASE_TIMEOUT_S),
    "graph-del": ("graph_del", "", OTHER_MAX_ENTRIES, CASE_TIMEOUT_S),
    "graph-del-empty-cache": ("graph_del_empty", "", OTHER_MAX_ENTRIES, CASE_TIMEOUT_S),
    "mempool-keep": ("mempool_keep", "", OTHER_MAX_ENTRIES, CASE_TIMEOUT_S),
    "mempool-del": ("mempool_del", "", OTHER_MAX_ENTRIES, CASE_TIMEOUT_S),
    "two-streams": ("streams", "", OTHER_MAX_ENTRIES, CASE_TIMEOUT_S),
    "oom-lost-start": ("oom", "", OOM_MAX_ENTRIES, CASE_TIMEOUT_S),
}


def describe(job, max_entries):
    full = max_entries >= OTHER_MAX_ENTRIES
    window = "keeping every event" if full else f"with max_entries={max_entries}, so the ring buffer drops its start"
    window += " (snapshot taken with the model and optimizer alive)"
    return {
        "train_gpt": f"Trains a 4-layer GPT-like transformer (d=256, bf16 autocast, AdamW) for {STEPS['gpt']} steps "
        f"of variable batch shapes (batch 4-16, length 64-256), {window}.",
        "train_resnet18": f"Trains torchvision resnet18 (weights=None, 10 classes) with SGD+momentum for "
        f"{STEPS['resnet18']} steps of 32x3x96x96 batches, {window}.",
        "train_lstm": f"Trains a 2-layer LSTM language model (cuDNN, hidden 512) with Adam for {STEPS['lstm']} steps "
        f"of 32x64 token batches, {window}.",
        "compile": "Trains an MLP compiled with torch.compile(mode='reduce-overhead') (cudagraph trees) for 10 steps, "
        "with an eager Adam step.",
        "empty_cache": "Trains the GPT-like job 6 steps and leaves scattered tensors without recording, then starts "
        "recording, calls torch.cuda.empty_cache() at once and trains 6 more steps.",
        "graph_keep": "Captures an MLP training step (forward, backward, SGD) with torch.cuda.graph after side-stream "
        "warm-up and replays it 12 times beside eager tensors on the default pool; the graph is kept alive.",
        "graph_del": "As graph-keep, then deletes the graph, its static outputs and the gradients it made, and does "
        "more eager work (no empty_cache).",
        "graph_del_empty": "As graph-del, then calls torch.cuda.empty_cache() at the end.",
        "mempool_keep": "Allocates tensors inside torch.cuda.use_mem_pool(MemPool()) and eager tensors outside, frees "
        "some of each, allocates again in the pool; the pool and its live tensors are kept.",
        "mempool_del": "As mempool-keep, then frees the pool's tensors, deletes the pool and does more eager work.",
        "streams": "Issues matmul chains on a side stream over inputs made on the default stream (record_stream, "
        "wait_stream), beside default-stream work, so frees are requested long before they complete.",
        "oom": f"Trains the GPT-like job with a batch growing by 2 each step under a "
        f"{OOM_CAP_BYTES >> 20} MiB cap (set_per_process_memory_fraction) until PyTorch raises OutOfMemoryError, "
        f"which is caught, with max_entries={max_entries}.",
    }[job]


# ---------------------------------------------------------------------------------------------
# Workloads (child side)


class Ctx:
    """What a job needs from its process: the rng, step marks, and a late start of recording."""

    def __init__(self, torch, max_entries):
        import random

        self.torch = torch
        self.rng = random.Random(SEED)
        self.max_entries = max_entries
        self.recording = False
        self.marks = []  # one per step start plus one at the end: (unix us, allocator call counters)
        self.notes = {}

    def start_recording(self):
        self.torch.cuda.memory._record_memory_history(max_entries=self.max_entries, context=None)
        self.recording = True
        self.recording_started_us = time.time_ns() // 1000

    def mark(self):
        s = self.torch.cuda.memory_stats()
        self.marks.append(
            [
                time.time_ns() // 1000,
                s.get("allocation.all.allocated", 0),
                s.get("allocation.all.freed", 0),
                s.get("segment.all.allocated", 0),
                s.get("segment.all.freed", 0),
            ]
        )


def gpt_trainer(torch, d=256, layers=4, heads=4, vocab=4096):
    F = torch.nn.functional
    dev = "cuda"

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

    emb = torch.nn.Embedding(vocab, d).to(dev)
    model = torch.nn.Sequential(*[Block() for _ in range(layers)], torch.nn.LayerNorm(d)).to(dev)
    opt = torch.optim.AdamW(list(model.parameters()) + list(emb.parameters()), lr=3e-4)

    def step(bs, t):
        tok = torch.randint(0, vocab, (bs, t + 1), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            h = model(emb(tok[:, :-1]))
            logits = h @ emb.weight.t()
        loss = F.cross_entropy(logits.float().view(-1, vocab), tok[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def job_train(torch, ctx, workload):
    F = torch.nn.functional
    dev = "cuda"
    rng = ctx.rng
    steps = STEPS[workload]
    if workload == "gpt":
        step = gpt_trainer(torch)
        ctx.mark()
        for _ in range(steps):
            step(rng.choice([4, 8, 12, 16]), rng.choice([64, 128, 192, 256]))
            ctx.mark()
    elif workload == "resnet18":
        import torchvision

        model = torchvision.models.resnet18(weights=None, num_classes=10).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        ctx.mark()
        for _ in range(steps):
            x = torch.randn(32, 3, 96, 96, device=dev)
            y = torch.randint(0, 10, (32,), device=dev)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            del x, y, loss
            ctx.mark()
    elif workload == "lstm":
        vocab, hidden = 5000, 512
        emb = torch.nn.Embedding(vocab, 256).to(dev)
        lstm = torch.nn.LSTM(256, hidden, num_layers=2, batch_first=True).to(dev)
        out = torch.nn.Linear(hidden, vocab).to(dev)
        params = list(emb.parameters()) + list(lstm.parameters()) + list(out.parameters())
        opt = torch.optim.Adam(params, lr=1e-3)
        ctx.mark()
        for _ in range(steps):
            tok = torch.randint(0, vocab, (32, 65), device=dev)
            h, _ = lstm(emb(tok[:, :-1]))
            loss = F.cross_entropy(out(h).reshape(-1, vocab), tok[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            del tok, h, loss
            ctx.mark()
    else:
        raise SystemExit(f"unknown workload {workload}")
    torch.cuda.synchronize()
    return locals()  # kept alive by the caller until after the snapshot


def job_oom(torch, ctx):
    rng = ctx.rng
    total = torch.cuda.mem_get_info()[1]
    torch.cuda.set_per_process_memory_fraction(OOM_CAP_BYTES / total)
    ctx.notes["memory_fraction"] = OOM_CAP_BYTES / total
    ctx.notes["allowed_memory_maximum"] = int(OOM_CAP_BYTES / total * total)
    step = gpt_trainer(torch)
    ctx.mark()
    ctx.notes["out_of_memory"] = None
    try:
        for i in range(200):
            bs = 4 + 2 * i
            ctx.notes["last_batch"] = bs
            step(bs, rng.choice([192, 256]))
            ctx.mark()
    except torch.cuda.OutOfMemoryError as e:
        ctx.notes["out_of_memory"] = str(e).splitlines()[0]
        ctx.notes["steps_done"] = len(ctx.marks) - 1
    return locals()  # kept alive by the caller until after the snapshot


def job_empty_cache(torch, ctx):
    rng = ctx.rng
    step = gpt_trainer(torch)
    junk = []
    for _ in range(6):
        step(rng.choice([4, 8, 12, 16]), rng.choice([64, 128, 192, 256]))
        for _ in range(4):
            junk.append(torch.empty(rng.choice([4096, 700_000, 3 << 20, 11 << 20, 40 << 20]), dtype=torch.uint8, device="cuda"))
    del junk[::3]
    torch.cuda.synchronize()
    ctx.start_recording()
    torch.cuda.empty_cache()
    ctx.mark()
    for _ in range(6):
        step(rng.choice([4, 8, 12, 16]), rng.choice([64, 128, 192, 256]))
        junk.append(torch.empty(rng.choice([4096, 700_000, 3 << 20, 11 << 20]), dtype=torch.uint8, device="cuda"))
        ctx.mark()
    del junk[1::2]
    torch.cuda.synchronize()
    return locals()  # kept alive by the caller until after the snapshot


def eager_churn(torch, rng, live, n):
    """Allocates and frees tensors of assorted sizes on the default pool, keeping a few alive."""
    for _ in range(n):
        nbytes = rng.choice([512, 4096, 300_000, 1_500_000, 5 << 20, 9 << 20, 30 << 20])
        t = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        t.fill_(1)
        live.append(t)
        if len(live) > 6:
            live.pop(rng.randrange(len(live)))


def job_graph(torch, ctx, variant):
    F = torch.nn.functional
    rng = ctx.rng
    dev = "cuda"
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 10)
    ).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    static_input = torch.randn(256, 1024, device=dev)
    static_target = torch.randint(0, 10, (256,), device=dev)
    live = []
    ctx.mark()
    # Warm-up on a side stream, as the CUDA graphs documentation says.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(static_input), static_target)
            loss.backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)
    ctx.mark()
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_out = model(static_input)
        static_loss = F.cross_entropy(static_out, static_target)
        static_loss.backward()
        opt.step()
    ctx.notes["graph_pool"] = list(g.pool())
    ctx.mark()
    for _ in range(12):
        static_input.copy_(torch.randn(256, 1024, device=dev))
        static_target.copy_(torch.randint(0, 10, (256,), device=dev))
        g.replay()
        eager_churn(torch, rng, live, 5)
        ctx.mark()
    torch.cuda.synchronize()
    if variant in ("del", "del_empty"):
        del g, static_out, static_loss
        opt.zero_grad(set_to_none=True)  # the gradients live in the graph's private pool
        import gc

        gc.collect()
        eager_churn(torch, rng, live, 10)
        ctx.mark()
        if variant == "del_empty":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            ctx.mark()
    torch.cuda.synchronize()
    return locals()  # kept alive by the caller until after the snapshot


def job_mempool(torch, ctx, variant):
    rng = ctx.rng
    sizes = [512, 8192, 600_000, 2 << 20, 3_000_000, 12 << 20, 25 << 20, 70 << 20]
    pool = torch.cuda.MemPool()
    ctx.notes["pool_id"] = list(pool.id)
    ctx.mark()
    with torch.cuda.use_mem_pool(pool):
        in_pool = [torch.empty(rng.choice(sizes), dtype=torch.uint8, device="cuda") for _ in range(16)]
        w = torch.randn(1024, 1024, device="cuda")
        in_pool.append(w @ w)
    ctx.mark()
    eager = [torch.empty(rng.choice(sizes), dtype=torch.uint8, device="cuda") for _ in range(16)]
    ctx.mark()
    del in_pool[::2]
    del eager[1::2]
    ctx.mark()
    with torch.cuda.use_mem_pool(pool):
        in_pool += [torch.empty(rng.choice(sizes), dtype=torch.uint8, device="cuda") for _ in range(6)]
    eager += [torch.empty(rng.choice(sizes), dtype=torch.uint8, device="cuda") for _ in range(6)]
    ctx.mark()
    torch.cuda.synchronize()
    if variant == "del":
        del in_pool, w
        import gc

        gc.collect()
        ctx.notes["pool_use_count_before_del"] = pool.use_count()
        del pool
        gc.collect()
        eager += [torch.empty(rng.choice(sizes), dtype=torch.uint8, device="cuda") for _ in range(6)]
        ctx.mark()
    torch.cuda.synchronize()
    return locals()  # kept alive by the caller until after the snapshot


def job_compile(torch, ctx):
    F = torch.nn.functional
    dev = "cuda"
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512)
    ).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    cmodel = torch.compile(model, mode="reduce-overhead")
    ctx.mark()
    losses = []
    for _ in range(10):
        torch.compiler.cudagraph_mark_step_begin()
        x = torch.randn(256, 512, device=dev)
        y = torch.randn(256, 512, device=dev)
        loss = F.mse_loss(cmodel(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss))
        del x, y, loss
        ctx.mark()
    ctx.notes["losses"] = losses
    torch.cuda.synchronize()
    return locals()  # kept alive by the caller until after the snapshot


def job_streams(torch, ctx):
    rng = ctx.rng
    dev = "cuda"
    cur = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    w = torch.randn(2048, 2048, device=dev) / 45.0
    w.record_stream(side)
    total = torch.zeros(2048, device=dev)
    ctx.mark()
    for i in range(40):
        x = torch.randn(rng.choice([512, 1024, 2048, 3072]), 2048, device=dev)
        side.wait_stream(cur)
        with torch.cuda.stream(side):
            x.record_stream(side)
            h = x
            for _ in range(6):
                h = torch.tanh(h @ w)  # allocated on the side stream
            s = h.sum(0)
        del x, h  # x's free waits for the side stream's work; h is the side stream's own
        a = torch.randn(rng.choice([1 << 18, 1 << 20, 3 << 20]), device=dev)  # default-stream work beside
        b = a * 2
        del a, b
        if i % 5 == 4:
            cur.wait_stream(side)
            s.record_stream(cur)
            total += s
        del s
        ctx.mark()
    torch.cuda.synchronize()
    flush = torch.empty(1, device=dev)  # lets the allocator see the side stream's events complete
    del flush, w
    torch.cuda.synchronize()
    flush = torch.empty(1, device=dev)
    del flush
    ctx.notes["total"] = float(total.sum())
    return locals()  # kept alive by the caller until after the snapshot


def run_job(torch, ctx, job):
    if job.startswith("train_"):
        return job_train(torch, ctx, job[len("train_") :])
    return {
        "oom": job_oom,
        "empty_cache": job_empty_cache,
        "graph_keep": lambda t, c: job_graph(t, c, "keep"),
        "graph_del": lambda t, c: job_graph(t, c, "del"),
        "graph_del_empty": lambda t, c: job_graph(t, c, "del_empty"),
        "mempool_keep": lambda t, c: job_mempool(t, c, "keep"),
        "mempool_del": lambda t, c: job_mempool(t, c, "del"),
        "compile": job_compile,
        "streams": job_streams,
    }[job](torch, ctx)


def child(args):
    import torch

    torch.manual_seed(SEED)
    torch.backends.cudnn.benchmark = False
    name, job, max_entries, out = args.child, args.job, args.max_entries, args.out
    free, total = torch.cuda.mem_get_info()  # makes the context; the caching allocator is untouched
    ctx = Ctx(torch, max_entries)
    if job != "empty_cache":
        ctx.start_recording()
    error = None
    kept = None  # the job's objects (model, optimizer, tensors, graph, pool), alive through the snapshot
    start = time.time()
    try:
        kept = run_job(torch, ctx, job)
    except Exception as e:  # recorded, then the snapshot is taken all the same
        error = f"{type(e).__name__}: {str(e).strip()[:2000]}"
        ctx.notes["traceback"] = traceback.format_exc()[-4000:]
    elapsed = time.time() - start
    stats = torch.cuda.memory_stats()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    del kept
    with gzip.open(os.path.join(out, f"{name}.pickle.gz"), "wb", compresslevel=9) as f:
        pickle.dump(snapshot, f, protocol=4)
    props = torch.cuda.get_device_properties(0)
    meta = {
        "case": name,
        "job": job,
        "description": describe(job, max_entries),
        "max_entries": max_entries,
        "alloc_conf": os.environ.get("PYTORCH_ALLOC_CONF", ""),
        "seed": SEED,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(0),
        "device_total_bytes": total,
        "device_total_memory_properties": props.total_memory,
        "device_free_bytes_at_start": free,
        "recording_started_before_first_allocation": job != "empty_cache",
        "error": error,
        "trace_events": sum(len(t) for t in snapshot["device_traces"]),
        "workload_seconds": round(elapsed, 3),
        "step_marks": ctx.marks,
        "step_marks_fields": ["unix_us", "allocation.all.allocated", "allocation.all.freed",
                              "segment.all.allocated", "segment.all.freed"],
        "notes": ctx.notes,
        "allocator_settings_in_snapshot": snapshot.get("allocator_settings"),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "memory_stats": stats,
    }
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True, default=str)


# ---------------------------------------------------------------------------------------------
# Parent side: no torch needed except for machine.txt


def nice_ceil(x):
    """x rounded up to two significant digits (2347 -> 2400)."""
    x = max(int(math.ceil(x)), 1)
    mag = 10 ** max(len(str(x)) - 2, 0)
    return -(-x // mag) * mag


def step_events(marks):
    """Trace events each step made, from the allocator's call counters at the step marks:
    an alloc is one event, a free two (free_requested, free_completed), a cudaMalloc or cudaFree one."""
    out = []
    for a, b in zip(marks, marks[1:]):
        out.append((b[1] - a[1]) + 2 * (b[2] - a[2]) + (b[3] - a[3]) + (b[4] - a[4]))
    return out


def pick_max_entries(total_events, per_step):
    """Three max_entries values for lost-start runs: the smallest holds two of the longest steps
    (so the window covers at least one whole step wherever it starts), the largest half the trace."""
    longest = max(per_step[1:] or per_step or [1000])
    small = nice_ceil(max(2.2 * longest, 1000))
    large = nice_ceil(0.5 * total_events)
    if large <= small:
        large = nice_ceil(max(small * 1.5, 0.8 * total_events))
    mid = nice_ceil(math.sqrt(small * large))
    vals = sorted({v for v in (small, mid, large) if v < 0.9 * total_events})
    return vals or FALLBACK_MAX_ENTRIES


class Runner:
    def __init__(self, out, deadline):
        self.out = out
        self.deadline = deadline
        self.lock = threading.Lock()
        self.results = {}
        self.log = open(os.path.join(out, "record.log"), "a")

    def record(self, name, status):
        with self.lock:
            self.results[name] = status
            line = f"{name:32s} {status}"
            print(line, flush=True)
            self.log.write(line + "\n")
            self.log.flush()

    def spawn(self, name, job, conf, max_entries, timeout):
        if time.time() > self.deadline:
            self.record(name, "skipped: the run's time budget was spent")
            return False
        env = dict(os.environ, PYTORCH_ALLOC_CONF=conf, PYTHONUNBUFFERED="1")
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        cmd = [sys.executable, os.path.abspath(__file__), self.out, "--child", name, "--job", job,
               "--max-entries", str(max_entries)]
        start = time.time()
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
        try:
            output, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)  # the child and what it started (compile workers)
            output, _ = p.communicate()
            self.record(name, f"timeout after {timeout} s")
            self._save_output(name, output)
            return False
        took = time.time() - start
        if p.returncode != 0:
            tail = (output or "").strip().splitlines()[-3:]
            self.record(name, f"exit {p.returncode} ({took:.0f} s): {' | '.join(tail)}")
            self._save_output(name, output)
            return False
        try:
            with open(os.path.join(self.out, f"{name}.json")) as f:
                err = json.load(f).get("error")
        except OSError as e:
            err = f"no JSON written: {e}"
        if err:
            self.record(name, f"error ({took:.0f} s), snapshot kept: {err.splitlines()[0][:300]}")
            self._save_output(name, output)
        else:
            self.record(name, f"ok ({took:.0f} s)")
        return True

    def _save_output(self, name, output):
        if output:
            with open(os.path.join(self.out, f"{name}.stderr.txt"), "w") as f:
                f.write(output[-20000:])


def family_values(out, fam):
    """max_entries values for a family's lost-start runs, from its full run's JSON."""
    try:
        with open(os.path.join(out, f"{fam}-full.json")) as f:
            meta = json.load(f)
        total = meta["trace_events"]
        per_step = step_events(meta["step_marks"])
        return pick_max_entries(total, per_step), total, per_step
    except (OSError, KeyError, ValueError):
        return FALLBACK_MAX_ENTRIES, None, []


def machine_txt(out):
    lines = [time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())]
    try:
        q = subprocess.run(["nvidia-smi", "-q"], capture_output=True, text=True, timeout=60).stdout.splitlines()
        in_fb = False
        for line in q:
            s = line.strip()
            if s.startswith(("Product Name", "Driver Version", "CUDA Version", "Product Architecture", "Bus Id")):
                lines.append(s)
            if s.startswith("FB Memory Usage"):
                in_fb = True
                continue
            if in_fb:
                if s.startswith(("Total", "Reserved")):
                    lines.append("FB Memory " + s)
                else:
                    in_fb = False
    except (OSError, subprocess.SubprocessError) as e:
        lines.append(f"nvidia-smi: {e}")
    from importlib import metadata

    for pkg in ["torch", "torchvision", "transformers", "triton", "numpy"]:
        try:
            lines.append(f"{pkg} {metadata.version(pkg)}")
        except metadata.PackageNotFoundError:
            lines.append(f"{pkg} not installed")
    lines.append(f"python {sys.version.split()[0]}")
    try:
        import torch

        lines.append(f"torch.version.cuda {torch.version.cuda}")
        lines.append(f"cudnn {torch.backends.cudnn.version()}")
    except Exception as e:  # torch missing here: the cases say so themselves
        lines.append(f"torch: {type(e).__name__}: {e}")
    lines.append(f"uname {' '.join(os.uname())}")
    lines.append(f"cpus {os.cpu_count()}")
    with open(os.path.join(out, "machine.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


# ---------------------------------------------------------------------------------------------
# Summary (pure Python: reads the pickles and JSONs)


def analyse(snapshot, meta):
    trace = [e for dev in snapshot.get("device_traces", []) for e in dev]
    actions = Counter(e["action"] for e in trace)
    live = {}
    unpaired_free_requested = 0
    unpaired_free_completed = 0
    first_free_paired = None
    seg_created = []  # (addr, size) of segment_alloc / segment_map events
    for e in trace:
        a = e["action"]
        if a == "alloc":
            live[e["addr"]] = "allocated"
        elif a == "free_requested":
            paired = e["addr"] in live
            if first_free_paired is None:
                first_free_paired = paired
            if paired:
                live[e["addr"]] = "requested"
            else:
                unpaired_free_requested += 1
        elif a == "free_completed":
            if e["addr"] in live:
                del live[e["addr"]]
            else:
                unpaired_free_completed += 1
        elif a in ("segment_alloc", "segment_map"):
            seg_created.append((e["addr"], e["size"]))
    segments = snapshot.get("segments", [])
    never = []
    for s in segments:
        lo, hi = s["address"], s["address"] + s["total_size"]
        if not any(lo <= addr < hi for addr, _ in seg_created):
            never.append(s)
    active_not_in_trace = 0
    active_blocks = 0
    for s in segments:
        for b in s["blocks"]:
            if b["state"] == "active_allocated":
                active_blocks += 1
                if b["address"] not in live:
                    active_not_in_trace += 1
    pools = sorted({tuple(s.get("segment_pool_id", (0, 0))) for s in segments})
    stats = meta.get("memory_stats", {})
    max_entries = meta.get("max_entries")
    first = trace[0] if trace else {}
    return {
        "trace_events": len(trace),
        "max_entries": max_entries,
        "ring_buffer_full": bool(max_entries) and len(trace) >= max_entries,
        "first_event": first.get("action"),
        "first_event_paired_in_trace": (first.get("action") in ("alloc", "segment_alloc", "segment_map", "snapshot"))
        if trace else None,
        "first_free_paired_in_trace": first_free_paired,
        "free_requested_without_alloc_in_trace": unpaired_free_requested,
        "free_completed_without_alloc_in_trace": unpaired_free_completed,
        "segments_at_end": len(segments),
        "segments_never_created_in_trace": len(never),
        "bytes_of_segments_never_created_in_trace": sum(s["total_size"] for s in never),
        "active_blocks_at_end": active_blocks,
        "active_blocks_not_allocated_in_trace": active_not_in_trace,
        "start_lost": bool(unpaired_free_requested or never or active_not_in_trace),
        "segment_pool_ids": [list(p) for p in pools],
        "actions": dict(sorted(actions.items())),
        "reserved_bytes.all.peak": stats.get("reserved_bytes.all.peak"),
        "allocated_bytes.all.peak": stats.get("allocated_bytes.all.peak"),
        "num_alloc_retries": stats.get("num_alloc_retries"),
        "num_ooms": stats.get("num_ooms"),
        "alloc_conf": meta.get("alloc_conf"),
        "error": meta.get("error"),
    }


def summarize(out):
    summary = {}
    for name in sorted(os.listdir(out)):
        if not name.endswith(".pickle.gz"):
            continue
        case = name[: -len(".pickle.gz")]
        try:
            with open(os.path.join(out, f"{case}.json")) as f:
                meta = json.load(f)
            with gzip.open(os.path.join(out, name), "rb") as f:
                snapshot = pickle.load(f)
            summary[case] = analyse(snapshot, meta)
        except Exception as e:  # one unreadable case must not hide the others
            summary[case] = {"error": f"summary failed: {type(e).__name__}: {e}"}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
    return summary


def write_readme(out, command, results, picks, summary):
    def mib(x):
        return "-" if x is None else f"{x / 2**20:.1f}"

    lines = [
        "# Snapshots as real jobs make them (issue 21)",
        "",
        "Recorded on a lent GPU (see `machine.txt`) by",
        "",
        f"    {command}",
        "",
        "Each case ran in its own process. `<case>.pickle.gz` is `torch.cuda.memory._snapshot()` (pickled,",
        "gzipped), recorded with `torch.cuda.memory._record_memory_history(max_entries=N, context=None)`",
        "started before the job's first CUDA allocation (except `empty-cache-start`). Each job's objects",
        "(model, optimizer, tensors, graph, pool) are still alive when the snapshot is taken, except those",
        "a case deletes on purpose. `<case>.json` holds",
        "`torch.cuda.memory_stats()` as PyTorch itself reported it right before the snapshot (the",
        "reference a replay is checked against; nothing in it comes from vramlab), with the case's",
        "description, max_entries, PYTORCH_ALLOC_CONF, seed, torch version, device and total memory, and",
        "`step_marks`: at each step's start and at the end, the Unix time in microseconds and the",
        "allocator's call counters, so the steps can be found in the trace. `record.log` says how each",
        "case went; `summary.json` is made from the files alone (`scripts/record_real_jobs.py --summarize DIR`).",
        "",
        "The lost-start runs' max_entries were chosen from each family's full run (same seed, same",
        "allocations): the smallest holds at least two of its longest steps, the largest half its trace.",
        "",
    ]
    for fam, (vals, total, per_step) in picks.items():
        if total is not None:
            lines.append(f"- {fam}: full trace {total} events, longest step {max(per_step[1:] or per_step or [0])} "
                         f"events; lost-start max_entries {vals}")
        else:
            lines.append(f"- {fam}: full run missing; lost-start max_entries fell back to {vals}")
    lines += [
        "",
        "| case | status | events | start lost | pool ids | reserved peak MiB | allocated peak MiB |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for case in sorted(set(results) | set(summary)):
        s = summary.get(case, {})
        lines.append(
            f"| {case} | {results.get(case, '-').split(':')[0]} | {s.get('trace_events', '-')} | "
            f"{s.get('start_lost', '-')} | {s.get('segment_pool_ids', '-')} | "
            f"{mib(s.get('reserved_bytes.all.peak'))} | {mib(s.get('allocated_bytes.all.peak'))} |"
        )
    lines += ["", "What each case does (from its JSON):", ""]
    for case in sorted(summary):
        try:
            with open(os.path.join(out, f"{case}.json")) as f:
                lines.append(f"- `{case}`: {json.load(f)['description']}")
        except (OSError, KeyError, ValueError):
            pass
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--jobs", type=int, default=6)
    ap.add_argument("--budget-s", type=float, default=240, help="no case starts after this many seconds")
    ap.add_argument("--child")
    ap.add_argument("--job")
    ap.add_argument("--max-entries", type=int)
    ap.add_argument("--summarize", action="store_true", help="only redo summary.json (and nothing else)")
    args = ap.parse_args()
    if args.child:
        return child(args)
    if args.summarize:
        for case, s in summarize(args.out).items():
            print(case, json.dumps(s))
        return
    os.makedirs(args.out, exist_ok=True)
    command = "python3 scripts/record_real_jobs.py " + " ".join(sys.argv[1:])
    t0 = time.time()
    machine_txt(args.out)
    runner = Runner(args.out, t0 + args.budget_s)
    picks = {}
    with ThreadPoolExecutor(args.jobs) as pool:
        # The compile case first (it is the slowest), then the full runs, then the rest.
        singles = dict(SINGLES)
        first = singles.pop("compile-reduce-overhead")
        futs = [pool.submit(runner.spawn, "compile-reduce-overhead", first[0], first[1], first[2], first[3])]
        full = {}
        for fam, (workload, conf, _) in FAMILIES.items():
            full[pool.submit(runner.spawn, f"{fam}-full", f"train_{workload}", conf, FULL_MAX_ENTRIES,
                             CASE_TIMEOUT_S)] = fam
        for name, (job, conf, max_entries, timeout) in singles.items():
            futs.append(pool.submit(runner.spawn, name, job, conf, max_entries, timeout))
        for fut in as_completed(list(full)):
            fam = full[fut]
            workload, conf, which = FAMILIES[fam]
            vals, total, per_step = family_values(args.out, fam)
            if which == "mid":
                vals = [vals[len(vals) // 2]]
            picks[fam] = (vals, total, per_step)
            for n in vals:
                futs.append(pool.submit(runner.spawn, f"{fam}-lost-{n}", f"train_{workload}", conf, n, CASE_TIMEOUT_S))
        for fut in futs:
            fut.result()
    print(f"all cases done in {time.time() - t0:.0f} s", flush=True)
    summary = summarize(args.out)
    write_readme(args.out, command, runner.results, picks, summary)
    print(f"summary written in {time.time() - t0:.0f} s", flush=True)
    for case, s in sorted(summary.items()):
        print(f"{case:32s} events={s.get('trace_events')} lost={s.get('start_lost')} pools={s.get('segment_pool_ids')} "
              f"reserved_peak={s.get('reserved_bytes.all.peak')} allocated_peak={s.get('allocated_bytes.all.peak')} "
              f"error={(s.get('error') or '')[:120]}", flush=True)


if __name__ == "__main__":
    main()
