"""Fits, from the design measurements of reports/reference/h100/recurrent (sweep.jsonl.gz and
random.jsonl.gz only; random3.jsonl.gz is held out), the estimate of cuDNN RNN's workspace that
vramlab/_tracer/rules/cudnn_rnn.py uses where the workspace is not derived: per group (mode,
float32 or 16-bit, cuDNN algorithm as RNN.cpp's get_algo picks it, training or inference), the
least-squares fit (weighted to relative error) of the workspace on a few products of the shape,
and the largest error of the fit on the group's rows relative to the estimate (the bound the trace's note gives).
Prints the table as the rule holds it:
    python scripts/fit_cudnn_rnn_workspace.py"""

import gzip
import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
from vramlab._tracer.rules.cudnn_rnn import MODE_OF, Shape, get_algo, workspace_features  # noqa: E402

FOLDER = pathlib.Path(__file__).resolve().parents[1] / "reports/reference/h100/recurrent"
ELEMENT = {"float32": 4, "float16": 2, "bfloat16": 2}


def shape(cfg, train):
    lengths = cfg.get("lengths") or []
    sizes = [sum(1 for n in lengths if n > t) for t in range(cfg["seq"])] if lengths else []
    return Shape(MODE_OF[cfg["mode"].lower()], ELEMENT[cfg["dtype"]], cfg["dtype"], cfg["input"], cfg["hidden"], cfg.get("proj", 0),
                 cfg["layers"], cfg["directions"], cfg["batch"], cfg["seq"], sizes, cfg.get("dropout", 0.0), train)


def training_workspace(events):
    """A training forward's workspace: allocated, then the reserve, then freed."""
    for k in range(len(events) - 2):
        if events[k][0] == "a" and events[k + 1][0] == "a" and events[k + 2][0] == "f" and events[k + 2][2] == events[k][2]:
            return events[k][1]
    raise ValueError("no workspace")


def freed_right_after(events):
    """The sizes of the blocks freed right after they were allocated (the workspaces)."""
    return [events[k][1] for k in range(len(events) - 1) if events[k][0] == "a" and events[k + 1][0] == "f" and events[k + 1][2] == events[k][2]]


def samples(names):
    groups = {}
    for name in names:
        for row in (json.loads(line) for line in gzip.open(FOLDER / name, "rt")):
            cfg = row.get("config")
            if not cfg or cfg.get("cell") or "error" in row:
                continue
            train, infer = shape(cfg, True), shape(cfg, False)
            forward = get_algo(train, True, 9, 0, 132)
            backward = get_algo(train, False, 9, 0, 132)
            width = "float32" if cfg["dtype"] == "float32" else "16-bit"
            got = [(forward, True, training_workspace(row["forward"]), train), (forward, False, freed_right_after(row["forward_eval"])[0], infer),
                   (backward, True, [w for w in freed_right_after(row["backward"]) if w > 8][0], train)]
            for algo, training, size, s in got:
                groups.setdefault((cfg["mode"].lower(), width, algo, training), []).append((workspace_features(s), size))
    return groups


def main():
    table = {}
    for key, rows in sorted(samples(("sweep.jsonl.gz", "random.jsonl.gz")).items()):
        x = np.array([f for f, _ in rows], float)
        y = np.array([w for _, w in rows], float)
        coef = np.linalg.lstsq(x / y[:, None], np.ones(len(y)), rcond=None)[0]
        # The bound the note gives is a fraction of the estimate: the largest error relative to it.
        fit = np.maximum(x @ coef, 1.0)
        error = float(np.max(np.abs(fit - y) / fit))
        if len(y) >= 20:
            table[key] = ([round(float(c), 4) for c in coef], round(error + 0.005, 2), len(y))
    print("WORKSPACE_FIT = {")
    for key, value in table.items():
        print(f"    {key!r}: {value!r},")
    print("}")


if __name__ == "__main__":
    main()
