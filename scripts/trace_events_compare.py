"""Event by event, with frees: each named workload traced by vramlab.trace beside its default-setting
recording on the H100 (reports/reference/h100/trace-workloads), every allocation and completed
free in order. Prints, per workload, the recording's and the trace's event counts and how many
stretches differ (0: the trace is the GPU's event for event), with the first three differences.
Run: python scripts/trace_events_compare.py WORKLOAD [WORKLOAD ...]"""

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


def events(trace):
    return [(e["action"], e["size"]) for e in trace if e["action"] in ("alloc", "free_completed")]


for name in sys.argv[1:]:
    recorded = pickle.load(gzip.open(ROOT / f"reports/reference/h100/trace-workloads/{name}-default.pickle.gz"))
    try:
        with vramlab.trace(gpu="h100") as t:
            ALL[name]("cuda")
    except vramlab.UnfollowedError as e:
        print(name, "refused:", str(e).split(": ", 1)[-1].split(";")[0])
        continue
    theirs, ours = events(recorded["device_traces"][0]), events(t.snapshot()["device_traces"][0])
    stretches = [op for op in difflib.SequenceMatcher(a=theirs, b=ours, autojunk=False).get_opcodes() if op[0] != "equal"]
    print(name, len(theirs), len(ours), len(stretches), [(op[0], theirs[op[1]:op[2]][:3], ours[op[3]:op[4]][:3]) for op in stretches[:3]], flush=True)
