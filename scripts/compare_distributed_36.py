"""Issue 36's traced ranks against their GPU recordings: for each recording
DIR/<workload>/rank{r}-{setting}.json (scripts/record_distributed.py), the workload is traced for
that rank and world size (scripts/trace_workloads_36.py), replayed under the recording's allocator
setting, and PyTorch's peak allocated and reserved compared; the memory outside the caching
allocator (CUDA context, NCCL) that the driver saw is listed beside them, as a trace cannot see it.

    python scripts/compare_distributed_36.py DIR [--only NAME,...] [--workloads MODULE | --scripts DIR] [--gpu NAME] [--events]

With --scripts, each workload is a torchrun script of that folder, traced as its user would trace it:
`python -m vramlab.trace --gpu NAME --nproc N --out FOLDER SCRIPT`, whose table says which ranks
traced to their end; a rank that did not is a refused row, with the first line of its error.

Prints a Markdown table (MiB; differences in percent of the GPU's figure)."""

import argparse
import json
import os
import pathlib
import pickle
import re
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--only", default="")
    parser.add_argument("--workloads", default="trace_workloads_36", help="the module of scripts/ holding ALL")
    parser.add_argument("--scripts", default="", help="a folder of torchrun scripts, each traced by the command line")
    parser.add_argument("--gpu", default="h100", help="the GPU the recordings were made on")
    parser.add_argument("--events", action="store_true", help="also compare each rank's events with its default-setting recording's, one by one")
    options = parser.parse_args()
    sys.path.insert(0, str(HERE))
    import importlib

    import vramlab

    from recorded_versions import warn as warn_versions

    ALL = {} if options.scripts else importlib.import_module(options.workloads).ALL
    warn_versions(options.folder, sys.stdout)
    scratch = tempfile.mkdtemp(prefix="compare36-")

    only = set(filter(None, options.only.split(",")))
    rows = []
    traces = {}
    largest = {}
    for path in sorted(pathlib.Path(options.folder).glob("*/rank*-*.json")):
        meta = json.loads(path.read_text())
        name, rank, ws = meta["workload"], meta["rank"], meta["world_size"]
        if only and name not in only:
            continue
        key = (name, ws, rank)
        if key not in traces and options.scripts:
            traces.update(traced_script(pathlib.Path(options.scripts) / f"{name}.py", name, ws, options.gpu, scratch))
        if key not in traces:
            try:
                with vramlab.trace(gpu=options.gpu, world_size=ws, rank=rank) as t:
                    ALL[name](rank, ws)
                traces[key] = t.snapshot()
            except Exception as e:  # noqa: BLE001 - a workload the trace refuses is a row too
                traces[key] = str(e).splitlines()[0][:120]
        snapshot = traces[key]
        stats = meta["memory_stats"]
        gpu_alloc, gpu_res = stats["allocated_bytes.all.peak"], stats["reserved_bytes.all.peak"]
        outside = meta["meminfo"]["outside_allocator_at_end"]
        if isinstance(snapshot, str):
            rows.append(f"| {name} | {ws} | {rank} | {meta['alloc_conf'] or 'default'} | {gpu_alloc / 2**20:,.1f} | refused: {snapshot} | | {gpu_res / 2**20:,.1f} | | | {outside / 2**20:,.0f} |")
            continue
        ours = vramlab.replay(snapshot, alloc_conf=meta["alloc_conf"] or "")["results"][0]["pytorch_stats"]
        a, r = ours["allocated_bytes.all.peak"], ours["reserved_bytes.all.peak"]
        largest.setdefault((name, ws, meta["alloc_conf"] or "default"), []).append((gpu_alloc, gpu_res, a, r))
        rows.append(
            f"| {name} | {ws} | {rank} | {meta['alloc_conf'] or 'default'} | {gpu_alloc / 2**20:,.1f} | {a / 2**20:,.1f} | {100 * (a - gpu_alloc) / gpu_alloc:+.2f}% "
            f"| {gpu_res / 2**20:,.1f} | {r / 2**20:,.1f} | {100 * (r - gpu_res) / gpu_res:+.2f}% | {outside / 2**20:,.0f} |"
        )
    print("| workload | ranks | rank | setting | GPU peak allocated | traced | diff | GPU peak reserved | traced | diff | outside the allocator (MiB) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    # The ranks as a set: which rank holds a little more can change from run to run on the GPU,
    # and the largest decides whether the job fits.
    print()
    print("| workload | ranks | setting | largest rank's GPU peak allocated | traced | diff | largest GPU peak reserved | traced | diff |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (name, ws, setting), ranks in largest.items():
        ga, gr = max(x[0] for x in ranks), max(x[1] for x in ranks)
        ta, tr = max(x[2] for x in ranks), max(x[3] for x in ranks)
        print(f"| {name} | {ws} | {setting} | {ga / 2**20:,.1f} | {ta / 2**20:,.1f} | {100 * (ta - ga) / ga:+.2f}% | {gr / 2**20:,.1f} | {tr / 2**20:,.1f} | {100 * (tr - gr) / gr:+.2f}% |")
    if options.events:
        print()
        print("| workload | rank | GPU events (allocations and completed frees) | traced | stretches that differ | allocations the trace has more (+) or fewer (-) of, by size |")
        print("|---|---|---|---|---|---|")
        print("\n".join(event_rows(options.folder, traces)))


def traced_script(script, name, world_size, gpu, scratch):
    """{(name, world_size, rank): snapshot, or the first line of the rank's error} of one script
    traced by the command line for every rank."""
    out = pathlib.Path(scratch) / name
    run = subprocess.run(
        [sys.executable, "-m", "vramlab.trace", "--gpu", gpu, "--nproc", str(world_size), "--out", str(out), str(script)],
        capture_output=True, text=True,
    )
    said = run.stdout + run.stderr
    errors = {}
    for line in said.splitlines():
        found = re.match(r"\[rank (\d+)\] error: (.*)", line)
        if found:
            errors.setdefault(int(found[1]), found[2].split("; the trace up to there")[0][:120])
    traces = {}
    for rank in range(world_size):
        row = re.search(rf"^\s+{rank}\s+[\d,.]+ MiB\s+\d+\s+(\S+)", said, re.M)
        if row and row[1] == "ok":
            with open(out / f"rank{rank}.pickle", "rb") as f:
                traces[(name, world_size, rank)] = pickle.load(f)
        else:
            traces[(name, world_size, rank)] = errors.get(rank, f"the trace did not finish ({row[1] if row else 'no table'})")
    return traces


def allocations(events):
    """(action, size) of each allocation and completed free, in order."""
    return [(e["action"], e["size"]) for e in events if e["action"] in ("alloc", "free_completed")]


def event_rows(folder, traces):
    """For each traced rank with a default-setting recording: the GPU's and the trace's
    allocations and completed frees, how many stretches differ (0: the trace is the GPU's event
    for event), and the sizes the differing stretches allocate more of on either side."""
    import collections
    import difflib
    import gzip

    rows = []
    for (name, ws, rank), snapshot in sorted(traces.items()):
        path = pathlib.Path(folder) / name / f"rank{rank}-default.pickle.gz"
        if isinstance(snapshot, str) or not path.is_file():
            continue
        with gzip.open(path) as f:
            recorded = pickle.load(f)
        gpu = allocations(e for trace in recorded["device_traces"] for e in trace)
        ours = allocations(e for trace in snapshot["device_traces"] for e in trace)
        # The trace frees what is left when it ends; the recording is taken before that.
        while ours and ours[-1][0] == "free_completed":
            ours.pop()
        matcher = difflib.SequenceMatcher(a=gpu, b=ours, autojunk=False)
        differing = [op for op in matcher.get_opcodes() if op[0] != "equal"]
        more = collections.Counter()
        for _, i1, i2, j1, j2 in differing:
            more.update({size: -1 for action, size in gpu[i1:i2] if action == "alloc"})
            more.update({size: 1 for action, size in ours[j1:j2] if action == "alloc"})
        said = ", ".join(f"{'+' if n > 0 else ''}{n} x {size:,} B" for size, n in sorted(more.items(), key=lambda kv: -abs(kv[1]) * kv[0]) if n)[:160]
        rows.append(f"| {name} | {rank} | {len(gpu):,} | {len(ours):,} | {len(differing)} | {said or 'none'} |")
    return rows


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
