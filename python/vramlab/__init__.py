"""vramlab: a GPU memory testbed, from Python.

Plain data in and out: every function returns dicts and lists shaped like the CLI's JSON, typed
(``TypedDict``) as ``vramlab.ReplayRecord``, ``vramlab.TuneRecord``, ``vramlab.SettingResult``,
``vramlab.Catalogue`` and the others of ``vramlab._results``.

    >>> import vramlab
    >>> result = vramlab.replay("snapshot.pickle", alloc_conf=["", "expandable_segments:True"])
    >>> [r["pytorch_stats"]["reserved_bytes.all.peak"] for r in result["results"]]

Errors are the classes of ``vramlab.errors``, each with vramlab's one-line message and each
also the built-in it stands for: ``TraceError``, ``SettingsError`` and ``InputError`` are
``ValueError``s, ``FileError`` and ``DeviceError`` are ``OSError``s; ``VramlabError`` catches
them all. Ctrl-C stops a long call with ``KeyboardInterrupt``. The Rust core releases the GIL
while it works, so calls from several threads run at once.
"""

from __future__ import annotations

import builtins
import json
import os
import warnings
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _vramlab
from .errors import DeviceError, FileError, InputError, SettingsError, TraceError, UnfollowedError, VramlabError
from ._results import Catalogue, PytorchStats, RecordedCheck, ReplayRecord, SettingResult, Steady, TunePostmortem, TuneRecord, TuneVerdict
from ._tracer.session import trace as _Trace
from ._tracer.sweep import sweep_function as sweep
from .trace import trace

# `python -m vramlab.trace` runs a module this package has already imported (the context manager
# lives there), which runpy warns about; the warning says nothing to the user.
warnings.filterwarnings("ignore", message="'vramlab.trace' found in sys.modules", category=RuntimeWarning)

__all__ = [
    "replay",
    "tune",
    "run",
    "explain",
    "list",
    "teach",
    "report",
    "trace",
    "sweep",
    # The shapes of what they return (vramlab._results).
    "ReplayRecord",
    "TuneRecord",
    "SettingResult",
    "TuneVerdict",
    "TunePostmortem",
    "PytorchStats",
    "RecordedCheck",
    "Steady",
    "Catalogue",
    "DEFAULT_TUNE_GRID",
    "__version__",
    # The classes of vramlab.errors, listed again here: type checkers (and stubtest) read a
    # literal __all__, not one extended from another module's.
    "VramlabError",
    "TraceError",
    "SettingsError",
    "InputError",
    "FileError",
    "DeviceError",
    "UnfollowedError",
]
__version__: str = _vramlab.__version__
DEFAULT_TUNE_GRID: List[str] = builtins.list(_vramlab.DEFAULT_TUNE_GRID)

# A snapshot's path, its bytes, its dict, a bare list of segments, or a finished vramlab.trace
# (its snapshot is taken).
Trace = Union[str, "os.PathLike[str]", bytes, Dict[str, Any], List[Any], _Trace]


def _as_input(trace: Any) -> Any:
    """A finished vramlab.trace as its snapshot; a bare list of segments (what
    torch.cuda.memory_snapshot() returns) as the pickle the Rust reader reads it from."""
    if isinstance(trace, _Trace):
        return trace.snapshot()
    if isinstance(trace, builtins.list):
        import pickle

        return pickle.dumps(trace, protocol=4)
    return trace


def _settings(alloc_conf: Union[None, str, Sequence[str]]) -> List[str]:
    if alloc_conf is None:
        return []
    if isinstance(alloc_conf, str):
        return [alloc_conf]
    if not isinstance(alloc_conf, (builtins.list, tuple)):
        raise TypeError(f"alloc_conf must be a string or a list of strings, not {type(alloc_conf).__name__}")
    settings = builtins.list(alloc_conf)
    for value in settings:
        if not isinstance(value, str):
            raise TypeError(f"alloc_conf must be a string or a list of strings, not a list holding {type(value).__name__}")
    return settings


def _capacity(capacity: Union[None, int, float, str], gpu: Optional[str] = None) -> Optional[int]:
    if capacity is None:
        return None
    if gpu is not None and not isinstance(gpu, str):
        raise TypeError(f"gpu must be a GPU's name (see vramlab list), not {type(gpu).__name__}")
    if isinstance(capacity, float) and 0.0 < capacity <= 1.0 or isinstance(capacity, str):
        # As the CLI reads it: "3 GiB", "80GB" (GiB, as GPU memory is counted), "1048576", or
        # with gpu a share of its memory: "90%", 0.9.
        capacity = _vramlab.capacity(str(capacity), gpu)[0]
    if isinstance(capacity, bool) or not isinstance(capacity, int):
        raise TypeError(f"capacity must be a whole number of bytes, a size such as '3 GiB', or with gpu a share of its memory (0.9, '90%'), not {capacity!r}")
    if capacity <= 0:
        raise SettingsError(f"capacity={capacity}: must be positive")
    return capacity


def _gpu_name(gpu: Optional[str]) -> Optional[str]:
    if gpu is not None and not isinstance(gpu, str):
        raise TypeError(f"gpu must be a GPU's name (see vramlab list), not {type(gpu).__name__}")
    return gpu


def _device(device: Optional[int]) -> Optional[int]:
    if device is None:
        return None
    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError(f"device must be a device index (an int), not {type(device).__name__}")
    if device < 0:
        raise InputError(f"device={device}: must be 0 or more")
    return device


def replay(
    trace: Trace,
    *,
    alloc_conf: Union[None, str, Sequence[str]] = None,
    capacity: Union[None, int, float, str] = None,
    policy: Optional[str] = None,
    device: Optional[int] = None,
    torch: Optional[str] = None,
    gpu: Optional[str] = None,
) -> ReplayRecord:
    """Replays an allocation trace through PyTorch's allocator (or vramlab's policies).

    trace: a path to a snapshot pickle (optionally gzipped), an RMM log or a vramlab trace;
        the bytes of a snapshot pickle; the dict ``torch.cuda.memory._snapshot()`` returns,
        taken as it is; or a finished ``vramlab.trace`` (its snapshot).
    alloc_conf: one ``PYTORCH_ALLOC_CONF`` string or a list of them; each is one result
        (``""`` is PyTorch's defaults). With neither this nor ``policy``, a snapshot is replayed
        under the settings it was recorded with, and checked against itself.
    capacity: the cap in bytes, or a size such as ``"3 GiB"`` (``"80GB"`` is read as GiB, as GPU
        memory is counted), or with ``gpu`` a share of its memory (``"90%"``, ``0.9``), as
        ``torch.cuda.set_per_process_memory_fraction`` sets it (the fraction times the device's
        memory); none: the cap a recorded out-of-memory error implies, if any. The CUDA context
        and other processes' memory are outside it.
    gpu: the GPU the job runs on (``"a100-80gb"``; ``vramlab list`` names them): the device the
        replay runs on has its memory (expandable segments reserve address space for all of it,
        and no replay holds more), as ``--gpu`` gives the CLI; none: the H100's.
    policy: vramlab policies, comma-separated (``"caching,best-fit"``, ``"all"``).
    device: which device of a multi-GPU snapshot (by default every device with events is
        replayed, each in ``devices``; the top-level figures are the first's).
    torch: the PyTorch release whose allocator rules to follow (``"2.11"`` to ``"2.15"``), where
        the snapshot does not show it (``vramlab replay --torch``); each result's ``torch`` says
        which release was followed and why.

    Returns the object ``vramlab replay --json`` prints (typed as ``vramlab.ReplayRecord``): ``{"trace", "events", "results": [...]}``,
    each result with ``peak_reserved_bytes``, ``peak_allocated_bytes``, ``failed_allocs``,
    ``min_capacity_bytes``, ``recorded_check`` (``{"verdict": "match"|"differs"|"unchecked",
    "why", ...}``), and for PyTorch's allocator ``pytorch_stats`` keyed as in
    ``torch.cuda.memory_stats()``; ``start`` (the state a lost-start window began in) and
    ``notes`` (what the input does not determine) beside them.
    """
    if policy is not None and not isinstance(policy, str):
        raise TypeError(f"policy must be a string, not {type(policy).__name__}")
    trace = _as_input(trace)
    text = _vramlab.replay(trace, _settings(alloc_conf), _capacity(capacity, gpu), policy, _device(device), torch, _gpu_name(gpu))
    return json.loads(text)


def tune(
    trace: Trace,
    *,
    capacity: Union[None, int, float, str] = None,
    grid: Optional[Sequence[str]] = None,
    device: Optional[int] = None,
    torch: Optional[str] = None,
    gpu: Optional[str] = None,
) -> TuneRecord:
    """Replays a trace under many ``PYTORCH_ALLOC_CONF`` settings at once, ranked.

    trace: as for ``replay``, a finished ``vramlab.trace`` included (``vramlab.tune(t)``).

    Returns the object ``vramlab tune --json`` prints (typed as ``vramlab.TuneRecord``), its
    ``results`` ranked as the terminal's table: settings that fit under ``capacity`` first (all of
    them where no cap is given), then by the cap from which each fits at every larger cap
    (``always_fits_bytes``, the least memory it needs), then by peak reserved memory. Each result
    names its setting (``policy`` is ``"PYTORCH_ALLOC_CONF=..."``), the line to paste in a shell
    (``paste``: ``"PYTORCH_ALLOC_CONF='...'"``, quoted), ``min_capacity_bytes`` (the smallest cap
    that fits) and ``peak_reserved_bytes`` (under the cap, where one is given: ``vramlab.replay``
    without ``capacity`` gives the peak with none). ``verdicts`` say the same in words, in rank
    order, with ``why`` where fitting is not monotone in the cap; ``answer`` is the one line that
    answers (the setting to use, or that the current settings already fit, or that nothing
    does). ``grid`` replaces the default grid (``vramlab.DEFAULT_TUNE_GRID``). ``torch`` names
    the PyTorch release whose allocator rules to follow, and ``capacity`` and ``gpu`` are read,
    as for ``replay``.
    """
    settings = _settings(grid)
    if grid is not None and not settings:
        # An empty grid would otherwise mean the default one, silently.
        raise InputError("grid is empty: give the settings to rank, or leave grid out for vramlab.DEFAULT_TUNE_GRID")
    trace = _as_input(trace)
    text = _vramlab.tune(trace, settings, _capacity(capacity, gpu), _device(device), torch, _gpu_name(gpu))
    return json.loads(text)


def _gpu_of(gpu: str, profile: Optional[str]) -> str:
    """The GPU named by ``gpu=``, or by ``profile=``, its former name (still read)."""
    if profile is None:
        return gpu
    if gpu != "h100" and gpu != profile:
        raise TypeError(f"gpu={gpu!r} and profile={profile!r} name two GPUs: give gpu= alone (profile= is its former name)")
    return profile


def run(
    targets: Union[str, Sequence[str]] = (),
    backend: str = "sim",
    gpu: str = "h100",
    seed: int = 0,
    *,
    profile: Optional[str] = None,
) -> List[Dict[str, Any]]:  # records of experiment families, each its own metrics
    """Runs experiments (suites, experiment names or suite .toml paths; none: every suite).

    ``gpu``: the GPU whose model predicts, a built-in profile (``"h100"``, ``"h200"``) or a
    profile file ``vramlab calibrate`` wrote (``profile=`` is its former name, still read).
    Returns one record per experiment: ``{"experiment", "backend", "device", "profile",
    "seed", "points": [{"params", "metrics"}], ...}``. ``backend="hw"`` needs a CUDA GPU.
    """
    names = [targets] if isinstance(targets, str) else builtins.list(targets)
    return json.loads(_vramlab.run(names, backend, _gpu_of(gpu, profile), seed))


def explain(topic: str, gpu: str = "h100", **params: Any) -> str:
    """A teaching view of one case: ``occupancy``, ``banks``, ``coalescing`` or ``constant``, on
    ``gpu`` (a built-in profile or a profile file; ``profile=`` is its former name, still read).

    >>> print(vramlab.explain("occupancy", threads=256, registers=64))
    """
    gpu = _gpu_of(gpu, params.pop("profile", None))
    return _vramlab.explain(topic, [f"{k}={v}" for k, v in params.items()], gpu)


def report(out: Union[str, "os.PathLike[str]"]) -> Dict[str, Any]:
    """Redraws a run's report from the records under ``out`` (the ``out`` folder of ``vramlab run
    --out``), as ``vramlab report DIR`` does: ``{"markdown", "html", "plots"}``, the paths
    written (report.md, report.html, every PNG and SVG)."""
    markdown, html, plots = _vramlab.report(os.fspath(out))
    return {"markdown": markdown, "html": html, "plots": plots}


def teach(
    out: Union[str, "os.PathLike[str]"] = "vramlab-out/teach",
    snapshot: Union[None, str, "os.PathLike[str]"] = None,
    gpu: str = "h100",
    *,
    profile: Optional[str] = None,
) -> List[str]:
    """Writes the teaching pages into ``out``, as ``vramlab teach --out DIR`` does: self-contained
    HTML with sliders, offline. ``snapshot``: a PyTorch memory snapshot for the allocator page
    instead of the committed one; ``gpu``: the GPU whose models the pages draw (``profile=`` is
    its former name, still read). Returns the pages written, the index first (open it)."""
    return _vramlab.teach(os.fspath(out), None if snapshot is None else os.fspath(snapshot), _gpu_of(gpu, profile))


def list() -> Catalogue:  # noqa: A001 - vramlab.list mirrors `vramlab list`; this module calls builtins.list
    """What ``vramlab list`` prints, as data: ``suites`` (each with its ``experiments``),
    ``families``, ``profiles``, ``gpus`` (the names ``gpu=`` takes, with their memory and whether
    measured), ``policies``, ``synthetic_traces``, ``alloc_conf_keys`` and ``tune_grid``."""
    catalogue: Catalogue = json.loads(_vramlab.catalogue())
    return catalogue
