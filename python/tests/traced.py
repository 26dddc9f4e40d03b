"""Reading a traced snapshot in the tests: its allocator events, and the allocations after a mark.

A measurement script (scripts/measure_*.py) makes a request no call makes between setting up a
call and making it; the allocations that follow the last such request are the call's own. A test
places the same mark in its trace and compares what follows it."""

from __future__ import annotations

from typing import Any, List, Tuple

# A request of 7 bytes: no measured call makes one.
MARK_BYTES = 7


def allocations(snapshot: Any) -> List[Tuple[str, int]]:
    """(action, size) of every allocation and completed free of device 0, in order."""
    return [(e["action"], e["size"]) for e in snapshot["device_traces"][0] if e["action"] in ("alloc", "free_completed")]


def place_mark(torch: Any) -> None:
    """Allocates and frees the mark on the current device."""
    mark = torch.empty(MARK_BYTES, dtype=torch.uint8, device="cuda")
    del mark


def sizes_after_mark(snapshot: Any) -> List[int]:
    """The sizes allocated after the last mark."""
    sizes = [e["size"] for e in snapshot["device_traces"][0] if e["action"] == "alloc"]
    return sizes[len(sizes) - sizes[::-1].index(MARK_BYTES) :]


def events(t: Any, start: int = 0) -> List[Tuple[str, int]]:
    """("a", size) of every allocation and ("f", size) of every free requested on device 0 of the
    trace `t`, from the `start`th."""
    return [(e["action"][0], e["size"]) for e in t.snapshot()["device_traces"][0] if e["action"] in ("alloc", "free_requested")][start:]
