"""The largest value of a program's parameter (a batch size, a sequence length) that fits on a GPU:
the program is traced once per value, each trace is ranked under PyTorch's settings by the replay
(``vramlab.tune``), and the answer is one line: the value, the setting, and the cap it needs.

Values are tried in increasing order and the sweep stops at the first value under which no
setting fits (memory is taken to grow with the parameter; a value past that is not traced, and
the answer says so).

The cap. Given (``--capacity``, ``capacity=``), it is what the caching allocator may hold, as
``vramlab tune`` reads it; the CUDA context and other processes are outside it. Not given, it is
what the caching allocator can use of the GPU: its memory less the CUDA context (measured on an
H100: 529 MiB), the cap ``vramlab tune`` offers as "the whole GPU less the context". The answer
says which. Each point is ranked as ``vramlab tune --gpu GPU`` ranks it: on a device of the GPU's
memory, which sizes the address range expandable segments reserve (on a 24 GiB card a program can
outgrow one range where an 80 GiB card's holds it, so what a setting needs differs with the
GPU)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from .._results import SettingResult
from .recorder import unknown_peak


def _mib(size: int) -> str:
    return f"{size / 2**20:,.0f} MiB"


def _setting(policy: str) -> str:
    return policy.split("=", 1)[1] if "=" in policy else policy


def _need(row: SettingResult) -> int:
    return int(row.get("always_fits_bytes") or row.get("min_capacity_bytes") or row["peak_reserved_bytes"])


def default_cap(gpu: str) -> Dict[str, Any]:
    """The cap a sweep takes where none is given: what the caching allocator can use of `gpu`,
    its memory less the CUDA context, with the sentence that says so."""
    import json

    from .. import _vramlab

    spec = json.loads(_vramlab.gpu(gpu))
    memory, context = int(spec["memory_bytes"]), int(spec["context_bytes"])
    measured = "measured on this GPU" if spec.get("context_measured") else "as measured on an H100; not measured on this GPU"
    said = f"the {spec['name']}'s {_mib(memory)} less {_mib(context)} for the CUDA context ({measured}): what the caching allocator can use; give --capacity for another cap"
    return {"bytes": memory - context, "said": said}


def given_cap(capacity: int) -> str:
    """What a cap given to a sweep holds, said."""
    return "as given: what the caching allocator may hold; the CUDA context and other processes are outside it"


def ranked(snapshot: Any, capacity: int, gpu: Optional[str] = None) -> Dict[str, Any]:
    """One point: the defaults' and the best setting's fit under `capacity` (vramlab.tune, on a
    device of `gpu`'s memory, as `vramlab tune --gpu` replays it)."""
    from .. import tune

    if out_of_memory(snapshot):
        return dict(OUT_OF_MEMORY)
    result = tune(snapshot, capacity=capacity, gpu=gpu)
    rows = result["results"]
    defaults = next((r for r in rows if r["policy"] in ("PYTORCH_ALLOC_CONF=", "(defaults)")), rows[0])
    best = rows[0]
    return {
        "fits": best["failed_allocs"] == 0,
        "setting": _setting(best["policy"]),
        # The line to paste, quoted for a shell (tune's "paste").
        "paste": best.get("paste", best["policy"]),
        "needs": _need(best),
        "defaults_fit": defaults["failed_allocs"] == 0,
        "defaults_need": _need(defaults),
        "stopped": any("stopped before the program ended" in n for n in snapshot.get("vramlab_notes", [])) if isinstance(snapshot, dict) else False,
        "out_of_memory": out_of_memory(snapshot),
        "bound": unknown_peaks([snapshot]),
    }


def unknown_peaks(snapshots: Sequence[Any]) -> str:
    """What the traces' notes leave of their peaks, in the words the answer adds: "" where they
    are the traces' answers (recorder.py's UNKNOWN_PEAK, PEAK_AT_MOST and UNKNOWN_EITHER_WAY notes)."""
    notes = [n for s in snapshots if isinstance(s, dict) for n in s.get("vramlab_notes", []) if isinstance(n, str)]
    return {"either way": "not known", "lower bound": "lower bounds", "upper bound": "upper bounds"}.get(unknown_peak(notes), "")


# A point whose tensors alive outgrew the GPU: no setting fits, and what the part traced needed is
# no figure of the whole.
OUT_OF_MEMORY: Dict[str, Any] = {"fits": False, "setting": "", "paste": "", "needs": 0, "defaults_fit": False, "defaults_need": 0, "stopped": True, "out_of_memory": True}


def out_of_memory(snapshot: Any) -> bool:
    """Whether the trace stopped where the tensors alive alone outgrew the GPU (recorder.py's
    OutOfMemoryError): the value fits under no setting, whatever the part traced needed."""
    notes = snapshot.get("vramlab_notes", []) if isinstance(snapshot, dict) else []
    return any("stopped before the program ended (CUDA out of memory" in n for n in notes)


def ranked_ranks(snapshots: Sequence[Any], capacity: int, gpu: Optional[str] = None) -> Dict[str, Any]:
    """One point of a program on N GPUs: each rank's trace ranked under PyTorch's settings
    (vramlab.tune), and the setting that fits every rank, with the least memory its largest rank
    needs; the rank that binds is the one needing most. Keys as `ranked`'s, plus per-rank needs."""
    from .. import tune

    per_rank = [{_setting(r["policy"]): r for r in tune(s, capacity=capacity, gpu=gpu)["results"]} for s in snapshots]
    settings = list(per_rank[0])
    fits_all = {k: all(k in ranks and ranks[k]["failed_allocs"] == 0 for ranks in per_rank) for k in settings}
    need = {k: max(_need(ranks[k]) for ranks in per_rank if k in ranks) for k in settings}
    best = min(settings, key=lambda k: (not fits_all[k], need[k]))
    defaults = next((k for k in settings if k in ("", "(defaults)")), settings[0])
    binding = max(range(len(per_rank)), key=lambda r: _need(per_rank[r][best]))
    row = next(ranks[best] for ranks in per_rank if best in ranks)
    return {
        "fits": fits_all[best],
        "setting": best,
        "paste": row.get("paste", row["policy"]),
        "needs": need[best],
        "defaults_fit": fits_all[defaults],
        "defaults_need": need[defaults],
        "binding_rank": binding,
        "rank_needs": [_need(ranks[best]) for ranks in per_rank],
        "stopped": any(any("stopped before the program ended" in n for n in s.get("vramlab_notes", [])) for s in snapshots if isinstance(s, dict)),
        "out_of_memory": any(out_of_memory(s) for s in snapshots),
        "bound": unknown_peaks(snapshots),
    }


def binds(point: Dict[str, Any]) -> str:
    """Which rank binds, said so that ranks needing the same are not told apart."""
    needs = point["rank_needs"]
    if len(set(needs)) == 1:
        return "all ranks alike" if len(needs) > 1 else "one rank"
    return f"rank {point['binding_rank']} needs the most"


def ranks_answer(point: Dict[str, Any], capacity: int) -> str:
    """The one line that answers "which setting fits every rank under the cap"."""
    cap = f"{_mib(capacity)} ({capacity / 1e9:,.1f} GB)"
    rank = binds(point)
    bound = f"; these needs are {point['bound']} (see the first note of each rank's trace)" if point.get("bound") else ""
    if not point["fits"]:
        return f"nothing fits every rank under {cap}: the least any setting needs is {_mib(point['needs'])} ({rank}){bound}"
    if point["defaults_fit"]:
        return f"every rank fits under {cap} with PyTorch's default settings, needing {_mib(point['defaults_need'])} ({rank}){bound}"
    return f'every rank fits under {cap} with {point["paste"]}, needing {_mib(point["needs"])} ({rank}; the defaults need {_mib(point["defaults_need"])}){bound}'


def answer(name: str, points: List[Dict[str, Any]], capacity: int, untried: Sequence[str], said: str = "") -> str:
    """The one line that answers the sweep; `said`: what the cap is (default_cap, given_cap)."""
    fitting = [p for p in points if p["fits"] and not p["stopped"]]
    cap = f"{_mib(capacity)} ({capacity / 1e9:,.1f} GB{'; ' + said if said else ''})"
    if not fitting:
        first = points[0] if points else None
        if first is None:
            return f"no value of {name} was traced"
        if first.get("out_of_memory"):
            return f"nothing fits under {cap}: at {name}={first['value']} the tensors alive outgrow the GPU's memory; reduce {name} below {first['value']} or use a GPU with more memory"
        bound = f" ({first['bound'].replace('lower bounds', 'a lower bound').replace('upper bounds', 'an upper bound')}: see the trace's first note)" if first.get("bound") else ""
        return f"nothing fits under {cap}: at {name}={first['value']} the least any setting needs is {_mib(first['needs'])}{bound}; reduce {name} below {first['value']} or use a GPU with more memory"
    best = fitting[-1]
    setting = "PyTorch's default settings" if best["defaults_fit"] else best["paste"]
    ranks = f" on every rank ({binds(best)})" if "binding_rank" in best else ""
    line = f"the largest {name} that fits under {cap}{ranks}: {name}={best['value']}, with {setting} (it needs {_mib(best['defaults_need'] if best['defaults_fit'] else best['needs'])})"
    beyond = [p for p in points if not p["fits"]]
    if beyond and beyond[0].get("out_of_memory"):
        line += f"; at {name}={beyond[0]['value']} the tensors alive outgrow the GPU's memory"
    elif beyond:
        line += f"; {name}={beyond[0]['value']} does not fit with any setting (the least needs {_mib(beyond[0]['needs'])})"
    elif untried:
        line += f"; {', '.join(untried)} not traced"
    if best.get("bound"):
        line += f"; the needs at {name}={best['value']} are {best['bound']} (see the trace's first note)"
    return line


def sweep_function(program: Callable[[Any], None], values: Sequence[Any], gpu: str = "h100", capacity: Union[None, int, float, str] = None, name: str = "value") -> Dict[str, Any]:
    """``vramlab.sweep``: calls ``program(value)`` under ``vramlab.trace(gpu=gpu)`` for each value in
    increasing order, ranks each trace under PyTorch's settings, and stops at the first value
    nothing fits. Returns ``{"points": [...], "answer": "one line", "capacity_bytes",
    "capacity_said"}``. Without ``capacity`` the cap is the GPU's memory less the CUDA context
    (``capacity_said`` says so)."""
    from .. import _vramlab
    from .session import trace

    points: List[Dict[str, Any]] = []
    # A size ("72 GiB", "80GB" read as GiB) or a share of the GPU's memory ("90%", 0.9).
    cap = _vramlab.capacity(str(capacity), gpu)[0] if isinstance(capacity, (str, float)) else capacity
    if cap is None:
        default = default_cap(gpu)
        cap, said = int(default["bytes"]), str(default["said"])
    else:
        said = given_cap(cap)
    last_fitting: Any = None
    for i, value in enumerate(values):
        t = trace(gpu=gpu)
        try:
            with t:
                program(value)
        except t.torch.OutOfMemoryError:
            pass  # the tensors alive outgrew the GPU: the snapshot says so, and the value fits nowhere
        snapshot = t.snapshot()
        point = dict(ranked(snapshot, cap, gpu), value=value)
        if point["out_of_memory"]:
            point["fits"] = False
        points.append(point)
        if point["fits"]:
            last_fitting = snapshot
        if not point["fits"]:
            break
    untried = [f"{name}={v}" for v in values[len(points):]]
    result = {"points": points, "answer": answer(name, points, cap, untried, said), "capacity_bytes": cap, "capacity_said": said}
    fitting = [p for p in points if p["fits"]]
    if fitting:
        from .steps import steady

        # Whether the answer's trace had settled (steps.py): "trace more steps" where not.
        result["steps"] = steady(last_fitting, "" if fitting[-1]["defaults_fit"] else fitting[-1]["setting"], cap, gpu)["advice"]
    return result


def _row(point: Dict[str, Any], suffix: str = "") -> str:
    """A sweep's progress line for one value: fits, the least needed, the setting as pasted."""
    setting = point["paste"].split("=", 1)[1] if point["setting"] else "(defaults)"
    if point.get("out_of_memory"):
        return f"{point['value']:>10}  {'NO':4}  {'> the GPU':>12}   (the tensors alive outgrew the GPU's memory: no setting helps){suffix}"
    return f"{point['value']:>10}  {'yes' if point['fits'] else 'NO':4}  {_mib(point['needs']):>12}   {setting}{suffix}"


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
        if options.capacity:
            capacity = _vramlab.capacity(options.capacity, options.gpu)[0]
            said = given_cap(capacity)
        else:
            default = default_cap(options.gpu)
            capacity, said = int(default["bytes"]), str(default["said"])
    except (ValueError, VramlabError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    os.makedirs(out_dir, exist_ok=True)
    points: List[Dict[str, Any]] = []
    print(f"{name:>10}  fits  least needed   best setting", file=sys.stderr)
    for value in values:
        env = dict(os.environ, **{name: value})
        if options.nproc is not None:
            # One folder of rank{r}.pickle per value; every rank must fit.
            from .ranks import run_ranks, traced_ranks

            folder = os.path.join(out_dir, f"{name}={value}")
            code = run_ranks(options.nproc, folder, options.gpu, options.answer_reads, options.script, options.args, env=env, quiet=True)
            snapshots = traced_ranks(folder, options.nproc)
            if snapshots is None:
                print(f"error: {name}={value}: a rank's trace wrote no snapshot (exit {code}); see the lines above", file=sys.stderr)
                return 1
            if any(out_of_memory(s) for s in snapshots):
                point = dict(OUT_OF_MEMORY, value=value)
                points.append(point)
                print(_row(point), file=sys.stderr)
                break
            point = dict(ranked_ranks(snapshots, capacity, options.gpu), value=value)
            if point["stopped"]:
                print(f"error: {name}={value}: a rank's trace stopped before the program ended; its figures would be a lower bound, so the sweep stops", file=sys.stderr)
                return 1
            points.append(point)
            print(_row(point, f"  ({binds(point)})"), file=sys.stderr)
            if not point["fits"]:
                break
            continue
        out = os.path.join(out_dir, f"{name}={value}.pickle")
        command = [sys.executable, "-m", "vramlab.trace", "--gpu", options.gpu, "--out", out]
        if options.answer_reads is not None:
            command += ["--answer-reads", str(options.answer_reads)]
        done = subprocess.run(command + [options.script] + list(options.args), env=env, stderr=subprocess.PIPE, text=True)
        if not os.path.exists(out):
            print(f"error: {name}={value}: the trace wrote no snapshot (exit {done.returncode}): {done.stderr.strip().splitlines()[-1:] or ''}", file=sys.stderr)
            return 1
        with open(out, "rb") as f:
            snapshot = pickle.load(f)
        point = dict(ranked(snapshot, capacity, options.gpu), value=value, snapshot=out)
        if point["out_of_memory"]:
            # The tensors alive outgrew the GPU: this value fits under no setting, an answer.
            point["fits"] = False
        if point["stopped"] and not point["out_of_memory"]:
            why = done.stderr.strip().splitlines()[-3:-2] or done.stderr.strip().splitlines()[-1:]
            print(f"error: {name}={value}: the trace stopped before the program ended ({' '.join(why)}); its figures would be a lower bound, so the sweep stops", file=sys.stderr)
            return 1
        points.append(point)
        print(_row(point), file=sys.stderr)
        if not point["fits"]:
            break
    untried = [f"{name}={v}" for v in values[len(points):]]
    print(answer(name, points, capacity, untried, said))
    fitting = [p for p in points if p["fits"] and "snapshot" in p]
    if fitting:
        # The answer holds for the steps traced: say so where they had not settled.
        from .steps import steady

        with open(fitting[-1]["snapshot"], "rb") as f:
            check = steady(pickle.load(f), "" if fitting[-1]["defaults_fit"] else fitting[-1]["setting"], capacity, options.gpu)
        if check["steady"] is not True and check["steps"]:
            print(f"note: {name}={fitting[-1]['value']}: {check['advice']}", file=sys.stderr)
    return 0
