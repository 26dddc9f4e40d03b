"""Which workloads a run of the tests traces. CI's 20 minutes on two cores do not hold every
traced workload under both torch releases beside the Rust tests, so CI takes a fixed share of
each table (`.ci/run`), and `scripts/full_trace_checks.sh` runs them all, its last result in
python/tests/FULL_CHECKS.md.

``VRAMLAB_TRACE_SAMPLE=N`` takes every Nth workload from the first, ``N:K`` every Nth from the
Kth (0-based), in the table's own order; unset, every workload. Shares with different K are
disjoint, so two runs (one per torch release) can cover different workloads."""

from __future__ import annotations

import os
from typing import Iterable, List, Tuple, TypeVar

T = TypeVar("T")


def share() -> Tuple[int, int]:
    """(N, K) of VRAMLAB_TRACE_SAMPLE: every Nth from the Kth."""
    text = os.environ.get("VRAMLAB_TRACE_SAMPLE", "1")
    every, _, first = text.partition(":")
    try:
        n, k = int(every), int(first or 0)
    except ValueError:
        raise ValueError(f"VRAMLAB_TRACE_SAMPLE={text!r}: expected N or N:K (whole numbers, 0 <= K < N)") from None
    if n < 1 or not 0 <= k < n:
        raise ValueError(f"VRAMLAB_TRACE_SAMPLE={text!r}: expected N or N:K (whole numbers, 0 <= K < N)")
    return n, k


def sampled(items: Iterable[T]) -> List[T]:
    """The share of `items` (in their order) this run takes."""
    n, k = share()
    return [item for i, item in enumerate(items) if i % n == k]
