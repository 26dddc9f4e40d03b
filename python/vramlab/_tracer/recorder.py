"""The record a trace keeps: each storage's allocation and free, in the order and at the sizes the
CUDA caching allocator would be asked for them, with the program's line, the stream and what the
program was doing; notes on what the trace could not size; and the record as a PyTorch memory
snapshot.

A storage's block is PyTorch's: its size rounded up to 512 bytes for the allocated figures
(``kMinBlockSize``, CUDACachingAllocator.cpp), which the replay applies again as the allocator does.
A storage that a program resizes (``UntypedStorage.resize_``, as FSDP does with its all-gather
buffers; ``Tensor.resize_`` past the storage's end) gets a new block and gives up its old one, as
``resize_bytes_cuda`` (aten/src/ATen/native/cuda/Resize.cpp) allocates the new size, copies and
frees the old.
"""

from __future__ import annotations

import errno
import os
import tempfile
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

from .where import where

# The most events a trace records by default (VRAMLAB_TRACE_MAX_EVENTS, --max-events,
# trace(max_events=)): a program that never ends (a `while True:` loop allocating and freeing)
# stops here in one line, the trace so far kept, instead of growing the host's memory without bound.
# An event is about 0.6 KB of the host's memory: 2,000,000 is some 1.2 GB, hundreds of times the
# events of a training step of the models traced so far.
MAX_EVENTS = 2_000_000
MAX_EVENTS_VARIABLE = "VRAMLAB_TRACE_MAX_EVENTS"


def max_events(value: Optional[int] = None) -> int:
    """The bound on a trace's events: `value`, else VRAMLAB_TRACE_MAX_EVENTS, else MAX_EVENTS."""
    source = "max_events"
    if value is None:
        text = os.environ.get(MAX_EVENTS_VARIABLE, "").strip()
        if not text:
            return MAX_EVENTS
        source = MAX_EVENTS_VARIABLE
        try:
            value = int(text.replace("_", ""))
        except ValueError:
            raise ValueError(f"{MAX_EVENTS_VARIABLE}={text[:100]!r}: give a whole number of events (at least 1)") from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{source}={value!r}: give a whole number of events (at least 1)")
    return value


# PyTorch's smallest block (CUDACachingAllocator.cpp: kMinBlockSize); also the alignment of every
# block it hands out.
MIN_BLOCK = 512

Frame = Optional[Dict[str, Any]]


# How a note starts whose subject leaves the peak unknown, not only approximate (the CLI and the
# summary print every note; these come first). Under UNKNOWN_PEAK the trace's peaks are lower
# bounds ("at least"); under PEAK_AT_MOST upper bounds (the GPU may skip work the trace takes, as a
# step GradScaler skips); under UNKNOWN_EITHER_WAY, or both bounds at once, the GPU's may be higher
# or lower.
UNKNOWN_PEAK = "UNKNOWN PEAK:"
PEAK_AT_MOST = "PEAK AT MOST:"
UNKNOWN_EITHER_WAY = "UNKNOWN PEAK, HIGHER OR LOWER:"
BOUND_PREFIXES = (UNKNOWN_PEAK, PEAK_AT_MOST, UNKNOWN_EITHER_WAY)


def unknown_peak(notes: List[str]) -> str:
    """What the notes leave of the traced peak: "either way" (UNKNOWN_EITHER_WAY, or both bounds),
    "lower bound" (UNKNOWN_PEAK), "upper bound" (PEAK_AT_MOST), or "" where it is the trace's
    answer."""
    lower = any(note.startswith(UNKNOWN_PEAK) for note in notes)
    upper = any(note.startswith(PEAK_AT_MOST) for note in notes)
    if any(note.startswith(UNKNOWN_EITHER_WAY) for note in notes) or (lower and upper):
        return "either way"
    return "lower bound" if lower else "upper bound" if upper else ""


def peak_bound(notes: List[str]) -> str:
    """The words before a traced peak that its notes call for: "" where it is the trace's answer."""
    return {"either way": "not known (see the first note); the eager trace gives ", "lower bound": "at least ", "upper bound": "at most "}.get(unknown_peak(notes), "")


def rounded(size: int) -> int:
    return (size + MIN_BLOCK - 1) // MIN_BLOCK * MIN_BLOCK


class Recorder:
    """Events, live storages, notes and the snapshot of one trace."""

    def __init__(self, torch: Any, gpu: Dict[str, Any], phase: Callable[[], str]) -> None:
        self.torch = torch
        self.gpu = gpu
        self.memory_bytes = int(gpu["memory_bytes"])
        self.events: List[Dict[str, Any]] = []
        self.max_events = MAX_EVENTS
        self.notes: Dict[str, int] = {}
        self.allocated = 0
        self.peak = 0
        self.stream = 0
        # The device the record is of (a rank's own, cuda:{local_rank}) and how many the snapshot
        # lists, as a torchrun rank's own snapshot does (events at its device only).
        self.device = 0
        self.devices = 1
        # Each live block's stream (a free returns the block to its own stream's pool), and the
        # other streams it was used on (Tensor.record_stream), whose frees complete later.
        self.block_stream: Dict[int, int] = {}
        self.stream_uses: Dict[int, set] = {}
        self.pending: List[Tuple[int, int, int]] = []
        # Addresses are the record's own, never reused: they pair each free with its allocation.
        self._next_addr = 1 << 40
        # Per live storage (by its _cdata): a weak reference, its block's address and size.
        self._live: Dict[int, Tuple[Any, int, int]] = {}
        # Per live storage made inside a backward formula: the sequence number of the autograd
        # node that was running (rules/engine.py tells a formula's own add from the engine's).
        self._made_in_node: Dict[int, int] = {}
        # Storages the program itself made on the meta device (a model built without memory), and
        # those computed from them alone: not GPU memory, never recorded.
        self._program_meta: Dict[int, Any] = {}
        self.phases: Dict[int, str] = {}
        self._phase = phase
        # Called with a storage's key when it dies (the values it was known to hold go with it).
        self.on_death: List[Callable[[int], None]] = []
        # While set, blocks allocated before this address that die are kept to the end of the
        # trace instead, each with where it died: (the number of events recorded by then, address,
        # size).
        self.holding_before: Optional[int] = None
        self.held_deaths: List[Tuple[int, int, int]] = []
        # The number of events recorded when each training step ended (the first optimizer to
        # step marks them: a GAN's two optimizers make one step).
        self.step_ends: List[int] = []

    # Blocks ---------------------------------------------------------------------------------

    def alloc(self, size: int, frame: Frame) -> int:
        block = rounded(size)
        if self.allocated + block > self.memory_bytes:
            # The tensors alive alone would not fit: the GPU fails here whatever the caching
            # allocator does (its reserve only adds to them), as a program that catches it sees.
            raise self.torch.OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate {size} bytes at {where(frame)}: the tensors alive would hold {self.allocated + size} of the {self.gpu['name']}'s {self.memory_bytes} bytes (vramlab.trace; the replay says where the caching allocator fails first)"
            )
        if len(self.events) >= self.max_events:
            from ..errors import UnfollowedError

            raise UnfollowedError(
                f"the trace reached its bound of {self.max_events:,} events at {where(frame)} (a program that does not end, or one longer than the bound: raise it with --max-events N, {MAX_EVENTS_VARIABLE}=N or trace(max_events=N)); the trace up to there is kept"
            )
        addr = self._next_addr
        self._next_addr += max(MIN_BLOCK, block)
        self.events.append({"action": "alloc", "addr": addr, "size": size, "stream": self.stream, "frames": [frame] if frame else []})
        self.block_stream[addr] = self.stream
        self.phases[addr] = self._phase()
        self.allocated += block
        self.peak = max(self.peak, self.allocated)
        return addr

    def free(self, addr: int, size: int) -> None:
        stream = self.block_stream.pop(addr, self.stream)
        self.events.append({"action": "free_requested", "addr": addr, "size": size, "stream": stream, "frames": []})
        if self.stream_uses.pop(addr, None):
            # Used on another stream (record_stream): the allocator keeps the block until that
            # stream's work is done (streams.py places it at the next synchronisation).
            self.pending.append((addr, size, stream))
        else:
            self.events.append({"action": "free_completed", "addr": addr, "size": size, "stream": stream, "frames": []})
        self.allocated -= rounded(size)

    def synchronised(self) -> None:
        """The frees waiting on other streams' work complete (at a synchronisation)."""
        for addr, size, stream in self.pending:
            self.events.append({"action": "free_completed", "addr": addr, "size": size, "stream": stream, "frames": []})
        self.pending = []

    def scratch(self, sizes: List[int], frame: Frame) -> None:
        """Allocations a kernel makes and frees before it returns, freed in reverse order."""
        made = [(self.alloc(size, frame), size) for size in sizes]
        for addr, size in reversed(made):
            self.free(addr, size)

    def empty_cache(self) -> None:
        self.events.append({"action": "empty_cache", "addr": 0, "size": 0, "stream": self.stream, "frames": []})

    def reset_peak(self) -> None:
        """The program's torch.cuda.reset_peak_memory_stats(), which PyTorch's snapshots do not
        record: the replay starts PyTorch's peak statistics again here."""
        self.peak = self.allocated
        self.events.append({"action": "reset_peak", "addr": 0, "size": 0, "stream": self.stream, "frames": []})

    # Storages -------------------------------------------------------------------------------

    def track(self, tensor: Any, frame: Frame, size: Optional[int] = None) -> None:
        """Records the allocation of `tensor`'s storage (of `size` bytes where the GPU's storage
        is larger than the meta tensor's), and its free when the storage dies."""
        self.track_storage(tensor.untyped_storage(), frame, size)

    def mark_program_meta(self, storage: Any) -> None:
        key = storage._cdata
        if key in self._live:
            return

        def died(_ref: Any, key: int = key) -> None:
            self._program_meta.pop(key, None)

        self._program_meta[key] = weakref.ref(storage, died)

    def program_meta(self, tensor: Any) -> bool:
        """Whether `tensor`'s storage is one the program itself made on the meta device."""
        storage = tensor.untyped_storage()
        ref = self._program_meta.get(storage._cdata)
        return ref is not None and ref() is storage

    def track_storage(self, storage: Any, frame: Frame, size: Optional[int] = None) -> None:
        key = storage._cdata
        if key in self._live or storage.nbytes() == 0:
            return
        if key in self._program_meta and self._program_meta[key]() is storage:
            return
        size = storage.nbytes() if size is None else size
        addr = self.alloc(size, frame)
        def died(_ref: Any, key: int = key) -> None:
            self._died(key)

        self._live[key] = (weakref.ref(storage, died), addr, size)
        node = self.torch._C._current_autograd_node()
        if node is not None:
            self._made_in_node[key] = node._sequence_nr()

    def _died(self, key: int) -> None:
        live = self._live.pop(key, None)
        self._made_in_node.pop(key, None)
        if live is not None:
            for forget in self.on_death:
                forget(key)
            if self.holding_before is not None and live[1] < self.holding_before:
                self.held_deaths.append((len(self.events), live[1], live[2]))
                return
            self.free(live[1], live[2])

    def hold_older_blocks(self) -> int:
        """From now until `release_hold`, blocks allocated before now that die stay allocated to
        the end of the trace; returns the address that marks "before now"."""
        self.holding_before = self._next_addr
        return self.holding_before

    def release_hold(self) -> None:
        self.holding_before = None

    def address(self, storage: Any) -> Optional[int]:
        live = self._live.get(storage._cdata)
        return None if live is None else live[1]

    def resized(self, storage: Any, frame: Frame, old_bytes: Optional[int] = None) -> None:
        """`storage` was resized in place: on the GPU its data moved to a new block of the new
        size (none for 0) and the old block was freed, in that order (resize_bytes_cuda)."""
        key = storage._cdata
        new = storage.nbytes()
        live = self._live.get(key)
        if live is None:
            if new:
                self.track_storage(storage, frame)
            return
        ref, addr, size = live
        if new == size:
            return
        if new:
            self._live[key] = (ref, self.alloc(new, frame), new)
        else:
            del self._live[key]
        self.free(addr, size)

    def made_in_node(self, storage: Any) -> Optional[int]:
        """The sequence number of the autograd node whose backward made `storage`, if one did."""
        return self._made_in_node.get(storage._cdata)

    def tracked_size(self, storage: Any) -> Optional[int]:
        live = self._live.get(storage._cdata)
        return None if live is None else live[2]

    # Notes and the snapshot -----------------------------------------------------------------

    def note(self, what: str) -> None:
        self.notes[what] = self.notes.get(what, 0) + 1

    def snapshot(self, header: List[str], settings: str) -> Dict[str, Any]:
        notes = list(header)
        notes.extend(self.said_notes())
        return {
            "segments": [],
            "device_traces": [list(self.events) if d == self.device else [] for d in range(max(self.devices, self.device + 1))],
            "allocator_settings": {"PYTORCH_ALLOC_CONF": settings},
            "vramlab_notes": notes,
            "vramlab_step_ends": list(self.step_ends),
        }

    def said_notes(self) -> List[str]:
        """What the trace did not follow exactly, each note with its count, those that leave the
        peak unknown first."""
        said = [what.format(count=count) for what, count in sorted(self.notes.items())]
        return sorted(said, key=lambda note: not note.startswith(BOUND_PREFIXES))

    def peak_releasing_held(self) -> int:
        """The peak allocated had the blocks held to the end been freed where they died (DDP's
        replaced buckets in a run that frees them at the rebuild)."""
        deaths: Dict[int, List[int]] = {}
        for index, addr, _ in self.held_deaths:
            deaths.setdefault(index, []).append(addr)
        live: Dict[int, int] = {}
        allocated = peak = 0
        for index, event in enumerate(self.events):
            for addr in deaths.get(index, ()):
                allocated -= live.pop(addr, 0)
            if event["action"] == "alloc":
                live[event["addr"]] = rounded(event["size"])
                allocated += live[event["addr"]]
                peak = max(peak, allocated)
            elif event["action"] == "free_requested" and event["addr"] in live:
                allocated -= live.pop(event["addr"])
        return peak

    def breakdown(self) -> Dict[str, Any]:
        live: Dict[int, int] = {}
        allocated = peak = 0
        at_peak: Dict[int, int] = {}
        during = ""
        for event in self.events:
            if event["action"] == "alloc":
                block = rounded(event["size"])
                live[event["addr"]] = block
                allocated += block
                if allocated > peak:
                    peak, at_peak, during = allocated, dict(live), self.phases.get(event["addr"], "forward and other")
            elif event["action"] == "free_requested" and event["addr"] in live:
                allocated -= live.pop(event["addr"])
        by_phase: Dict[str, int] = {}
        for addr, block in at_peak.items():
            phase = self.phases.get(addr, "forward and other")
            by_phase[phase] = by_phase.get(phase, 0) + block
        return {"peak_allocated": peak, "peak_during": during, "live_at_peak": dict(sorted(by_phase.items(), key=lambda kv: -kv[1]))}


def temporary_prefix(path: str) -> str:
    """The start of the name of a save's temporary file beside `path`: hidden, and short enough
    that a name the file system takes for `path` is one it takes for the temporary file too."""
    return "." + os.path.basename(path)[:100] + "."


def write_atomically(path: str, snapshot: Dict[str, Any]) -> None:
    """Writes `snapshot` as a pickle (gzipped where the name ends in .gz) to a temporary file beside
    `path`, then renames it over `path`: a kill or a full disk leaves the old file or none, never a
    truncated one."""
    import gzip
    import pickle

    if not isinstance(path, str):
        raise TypeError(f"a snapshot's path is a file name (str or os.PathLike), not {type(path).__name__}")
    if not path:
        raise ValueError("a snapshot's path is empty; name the file to write")
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, "is a folder (a snapshot is written to a file of its own)", path)
    if os.path.exists(path) and not os.path.isfile(path):
        raise OSError(f"{path}: not a regular file (a snapshot is written to a file of its own)")
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, temporary = tempfile.mkstemp(prefix=temporary_prefix(path), suffix=".partial", dir=folder)
    except OSError as e:
        # Said of the file asked for, not of the temporary file's name.
        raise OSError(e.errno, e.strerror or str(e), path) from None
    try:
        # The permissions any new file gets (mkstemp's are the owner's alone), as the CLI's own
        # outputs have them.
        mask = os.umask(0)
        os.umask(mask)
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o666 & ~mask)
        with os.fdopen(fd, "wb") as raw:
            if str(path).endswith(".gz"):
                with gzip.GzipFile(fileobj=raw, mode="wb") as f:
                    pickle.dump(snapshot, f, protocol=4)
            else:
                pickle.dump(snapshot, raw, protocol=4)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(temporary, path)
    except BaseException as e:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        if isinstance(e, OSError) and e.errno is not None:
            raise OSError(e.errno, e.strerror or str(e), path) from None
        raise
