#!/usr/bin/env python3
"""What PyTorch does with a `large_segment_size_mb` smaller than a request (issue 22).

    python3 scripts/large_segment_check.py OUT.json

For each setting, in its own process: allocate requests between 1 and 10 MiB (the band whose
segments `large_segment_size` sizes), and record every segment PyTorch made (snapshot) and its
memory_stats. Nothing here borrows vramlab's model.
"""
import json
import os
import subprocess
import sys

SETTINGS = ["", "large_segment_size_mb:1", "large_segment_size_mb:2", "large_segment_size_mb:4",
            "large_segment_size_mb:6", "expandable_segments:True,large_segment_size_mb:2"]
SIZES_MIB = [1.5, 3, 5, 9.5]

CHILD = r'''
import json, sys, torch
sizes = json.loads(sys.argv[1])
torch.cuda.memory._record_memory_history(max_entries=100000, context=None)
keep = []
out = {"requests": []}
for mib in sizes:
    n = int(mib * (1 << 20))
    try:
        keep.append(torch.empty(n, dtype=torch.uint8, device="cuda"))
        out["requests"].append([n, "ok"])
    except Exception as e:
        out["requests"].append([n, f"{type(e).__name__}: {str(e)[:200]}"])
snap = torch.cuda.memory._snapshot()
out["segments"] = [[s["total_size"], s["segment_type"], [[b["size"], b["state"]] for b in s["blocks"]]] for s in snap["segments"]]
out["trace"] = [[e["action"], e["size"]] for e in snap["device_traces"][0] if e["action"] != "alloc" or True]
stats = torch.cuda.memory_stats()
out["reserved_peak"] = stats["reserved_bytes.all.peak"]
out["allocated_peak"] = stats["allocated_bytes.all.peak"]
out["settings_in_snapshot"] = snap.get("allocator_settings")
print(json.dumps(out))
'''

def main():
    results = {}
    for setting in SETTINGS:
        env = dict(os.environ, PYTORCH_ALLOC_CONF=setting)
        run = subprocess.run([sys.executable, "-c", CHILD, json.dumps(SIZES_MIB)], env=env,
                             capture_output=True, text=True, timeout=120)
        if run.returncode == 0:
            results[setting] = json.loads(run.stdout.strip().splitlines()[-1])
        else:
            results[setting] = {"error": run.stderr.strip().splitlines()[-1:] }
        print(setting, json.dumps(results[setting])[:400], flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump({"torch": __import__("torch").__version__, "results": results}, f, indent=1)

if __name__ == "__main__":
    main()
