"""One trace: the recorder, the stand-in, the rules and the two modes, put together on entering and
taken apart on leaving (see vramlab/trace.py for what a trace does, and rules/ for each family)."""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import weakref
from typing import Any, Callable, Dict, List, Optional

from .. import _vramlab
from .._results import Steady
from ..errors import UnfollowedError
from . import compat, distributed, futures, paths, standin, streams, unknown
from .engine_thread import DeviceWorker, engine_paths
from .host import HostWatch
from .libraries import Libraries
from .recorder import Recorder, peak_bound, write_atomically
from .recorder import max_events as recorder_max_events
from .rules import Rules
from .rules.autocast import Autocast
from .rules.cells import RecurrentCells
from .rules.rms_norm import FusedRmsNorm
from .rules.samplers import SamplerKernels
from .rules.sync_batch_norm import SyncBatchNormKernels, sync_batch_norm_paths
from .rules.zero_tensors import ZeroTensorKernels
from .rules.composites import CudaComposites
from .rules.kernels import threads_per_sm
from .rules.linear import LinearPath
from .registered import InPlaceWithoutMeta, RegisteredKernels
from .values import Shadows
from .where import here, set_torch, user_frame, where

# Reads answered at one line of the program (answer_reads) before the trace stops: far more than
# any loop over steps or tokens asks, far fewer than a loop waiting on an answered value runs.
MOST_ANSWERS_AT_ONE_LINE = 100_000


# Two threads entering traces at once: one enters, the other is told a trace is running.
_ENTERING = threading.Lock()


class trace:
    """A context manager: PyTorch code inside runs on ``"cuda"`` as if ``gpu`` were present,
    without computing, and its CUDA memory is recorded (see ``vramlab.trace``'s module notes).

    gpu: a device profile, built-in (``"h100"``, ``"h200"``) or a profile file.
    answer_reads: where given, a value the trace cannot know (``loss.item()`` for a log line,
    ``.cpu()`` of a computed tensor) is answered with it instead of stopping the trace, and the
    snapshot says how many were: for programs that only print such values. A program whose
    allocations depend on them (a loop until the loss is small) is then traced along the path
    this answer takes, which may not be the GPU's. Data-dependent shapes still stop the trace.
    max_events: the most events the trace records (by default VRAMLAB_TRACE_MAX_EVENTS, else
    2,000,000): an allocation past it stops the program with ``UnfollowedError`` in one line, the
    trace so far kept (a program that never ends would otherwise grow the host's memory for ever).
    """

    def __init__(
        self, gpu: str = "h100", answer_reads: Optional[float] = None, world_size: Optional[int] = None, rank: Optional[int] = None, max_events: Optional[int] = None
    ) -> None:
        import torch

        if not isinstance(gpu, (str, os.PathLike)):
            raise TypeError(f"gpu must be a GPU's name (h100, a100-80gb, rtx-4090, ...: vramlab list names them) or a profile file's path, not {type(gpu).__name__}")
        if answer_reads is not None and (isinstance(answer_reads, bool) or not isinstance(answer_reads, (int, float))):
            raise TypeError(f"answer_reads must be a number (the value to answer reads with) or None, not {answer_reads!r}")
        if answer_reads is not None and not (abs(answer_reads) < 2**1023 and math.isfinite(answer_reads)):
            # int(nan) and int(inf) have no value: a read of an integer tensor answered with it
            # would fail inside the program, far from here.
            raise ValueError(f"answer_reads={answer_reads!r}: give a finite number")

        self.release = compat.check(torch)
        set_torch(torch)
        self.torch = torch
        self.gpu: Dict[str, Any] = json.loads(_vramlab.gpu(os.fspath(gpu)))
        self.major, self.minor = (int(part) for part in str(self.gpu["compute_capability"]).split(".")[:2])
        self.threads_per_sm = threads_per_sm(self.major, self.minor)
        self.record = Recorder(torch, self.gpu, self._phase)
        self.record.max_events = recorder_max_events(max_events)
        # One rank of a distributed program (distributed.py): its own GPU is cuda:{rank}, as
        # torchrun's LOCAL_RANK on one host.
        self.world_size, self.rank = distributed.check_rank(world_size, rank)
        # A rank of a launched job (torchrun's variables set) only where one was asked for: a plain
        # process has none, and libraries decide by them (accelerate, and so Trainer, take a
        # process with LOCAL_RANK set for a distributed one and wrap the model in DDP).
        self.launched = world_size is not None or rank is not None
        self.device_index = self.rank
        self.record.device, self.record.devices = self.device_index, self.world_size
        self.host_copies_kept = 0
        # "meta" while the program asks for its own meta tensors, "gpu" while it asks for a GPU
        # device, None otherwise (modes.py: OnTheGpu, Allocations._program_meta).
        self.explicit_device: Optional[str] = None
        # Raised while tensors made on meta by PyTorch's own code stand in for the GPU's (a
        # checkpoint the trace saved, loaded back: paths.py).
        self.stand_in_meta = 0
        # Raised while a random generator's state is broadcast (distributed.py: RNG_STATE_NOTE).
        self.same_state_broadcasts = 0
        self.shadows = Shadows(torch)
        self.record.on_death.append(self.shadows.forget)
        self.settings = standin.environment_settings()
        self._check_settings()
        self.answer_reads = answer_reads
        # Set while the program reads a stand-in's values through the host (tolist, printing):
        # its copy to the host is then a read, refused where the values are not known.
        self.reading_values: Optional[str] = None
        # Set while the program reads one floating-point value (loss.item(), float(t), a format):
        # an unknown one is then answered with a placeholder (unknown.py), which rules/reads.py
        # says by setting `placeholder_given`.
        self.placeholder_reads = False
        self.placeholder_given = False
        self.autocast: Optional[Autocast] = None
        self.modes: List[Any] = []
        self.rules: Any = None
        self.in_optimizer = 0
        self.in_module_move = 0
        # Whether the last Module.to named the meta device itself (modes.py, _parse_to).
        self.module_to_meta = False
        # The first use of the GPU from a thread the trace does not follow, said when it ends.
        self.escaped: Optional[str] = None
        # Why the program's run ended inside the trace, where it did not run to its end.
        self.stopped: Optional[str] = None
        self._answers_at: Dict[str, int] = {}
        # Library rules that know a value the program reads (libraries.py): each takes the tensor
        # read and gives its value, or None.
        self.read_answers: List[Any] = []
        # Functions of a boolean mask whose values the trace does not have: True where it is
        # answered all set (a library's mask known to keep every element), else None.
        self.mask_answers: List[Any] = []
        # Likewise for a GPU tensor's values copied to the host (.cpu()): a fill value, or None.
        self.host_answers: List[Any] = []
        self._patches = standin.Patches()
        self._registered: List[RegisteredKernels] = []
        self._hooks: List[Any] = []
        self.host = HostWatch()

    def _check_settings(self) -> None:
        """Settings PyTorch would refuse at the program's first CUDA allocation stop the trace
        before the program runs, in PyTorch's words for the installed release (the replay's
        grammar of each release: experiments/src/alloc_conf.rs)."""
        if not self.settings.strip():
            return
        from .. import replay
        from ..errors import SettingsError

        one_block = {"segments": [], "device_traces": [[{"action": "alloc", "addr": 1 << 40, "size": 512, "stream": 0, "frames": []}]]}
        try:
            replay(one_block, alloc_conf=self.settings, torch=f"{self.release[0]}.{self.release[1]}")
        except SettingsError as error:
            reason = str(error).split(": ", 1)[-1]
            raise UnfollowedError(
                f"PYTORCH_ALLOC_CONF={self.settings!r}: {reason}; PyTorch {self.torch.__version__} refuses it at the program's first CUDA allocation, so the trace stops before the program runs"
            ) from None

    def __repr__(self) -> str:
        record = self.record
        stopped = f", stopped early: {self.stopped}" if self.stopped else ""
        return f"<vramlab.trace for {self.gpu['name']}, torch {self.torch.__version__}: {len(record.events):,} events, peak allocated {record.peak:,} B ({record.peak / 2**20:,.1f} MiB){stopped}>"

    def summary(self) -> str:
        """The trace in a few lines: the GPU and torch it was traced for, its events, the peak of
        the program's tensors, the training steps traced, what it noted and what to call next."""
        record = self.record
        allocations = sum(1 for event in record.events if event.get("action") == "alloc")
        mib = lambda n: f"{n / 2**20:,.1f} MiB"  # noqa: E731
        lines = [
            f"vramlab.trace for {self.gpu['name']} (compute capability {self.gpu['compute_capability']}{'' if self.gpu.get('measured', True) else ', from its datasheet'}), torch {self.torch.__version__}",
            f"  {len(record.events):,} events, {allocations:,} of them allocations; {mib(record.allocated)} allocated at the end",
            f"  peak allocated {peak_bound(record.said_notes())}{mib(record.peak)} (the tensors' bytes, a lower bound of PyTorch's figure: vramlab.replay(t) gives PyTorch's peaks)",
        ]
        released = record.peak_releasing_held() if record.held_deaths else record.peak
        if released < record.peak:
            lines.append(f"  peak allocated {mib(released)} if DDP's replaced buckets are freed at the rebuild (it varies by rank and run; the trace keeps them)")
        steps = len(record.step_ends)
        if steps:
            lines.append(f"  {steps} training step{'s' if steps != 1 else ''} traced (optimizer.step()): t.steady() says whether memory stopped growing")
        else:
            lines.append("  no training step (optimizer.step()) traced")
        if record.notes:
            lines.append(f"  {len(record.notes)} note{'s' if len(record.notes) != 1 else ''} on what was not followed exactly (also in t.snapshot()['vramlab_notes']):")
            lines.extend(f"    - {note}" for note in record.said_notes())
        if self.world_size > 1:
            lines.append(f"  rank {self.rank} of {self.world_size}")
        if self.stopped:
            lines.append(f"  stopped early: {self.stopped}")
        lines.append('  next: vramlab.tune(t, capacity="80 GiB") ranks PYTORCH_ALLOC_CONF settings under a cap; t.breakdown() says what holds the peak; t.save("snap.pickle")')
        return "\n".join(lines)

    # What the rules and stand-ins ask ------------------------------------------------------

    def note(self, what: str) -> None:
        self.record.note(what)

    def frame(self) -> Optional[Dict[str, Any]]:
        return user_frame()

    def autocast_on(self) -> bool:
        return self.autocast is not None and self.torch.is_autocast_enabled("cuda")

    def on_the_gpu(self, fn: Any) -> Any:
        """`fn`, run inside the trace's function mode where PyTorch runs it without (the autograd
        engine carries no torch function modes into backward: hooks, checkpoints' recomputation)."""

        def run(*args: Any, **kwargs: Any) -> Any:
            if self.modes and self.modes[0] not in self.torch.overrides._get_current_function_mode_stack():
                with self.modes[0]:
                    return fn(*args, **kwargs)
            return fn(*args, **kwargs)

        return run

    def one_gpu(self, device: Any) -> None:
        # A device as the program names it: an index, "cuda:1", torch.device("cuda", 1).
        index = device if isinstance(device, int) or device is None else self.torch.device(device).index
        if index not in (None, self.device_index):
            raise UnfollowedError(
                f"device cuda:{index} at {here()}: the trace stands in for one GPU per process ({self.gpu['name']}, device {self.device_index}, rank {self.rank} of {self.world_size}); a process using another GPU is not followed (the trace up to there is kept)"
            )

    def redirect(self, value: Any) -> Any:
        """A device the program names, with "cuda" made the stand-in device ("meta")."""
        torch = self.torch
        if isinstance(value, torch.device) and value.type == "cuda":
            self.one_gpu(value)
            return torch.device("meta")
        if isinstance(value, str) and value.split(":")[0] == "cuda":
            self.one_gpu(value)
            return "meta"
        return value

    def answered(self, dtype: Any) -> Any:
        """The value asked for with ``answer_reads``, as a Python number of `dtype`'s kind."""
        self.note(
            "{count} values read back that a trace cannot know were answered "
            + f"{self.answer_reads!r} as asked (answer_reads): where the program's allocations depend on them, it was traced along the path that answer takes"
        )
        at = here()
        self._answers_at[at] = self._answers_at.get(at, 0) + 1
        if self._answers_at[at] > MOST_ANSWERS_AT_ONE_LINE:
            # A loop that runs until a value says stop would never stop on an answered value.
            raise UnfollowedError(
                f"read at {at}: answered {MOST_ANSWERS_AT_ONE_LINE:,} times (answer_reads); a loop whose end depends on the values would not end on answered ones, so the trace stops here (the trace up to there is kept)"
            )
        answer = self.answer_reads
        if dtype == self.torch.bool:
            return bool(answer)
        if not (dtype.is_floating_point or dtype.is_complex):
            return int(answer or 0)
        return float(answer or 0.0)

    def from_host(self, func: Any, args: Any, kwargs: Dict[str, Any]) -> Any:
        """``torch.tensor(data, device="cuda")`` and its kin: PyTorch makes them on the host and
        copies them over out of sight of dispatch modes, so they are made here as the same host
        tensor and a copy to the stand-in device, which the trace records (and whose values it
        keeps where they are known). None where the tensor is not for the GPU."""
        torch = self.torch
        device = kwargs.get("device")
        if func is torch.Tensor.new_tensor:
            if not args or not isinstance(args[0], torch.Tensor):
                return None
            data = args[1] if len(args) > 1 else kwargs.get("data")
            target = self.redirect(device) if device is not None else args[0].device
            made_by, made_args = torch.tensor, (data,)
            kwargs = {"dtype": args[0].dtype, **{k: v for k, v in kwargs.items() if k != "data"}}
        else:
            data = args[0] if args else kwargs.get("data", kwargs.get("obj"))
            target = self.redirect(device)
            made_by, made_args = func, tuple(args)
        if target is None or torch.device(target).type != "meta":
            return None
        if isinstance(data, torch.Tensor) and data.device.type == "meta":
            return None
        requires_grad = bool(kwargs.get("requires_grad", False))
        kwargs = {k: v for k, v in kwargs.items() if k not in ("device", "pin_memory", "requires_grad")}
        made = made_by(*made_args, device="cpu", **kwargs).to("meta")
        return made.requires_grad_(True) if requires_grad else made

    def known_shape(self, func: Any, args: Any, kwargs: Dict[str, Any]) -> Any:
        """An operation whose result's shape comes from values (nonzero, masked_select, unique),
        on stand-ins whose values are all known: run on their CPU copies, and its outputs made as
        stand-ins of the shapes that gives (recorded, their values kept). None where a value is
        not known."""
        torch = self.torch
        leaves = torch.utils._pytree.tree_leaves((args, kwargs))
        stand_ins = [a for a in leaves if isinstance(a, torch.Tensor) and a.device.type == "meta"]
        if not stand_ins or any(self.shadows.view(a) is None for a in stand_ins):
            return None
        on_cpu = torch.utils._pytree.tree_map(self.shadows._on_cpu, (args, kwargs))
        result = func(*on_cpu[0], **on_cpu[1])
        frame = user_frame()
        self.note(
            "{count} operations whose result's shape comes from values (nonzero, masked_select, unique, a boolean mask's indexing) had inputs whose values were known without a GPU (vramlab/_tracer/values.py) and were answered; the scratch their CUDA kernels allocate for themselves (CUB's) is not in the trace"
        )

        return torch.utils._pytree.tree_map(lambda value: self.stand_in(value, frame=frame), result)

    def stand_in(self, value: Any, keep_values: bool = True, frame: Any = None) -> Any:
        """A recorded stand-in of a host tensor's shape, strides and dtype, as the GPU would make
        it; holding its values where `keep_values` (known_shape's results) and not where they are an
        assumption (a selection answered as the most it could be)."""
        torch = self.torch
        if not isinstance(value, torch.Tensor):
            return value
        made = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
        self.record.track(made, frame or user_frame())
        if keep_values:
            self.shadows.adopt(made, value)
        return made

    def _phase(self) -> str:
        if self.in_optimizer:
            return "optimizer"
        if self.in_module_move:
            return "parameters and buffers"
        if self.torch._C._current_autograd_node() is not None:
            return "backward"
        return "forward and other"

    def _parameter(self, tensor: Any) -> None:
        addr = self.record.address(tensor.untyped_storage()) if isinstance(tensor, self.torch.Tensor) else None
        if addr is not None:
            self.record.phases[addr] = "parameters and buffers"

    # The record ----------------------------------------------------------------------------

    def _datasheet_note(self) -> str:
        """What a trace for a GPU known from its datasheets alone rests on, and what it leaves
        uncertain (experiments/src/gpus.rs holds the figures and their sources)."""
        from .rules.attention import priority
        from .rules.cublas import workspace_size

        gpu, release = self.gpu, self.release
        cublas = workspace_size(release, self.major, self.minor, os.environ)
        order = ", ".join(priority(self.major, minor=self.minor, release=release))
        return (
            f"the {gpu['name']} is known to vramlab from its datasheets, not measured ({gpu['source']}): total memory {gpu['memory_said']}; "
            + f"what follows from compute capability {gpu['compute_capability']} is PyTorch's rule, not a measurement: cuBLAS's workspace {cublas:,} B per handle (rules/cublas.py, CublasHandlePool.cpp), "
            + f"attention tried in the order {order} where each qualifies (rules/attention.py, sdp_utils.cpp), bfloat16 supported from major 8; "
            + f"cuDNN's convolution workspaces were measured on the H100 and H200 only, so convolutions here are traced without them: peak reserved may be higher by up to the largest workspace cuDNN picks (the note on convolutions says how many)"
        )

    def snapshot(self) -> Dict[str, Any]:
        """The record so far, as a PyTorch memory snapshot (a dict)."""
        header = [
            f"traced without a GPU by vramlab.trace for {self.gpu['name']} (compute capability {self.gpu['compute_capability']}, torch {self.torch.__version__}): allocations and frees as the caching allocator would be asked for them, with no data computed"
        ]
        if not self.gpu.get("measured", True):
            header.append(self._datasheet_note())
        if self.release != (2, 11):
            header.append(
                f"torch {self.release[0]}.{self.release[1]}: where its rules differ from 2.11's (cuBLAS workspaces, attention backends, autocast lists, checkpointing), they are read from that release's sources and binaries, not measured on a GPU (the GPU measurements are torch 2.11's)"
            )
        if self.stopped is not None:
            header.append(
                f"the trace stopped before the program ended ({self.stopped}): this record holds the program up to there only, so its peaks are those of that part, a lower bound of the whole program's"
            )
        return self.record.snapshot(header, self.settings)

    def save(self, path: str) -> None:
        """Writes the snapshot as a pickle (gzipped where the name ends in .gz), through a
        temporary file renamed into place: an interrupted save leaves no truncated file."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"save: a path (str or os.PathLike) names the snapshot file, not {type(path).__name__}")
        write_atomically(os.fspath(path), self.snapshot())

    def steady(self, alloc_conf: Optional[str] = None, capacity: Optional[int] = None) -> Steady:
        """Whether the traced training steps reached a steady state: the peaks after each of the
        last steps under `alloc_conf` (the program's own setting by default), or what each needs
        to fit under `capacity`, and a line of advice ("trace more steps (at least N)")."""
        from .steps import steady

        return steady(self.snapshot(), self.settings if alloc_conf is None else alloc_conf, capacity, self.gpu["profile"])

    @property
    def peak_allocated(self) -> int:
        """The most bytes the program's tensors held at once, each rounded up to 512 B: a lower
        bound of PyTorch's peak allocated, which also counts the unsplit remainder of any cached
        block a tensor is given (``vramlab.replay(t.snapshot())`` gives PyTorch's figure)."""
        return self.record.peak

    def breakdown(self) -> Dict[str, Any]:
        """Where the peak is: the bytes live at the traced peak of allocated memory (blocks
        rounded to 512 B, as PyTorch counts them), by what the program was doing when each was
        allocated: ``parameters and buffers`` (registered on a module, or moved with it by
        ``.to``/``.cuda``), ``optimizer`` (made inside ``optimizer.step()``: its state, and its
        temporaries where the peak falls in a step), ``backward`` (gradients and the backward's
        temporaries), ``forward and other`` (activations, inputs, everything else) and
        ``workspaces`` (cuBLAS's); with the phase the peak fell in. A breakdown of the trace, not of
        a replay: reserved memory and the allocator's rounding of large blocks are the replay's."""
        return self.record.breakdown()

    # Entering and leaving -------------------------------------------------------------------

    def __enter__(self) -> "trace":
        with _ENTERING:
            return self._enter()

    def _enter(self) -> "trace":
        if standin.ACTIVE:
            raise UnfollowedError(
                f"vramlab.trace at {here()}: a trace is already running in this process, and traces do not nest (the one running keeps recording; finish it first, or trace the inner part on its own)"
            )
        self._install()
        try:
            self._excepthook = threading.excepthook

            def said_once(args: Any) -> None:
                # A thread's use of the GPU the trace does not follow is said when the trace ends
                # (the error the trace raises then); a thread's own traceback of it would show
                # the tracer's frames.
                if isinstance(args.exc_value, UnfollowedError):
                    if self.escaped is None or str(args.exc_value) != self.escaped:
                        print(f"error: in thread {getattr(args.thread, 'name', '?')!r}: {args.exc_value}", file=sys.stderr)
                    return
                self._excepthook(args)

            self._said_once: Optional[Callable[[Any], None]] = said_once
            threading.excepthook = said_once
        except BaseException:
            self._uninstall()
            raise
        return self

    def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> None:
        self._uninstall()
        if exc is not None and not isinstance(exc, (SystemExit, KeyboardInterrupt)):
            self.stopped = stopped_by(exc)
        elif isinstance(exc, KeyboardInterrupt):
            self.stopped = "interrupted (KeyboardInterrupt)"
        if isinstance(exc, TypeError) and "UnknownInt" in str(exc) and traceback is not None:
            # PyTorch's argument parser refuses a placeholder integer (unknown.py) as a size or an
            # argument before any mode sees the call: that is the refusal, said as one.
            frame = traceback
            while frame.tb_next is not None:
                frame = frame.tb_next
            where = f"{frame.tb_frame.f_code.co_filename}:{frame.tb_lineno}"
            self.stopped = (
                f"{str(exc).splitlines()[0].split(' - ')[0]} at {where}: an integer the program read back was used as a size or an "
                "argument, and a trace without data has none; the trace up to there is kept"
            )
            raise UnfollowedError(self.stopped) from exc
        if self.escaped is not None and not isinstance(exc, UnfollowedError):
            # The program's own error after a thread's refused work (a result that never came)
            # follows from the refusal, which is said instead.
            self.stopped = self.escaped
            raise UnfollowedError(self.escaped) from exc

    def _install(self) -> None:
        torch = self.torch
        from .modes import Allocations, OnTheGpu

        self.rules = Rules(self)
        table: standin.Table = {}
        table.update(standin.device_queries(self))
        table.update(standin.random_state(torch))
        table.update(standin.refusals(self))
        table.update(standin.legacy_types(torch))
        self._streams = streams.Streams(self)
        table.update(self._streams.table())
        self._distributed = distributed.Distributed(self)
        table.update(self._distributed.table())
        table.update(futures.future_paths(self))
        table.update(paths.serialization_paths(self))
        table.update(paths.checkpoint_paths(self))
        table.update(paths.program_paths(self))
        table.update(paths.optimizer_paths(self))
        table.update(sync_batch_norm_paths(self))
        table.update(unknown.python_paths())
        self.device_worker = DeviceWorker(torch)
        table.update(engine_paths(self))
        # torch.cuda.memory's (and torch.cuda.random's) own names for the same queries: torch.cuda's
        # are re-exports, and PyTorch's code calls either.
        for (owner, name), value in list(table.items()):
            if owner is torch.cuda and name not in ("device", "Stream", "stream", "Event"):
                for module in (torch.cuda.memory, torch.cuda.random):
                    if hasattr(module, name) and (module, name) not in table:
                        table[(module, name)] = value
        kernels = Autocast(torch, here, self.release)
        kernels.install()
        self.autocast = kernels
        for kernels_for in (RecurrentCells, CudaComposites, LinearPath, InPlaceWithoutMeta, SyncBatchNormKernels, FusedRmsNorm, SamplerKernels, ZeroTensorKernels):
            registered = kernels_for(torch)
            registered.install()
            self._registered.append(registered)
            if isinstance(registered, LinearPath):
                # F.linear as the GPU runs it, for where it reaches the mode whole (modes.py).
                self.linear = registered._linear
        table.update(paths.autocast_paths(self, kernels))
        self._patches.install(table)
        self._libraries = Libraries(self, self._patches.install)
        self._libraries.install()
        self._distributed.enter()
        # On CUDA, `module.to("cuda")` moves each parameter in place, so a parameter two modules
        # share (tied embeddings) moves once and stays shared; from CPU to meta PyTorch would make
        # a new Parameter per module instead. Swapping keeps each parameter's identity, as on CUDA.
        self._swap_was = torch.__future__.get_swap_module_params_on_conversion()
        torch.__future__.set_swap_module_params_on_conversion(True)
        # The default device as PyTorch keeps it: a DeviceContext mode, or none at all.
        self._device_context = getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None)
        standin.ACTIVE.append(self)
        from torch.nn.modules import module as module_module
        from torch.optim import optimizer as optimizer_module

        def step_started(*args: Any) -> None:
            self.in_optimizer += 1

        pacing: List[Any] = []

        def step_ended(optimizer: Any, *args: Any) -> None:
            self.in_optimizer -= 1
            if not pacing:
                pacing.append(weakref.ref(optimizer))
            if pacing[0]() is optimizer and not self.in_optimizer:
                self.record.step_ends.append(len(self.record.events))

        self._hooks = [
            optimizer_module.register_optimizer_step_pre_hook(step_started),
            optimizer_module.register_optimizer_step_post_hook(step_ended),
            module_module.register_module_parameter_registration_hook(lambda module, name, value: self._parameter(value)),
            module_module.register_module_buffer_registration_hook(lambda module, name, value: self._parameter(value)),
        ]
        self.thread = threading.current_thread()
        self.host.start()
        self.modes = [OnTheGpu(self), Allocations(self)]
        for mode in self.modes:
            mode.__enter__()

    def _uninstall(self) -> None:
        torch = self.torch
        self.host.stop()
        if getattr(self, "device_worker", None) is not None:
            self.device_worker.stop()
        if getattr(self, "_said_once", None) is not None and threading.excepthook is self._said_once:
            threading.excepthook = self._excepthook
        self._said_once = None
        if self in standin.ACTIVE:
            standin.ACTIVE.remove(self)
            # A default device the program set to "cuda" inside was "meta"; the one before stays.
            # Put back as it was (no mode where there was none: setting "cpu" would leave one on
            # the stack, which turns off PyTorch's fast paths after the trace), and before the
            # trace's own modes leave, which must be on top of the stack to leave it.
            if getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None) is not self._device_context:
                torch.set_default_device(None if self._device_context is None else self._device_context.device)
        for mode in reversed(self.modes):
            mode.__exit__(None, None, None)
        self.modes = []
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        if self.autocast is not None:
            self.autocast.uninstall()
            self.autocast = None
        for registered in reversed(self._registered):
            registered.uninstall()
        self._registered = []
        if getattr(self, "_libraries", None) is not None:
            self._libraries.uninstall()
        if self._patches:
            self._distributed.exit()
            self._patches.uninstall()
            torch.__future__.set_swap_module_params_on_conversion(self._swap_was)


def stopped_by(error: BaseException) -> str:
    """Why a trace stopped, from the error that stopped it: its message's first line (or its type's
    name), bounded, as a note in the snapshot says it."""
    try:
        text = str(error)
    except Exception:  # noqa: BLE001 - the program's own exception, whose __str__ may fail
        text = ""
    first = text.splitlines()[0] if text.strip() else type(error).__name__
    return first if len(first) <= 500 else first[:500] + f"... ({len(first):,} characters)"


__all__ = ["trace", "where"]
