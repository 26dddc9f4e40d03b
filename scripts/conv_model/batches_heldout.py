"""What vramlab.trace answered, before they were measured, for the convolutions of
reports/reference/h200/conv-workspaces/conv-batches-*-2026-11-30.jsonl.gz (common models' shapes at
224 and 32 pixels, at batch sizes no earlier run measured; scripts/measure_conv_timm.py): the
H200's table and the H100's as they were committed before (git show REV:...), then the fitted model
(conv_model.py, its channels-last trees for channels-last rows; of the measured kinds only), else
no workspace, as rules/convolution.py looks them up. Byte-exact and within 1 MiB per file,
direction and dtype, beside what no workspace at all would give.

    python scripts/conv_model/batches_heldout.py [REV] [PREFIX]
REV: the commit before the run (default HEAD); PREFIX: the files' (default conv-batches-; the
held-out models of 2026-11-30: conv-cl-heldout-, conv-nchw-heldout-)."""
import collections
import gzip
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "python"))
import build_conv_table  # noqa: E402
from vramlab._tracer.rules import conv_model  # noqa: E402
from vramlab._tracer.rules.convolution import measured_kind  # noqa: E402

REV = sys.argv[1] if len(sys.argv) > 1 else "HEAD"
PREFIX = sys.argv[2] if len(sys.argv) > 2 else "conv-batches-"


def committed_table(profile):
    blob = subprocess.run(["git", "-C", ROOT, "show", f"{REV}:python/vramlab/_tracer/rules/_conv_{profile}.json.gz"],
                          capture_output=True, check=True).stdout
    return json.loads(gzip.decompress(blob))["entries"]


before = {p: committed_table(p) for p in ("h200", "h100")}
folder = os.path.join(ROOT, "reports", "reference", "h200", "conv-workspaces")
MIB = 1 << 20
for name in sorted(n for n in os.listdir(folder) if n.startswith(PREFIX) and n.endswith(".jsonl.gz")):
    with gzip.open(os.path.join(folder, name), "rt") as f:
        rows = [json.loads(line) for line in f]
    measured = build_conv_table.entries(rows)
    tally = collections.defaultdict(lambda: [0, 0, 0, 0, 0])  # exact, within 1 MiB, rows; none's exact, within
    sources = collections.Counter()
    for key, value in measured.items():
        if key in before["h200"]:
            sources["already in the H200's table"] += 1
            continue
        layout, rest = ("channels_last", key.split("|", 1)[1]) if key.startswith("channels_last|") else ("", key)
        dtype, x, wt, stride, padding, dilation, groups = rest.split("|")
        n, c, h, w = map(int, x.split(","))
        k, _, r, s = map(int, wt.split(","))
        st, pad, dil = [int(v) for v in stride.split(",")], [int(v) for v in padding.split(",")], [int(v) for v in dilation.split(",")]
        if key in before["h100"]:
            answer, source = before["h100"][key][1:], "the H100's table"
        elif measured_kind(r, s, st, dil):
            fitted = conv_model.workspaces("h200", dtype, n, c, h, w, k, r, s, st, pad, dil, int(groups), channels_last=bool(layout))
            answer, source = ([v or 0 for v in fitted], "the fitted model") if fitted else ([0, 0, 0], "none")
        else:
            answer, source = [0, 0, 0], "none (kinds not measured)"
        sources[source] += 1
        for direction, got, true in zip(("forward", "input gradient", "weight gradient"), answer, value[1:]):
            t = tally[(dtype, direction)]
            t[0] += got == true
            t[1] += abs(got - true) <= MIB
            t[2] += 1
            t[3] += true == 0
            t[4] += true <= MIB
    print(f"{name}: {len(rows)} rows, {len(measured)} convolutions; answered from: "
          + ", ".join(f"{source} {count}" for source, count in sources.most_common()))
    for (dtype, direction), (exact, near, count, none_exact, none_near) in sorted(tally.items()):
        print(f"  {dtype:9} {direction:16} byte-exact {exact / count:6.1%}  within 1 MiB {near / count:6.1%}  ({count}); "
              f"none: {none_exact / count:6.1%}, {none_near / count:6.1%}")
