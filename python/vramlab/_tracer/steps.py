"""Whether a trace has reached its steady state: "will it fit?" depends on how many training steps
were traced. The caching allocator's cache settles over the first steps (a Hugging Face GPT-2 at
batch 24 needs 36.2 GiB after one step, 38.2 after two and 41.0 from the third on: issue 38), so a
trace of one step can answer "fits" for a job whose later steps run out of memory.

A step ends where the first optimizer that steps returns from ``step()`` (the recorder keeps the
event count there, ``vramlab_step_ends``). The trace cut after each step is replayed under the
setting, and the last step is steady where it needed no more reserved and no more allocated memory
than the step before: every later step that repeats it then needs no more either. Where it still
grew, the answer says to trace more steps, and how many at least to see two alike."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from .._results import Steady

# Steps replayed at most (the last ones): each is a replay of the trace up to its end.
LAST_STEPS = 6


def _cut(snapshot: Dict[str, Any], end: int) -> Dict[str, Any]:
    traces = [trace[:end] if trace else trace for trace in snapshot["device_traces"]]
    return {**snapshot, "device_traces": traces}


def steady(snapshot: Dict[str, Any], alloc_conf: str = "", capacity: Optional[int] = None, gpu: Optional[str] = None) -> Steady:
    """``{"steps", "peaks_reserved", "peaks_allocated", "steady", "advice"}``: the steps traced, the
    peaks of the trace cut after each of the last ones (bytes, under `alloc_conf`), whether the
    last step was steady (None where fewer than two steps were traced), and one line to act on.
    With `capacity`, "reserved" is what the setting needs to fit under that cap (tune's "fits at
    every cap from"), which a cache under pressure grows step by step where an uncapped one may
    not. `gpu`: the GPU traced for, whose memory the replays' device has (as tune's --gpu)."""
    from .. import replay, tune

    ends: List[int] = list(snapshot.get("vramlab_step_ends") or [])
    steps = len(ends)
    result: Steady = {"steps": steps, "peaks_reserved": [], "peaks_allocated": [], "steady": None}
    if steps == 0:
        result["advice"] = "no training step (optimizer.step()) was traced: whether memory grows from step to step is not known"
        return result
    if steps == 1:
        result["advice"] = "one training step traced: the cache often settles only in later steps, so trace at least 3 before asking whether the job fits"
        return result
    for end in ends[-LAST_STEPS:]:
        cut = _cut(snapshot, end)
        stats = replay(cut, alloc_conf=alloc_conf, gpu=gpu)["results"][0]["pytorch_stats"]
        needs = int(stats["reserved_bytes.all.peak"])
        if capacity is not None:
            row = tune(cut, capacity=capacity, grid=[alloc_conf], gpu=gpu)["results"][0]
            needs = int(row.get("always_fits_bytes") or row.get("min_capacity_bytes") or needs)
        result["peaks_reserved"].append(needs)
        result["peaks_allocated"].append(int(stats["allocated_bytes.all.peak"]))
    reserved, allocated = result["peaks_reserved"], result["peaks_allocated"]
    grew_reserved, grew_allocated = reserved[-1] - reserved[-2], allocated[-1] - allocated[-2]
    result["steady"] = grew_reserved <= 0 and grew_allocated <= 0
    if result["steady"]:
        result["advice"] = f"steady: step {steps} needed no more memory than step {steps - 1} (peak reserved {reserved[-1] / 2**20:,.0f} MiB)"
    else:
        grew = max(grew_reserved, 0) / 2**20
        result["advice"] = (
            f"not steady: step {steps} raised peak reserved by {grew:,.0f} MiB (allocated by {max(grew_allocated, 0) / 2**20:,.0f} MiB) over step {steps - 1}; "
            f"trace more steps (at least {steps + 2}) before asking whether the job fits"
        )
    return result
