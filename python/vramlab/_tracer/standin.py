"""The stand-in for ``torch.cuda`` (and ``torch.accelerator``, which PyTorch's own code asks from
2.12 on): one table of what each name answers inside a trace, installed and removed in one place
(`Patches`). A name left out reaches ``torch.cuda._lazy_init``, which the table makes a one-line
refusal naming the program's line: the trace never reaches a driver."""

from __future__ import annotations

import functools

import os
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..errors import UnfollowedError
from .where import here

Table = Dict[Tuple[Any, str], Any]


def counting(session: Any, attribute: str, fn: Any) -> Any:
    """`fn`, with the session's counter `attribute` raised while it runs."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        setattr(session, attribute, getattr(session, attribute) + 1)
        try:
            return fn(*args, **kwargs)
        finally:
            setattr(session, attribute, getattr(session, attribute) - 1)

    return run


class Patches:
    """Attributes replaced for one trace, and put back as they were (a class's staticmethod stays
    one when put back)."""

    def __init__(self) -> None:
        self._saved: List[Tuple[Any, str, Any]] = []

    def install(self, table: Table) -> None:
        for (owner, name), value in table.items():
            self._saved.append((owner, name, vars(owner).get(name, getattr(owner, name, None))))
            setattr(owner, name, value)

    def uninstall(self) -> None:
        for owner, name, value in reversed(self._saved):
            setattr(owner, name, value)
        self._saved = []

    def __bool__(self) -> bool:
        return bool(self._saved)


class Event:
    """``torch.cuda.Event`` in a trace: recorded and waited on as nothing (the trace's order is
    the program's), and a trace has no time (``elapsed_time`` answers 0.0, which the snapshot notes)."""

    cuda_event = 0
    event_id = 0

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False, external: bool = False) -> None:
        self.enable_timing = enable_timing

    def record(self, stream: Any = None) -> None:
        return None

    def wait(self, stream: Any = None) -> None:
        return None

    def synchronize(self) -> None:
        return None

    def query(self) -> bool:
        return True

    def elapsed_time(self, end_event: Any) -> float:
        note("{count} CUDA event timings answered 0.0 ms: a trace has no time")
        return 0.0


class DefaultStream:
    """The default CUDA stream, the one stream a trace follows."""

    cuda_stream = 0
    stream_id = 0
    device_index = 0
    device_type = 1  # c10::DeviceType::CUDA
    priority = 0

    @property
    def device(self) -> Any:
        import torch

        return torch.device("cuda", 0)

    native_handle = 0
    _as_parameter_ = 0

    def synchronize(self) -> None:
        return None

    def query(self) -> bool:
        return True

    def is_capturing(self) -> bool:
        return False

    def wait_event(self, event: Any) -> None:
        return None

    def wait_stream(self, stream: Any) -> None:
        return None

    def record_event(self, event: Any = None) -> Any:
        return event if event is not None else Event()

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, DefaultStream)

    def __hash__(self) -> int:
        return 0

    def __enter__(self) -> "DefaultStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class NoContext:
    """``torch.cuda.device(i)`` and the like: the trace has one device."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> "NoContext":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class Properties:
    """What ``torch.cuda.get_device_properties`` says of the profile's GPU: its name, compute
    capability, memory and SM count, and where the profile was calibrated on the GPU, what the
    driver reported then (the L2's size, the SM's limits). Libraries size work by some of these
    (timm's foreach optimizers chunk parameters to fit the L2), so a field the profile does not
    have stops the trace at the line that reads it rather than answering a guess."""

    # _CudaDeviceProperties' fields from the profile's [sm] section (cuDeviceGetAttribute).
    FROM_SM = {
        "warp_size": "warp_size",
        "max_threads_per_multi_processor": "max_threads_per_sm",
        "max_threads_per_block": "max_threads_per_block",
        "regs_per_multiprocessor": "registers_per_sm",
        "shared_memory_per_block": "shared_bytes_per_block",
        "shared_memory_per_block_optin": "shared_bytes_per_block_optin",
        "shared_memory_per_multiprocessor": "shared_bytes_per_sm",
    }

    def __init__(self, gpu: Dict[str, Any]) -> None:
        major, minor = (int(x) for x in str(gpu["compute_capability"]).split("."))
        self.name = gpu["name"]
        self.major, self.minor = major, minor
        self.total_memory = gpu["memory_bytes"]
        self.multi_processor_count = gpu["multiprocessors"]
        # A discrete board with one GPU: the kinds vramlab profiles.
        self.is_integrated = 0
        self.is_multi_gpu_board = 0
        if gpu.get("l2_bytes") is not None:
            self.L2_cache_size = int(gpu["l2_bytes"])
        for field, key in self.FROM_SM.items() if gpu.get("sm") else ():
            setattr(self, field, int(gpu["sm"][key]))
        self._source = gpu.get("source", "")

    def __getattr__(self, field: str) -> Any:
        if field.startswith("_"):
            raise AttributeError(field)
        raise UnfollowedError(
            f"torch.cuda.get_device_properties(...).{field} at {here()}: the profile of the {self.name} does not say it "
            f"({self._source}), and a trace without the GPU has no driver to ask; the trace up to there is kept"
        )

    def __repr__(self) -> str:
        return f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, total_memory={self.total_memory >> 20}MB, multi_processor_count={self.multi_processor_count})"


# The traces whose patches are installed (notes from module-level stand-ins go to the innermost).
ACTIVE: List[Any] = []


def note(what: str) -> None:
    if ACTIVE:
        ACTIVE[-1].note(what)


def host_generator(base: Any) -> Any:
    """``torch.Generator`` in a trace: one asked for on CUDA is made on the host (still a
    ``torch.Generator``), which operations on stand-ins take as they would the GPU's."""

    def new(cls: Any, device: Any = "cpu") -> Any:
        kind = device.type if hasattr(device, "type") else str(device).split(":")[0]
        return base.__new__(cls, device="cpu" if kind in ("cuda", "meta") else device)

    return type(base.__name__, (base,), {"__new__": staticmethod(new)})


def refusing_class(base: Any, refuse: Callable[[], Any]) -> Any:
    """A subclass of `base` that refuses to be made: still a type, so annotations such as
    ``torch.cuda.Stream | None`` in imported libraries keep working."""
    return type(base.__name__, (base,), {"__new__": staticmethod(lambda cls, *a, **k: refuse())})


def device_of(torch: Any, t: Any) -> Optional[str]:
    """A tensor's own device type ("meta" for a stand-in, which says "cuda" to the program while
    the trace's function mode is on), or None for anything else."""
    if not isinstance(t, torch.Tensor):
        return None
    with torch._C.DisableTorchFunction():
        return str(t.device.type)


def unfollowed(what: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise UnfollowedError(f"{what} at {here()}: vramlab.trace does not follow it yet (the trace up to there is kept)")

    return refuse


LEGACY_CUDA_TYPES = (
    "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "ByteTensor", "CharTensor",
    "ShortTensor", "IntTensor", "LongTensor", "BoolTensor",
)


def legacy_cuda_type(torch: Any, name: str) -> Any:
    """A stand-in for ``torch.cuda.<name>`` (a legacy tensor type): called, it makes the tensor as
    the legacy constructor would (sizes: uninitialized, as torch.empty; a sequence: its values, as
    torch.tensor; a tensor of its type: that tensor); ``isinstance`` and ``x.type(...)`` read it as
    the type it stands for."""
    dtype = getattr(torch, name).dtype

    class LegacyType(type):
        def __instancecheck__(cls, value: Any) -> bool:
            # A stand-in says it is on the GPU (is_cuda) while the trace runs.
            return isinstance(value, torch.Tensor) and value.is_cuda and value.dtype == dtype

        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            if kwargs.keys() - {"device"}:
                raise TypeError(f"torch.cuda.{name}(): unexpected keyword arguments {sorted(kwargs.keys() - {'device'})}")
            if len(args) == 1 and isinstance(args[0], torch.Size):
                args = tuple(args[0])
            if not args:
                return torch.empty(0, dtype=dtype, device="cuda")
            if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
                return torch.empty(args, dtype=dtype, device="cuda")
            if len(args) == 1 and isinstance(args[0], torch.Tensor):
                if isinstance(args[0], cls):
                    return args[0]
                raise TypeError(f"expected torch.cuda.{name} (got {args[0].dtype} on {args[0].device})")
            if len(args) == 1 and isinstance(args[0], (list, tuple)):
                return torch.tensor(args[0], dtype=dtype, device="cuda")
            raise TypeError(f"torch.cuda.{name}(): arguments not understood by vramlab.trace: {args!r}")

    return LegacyType(name, (), {"__module__": "torch.cuda", "dtype": dtype, "is_cuda": True})


def legacy_dtype(torch: Any, name: str) -> Any:
    """The dtype of a legacy tensor type's name ("torch.cuda.HalfTensor"), or None."""
    kind = getattr(torch, name.split(".")[-1], None)
    return getattr(kind, "dtype", None)


def device_queries(session: Any) -> Table:
    """What the program asks of the device and its memory: the profile's GPU, one of it, and the
    trace's own figures (reserved memory is the replay's answer, so reads of it are noted)."""
    torch = session.torch
    record = session.record
    props = Properties(session.gpu)
    cuda = torch.cuda

    def reserved_read(answer: Any) -> Any:
        session.note(
            "{count} reads of reserved or free memory (memory_reserved, memory_stats, mem_get_info) were answered with the bytes allocated so far, a lower bound: the reserved figures are the replay's"
        )
        return answer

    def memory_stats(device: Any = None) -> Dict[str, int]:
        now, peak = record.allocated, record.peak
        return reserved_read(
            {
                "allocated_bytes.all.current": now,
                "allocated_bytes.all.peak": peak,
                "reserved_bytes.all.current": now,
                "reserved_bytes.all.peak": peak,
                "active_bytes.all.current": now,
                "active_bytes.all.peak": peak,
                "num_alloc_retries": 0,
                "num_ooms": 0,
            }
        )

    def reset_peak(device: Any = None) -> None:
        record.reset_peak()
        session.note(
            "{count} resets of the peak statistics (torch.cuda.reset_peak_memory_stats and the like) were made by the program: the replay's PyTorch statistics (pytorch_stats) count their peaks from the last, as memory_stats() does, while its own peak figures are the whole program's"
        )

    def empty_cache() -> None:
        record.empty_cache()

    def mem_get_info(device: Any = None) -> Tuple[int, int]:
        return reserved_read((record.memory_bytes - record.allocated, record.memory_bytes))

    def set_fraction(fraction: float, device: Any = None) -> None:
        session.note(
            "{count} calls to set_per_process_memory_fraction were not applied: the trace asks for every allocation; replay with a capacity (vramlab.replay(..., capacity=...)) to see where the cap would bite"
        )

    memory = {
        "empty_cache": empty_cache,
        "memory_allocated": lambda device=None: record.allocated,
        "max_memory_allocated": lambda device=None: record.peak,
        "reset_peak_memory_stats": reset_peak,
        "reset_max_memory_allocated": reset_peak,
        "reset_max_memory_cached": reset_peak,
        "reset_accumulated_memory_stats": lambda device=None: None,
        "memory_reserved": lambda device=None: reserved_read(record.allocated),
        "max_memory_reserved": lambda device=None: reserved_read(record.peak),
        "memory_cached": lambda device=None: reserved_read(record.allocated),
        "max_memory_cached": lambda device=None: reserved_read(record.peak),
        "memory_stats": memory_stats,
        "memory_summary": lambda device=None, abbreviated=False: reserved_read(
            f"vramlab.trace: {record.allocated} bytes allocated, {record.peak} at most; reserved memory is the replay's answer"
        ),
        "mem_get_info": mem_get_info,
        "get_per_process_memory_fraction": lambda device=None: 1.0,
        "set_per_process_memory_fraction": set_fraction,
        "_record_memory_history": lambda *args, **kwargs: None,
        "_snapshot": lambda device=None: session.snapshot(),
        "_dump_snapshot": lambda filename="dump_snapshot.pickle": session.save(filename),
    }
    table: Table = {}
    for name, value in memory.items():
        for owner in (cuda, cuda.memory):
            if hasattr(owner, name) or owner is cuda:
                table[(owner, name)] = value
    table.update(
        {
            (cuda, "is_available"): lambda: True,
            (cuda, "device_count"): lambda: 1,
            (cuda, "current_device"): lambda: 0,
            (cuda, "get_device_name"): lambda device=None: props.name,
            (cuda, "get_device_properties"): lambda device=None: props,
            (cuda, "get_device_capability"): lambda device=None: (props.major, props.minor),
            (cuda, "is_bf16_supported"): lambda including_emulation=True: props.major >= 8,
            (cuda, "synchronize"): lambda device=None: None,
            (cuda, "set_device"): lambda device: None,
            (cuda, "is_current_stream_capturing"): lambda: False,
            (cuda, "Event"): Event,
            (cuda, "current_stream"): lambda device=None: DefaultStream(),
            (cuda, "default_stream"): lambda device=None: DefaultStream(),
            (cuda, "device"): NoContext,
            (cuda, "device_of"): NoContext,
            (cuda, "Stream"): refusing_class(cuda.Stream, unfollowed("torch.cuda.Stream")),
            (cuda, "stream"): unfollowed("torch.cuda.stream"),
            # What initialises CUDA or tidies inter-process memory has nothing to do in a trace.
            (cuda, "init"): lambda: None,
            (cuda, "ipc_collect"): lambda: None,
        }
    )
    # torch.accelerator: the device-generic front PyTorch's own code uses (the optimizers' graph
    # capture check asks it for the current stream from 2.12 on: torch/optim/optimizer.py's
    # _accelerator_graph_capture_health_check), answered as torch.cuda's names are.
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None:
        answers: Dict[str, Any] = {
            "is_available": lambda check_fork=False: True,
            "device_count": lambda: 1,
            "current_accelerator": lambda check_available=False: torch.device("cuda"),
            "current_device_index": lambda: 0,
            "current_device_idx": lambda: 0,
            "set_device_index": lambda device: None,
            "set_device_idx": lambda device: None,
            "current_stream": lambda device=None: DefaultStream(),
            "set_stream": lambda stream: None,
            "synchronize": lambda device=None: None,
            "get_device_capability": lambda device=None: {"major": props.major, "minor": props.minor},
            "device_index": NoContext,
        }
        for name, value in answers.items():
            if hasattr(accelerator, name):
                table[(accelerator, name)] = value
        for name, value in memory.items():
            for owner in (accelerator, getattr(accelerator, "memory", None)):
                if owner is not None and hasattr(owner, name):
                    table[(owner, name)] = value
        if hasattr(accelerator, "get_memory_info"):
            table[(accelerator, "get_memory_info")] = mem_get_info
            if hasattr(accelerator, "memory"):
                table[(accelerator.memory, "get_memory_info")] = mem_get_info
        if hasattr(accelerator, "empty_host_cache"):
            table[(accelerator, "empty_host_cache")] = lambda: None
    return table


def random_state(torch: Any) -> Table:
    """The CUDA generator's state (checkpoint saves and restores it, as do fork_rng and the
    program): a trace draws no numbers, so it is a fixed state, as the GPU's is after a seed."""
    table: Table = {}
    cuda = torch.cuda
    for owner in (cuda, cuda.random):
        table[(owner, "get_rng_state")] = lambda device="cuda": torch.zeros(16, dtype=torch.uint8)
        table[(owner, "get_rng_state_all")] = lambda: [torch.zeros(16, dtype=torch.uint8)]
        table[(owner, "set_rng_state")] = lambda new_state, device="cuda": None
        table[(owner, "set_rng_state_all")] = lambda new_states: None
        table[(owner, "seed")] = lambda: None
        table[(owner, "seed_all")] = lambda: None
        table[(owner, "initial_seed")] = lambda: 0
        table[(owner, "manual_seed")] = lambda seed: None
        table[(owner, "manual_seed_all")] = lambda seed: None
    # torch.Generator(device="cuda"): draws on stand-ins take any generator, and make nothing.
    table[(torch, "Generator")] = host_generator(torch.Generator)
    return table


FLEX_ATTENTION_REFUSAL = (
    "flex_attention at {here}: the GPU runs kernels torch.compile generates for each score and mask function, whose buffers "
    "vramlab.trace does not size; the trace up to there is kept"
)


def refused_on_stand_ins(torch: Any, call: Any, message: str) -> Any:
    """`call` (a method), refused where any tensor it is given stands in for a GPU one."""

    def refused(self: Any, *args: Any, **kwargs: Any) -> Any:
        if any(device_of(torch, leaf) == "meta" for leaf in torch.utils._pytree.tree_leaves((args, kwargs))):
            raise UnfollowedError(message.format(here=here()))
        return call(self, *args, **kwargs)

    return refused


def refusals(session: Any) -> Table:
    """What the trace does not stand in for, refused in one line; and torch.cuda._lazy_init, which
    PyTorch calls before anything reaches the driver, so that only work the trace does not stand
    in for gets there (another thread's, chiefly)."""
    torch = session.torch
    cuda = torch.cuda
    table: Table = {
        (cuda, "CUDAGraph"): refusing_class(cuda.CUDAGraph, unfollowed("torch.cuda.CUDAGraph")),
        (cuda, "graph"): refusing_class(cuda.graph, unfollowed("torch.cuda.graph")),
        (cuda, "make_graphed_callables"): unfollowed("torch.cuda.make_graphed_callables"),
    }
    owner_thread = threading.current_thread()

    def reached_cuda() -> None:
        thread = threading.current_thread()
        elsewhere = thread is not owner_thread
        where = here()
        message = (
            f"the CUDA runtime at {where} in thread {thread.name!r}: the program used the GPU from a thread the trace does not follow (it follows the thread that opened it); the trace up to there is kept"
            if elsewhere
            else f"the CUDA runtime at {where}: the program reached CUDA by a path vramlab.trace does not stand in for; the trace up to there is kept"
        )
        if elsewhere and session.escaped is None:
            session.escaped = message
        raise UnfollowedError(message)

    table[(cuda, "_lazy_init")] = reached_cuda
    # flex_attention, a higher-order operator, reaches neither the function mode nor the dispatch
    # mode first: its autograd kernel builds a joint graph by make_fx, which aborts the process on
    # stand-ins. On the GPU torch.compile generates its kernels per score and mask function (and
    # eagerly it materialises the scores); neither is sized here.
    flex = sys.modules.get("torch._higher_order_ops.flex_attention")
    for name in ("FlexAttentionHOP", "FlexAttentionBackwardHOP"):
        hop_class = getattr(flex, name, None)
        if hop_class is not None:
            table[(hop_class, "__call__")] = refused_on_stand_ins(torch, hop_class.__call__, FLEX_ATTENTION_REFUSAL)
    nested = torch.nested

    def nested_constructor(name: str) -> Any:
        made_by = getattr(nested, name)

        def construct(*args: Any, **kwargs: Any) -> Any:
            device = kwargs.get("device")
            leaves = torch.utils._pytree.tree_leaves((args, kwargs))
            if any(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in leaves) or (device is not None and torch.device(device).type == "cuda"):
                raise UnfollowedError(f"torch.nested.{name} at {here()}: nested tensors on the GPU are not followed; the trace up to there is kept")
            return made_by(*args, **kwargs)

        return construct

    for name in ("nested_tensor", "as_nested_tensor", "nested_tensor_from_jagged"):
        if hasattr(nested, name):
            table[(nested, name)] = nested_constructor(name)
    import torch.utils.dlpack as dlpack

    packs = getattr(dlpack, "to_dlpack", None)
    if packs is not None:

        def to_dlpack(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            # torch._C._to_dlpack: no dispatch or function mode sees it (so a stand-in says
            # it is on cuda here, as it does to the program).
            if isinstance(tensor, torch.Tensor) and tensor.device.type in ("meta", "cuda"):
                raise UnfollowedError(
                    f"to_dlpack at {here()}: a GPU tensor handed to another library (DLPack) is read there from GPU memory, which a trace has none of; the trace up to there is kept"
                )
            return packs(tensor, *args, **kwargs)

        table[(dlpack, "to_dlpack")] = to_dlpack
        if getattr(torch, "to_dlpack", None) is packs:
            table[(torch, "to_dlpack")] = to_dlpack
    return table


def legacy_types(torch: Any) -> Table:
    """The legacy constructors (torch.cuda.FloatTensor(4, 4)) make the tensor on the device in
    C++, which needs a driver: they make it as torch.empty and torch.tensor would."""
    return {(torch.cuda, name): legacy_cuda_type(torch, name) for name in LEGACY_CUDA_TYPES if hasattr(torch.cuda, name)}


def environment_settings() -> str:
    """The allocator settings the program's environment gives, as PyTorch reads them (the newer
    name first)."""
    return os.environ.get("PYTORCH_ALLOC_CONF", os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""))
