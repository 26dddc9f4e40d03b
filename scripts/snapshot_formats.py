#!/usr/bin/env python3
"""Writes the same real snapshot in the shapes older PyTorch versions gave it (issue 21).

    python3 scripts/snapshot_formats.py reports/reference/h100/real-jobs/two-streams.pickle.gz tests/traces/formats

torch 2.0 wrote `segments` and `device_traces` only: blocks carried a `history` list instead of
`address` and `frames`, segments no `segment_pool_id` or `is_expandable`, events no `time_us`.
2.1 added `address`, `frames`, `segment_pool_id`, `is_expandable` (and segment_map/unmap);
2.2 `time_us`; 2.3 `allocator_settings`; 2.5 `external_annotations`; 2.8 `compile_context`.
Each shape keeps the recording's own events and segments, so every one must replay to the same
figures (the facts come from PyTorch's torch/cuda/memory.py and _memory_viz.py of each release).
"""
import gzip
import pickle
import sys
from pathlib import Path

DROP_EVENT = {"2.0": {"time_us", "compile_context", "frames", "user_metadata"},
              "2.2": {"compile_context", "user_metadata"},
              "2.5": {"compile_context", "user_metadata"}}


def shape(snapshot, version):
    out = {}
    segments = []
    for seg in snapshot["segments"]:
        seg = dict(seg)
        if version == "2.0":
            seg.pop("segment_pool_id", None)
            seg.pop("is_expandable", None)
            blocks = []
            for block in seg["blocks"]:
                block = dict(block)
                address = block.pop("address")
                block.pop("frames", None)
                block["history"] = [{"addr": address, "real_size": block.get("requested_size", block["size"]), "frames": []}]
                blocks.append(block)
            seg["blocks"] = blocks
        segments.append(seg)
    out["segments"] = segments
    out["device_traces"] = [
        [{k: v for k, v in e.items() if k not in DROP_EVENT[version]} for e in trace]
        for trace in snapshot["device_traces"]
    ]
    if version == "2.5":
        out["allocator_settings"] = snapshot.get("allocator_settings")
        out["external_annotations"] = snapshot.get("external_annotations", [])
    return out


def main():
    source, folder = Path(sys.argv[1]), Path(sys.argv[2])
    snapshot = pickle.load(gzip.open(source))
    folder.mkdir(parents=True, exist_ok=True)
    for version in DROP_EVENT:
        name = folder / f"torch-{version}.pickle.gz"
        with gzip.open(name, "wb") as f:
            pickle.dump(shape(snapshot, version), f, protocol=4 if version != "2.0" else 2)
        print(name)


if __name__ == "__main__":
    main()
