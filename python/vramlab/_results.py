"""The shapes of what ``vramlab``'s functions return: plain dicts, shaped like the CLI's JSON, typed
here (``TypedDict``) so that a type checker and an editor know each key. They are the one place
these shapes are written for Python (the Rust records they mirror: experiments/src/replay_record.rs);
import them from ``vramlab`` (``vramlab.TuneRecord``, ...). Keys a record carries only in some
cases are in the ``total=False`` classes."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, TypedDict

__all__ = [
    "PytorchStats",
    "RecordedCheck",
    "SettingResult",
    "TuneVerdict",
    "TunePostmortem",
    "ReplayRecord",
    "TuneRecord",
    "Steady",
    "Catalogue",
]

# Keyed as in torch.cuda.memory_stats(), names that are no identifiers: the functional form.
PytorchStats = TypedDict(
    "PytorchStats",
    {
        "allocated_bytes.all.peak": int,
        "allocated_bytes.all.current": int,
        "reserved_bytes.all.peak": int,
        "reserved_bytes.all.current": int,
        "active_bytes.all.peak": int,
        "requested_bytes.all.peak": int,
        "inactive_split_bytes.all.peak": int,
        "segment.all.peak": int,
        "num_alloc_retries": int,
        "num_ooms": int,
        "num_sync_all_streams": int,
        "num_device_alloc": int,
        "num_device_free": int,
    },
)
PytorchStats.__doc__ = "PyTorch's allocator's own statistics at the end of a replay, keyed as in ``torch.cuda.memory_stats()``."


class RecordedCheck(TypedDict):
    """A replay against its recording: ``verdict`` is ``"match"``, ``"differs"`` or
    ``"unchecked"``; ``why`` says why, ``summary`` in one sentence; ``first_difference`` (or
    None) where it parts from the recording."""

    verdict: str
    operations: int
    first_difference: Optional[Dict[str, Any]]
    why: str
    summary: str


class _SettingResult(TypedDict):
    policy: str
    backend: str
    peak_reserved_bytes: int
    peak_allocated_bytes: int
    peak_requested_bytes: int
    fragmentation_at_peak: float
    rounding_waste_bytes: int
    device_allocations: int
    device_frees: int
    failed_allocs: int
    first_failure: Optional[str]
    min_capacity_bytes: Optional[int]
    alloc_ns_p50: float
    alloc_ns_p99: float
    free_ns_p50: float
    free_ns_p99: float
    alloc_free_ns_p50: float
    alloc_free_ns_p99: float
    counters: Dict[str, int]
    segments_matched: Optional[int]
    device_check: Optional[str]
    recorded_check: RecordedCheck


class SettingResult(_SettingResult, total=False):
    """One setting (or policy) replayed: its peaks, the cap it fits under, and how it went.

    ``policy``: ``"PYTORCH_ALLOC_CONF=<setting>"`` for PyTorch's allocator (another policy's name
    otherwise); ``paste``: the line to paste before the job's command, quoted for a shell
    (``"PYTORCH_ALLOC_CONF='expandable_segments:True'"``); ``peak_reserved_bytes``: the most the
    allocator held, under the cap where one was given; ``failed_allocs`` 0: it fits;
    ``min_capacity_bytes``: the smallest cap that fits; ``always_fits_bytes``: the cap from which
    every larger cap fits too (tune), exact where ``always_fits_exact``; ``pytorch_stats``:
    PyTorch's own figures. ``alloc_ns_*``, ``free_ns_*`` and ``fragmentation_at_peak`` are
    vramlab's bookkeeping, no figure of PyTorch's."""

    paste: str
    always_fits_bytes: int
    always_fits_exact: bool
    timed_one_in: int
    pytorch_stats: PytorchStats


class _TuneVerdict(TypedDict):
    rank: int
    setting: str
    label: str
    fits_at_cap: Optional[bool]
    min_capacity_bytes: Optional[int]
    always_fits_bytes: Optional[int]
    monotone: Optional[bool]
    text: str


class TuneVerdict(_TuneVerdict, total=False):
    """What tune says of one setting, in rank order: ``text`` is the line the terminal prints;
    ``why``, where the answer under the cap reads as a contradiction of the caps found (fitting
    is not monotone in the cap), the sentence that says why."""

    why: str


class TunePostmortem(TypedDict):
    """Why the current settings did not fit, and what would have."""

    baseline: str
    baseline_label: str
    first_failure: str
    fitting: int
    settings: int
    fits_reserving_least: Optional[str]
    alloc_conf_line: Optional[str]
    text: List[str]


class _ReplayRecord(TypedDict):
    trace: str
    events: int
    allocations: int
    recorded_segments: int
    warnings: Dict[str, Any]
    capacity_bytes: Optional[int]
    device: Dict[str, Any]
    commit: str
    results: List[SettingResult]
    device_index: int
    notes: List[str]


class ReplayRecord(_ReplayRecord, total=False):
    """What ``vramlab.replay`` returns (``vramlab replay --json``): ``results``, one per setting
    or policy, in the order given; ``notes``, what the input does not determine;
    ``capacity_source``, the cap read back (both units, what lies outside it); ``torch``, the
    release whose rules were followed and why; ``start``, the state a lost-start window began in;
    ``devices``, each device of a multi-GPU snapshot (the top-level figures are the first's)."""

    start: Dict[str, int]
    capacity_source: str
    final_state: List[Dict[str, Any]]
    torch: Dict[str, str]
    devices: List["ReplayRecord"]


class TuneRecord(ReplayRecord, total=False):
    """What ``vramlab.tune`` returns (``vramlab tune --json``): ``results`` ranked (settings that
    fit first, then by ``always_fits_bytes``, the cap from which each fits at every larger one,
    then by peak reserved); ``verdicts`` in the same order; ``postmortem`` where the current
    settings do not fit; ``answer``, the one line that answers."""

    verdicts: List[TuneVerdict]
    device_bytes: int
    postmortem: TunePostmortem
    answer: str


class _Steady(TypedDict):
    steps: int
    peaks_reserved: List[int]
    peaks_allocated: List[int]
    steady: Optional[bool]


class Steady(_Steady, total=False):
    """What ``trace.steady()`` returns: the training steps traced, the peaks after each of the last
    ones, whether the last needed no more than the one before, and ``advice`` (``"trace more
    steps (at least N)"``)."""

    advice: str


class Catalogue(TypedDict):
    """What ``vramlab.list()`` returns: what there is to run, replay and tune (``vramlab list``)."""

    suites: List[Dict[str, Any]]
    families: List[str]
    profiles: List[str]
    default_profile: str
    gpus: List[Dict[str, Any]]
    backends: List[str]
    policies: List[Dict[str, Any]]
    synthetic_traces: List[Dict[str, Any]]
    alloc_conf_keys: List[str]
    tune_grid: List[str]
