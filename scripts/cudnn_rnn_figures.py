"""Recomputes, from the committed measurements (reports/reference/h100/recurrent), the figures
its README gives for cuDNN RNN's reserve and workspace, and which parts of them hold. No GPU needed:
    python scripts/cudnn_rnn_figures.py"""

import gzip
import json
import pathlib

FOLDER = pathlib.Path(__file__).resolve().parents[1] / "reports/reference/h100/recurrent"
ELEMENT = {"float32": 4, "float16": 2, "bfloat16": 2}
GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}
# Reserve units of H per layer: the gates plus what else each layer keeps (from the sweeps).
PER_LAYER = {"LSTM": 6, "GRU": 7, "RNN_TANH": 2, "RNN_RELU": 2}
MiB = 1 << 20


def rows(name):
    return [json.loads(line) for line in gzip.open(FOLDER / name, "rt")][1:]


def forward_sizes(events):
    """(workspace, reserve) of a training forward: the largest allocation freed inside the call,
    and the first allocation after it that outlives the call."""
    live, allocs = {}, []
    for i, (action, size, addr) in enumerate(events):
        if action == "a":
            live[addr] = len(allocs)
            allocs.append([i, size, None])
        elif addr in live:
            allocs[live.pop(addr)][2] = i
    freed = [a for a in allocs if a[2] is not None]
    if not freed:
        return None, None
    workspace = max(freed, key=lambda a: a[1])
    kept = [a for a in allocs if a[0] > workspace[0] and a[2] is None]
    return workspace[1], kept[0][1] if kept else None


def eval_workspace(events):
    sizes = [a[1] for a in events if a[0] == "f"]
    return max(sizes) if sizes else None


def standard_algorithm(cfg):
    """PyTorch's get_algo (aten/src/ATen/native/cudnn/RNN.cpp) for the forward: the standard
    algorithm, as opposed to the persistent ones."""
    if cfg.get("proj"):
        return True
    if cfg.get("lengths"):
        return True
    small = 384 if cfg["mode"].startswith("RNN") else 192
    if cfg["hidden"] <= small:
        return False
    if cfg["dtype"] == "float16":
        b, h = cfg["batch"], cfg["hidden"]
        common = cfg["layers"] == 1 and cfg["directions"] == 1 and h <= 1024 and h % 128 == 0 and cfg["input"] % 128 == 0
        device = cfg["mode"] != "GRU" and b % 8 == 0 and b <= 128 and (cfg["mode"] == "LSTM" or b < 96 or h < 896)
        return not (common and device)
    return True


def lstm_float32_inference_workspace(cfg):
    """The structure the one-at-a-time sweeps show for a float32 unidirectional LSTM in the
    standard algorithm (the README: not cuDNN's rule)."""
    b, t, h, i, layers = cfg["batch"], cfg["seq"], cfg["hidden"], cfg["input"], cfg["layers"]
    gates = 16 * h * b * min(t, 256)
    copy = 4 * b * t * i
    outputs = 4 * b * t * h * (layers - 1)
    weights = 4 * (4 * h * i + 4 * h * h + (layers - 1) * 8 * h * h)
    return gates + copy + outputs + weights + 40 * b * h * layers + 8 * MiB + 512 + 4 * MiB * layers


def main():
    sweep, drawn = rows("sweep.jsonl.gz"), rows("random.jsonl.gz") + rows("random3.jsonl.gz")
    layers = [r for r in sweep + rows("random.jsonl.gz") if "forward" in r and not r["config"].get("cell")]
    total = within = exact = standard = standard_within = 0
    for r in layers:
        cfg = r["config"]
        if cfg.get("lengths") or cfg.get("proj"):
            continue
        _, reserve = forward_sizes(r["forward"])
        b, t, h, d, n = cfg["batch"], cfg["seq"], cfg["hidden"], cfg["directions"], cfg["layers"]
        rest = reserve - 256 - (PER_LAYER[cfg["mode"]] * n - 1) * b * t * d * h * ELEMENT[cfg["dtype"]]
        total += 1
        within += abs(rest) <= 64
        exact += rest == 0
        if standard_algorithm(cfg):
            standard += 1
            standard_within += abs(rest) <= 64
    print(f"reserve: {within:,} of {total:,} unpacked rows without projections within 64 B ({exact:,} exact); "
          f"{standard_within:,} of {standard:,} in the standard algorithm")

    def in_regime(cfg):
        return (cfg["mode"] == "LSTM" and cfg["dtype"] == "float32" and cfg["directions"] == 1 and not cfg.get("cell")
                and not cfg.get("lengths") and not cfg.get("proj") and cfg["hidden"] > 192)

    plain = [r for r in sweep if in_regime(r["config"]) and not r["config"].get("batch_first") and not r["config"].get("dropout")]
    fit = sum(abs(eval_workspace(r["forward_eval"]) - lstm_float32_inference_workspace(r["config"])) < 512 for r in plain)
    print(f"workspace structure: {fit} of {len(plain)} sweep rows (float32 LSTM, one direction, H > 192, plain input)")
    random = [r for r in drawn if "forward_eval" in r and in_regime(r["config"])]
    fit = sum(abs(eval_workspace(r["forward_eval"]) - lstm_float32_inference_workspace(r["config"])) < 512 for r in random)
    print(f"workspace structure: {fit} of {len(random)} randomly drawn rows of the same regime")


if __name__ == "__main__":
    main()
