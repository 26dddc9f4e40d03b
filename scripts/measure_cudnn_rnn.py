"""Measures, on a GPU, every allocation and free the caching allocator sees while PyTorch's
recurrent layers run: nn.LSTM, nn.GRU and nn.RNN (cuDNN RNN) and their cells, for a list of
shapes. For each it records, in order, the events of moving the module to the GPU (the flat
weight buffer), of a training forward, of its backward, and of an inference forward under
no_grad; sizes are the bytes PyTorch asked for. Writes JSON lines, one per configuration.

The configurations are either a seeded random draw (--random N --seed S, only cells with
--cells; --autocast: float32 layers under autocast), sweeps of one dimension at a time around a
few bases (--sweep), or a list given as JSON lines (--configs F).
Run on a GPU machine:
    python scripts/measure_cudnn_rnn.py OUT.jsonl [--sweep] [--random N --seed S [--cells]]
        [--configs CONFIGS.jsonl] [--seconds S]"""

import json
import random
import sys
import time

import torch
from torch import nn

from allocator_events import events_during  # noqa: F401 (the tests replace it here)

MODES = ("LSTM", "GRU", "RNN_TANH", "RNN_RELU")
DTYPES = ("float32", "float16", "bfloat16")


def build(cfg):
    kind = cfg["mode"]
    common = dict(num_layers=cfg["layers"], bidirectional=cfg["directions"] == 2,
                  batch_first=cfg.get("batch_first", False), dropout=cfg.get("dropout", 0.0))
    if kind == "LSTM":
        return nn.LSTM(cfg["input"], cfg["hidden"], proj_size=cfg.get("proj", 0), **common)
    if kind == "GRU":
        return nn.GRU(cfg["input"], cfg["hidden"], **common)
    return nn.RNN(cfg["input"], cfg["hidden"], nonlinearity="tanh" if kind == "RNN_TANH" else "relu", **common)


def build_cell(cfg):
    kind = cfg["mode"]
    if kind == "LSTM":
        return nn.LSTMCell(cfg["input"], cfg["hidden"])
    if kind == "GRU":
        return nn.GRUCell(cfg["input"], cfg["hidden"])
    return nn.RNNCell(cfg["input"], cfg["hidden"], nonlinearity="tanh" if kind == "RNN_TANH" else "relu")


def measure(cfg):
    dtype = getattr(torch, cfg["dtype"])
    row = {"config": cfg}
    if cfg.get("cell"):
        module, row["to_device"] = events_during(lambda: build_cell(cfg).to("cuda", dtype))
        x = torch.randn(cfg["batch"], cfg["input"], device="cuda", dtype=dtype)
        out, row["forward"] = events_during(lambda: module(x))
        first = out[0] if isinstance(out, tuple) else out
        _, row["backward"] = events_during(lambda: first.float().sum().backward())
        return row
    torch.manual_seed(0)
    module, row["to_device"] = events_during(lambda: build(cfg).to("cuda", dtype))
    t, b, i = cfg["seq"], cfg["batch"], cfg["input"]
    x = torch.randn(*((b, t, i) if cfg.get("batch_first") else (t, b, i)), device="cuda", dtype=dtype)
    lengths = cfg.get("lengths")
    if lengths:
        x = nn.utils.rnn.pack_padded_sequence(x, torch.tensor(lengths), batch_first=cfg.get("batch_first", False))
    module.train()

    def forward():
        # "autocast": a float32 layer run under torch.autocast("cuda", dtype) (AutocastRNN.cpp).
        if cfg.get("autocast"):
            with torch.autocast("cuda", dtype=getattr(torch, cfg["autocast"])):
                return module(x)
        return module(x)

    out, row["forward"] = events_during(forward)
    y = out[0].data if lengths else out[0]
    grad = torch.ones_like(y)
    _, row["backward"] = events_during(lambda: y.backward(grad))
    del out, y, grad
    module.zero_grad(set_to_none=True)
    module.eval()
    with torch.no_grad():
        _, row["forward_eval"] = events_during(forward)
    return row


def est_bytes(cfg):
    elt = 4 if cfg["dtype"] == "float32" else 2
    return cfg["layers"] * cfg["directions"] * cfg["seq"] * cfg["batch"] * max(cfg["hidden"], cfg["input"]) * 12 * elt


def log_uniform(rng, lo, hi):
    return int(round(lo * (hi / lo) ** rng.random()))


def random_configs(n, seed, cells_only=False):
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        mode = rng.choice(MODES)
        hidden = log_uniform(rng, 1, 2048)
        if rng.random() < 0.5:
            hidden = max(8, hidden // 8 * 8)
        cfg = {
            "mode": mode, "dtype": rng.choice(DTYPES + ("float32",)), "input": log_uniform(rng, 1, 2048),
            "hidden": hidden, "layers": rng.randint(1, 4), "directions": rng.choice((1, 2)),
            "batch": log_uniform(rng, 1, 512), "seq": log_uniform(rng, 1, 1024),
        }
        if mode == "LSTM" and hidden > 1 and rng.random() < 0.25:
            cfg["proj"] = rng.randint(1, hidden - 1)
        if rng.random() < 0.2:
            cfg["batch_first"] = True
        if cfg["layers"] > 1 and rng.random() < 0.15:
            cfg["dropout"] = 0.1
        if rng.random() < 0.1 and cfg["batch"] > 1:
            cfg["lengths"] = sorted((rng.randint(1, cfg["seq"]) for _ in range(cfg["batch"] - 1)), reverse=True)
            cfg["lengths"].insert(0, cfg["seq"])
        if cells_only or rng.random() < 0.1:
            cfg = {k: cfg[k] for k in ("mode", "dtype", "input", "hidden", "batch")} | {"cell": True}
            cfg.update(layers=1, directions=1, seq=1)
        if est_bytes(cfg) > 6e9:
            continue
        out.append(cfg)
    return out


def sweep_configs():
    out = []
    for mode in MODES:
        for dtype in ("float32", "float16"):
            base = {"mode": mode, "dtype": dtype, "input": 256, "hidden": 512, "layers": 2, "directions": 1,
                    "batch": 32, "seq": 64}
            for key, values in (
                ("batch", list(range(1, 41)) + [48, 63, 64, 65, 96, 127, 128, 129, 192, 256, 384, 512]),
                ("seq", list(range(1, 21)) + [31, 32, 33, 50, 64, 100, 128, 200, 256, 512, 1000]),
                ("hidden", [1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 96, 100, 127, 128, 129,
                            160, 192, 200, 255, 256, 257, 300, 384, 500, 511, 512, 513, 640, 768, 1000, 1024,
                            1025, 1536, 2048]),
                ("input", [1, 2, 3, 8, 16, 17, 64, 100, 128, 255, 256, 257, 512, 513, 1000, 1024, 2048]),
                ("layers", [1, 2, 3, 4, 6]),
                ("directions", [1, 2]),
            ):
                for v in values:
                    out.append(base | {key: v})
            if mode == "LSTM":
                for p in (1, 64, 128, 256, 511):
                    out.append(base | {"proj": p})
    return out


def main():
    sink = open(sys.argv[1], "w")
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 1e9
    jobs = []
    if "--configs" in sys.argv:
        jobs += [json.loads(line) for line in open(sys.argv[sys.argv.index("--configs") + 1]) if line.strip()]
    if "--sweep" in sys.argv:
        jobs += sweep_configs()
    if "--random" in sys.argv:
        seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else 0
        drawn = random_configs(int(sys.argv[sys.argv.index("--random") + 1]), seed, "--cells" in sys.argv)
        if "--autocast" in sys.argv:
            rng = random.Random(seed)
            drawn = [cfg | {"dtype": "float32", "autocast": rng.choice(("float16", "bfloat16"))} for cfg in drawn if not cfg.get("cell")]
        jobs += drawn
    meta = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
            "gpu": torch.cuda.get_device_name(), "capability": list(torch.cuda.get_device_capability()),
            "allow_tf32_cudnn": torch.backends.cudnn.allow_tf32}
    sink.write(json.dumps({"meta": meta}) + "\n")
    measure_each(jobs, measure, sink, seconds)


def measure_each(jobs, measure, sink, seconds):
    """Writes measure(cfg) for each configuration as a JSON line (an error, out of memory or
    another, as the row), until `seconds` have gone."""
    start = time.time()
    done = 0
    for cfg in jobs:
        if time.time() - start > seconds:
            break
        t = time.time()
        try:
            row = measure(cfg)
        except torch.OutOfMemoryError:
            row = {"config": cfg, "error": "out of memory"}
        except RuntimeError as e:
            row = {"config": cfg, "error": str(e).splitlines()[0][:200]}
        row["seconds"] = round(time.time() - t, 4)
        sink.write(json.dumps(row) + "\n")
        sink.flush()
        done += 1
        torch.cuda.empty_cache()
    print(f"{done} of {len(jobs)} measured in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
