"""``python -m vramlab.trace --nproc N --out DIR script.py``: a torchrun script traced once per rank,
each rank in a fresh process of its own (torch.distributed's default group is one per process, as
under torchrun), writing DIR/rank{r}.pickle; then a summary of each rank's peak. Ranks do not talk
to each other (the trace's process group communicates nothing), so ranks whose programs diverge
cannot hang: each runs to its own end or its own one-line refusal."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Tuple

from .recorder import rounded


def peak_of(path: str) -> Tuple[int, int]:
    """(peak allocated, events) of a snapshot written by a trace."""
    import gzip

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        snapshot = pickle.load(f)
    events = [e for trace in snapshot["device_traces"] for e in trace]
    live: Dict[int, int] = {}
    now = peak = 0
    for e in events:
        if e["action"] == "alloc":
            live[e["addr"]] = rounded(e["size"])
            now += live[e["addr"]]
            peak = max(peak, now)
        elif e["action"] == "free_requested" and e["addr"] in live:
            now -= live.pop(e["addr"])
    return peak, len(events)


def traced_ranks(out_dir: str, nproc: int) -> Optional[List[Any]]:
    """The snapshots DIR/rank{r}.pickle of every rank, or None where one is missing."""
    snapshots = []
    for rank in range(nproc):
        path = os.path.join(out_dir, f"rank{rank}.pickle")
        if not os.path.isfile(path):
            return None
        with open(path, "rb") as f:
            snapshots.append(pickle.load(f))
    return snapshots


def run_ranks(
    nproc: int, out_dir: str, gpu: str, answer_reads: Optional[float], script: str, args: List[str], env: Optional[Dict[str, str]] = None, quiet: bool = False
) -> int:
    if nproc < 1:
        print(f"error: --nproc {nproc}: at least one rank", file=sys.stderr)
        return 2
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        print(f"error: {out_dir}: not a folder (with --nproc, --out names a folder for rank{{r}}.pickle)", file=sys.stderr)
        return 2
    os.makedirs(out_dir, exist_ok=True)

    def one(rank: int) -> Tuple[int, str]:
        command = [sys.executable, "-m", "vramlab.trace", "--gpu", gpu, "--world-size", str(nproc), "--rank", str(rank), "--out", os.path.join(out_dir, f"rank{rank}.pickle")]
        if answer_reads is not None:
            command += ["--answer-reads", repr(answer_reads)]
        done = subprocess.run(command + [script] + list(args), capture_output=True, text=True, env=env)
        return done.returncode, (done.stdout or "") + (done.stderr or "")

    workers = max(1, min(nproc, os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(one, range(nproc)))
    status = 0
    rows: List[Any] = []
    for rank, (code, output) in enumerate(results):
        for line in output.rstrip().splitlines() if not quiet or code else ():
            print(f"[rank {rank}] {line}", file=sys.stderr)
        path = os.path.join(out_dir, f"rank{rank}.pickle")
        peak, events = peak_of(path) if os.path.isfile(path) else (0, 0)
        rows.append((rank, code, peak, events, path))
        status = status or code
    if quiet:
        return status
    print(f"{'rank':>4}  {'peak allocated':>16}  {'events':>8}  status  snapshot", file=sys.stderr)
    for rank, code, peak, events, path in rows:
        state = "ok" if code == 0 else f"rc={code}"
        print(f"{rank:>4}  {peak / 2**20:>12,.1f} MiB  {events:>8}  {state:<6}  {path}", file=sys.stderr)
    return status
