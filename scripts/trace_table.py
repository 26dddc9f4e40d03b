"""The table of vramlab.trace against PyTorch's recorded peaks (README, docs/VALIDATION.md):
each workload of scripts/trace_workloads.py traced on this machine (no GPU needed) and replayed,
beside torch.cuda.memory_stats() recorded on the H100 (or, with --gpu and --recordings, another GPU). Run: python scripts/trace_table.py"""

import json
import pathlib
import sys
import warnings

import vramlab
from vramlab._tracer.recorder import unknown_peak

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from recorded_versions import warn as warn_versions  # noqa: E402
from trace_workloads import ALL, GROUPS  # noqa: E402

# `--holdout`, `--autocast`, `--sdpa`, `--sdpa-fp32`, `--scaler`, `--conv`, `--hf-masks`: that
# group of held-out workloads (committed before they were measured or traced); else the first.
WORKLOADS = GROUPS[""]
for flag in sys.argv[1:]:
    if flag.startswith("--") and flag[2:].replace("-", "_") in GROUPS:
        WORKLOADS = GROUPS[flag[2:].replace("-", "_")]

# `--recordings DIR`: compare with the recordings in DIR (another transformers version's, say)
# instead of reports/reference/h100/trace-workloads; the workloads without one there are left out.
RECORDINGS = ROOT / "reports/reference/h100/trace-workloads"
if "--recordings" in sys.argv:
    RECORDINGS = pathlib.Path(sys.argv[sys.argv.index("--recordings") + 1]).resolve()
    WORKLOADS = {n: f for n, f in WORKLOADS.items() if (RECORDINGS / f"{n}-default.json").exists()} or {
        n: f for n, f in ALL.items() if (RECORDINGS / f"{n}-default.json").exists()
    }

# `--gpu NAME`: trace for that GPU's profile (recordings made on it, given by --recordings).
GPU = sys.argv[sys.argv.index("--gpu") + 1] if "--gpu" in sys.argv else "h100"

warnings.filterwarnings("ignore")
warn_versions(RECORDINGS, sys.stdout)
print("| workload | setting | peak allocated: PyTorch / trace | peak reserved: PyTorch / trace |")
print("|---|---|---|---|")
mib = lambda b: f"{b / 2**20:,.1f} MiB"
for name, workload in WORKLOADS.items():
    try:
        with vramlab.trace(gpu=GPU) as t:
            workload("cuda")
    except vramlab.UnfollowedError as e:
        print(f"| {name} | both | refused: {str(e).split(': ', 1)[1].split(';')[0].split(' (')[0]} | |")
        continue
    except Exception as e:  # noqa: BLE001 (a tracer failure is a row of the table, not its end)
        print(f"| {name} | both | failed: {type(e).__name__}: {str(e).splitlines()[0][:120]} | |")
        continue
    for label, setting in [("default", ""), ("expandable", "expandable_segments:True")]:
        theirs = json.loads((RECORDINGS / f"{name}-{label}.json").read_text())["memory_stats"]
        ours = vramlab.replay(t.snapshot(), alloc_conf=setting)["results"][0]["pytorch_stats"]
        cells = []
        for key in ["allocated_bytes.all.peak", "reserved_bytes.all.peak"]:
            a, b = theirs[key], ours[key]
            cells.append(f"{mib(a)} / {mib(b)} ({b / a - 1:+.2%})" if a != b else f"{mib(a)} / exact")
        said = {"either way": " (said: not known)", "lower bound": " (said: at least)", "upper bound": " (said: at most)"}.get(unknown_peak(t.snapshot().get("vramlab_notes", [])), "")
        print(f"| {name} | {label} | {cells[0]}{said} | {cells[1]} |")
