#!/usr/bin/env python3
"""Checks vramlab's snapshot exports with PyTorch's own torch.cuda._memory_viz (needs torch).

    python3 scripts/check_memory_viz.py OUT_DIR EXPORT.pickle[=REPLAY.json] ...

For each export: trace_plot and segment_plot (the HTML viewers) build, the text views segsum
and trace run (segsum asserts every segment's blocks add up), and the peaks read off the
export's own device_traces equal the replay's figures in REPLAY.json (vramlab replay --json):
reserved from segment_alloc/free/map/unmap, allocated from alloc and free_requested, as
PyTorch counts them. Writes OUT_DIR/memory_viz-check.json and the HTML of each.
"""
import json
import os
import pickle
import sys

import torch
from torch.cuda import _memory_viz as viz


def peaks(snapshot):
    reserved = allocated = peak_reserved = peak_allocated = 0
    live = {}
    for e in snapshot["device_traces"][0]:
        a = e["action"]
        if a in ("segment_alloc", "segment_map"):
            reserved += e["size"]
        elif a in ("segment_free", "segment_unmap"):
            reserved -= e["size"]
        elif a == "alloc":
            live[e["addr"]] = e["size"]
            allocated += e["size"]
        elif a == "free_requested":
            allocated -= live.pop(e["addr"])
        peak_reserved = max(peak_reserved, reserved)
        peak_allocated = max(peak_allocated, allocated)
    return peak_reserved, peak_allocated


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    report = {"torch": torch.__version__, "checks": []}
    for arg in sys.argv[2:]:
        path, _, replay_json = arg.partition("=")
        with open(path, "rb") as f:
            snapshot = pickle.load(f)
        name = os.path.basename(path)
        check = {"export": name}
        html = viz.trace_plot(snapshot)
        with open(os.path.join(out, name + ".trace.html"), "w") as f:
            f.write(html)
        check["trace_plot_bytes"] = len(html)
        check["segment_plot_bytes"] = len(viz.segment_plot(snapshot))
        check["segsum_first_line"] = viz.segsum(snapshot).splitlines()[0]
        check["trace_lines"] = len(viz.trace(snapshot).splitlines())
        reserved, allocated = peaks(snapshot)
        check["peak_reserved_from_trace"] = reserved
        check["peak_requested_from_trace"] = allocated
        if replay_json:
            with open(replay_json) as f:
                result = json.load(f)["results"][0]
            check["replay_peak_reserved"] = result["peak_reserved_bytes"]
            check["replay_peak_requested"] = result["peak_requested_bytes"]
            check["agree"] = (reserved, allocated) == (result["peak_reserved_bytes"], result["peak_requested_bytes"])
        report["checks"].append(check)
        print(json.dumps(check))
    with open(os.path.join(out, "memory_viz-check.json"), "w") as f:
        json.dump(report, f, indent=1)
    bad = [c for c in report["checks"] if c.get("agree") is False]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
