"""The fitted convolution model (python/vramlab/_tracer/rules/conv_model.py, as committed before
the timm measurements) against the timm convolutions measured on the H200 after it
(reports/reference/h200/conv-workspaces/conv-timm-*.jsonl.gz; scripts/measure_conv_timm.py): held
out, byte-exact and within 1 MiB per direction and dtype, and, for the convolutions both GPUs'
tables hold, how often the H100's measured workspaces equal the H200's.

    python scripts/conv_model/timm_heldout.py"""
import collections
import gzip
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "python", "vramlab", "_tracer", "rules"))
import build_conv_table  # noqa: E402
import conv_model  # noqa: E402

folder = os.path.join(ROOT, "reports", "reference", "h200", "conv-workspaces")
rows = []
for name in sorted(os.listdir(folder)):
    if name.startswith("conv-timm-") and name.endswith(".jsonl.gz"):
        with gzip.open(os.path.join(folder, name), "rt") as f:
            rows += [json.loads(line) for line in f]
timm = build_conv_table.entries(rows)
print(f"{len(rows)} rows, {len(timm)} distinct convolutions, {sum('error' in r for r in rows)} failed")

tally = collections.defaultdict(lambda: [0, 0, 0, 0])  # (dtype, direction): exact, within 1 MiB, unknown, rows
depthwise = 0
for key, (backend, *measured) in timm.items():
    dtype, x, w, stride, padding, dilation, groups = key.split("|")
    n, c, h, wd = map(int, x.split(","))
    k, cg, r, s = map(int, w.split(","))
    groups = int(groups)
    pair = lambda v: [int(p) for p in v.split(",")]  # noqa: E731
    got = conv_model.workspaces("h200", dtype, n, c, h, wd, k, r, s, pair(stride), pair(padding), pair(dilation), groups)
    for direction, actual, predicted in zip(("forward", "input gradient", "weight gradient"), measured, got or (None,) * 3):
        t = tally[(dtype, direction)]
        t[3] += 1
        if predicted is None:
            t[2] += 1
        else:
            t[0] += predicted == actual
            t[1] += abs(predicted - actual) <= 1 << 20
print("\nThe fitted model on them, held out (h200): byte-exact / within 1 MiB / unknown, of rows")
for direction in ("forward", "input gradient", "weight gradient"):
    total = [sum(tally[(d, direction)][i] for d in ("bfloat16", "float16", "float32")) for i in range(4)]
    per = ", ".join(f"{d} {tally[(d, direction)][0] / tally[(d, direction)][3]:.1%}" for d in ("bfloat16", "float16", "float32"))
    print(f"  {direction}: {total[0] / total[3]:.1%} / {total[1] / total[3]:.1%} / {total[2] / total[3]:.1%} of {total[3]} ({per})")

h100 = build_conv_table.build("h100")["entries"]
shared = [k for k in timm if k in h100]
same = sum(timm[k] == h100[k] for k in shared)
print(f"\nMeasured on both GPUs: {len(shared)} of these convolutions; the H100's workspaces equal the H200's on {same} ({same / max(1, len(shared)):.1%})")
