#!/usr/bin/env python3
"""Choose one PYTORCH_ALLOC_CONF for a fleet: vramlab.tune over a folder of snapshots, with Ray.

Each snapshot is tuned on its own (the work is independent), as a Ray task; the results are
merged into one table: for every setting, on how many snapshots it fits under the cap, and the
peak reserved memory it needs (total and worst). Settings that fit everywhere come first.

    python examples/ray_tune.py SNAPSHOT_DIR --capacity 3391687756            # a local Ray instance
    python examples/ray_tune.py SNAPSHOT_DIR --capacity 3391687756 --address auto   # a running cluster

On a real cluster: install vramlab (`pip install .` from this repository, or the wheel) on every
node, start the cluster (`ray start --head` on one node, `ray start --address=HEAD:6379` on the
others), put the snapshots where every node can read them (a shared file system or object
store mounted at the same path), and run this script on the head node with `--address auto`.
Ray schedules one task per snapshot across the nodes; each task uses one core.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import ray

import vramlab


@ray.remote(num_cpus=1)
def tune_one(path: str, capacity: Optional[int], grid: Optional[List[str]]) -> Dict[str, Any]:
    """One snapshot's ranked settings (the dict vramlab.tune returns, by setting)."""
    result = vramlab.tune(path, capacity=capacity, grid=grid)
    return {
        "snapshot": path,
        "settings": {
            r["policy"].removeprefix("PYTORCH_ALLOC_CONF="): {
                "fits": r["failed_allocs"] == 0,
                "peak_reserved_bytes": r["peak_reserved_bytes"],
                "min_capacity_bytes": r["min_capacity_bytes"],
            }
            for r in result["results"]
        },
    }


def merge(per_snapshot: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One row per setting that every snapshot was tuned under, ranked for a fleet."""
    common = set.intersection(*(set(s["settings"]) for s in per_snapshot))
    rows = []
    for setting in common:
        cells = [s["settings"][setting] for s in per_snapshot]
        rows.append(
            {
                "setting": setting,
                "fits": sum(c["fits"] for c in cells),
                "snapshots": len(cells),
                "total_peak_reserved_bytes": sum(c["peak_reserved_bytes"] for c in cells),
                "worst_peak_reserved_bytes": max(c["peak_reserved_bytes"] for c in cells),
                "worst_min_capacity_bytes": max((c["min_capacity_bytes"] or 0) for c in cells),
            }
        )
    rows.sort(key=lambda r: (-r["fits"], r["worst_peak_reserved_bytes"], r["setting"]))
    return rows


def table(rows: List[Dict[str, Any]]) -> str:
    gib = lambda b: f"{b / 2**30:.2f} GiB"
    lines = [
        "| rank | fits | worst peak reserved | total peak reserved | smallest cap for all | PYTORCH_ALLOC_CONF |",
        "|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(rows, 1):
        lines.append(
            f"| {i} | {r['fits']}/{r['snapshots']} | {gib(r['worst_peak_reserved_bytes'])} | "
            f"{gib(r['total_peak_reserved_bytes'])} | {gib(r['worst_min_capacity_bytes'])} | `{r['setting'] or '(defaults)'}` |"
        )
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, help="a folder of snapshots (.pickle, .pickle.gz), searched recursively")
    ap.add_argument("--capacity", type=int, help="the cap every job must fit under, in bytes")
    ap.add_argument("--grid", action="append", help="a setting to try (repeatable; default: vramlab's grid)")
    ap.add_argument("--address", help="a Ray cluster to join ('auto' for the running one); default: start a local one")
    ap.add_argument("--num-cpus", type=int, help="CPUs of a local Ray instance")
    ap.add_argument("--json", type=Path, help="also write the merged rows here")
    args = ap.parse_args(argv)

    snapshots = sorted(str(p) for p in args.folder.rglob("*") if p.name.endswith((".pickle", ".pickle.gz")))
    if not snapshots:
        print(f"{args.folder}: no snapshots (.pickle, .pickle.gz)", file=sys.stderr)
        return 1
    ray.init(address=args.address, num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        per_snapshot = ray.get([tune_one.remote(p, args.capacity, args.grid) for p in snapshots])
    finally:
        ray.shutdown()
    rows = merge(per_snapshot)
    print(f"{len(snapshots)} snapshots, {len(rows)} settings, cap {args.capacity if args.capacity else 'none'}")
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps({"snapshots": snapshots, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
