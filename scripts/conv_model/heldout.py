"""The conv workspace model (python/vramlab/_tracer/rules/conv_model.py, committed in 78caa6e)
against the shapes scripts/measure_conv_more.py measured on the H100 after it was committed
(reports/reference/h100/conv-workspaces/more-2026-11-27.jsonl.gz): byte-exact hits per direction,
for the random held-out shapes the model claims (NCHW, not transposed, benchmark off) and, as
extrapolation, for the transposed and channels-last rows; and the 1-d and 3-d convolutions
scripts/measure_conv1d.py and measure_conv3d.py measured first and kept out of every fit
(conv1d-heldout, conv3d-heldout). Run: python scripts/conv_model/heldout.py"""

import collections
import gzip
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "python", "vramlab", "_tracer", "rules"))
from build_conv_table import scratch  # noqa: E402
import conv_model  # noqa: E402

MEASURED = os.path.join(ROOT, "reports", "reference", "h100", "conv-workspaces", "more-2026-11-27.jsonl.gz")


def measured_workspaces(row):
    forward = sum(size for _, size in scratch(row["forward"]))
    backward = scratch(row["backward"])
    return (forward, sum(s for n, s in backward if n == 1), sum(s for n, s in backward if n == 2))


def main():
    tally = collections.defaultdict(lambda: [[0, 0, 0], [0, 0, 0], 0, [0, 0, 0]])
    for line in gzip.open(MEASURED, "rt"):
        row = json.loads(line)
        if "error" in row or not row["backend"].endswith(("Cudnn", "CudnnTranspose", "CudaDepthwise2d")):
            continue
        c, h, w, k, r, s, stride, padding, dilation, groups = row["shape"]
        tally_row(tally, row, c, h, w, k, r, s, stride, padding, dilation, groups)
    # The 1-d and 3-d convolutions scripts/measure_conv1d.py and measure_conv3d.py measured first
    # and kept out of every fit.
    for name, group in (("conv1d-2026-11-28.jsonl.gz", "conv1d-heldout"), ("conv3d-2026-11-28.jsonl.gz", "conv3d-heldout")):
        for line in gzip.open(os.path.join(os.path.dirname(MEASURED), name), "rt"):
            row = json.loads(line)
            if "error" in row or row["group"] != group:
                continue
            if row["dims"] == 3:
                c, d, h, w, k, t, r, s, stride, padding, dilation, groups = row["shape"]
                predicted = conv_model.workspaces_3d("h100", row["dtype"], row["n"], c, d, h, w, k, t, r, s, stride, padding, dilation, groups)
                count(tally[f"{group} / 3-d"], predicted, measured_workspaces(row))
            else:
                c, h, w, k, r, s, stride, padding, dilation, groups = row["shape"]
                predicted = conv_model.workspaces("h100", row["dtype"], row["n"], c, h, w, k, r, s, stride, padding, dilation, groups)
                count(tally[f"{group} / 1-d"], predicted, measured_workspaces(row))
    report(tally)


def count(entry, predicted, truth):
    entry[2] += 1
    for i in range(3):
        entry[3][i] += truth[i] == 0
        answered = predicted is not None and predicted[i] is not None
        entry[1][i] += answered
        entry[0][i] += answered and predicted[i] == truth[i]


def tally_row(tally, row, c, h, w, k, r, s, stride, padding, dilation, groups):
    if True:
        kind = "transposed" if row["transposed"] else ("channels-last" if row["channels_last"] else "NCHW")
        if row["benchmark"]:
            kind += ", benchmark on"
        extrapolate = kind != "NCHW"
        group = f"{row['group']} / {kind}"
        predicted = conv_model.workspaces(
            "h100", row["dtype"], row["n"], c, h, w, k, r, s, stride, padding, dilation, groups,
            transposed=row["transposed"], channels_last=row["channels_last"], extrapolate=extrapolate,
        )
        count(tally[group], predicted, measured_workspaces(row))


def report(tally):
    print("Each cell: byte-exact / answered by the model; in brackets, rows a workspace of 0 (the tracer's")
    print("answer without the model) would get right.")
    print()
    print("| shapes (group / kind) | rows | forward | input gradient | weight gradient |")
    print("|---|---|---|---|---|")
    for group, (hits, answered, rows, zeros) in sorted(tally.items()):
        cells = " | ".join(f"{hits[i]} / {answered[i]} ({zeros[i]})" for i in range(3))
        print(f"| {group} | {rows} | {cells} |")


if __name__ == "__main__":
    main()
