"""Event by event: each workload traced by vramlab.trace beside its snapshot recorded on the H100
(reports/reference/h100/trace-workloads): which allocations the trace misses or adds, by size,
and where the sequences part. Run: python scripts/trace_compare.py [WORKLOAD ...]"""

import collections
import difflib
import gzip
import pathlib
import pickle
import sys
import warnings

import vramlab

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from trace_workloads import ALL  # noqa: E402

warnings.filterwarnings("ignore")


def allocations(events):
    return [e["size"] for e in events if e["action"] == "alloc"]


for name in sys.argv[1:] or list(ALL):
    recorded = pickle.load(gzip.open(ROOT / f"reports/reference/h100/trace-workloads/{name}-default.pickle.gz"))
    try:
        with vramlab.trace(gpu="h100") as t:
            ALL[name]("cuda")
        stopped = ""
    except vramlab.UnfollowedError as e:
        stopped = f" (the trace stopped: {e})"
    ours, theirs = allocations(t.snapshot()["device_traces"][0]), allocations(recorded["device_traces"][0])
    missing = collections.Counter(theirs) - collections.Counter(ours)
    added = collections.Counter(ours) - collections.Counter(theirs)
    matcher = difflib.SequenceMatcher(a=theirs, b=ours, autojunk=False)
    same = sum(block.size for block in matcher.get_matching_blocks())
    print(f"## {name}{stopped}\n")
    print(f"- allocations: recorded {len(theirs)}, traced {len(ours)}; {same} in the same order")
    show = lambda counts: ", ".join(f"{n} x {size:,} B" for size, n in sorted(counts.items(), key=lambda kv: -kv[0] * kv[1])[:8]) or "none"
    print(f"- recorded, not traced (largest first): {show(missing)}")
    print(f"- traced, not recorded: {show(added)}\n")
