"""The largest value of a program's parameter (a batch size, a sequence length) that fits on a GPU:
the program is traced once per value, each trace is ranked under PyTorch's settings by the replay
(``vramlab.tune``), and the answer is one line: the value, the setting, and the cap it needs.

Values are tried in increasing order and the sweep stops at the first value under which no
setting fits (memory is taken to grow with the parameter; a value past that is not traced, and
the answer says so)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Callable, Dict, List, Sequence, Union


def _mib(size: int) -> str:
    return f"{size / 2**20:,.0f} MiB"


def ranked(snapshot: Any, capacity: int) -> Dict[str, Any]:
    """One point: the defaults' and the best setting's fit under `capacity` (vramlab.tune)."""
    from .. import tune

    result = tune(snapshot, capacity=capacity)
    rows = result["results"]
    defaults = next((r for r in rows if r["policy"] in ("PYTORCH_ALLOC_CONF=", "(defaults)")), rows[0])
    best = rows[0]
    return {
        "fits": best["failed_allocs"] == 0,
        "setting": best["policy"].split("=", 1)[1] if "=" in best["policy"] else best["policy"],
        # The line to paste, quoted for a shell (tune's "paste").
        "paste": best.get("paste", best["policy"]),
        "needs": best.get("always_fits_bytes") or best.get("min_capacity_bytes") or best["peak_reserved_bytes"],
        "defaults_fit": defaults["failed_allocs"] == 0,
        "defaults_need": defaults.get("always_fits_bytes") or defaults.get("min_capacity_bytes") or defaults["peak_reserved_bytes"],
        "stopped": any("stopped before the program ended" in n for n in snapshot.get("vramlab_notes", [])) if isinstance(snapshot, dict) else False,
    }


def answer(name: str, points: List[Dict[str, Any]], capacity: int, untried: Sequence[str]) -> str:
    """The one line that answers the sweep."""
    fitting = [p for p in points if p["fits"] and not p["stopped"]]
    cap = f"{_mib(capacity)} ({capacity / 1e9:,.1f} GB)"
    if not fitting:
        first = points[0] if points else None
        if first is None:
            return f"no value of {name} was traced"
        return f"nothing fits under {cap}: at {name}={first['value']} the least any setting needs is {_mib(first['needs'])}; reduce {name} below {first['value']} or use a GPU with more memory"
    best = fitting[-1]
    setting = "PyTorch's default settings" if best["defaults_fit"] else best["paste"]
    line = f"the largest {name} that fits under {cap}: {name}={best['value']}, with {setting} (it needs {_mib(best['defaults_need'] if best['defaults_fit'] else best['needs'])})"
    beyond = [p for p in points if not p["fits"]]
    if beyond:
        line += f"; {name}={beyond[0]['value']} does not fit with any setting (the least needs {_mib(beyond[0]['needs'])})"
    elif untried:
        line += f"; {', '.join(untried)} not traced"
    return line


def sweep_function(program: Callable[[Any], None], values: Sequence[Any], gpu: str = "h100", capacity: Union[None, int, float, str] = None, name: str = "value") -> Dict[str, Any]:
    """``vramlab.sweep``: calls ``program(value)`` under ``vramlab.trace(gpu=gpu)`` for each value in
    increasing order, ranks each trace under PyTorch's settings, and stops at the first value
    nothing fits. Returns ``{"points": [...], "answer": "one line"}``."""
    from .. import _vramlab
    from .session import trace

    points: List[Dict[str, Any]] = []
    # A size ("72 GiB", "80GB" read as GiB) or a share of the GPU's memory ("90%", 0.9).
    cap = _vramlab.capacity(str(capacity), gpu)[0] if isinstance(capacity, (str, float)) else capacity
    for i, value in enumerate(values):
        with trace(gpu=gpu) as t:
            program(value)
        if cap is None:
            cap = int(t.gpu["memory_bytes"])
        point = dict(ranked(t.snapshot(), cap), value=value)
        points.append(point)
        if not point["fits"]:
            break
    untried = [f"{name}={v}" for v in values[len(points):]]
    return {"points": points, "answer": answer(name, points, cap or 0, untried), "capacity_bytes": cap}


def sweep_script(options: Any, out_dir: str) -> int:
    """`python -m vramlab.trace --sweep NAME=V1,V2,... --out DIR script.py`: each value in a fresh
    process (the script reads NAME from its environment), traced to DIR/NAME=V.pickle."""
    import pickle

    from .. import _vramlab
    from ..errors import VramlabError

    name, _, listed = options.sweep.partition("=")
    values = [v.strip() for v in listed.split(",") if v.strip()]
    if not name.isidentifier() or not values:
        print(f"error: --sweep {options.sweep!r}: give NAME=V1,V2,... (an environment variable the script reads, and its values)", file=sys.stderr)
        return 2
    if all(v.lstrip("-").isdigit() for v in values):
        values = sorted(values, key=int)
    try:
        import json

        gpu = json.loads(_vramlab.gpu(options.gpu))
        capacity = _vramlab.capacity(options.capacity, options.gpu)[0] if options.capacity else int(gpu["memory_bytes"])
    except (ValueError, VramlabError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    os.makedirs(out_dir, exist_ok=True)
    points: List[Dict[str, Any]] = []
    print(f"{name:>10}  fits  least needed   best setting", file=sys.stderr)
    for value in values:
        out = os.path.join(out_dir, f"{name}={value}.pickle")
        command = [sys.executable, "-m", "vramlab.trace", "--gpu", options.gpu, "--out", out]
        if options.answer_reads is not None:
            command += ["--answer-reads", str(options.answer_reads)]
        done = subprocess.run(command + [options.script] + list(options.args), env=dict(os.environ, **{name: value}), stderr=subprocess.PIPE, text=True)
        if not os.path.exists(out):
            print(f"error: {name}={value}: the trace wrote no snapshot (exit {done.returncode}): {done.stderr.strip().splitlines()[-1:] or ''}", file=sys.stderr)
            return 1
        with open(out, "rb") as f:
            snapshot = pickle.load(f)
        point = dict(ranked(snapshot, capacity), value=value)
        if point["stopped"]:
            why = done.stderr.strip().splitlines()[-3:-2] or done.stderr.strip().splitlines()[-1:]
            print(f"error: {name}={value}: the trace stopped before the program ended ({' '.join(why)}); its figures would be a lower bound, so the sweep stops", file=sys.stderr)
            return 1
        points.append(point)
        print(f"{value:>10}  {'yes' if point['fits'] else 'NO':4}  {_mib(point['needs']):>12}   {point['paste'].split('=', 1)[1] if point['setting'] else '(defaults)'}", file=sys.stderr)
        if not point["fits"]:
            break
    untried = [f"{name}={v}" for v in values[len(points):]]
    print(answer(name, points, capacity, untried))
    return 0
