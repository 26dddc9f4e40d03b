"""examples/ray_tune.py on a local Ray instance over several committed snapshots."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "reports" / "reference" / "h100" / "alloc-traces"

if os.environ.get("VRAMLAB_REQUIRE_RAY") != "1":
    # Ray's own temporary folder (/tmp/ray) imports as an empty namespace package from /tmp: only a
    # module with a file is Ray.
    spec = importlib.util.find_spec("ray")
    if spec is None or spec.origin is None:
        pytest.skip("Ray is not installed (CI installs it and sets VRAMLAB_REQUIRE_RAY=1)", allow_module_level=True)


def test_ray_tune_merges_a_folder_of_snapshots(tmp_path):
    folder = tmp_path / "fleet"
    folder.mkdir()
    for name in ["resnet18", "serve", "random"]:
        shutil.copy(RECORDINGS / name / "default.pickle.gz", folder / f"{name}.pickle.gz")
    out = tmp_path / "rows.json"
    grid = ["", "expandable_segments:True", "max_split_size_mb:128", "garbage_collection_threshold:0.8"]
    args = [sys.executable, str(ROOT / "examples" / "ray_tune.py"), str(folder), "--capacity", str(3 << 30)]
    args += ["--num-cpus", "2", "--json", str(out)] + [f"--grid={g}" for g in grid]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert sorted(r["setting"] for r in rows) == sorted(grid)
    assert all(r["snapshots"] == 3 for r in rows)
    # The merge is the per-snapshot results added up: check one against vramlab.tune directly.
    import vramlab

    expandable = next(r for r in rows if r["setting"] == "expandable_segments:True")
    direct = [
        next(x for x in vramlab.tune(folder / f"{n}.pickle.gz", capacity=3 << 30, grid=grid)["results"] if x["policy"].endswith("expandable_segments:True"))
        for n in ["resnet18", "serve", "random"]
    ]
    assert expandable["total_peak_reserved_bytes"] == sum(d["peak_reserved_bytes"] for d in direct)
    assert expandable["fits"] == sum(d["failed_allocs"] == 0 for d in direct)
    ranks = [(-r["fits"], r["worst_peak_reserved_bytes"]) for r in rows]
    assert ranks == sorted(ranks)
