"""The host's memory while a program is traced. A trace keeps no data on the GPU's side, but the
program's own CPU tensors are real: a model built on the CPU holds its float32 weights there
(27 GB for a 7B Llama) before `.cuda()` moves it. Where the host runs short, the operating
system's out-of-memory killer ends the process with no message and no snapshot. A watcher thread
reads what is left (the machine's MemAvailable, and the cgroup's limit where a container has one)
and, once it falls below `RESERVE`, the trace's function mode stops the program at its next
PyTorch call, in one line, with the trace up to there kept."""

from __future__ import annotations

import os
import threading
from typing import Optional, Tuple

# What is left when the trace stops the program, at least: an amount the process can still use to
# raise, unwind and save its snapshot. A twentieth of the host, between 256 MiB and 2 GiB.
RESERVE_FRACTION = 0.05
RESERVE_MIN, RESERVE_MAX = 256 << 20, 2 << 30
POLL_SECONDS = 0.05


def _read_int(path: str) -> Optional[int]:
    try:
        with open(path) as file:
            text = file.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def memory_left() -> Optional[Tuple[int, int]]:
    """(bytes the process can still take, bytes it could take in all), or None where the host
    does not say (not Linux)."""
    try:
        with open("/proc/meminfo") as file:
            fields = dict(line.split(":", 1) for line in file if ":" in line)
        available = int(fields["MemAvailable"].split()[0]) << 10
        total = int(fields["MemTotal"].split()[0]) << 10
    except (OSError, KeyError, ValueError):
        return None
    # cgroup v2: a container's own limit, where it is lower than the machine's.
    limit, current = _read_int("/sys/fs/cgroup/memory.max"), _read_int("/sys/fs/cgroup/memory.current")
    if limit is not None and current is not None and limit < total:
        available, total = min(available, max(limit - current, 0)), limit
    return available, total


def reserve(total: int) -> int:
    return min(max(int(total * RESERVE_FRACTION), RESERVE_MIN), RESERVE_MAX)


class HostWatch:
    """Watches the host's memory during one trace; `short` is the stop's message once it ran out."""

    def __init__(self) -> None:
        self.short: Optional[str] = None
        self.said = False
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        if memory_left() is None:
            return
        self._thread = threading.Thread(target=self._watch, name="vramlab-host-memory", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            left = memory_left()
            if left is None:
                return
            available, total = left
            if available < reserve(total):
                self.short = (
                    f"host memory ran short ({available / 2**30:.1f} GiB left of {total / 2**30:.1f} GiB, pid {os.getpid()}): "
                    "the program's CPU tensors fill it (a model built on the CPU holds its float32 weights there before .cuda() moves them); "
                    "build the model inside `with torch.device(\"cuda\"):`, which a trace keeps off the host, or trace on a machine with more memory"
                )
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)
        self._thread = None
