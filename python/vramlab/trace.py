"""Traces a PyTorch program's CUDA memory on a machine without a GPU.

    >>> import torch, vramlab
    >>> with vramlab.trace(gpu="h100") as t:
    ...     model = torch.nn.Linear(4096, 4096).to("cuda")
    ...     model(torch.randn(64, 4096, device="cuda")).sum().backward()
    >>> vramlab.tune(t.snapshot(), capacity="1 GiB")

Inside ``trace``, tensors asked for on ``"cuda"`` are made on PyTorch's ``meta`` device: they have
shapes, dtypes and storages but no data, so nothing is computed. To the program (and to PyTorch's
own Python code, which picks fast paths by it) such a tensor says it is on ``cuda:0``
(``x.device``, ``x.is_cuda``); below it, inside PyTorch's operators, it is on ``meta``. Each
storage the program makes is
an allocation the CUDA caching allocator would serve, in the same order and of the same size; each
storage that dies is a free. ``snapshot()`` gives the record in the form of PyTorch's own memory
snapshots (``torch.cuda.memory._snapshot()``), which ``vramlab.replay``, ``vramlab.tune``, the CLI
and PyTorch's memory_viz read; the caching allocator itself, under any ``PYTORCH_ALLOC_CONF``, is
vramlab's replay.

Allocations PyTorch makes behind the program's back are added by the rules measured for the GPU
named (reports/reference/h100/trace-workloads, torch 2.11 on an H100):
- the cuBLAS workspace, 32 MiB for each handle (one per thread: the program's and the autograd
  engine's) on its first matrix multiply, and cuBLASLt's 1 MiB on the first matrix multiply with a
  bias (``addmm``) on that handle; each right after the multiply's output.

What it cannot follow it says, in one line naming the operation and the program's line, raising
``vramlab.UnfollowedError`` (the trace up to there is kept): a value read back that cannot be
known without the GPU (``.item()`` of a computed tensor, ``nonzero``, a data-dependent shape;
values that came from the CPU or from deterministic factories, such as a tokenizer's attention
mask, are known and answered: vramlab/_values.py; GradScaler's check for overflowed gradients is
answered as a healthy step's and noted), ``scaled_dot_product_attention`` where the GPU would run
flash attention or memory-efficient attention with heads over 128, recurrent layers run as cuDNN
RNN (``nn.LSTM``, ``nn.GRU``, ``nn.RNN``: cuDNN's workspace and reserve sizes are not modelled;
the cells ``nn.LSTMCell``, ``nn.GRUCell`` and ``nn.RNNCell`` are followed on CUDA's fused path,
vramlab/_cells.py), CUDA streams, PyTorch's fused inference fast paths (``nn.MultiheadAttention``
and ``nn.TransformerEncoderLayer`` without gradients) on nested tensors (``nn.TransformerEncoder``
given a key padding mask) or between different tensors (both branches of self-attention, the
scaled-dot-product one and the general one taken for attention weights or a mask, are followed as
attention.cu and transformer.cpp run them) and operators PyTorch has no meta kernel for
(``ctc_loss``). ``F.linear`` adds its bias in place where the GPU does (vramlab/_linear.py). ``autocast("cuda")`` is followed, by PyTorch's own per-operator policies
(vramlab/_autocast.py), and so is ``scaled_dot_product_attention`` on cuDNN, memory-efficient
and math attention, with the backend PyTorch would pick (vramlab/_attention.py). Kernels' own scratch memory (reductions' buffers,
losses' temporaries) is added by PyTorch's rules (vramlab/_kernels.py). cuDNN's convolution
workspaces, which cuDNN chooses on the GPU by no rule PyTorch states, come from tables measured on
each GPU (vramlab/_convolution.py: torchvision's convolutions at common batch and image sizes,
H100 and H200). What it follows but cannot size, it notes in the snapshot (``vramlab_notes``,
said with every replay): convolutions outside those tables, among others.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import types
import weakref
from typing import Any, Dict, List, Optional, Tuple

from . import _vramlab
from . import _attention, _convolution, _kernels, _values
from ._autocast import Autocast
from ._cells import RecurrentCells
from ._linear import LinearPath
from ._registered import InPlaceWithoutMeta, RegisteredKernels
from .errors import UnfollowedError

__all__ = ["trace", "UnfollowedError"]

# Measured on an H100 (sm_90) with torch 2.11 (cu130): the first cuBLAS call of a thread allocates
# its handle's workspace (at::cuda::setWorkspaceForHandle), and the first cuBLASLt call on it
# another workspace (at::cuda::getCUDABlasLtWorkspace). PyTorch's rule for sm_90 is 32 MiB;
# CUBLAS_WORKSPACE_CONFIG (":SIZE_KiB:COUNT,...") overrides it, as it does in PyTorch.
_CUBLAS_WORKSPACE_SM90 = 32 << 20
_CUBLAS_WORKSPACE_OTHER = 8519680
_CUBLASLT_WORKSPACE = 1 << 20

# Operations that read values back or make shapes from values: a trace without data cannot
# follow them.
# Reads answered at one line of the program (answer_reads) before the trace stops: far more than
# any loop over steps or tokens asks, far fewer than a loop waiting on an answered value runs.
_MOST_ANSWERS_AT_ONE_LINE = 100_000
_READS_ONE_VALUE = {"_local_scalar_dense", "item", "is_nonzero"}
_READS_VALUES = {
    "_local_scalar_dense",
    "nonzero",
    "masked_select",
    "unique",
    "_unique",
    "_unique2",
    "unique_consecutive",
    "unique_dim",
    "equal",
    "is_nonzero",
    "item",
    "repeat_interleave",
    "bincount",
    "nonzero_static",
}
# PyTorch's fused inference fast paths, taken on the GPU where the program runs
# nn.MultiheadAttention or nn.TransformerEncoder(Layer) without gradients: their kernels make
# temporaries their meta kernels do not (their scaled-dot-product branch is followed before it
# gets here: trace._fast_attention, trace._fast_encoder_layer).
_FAST_PATHS = {
    "_native_multi_head_attention",
    "_transformer_encoder_layer_fwd",
    "_nested_tensor_from_mask",
    "_nested_tensor_from_mask_left_aligned",
    "_masked_softmax",
    "_transform_bias_rescale_qkv",
}
_MATMULS = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "addmv", "mv", "dot", "vdot", "_addmm_activation"}
_WITH_BIAS = {"addmm", "_addmm_activation"}
_RECURRENT = {"lstm", "gru", "rnn_tanh", "rnn_relu"}
# Outputs in the order the CUDA kernels allocate them, where it is not the order they are
# returned in: fused dropout makes its mask before its output (as recorded), the fused recurrent
# cells their workspace first (aten/src/ATen/native/cuda/RNN.cu).
_ALLOCATION_ORDER = {"native_dropout": (1, 0), "_thnn_fused_lstm_cell": (2, 0, 1), "_thnn_fused_gru_cell": (1, 0)}
_CONVOLUTIONS = {"convolution", "convolution_backward", "_convolution", "cudnn_convolution"}
# Losses whose CUDA kernels keep a full-size output storage and a full-size temporary
# (vramlab/_kernels.py), and the operators whose kernels allocate scratch.
_LOSSES = {"mse_loss", "smooth_l1_loss", "huber_loss"}
# Operators whose CUDA kernels allocate scratch of their own that the trace does not size (CUB's
# temporary storage in sorts, scans and embedding backward): noted in the snapshot.
_UNSIZED_SCRATCH = {
    "sort",
    "argsort",
    "topk",
    "kthvalue",
    "median",
    "cumsum",
    "cumprod",
    "cummax",
    "cummin",
    "logcumsumexp",
    "embedding_dense_backward",
    "_embedding_bag",
    "_embedding_bag_backward",
    "_embedding_bag_dense_backward",
    "searchsorted",
    "bincount",
    "histc",
    "randperm",
}
_KERNEL_SCRATCH = {"sum", "mean", "convolution_backward", "_softmax_backward_data", "_safe_softmax", "native_layer_norm_backward"} | _LOSSES


def _user_frame() -> Optional[Dict[str, Any]]:
    """The innermost frame of the traced program (outside torch and vramlab)."""
    frame: Optional[types.FrameType] = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith(_TORCH_DIR) or name.startswith(_HERE) or name.startswith("<frozen")):
            return {"filename": name, "line": frame.f_lineno, "name": frame.f_code.co_name}
        frame = frame.f_back
    return None


_HERE = os.path.dirname(os.path.abspath(__file__))
_TORCH_DIR = ""


def _where(frame: Optional[Dict[str, Any]]) -> str:
    """`frame`'s file:line; where that is a library's (an installed package's), also the line of
    the program's own that called into it, so that the message names the program's line."""
    if not frame:
        return "an unknown line"
    where = f"{frame['filename']}:{frame['line']}"
    if not _installed(frame["filename"]):
        return where
    caller: Optional[types.FrameType] = sys._getframe(1)
    while caller is not None:
        name = caller.f_code.co_filename
        if not (name.startswith(_TORCH_DIR or "\0") or name.startswith(_HERE) or name.startswith("<") or _installed(name)):
            return f"{where} (called from {name}:{caller.f_lineno})"
        caller = caller.f_back
    return where


def _installed(filename: str) -> bool:
    """Whether `filename` is an installed package's or the standard library's, not the program's."""
    import sysconfig

    folders = {sysconfig.get_paths().get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    return any(folder and filename.startswith(folder + os.sep) for folder in folders) or (os.sep + "site-packages" + os.sep) in filename


class trace:
    """A context manager: PyTorch code inside runs on ``"cuda"`` as if ``gpu`` were present,
    without computing, and its CUDA memory is recorded (see the module's notes).

    gpu: a device profile, built-in (``"h100"``, ``"h200"``) or a profile file.
    answer_reads: where given, a value the trace cannot know (``loss.item()`` for a log line,
    ``.cpu()`` of a computed tensor) is answered with it instead of stopping the trace, and the
    snapshot says how many were: for programs that only print such values. A program whose
    allocations depend on them (a loop until the loss is small) is then traced along the path
    this answer takes, which may not be the GPU's. Data-dependent shapes still stop the trace.
    """

    def __init__(self, gpu: str = "h100", answer_reads: Optional[float] = None) -> None:
        import torch

        global _TORCH_DIR
        # With the separator: torchvision and torchaudio are installed beside torch, and are not it.
        _TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
        self.gpu: Dict[str, Any] = json.loads(_vramlab.gpu(gpu))
        major, minor = (int(part) for part in str(self.gpu["compute_capability"]).split(".")[:2])
        self._major = major
        self._workspace = _workspace_size(major)
        self._threads_per_sm = _kernels.threads_per_sm(major, minor)
        self._memory_bytes = int(self.gpu["memory_bytes"])
        self._events: List[Dict[str, Any]] = []
        self._live: Dict[int, Any] = {}
        self._next_addr = 1 << 40
        self._handles: set = set()
        self._lt_handles: set = set()
        self._notes: Dict[str, int] = {}
        self._allocated = 0
        self._peak = 0
        self._modes: List[Any] = []
        self._patches: List[Any] = []
        self._autocast: Optional[Autocast] = None
        # ATen kernels registered while the trace is on (vramlab/_registered.py).
        self._registered: List[RegisteredKernels] = []
        # GradScaler's found_inf storages, by id, while they live.
        self._found_inf: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()
        self._settings = os.environ.get("PYTORCH_ALLOC_CONF", os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""))
        self._torch = torch
        self._shadows = _values.Shadows(torch)
        # Per allocation, what the program was doing when it was made (see breakdown()).
        self._phases: Dict[int, str] = {}
        self._storage_addr: Dict[int, int] = {}
        self._in_optimizer = 0
        self._in_module_move = 0
        self._hooks: List[Any] = []
        self._answer_reads = answer_reads
        # The first use of the GPU from a thread the trace does not follow, said when it ends.
        self._escaped: Optional[str] = None
        # Why the program's run ended inside the trace, where it did not run to its end.
        self._stopped: Optional[str] = None
        self._answers_at: Dict[str, int] = {}
        self._thread: Optional[threading.Thread] = None

    # The record -----------------------------------------------------------------------------

    def _alloc(self, size: int, frame: Optional[Dict[str, Any]]) -> int:
        rounded = (size + 511) // 512 * 512
        total = self._memory_bytes
        if self._allocated + rounded > total:
            # The tensors alive alone would not fit: the GPU fails here whatever the caching
            # allocator does (its reserve only adds to them), as a program that catches it sees.
            raise self._torch.OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate {size} bytes at {_where(frame)}: the tensors alive would hold {self._allocated + size} of the {self.gpu['name']}'s {total} bytes (vramlab.trace; the replay says where the caching allocator fails first)"
            )
        addr = self._next_addr
        # Addresses are the record's own, never reused: they pair each free with its allocation.
        self._next_addr += max(512, rounded)
        event = {"action": "alloc", "addr": addr, "size": size, "stream": 0, "frames": [frame] if frame else []}
        self._events.append(event)
        self._phases[addr] = self._phase()
        self._allocated += rounded
        self._peak = max(self._peak, self._allocated)
        return addr

    def _free(self, addr: int, size: int) -> None:
        for action in ("free_requested", "free_completed"):
            self._events.append({"action": action, "addr": addr, "size": size, "stream": 0, "frames": []})
        self._allocated -= (size + 511) // 512 * 512

    def _track(self, tensor: Any, frame: Optional[Dict[str, Any]], size: Optional[int] = None) -> None:
        """Records the allocation of `tensor`'s storage (of `size` bytes where the GPU's storage
        is larger than the meta tensor's), and its free when the storage dies."""
        storage = tensor.untyped_storage()
        key = storage._cdata
        if key in self._live or storage.nbytes() == 0:
            return
        size = storage.nbytes() if size is None else size
        addr = self._alloc(size, frame)
        self._storage_addr[key] = addr

        def freed(_ref: Any, key: int = key, addr: int = addr, size: int = size) -> None:
            if self._live.pop(key, None) is not None:
                self._shadows.forget(key)
                self._storage_addr.pop(key, None)
                self._free(addr, size)

        self._live[key] = weakref.ref(storage, freed)

    def _note(self, what: str) -> None:
        self._notes[what] = self._notes.get(what, 0) + 1

    def snapshot(self) -> Dict[str, Any]:
        """The record so far, as a PyTorch memory snapshot (a dict)."""
        notes = [
            f"traced without a GPU by vramlab.trace for {self.gpu['name']} (compute capability {self.gpu['compute_capability']}, torch {self._torch.__version__}): allocations and frees as the caching allocator would be asked for them, with no data computed"
        ]
        if self._stopped is not None:
            notes.append(
                f"the trace stopped before the program ended ({self._stopped}): this record holds the program up to there only, so its peaks are those of that part, a lower bound of the whole program's"
            )
        for what, count in sorted(self._notes.items()):
            notes.append(what.format(count=count))
        return {
            "segments": [],
            "device_traces": [list(self._events)],
            "allocator_settings": {"PYTORCH_ALLOC_CONF": self._settings},
            "vramlab_notes": notes,
        }

    def save(self, path: str) -> None:
        """Writes the snapshot as a pickle (gzipped where the name ends in .gz)."""
        import gzip
        import pickle

        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "wb") as f:
            pickle.dump(self.snapshot(), f, protocol=4)

    @property
    def peak_allocated(self) -> int:
        """The most bytes the program's tensors held at once, each rounded up to 512 B: a lower
        bound of PyTorch's peak allocated, which also counts the unsplit remainder of any cached
        block a tensor is given (``vramlab.replay(t.snapshot())`` gives PyTorch's figure)."""
        return self._peak

    def _answered(self, dtype: Any) -> Any:
        """The value asked for with ``answer_reads``, as a Python number of `dtype`'s kind."""
        self._note(
            "{count} values read back that a trace cannot know were answered "
            + f"{self._answer_reads!r} as asked (answer_reads): where the program's allocations depend on them, it was traced along the path that answer takes"
        )
        where = _where(_user_frame())
        self._answers_at[where] = self._answers_at.get(where, 0) + 1
        if self._answers_at[where] > _MOST_ANSWERS_AT_ONE_LINE:
            # A loop that runs until a value says stop would never stop on an answered value.
            raise UnfollowedError(
                f"read at {where}: answered {_MOST_ANSWERS_AT_ONE_LINE:,} times (answer_reads); a loop whose end depends on the values would not end on answered ones, so the trace stops here (the trace up to there is kept)"
            )
        answer = self._answer_reads
        if dtype == self._torch.bool:
            return bool(answer)
        if not (dtype.is_floating_point or dtype.is_complex):
            return int(answer or 0)
        return float(answer or 0.0)

    def _phase(self) -> str:
        if self._in_optimizer:
            return "optimizer"
        if self._in_module_move:
            return "parameters and buffers"
        if self._torch._C._current_autograd_node() is not None:
            return "backward"
        return "forward and other"

    def _parameter(self, tensor: Any) -> None:
        addr = self._storage_addr.get(tensor.untyped_storage()._cdata) if isinstance(tensor, self._torch.Tensor) else None
        if addr is not None:
            self._phases[addr] = "parameters and buffers"

    def breakdown(self) -> Dict[str, Any]:
        """Where the peak is: the bytes live at the traced peak of allocated memory (blocks
        rounded to 512 B, as PyTorch counts them), by what the program was doing when each was
        allocated: ``parameters and buffers`` (registered on a module, or moved with it by
        ``.to``/``.cuda``), ``optimizer`` (made inside ``optimizer.step()``: its state, and its
        temporaries where the peak falls in a step), ``backward`` (gradients and the backward's
        temporaries), ``forward and other`` (activations, inputs, everything else) and
        ``workspaces`` (cuBLAS's); with the phase the peak fell in. A breakdown of the trace, not of
        a replay: reserved memory and the allocator's rounding of large blocks are the replay's."""
        live: Dict[int, int] = {}
        allocated = peak = 0
        at_peak: Dict[int, int] = {}
        during = ""
        for event in self._events:
            if event["action"] == "alloc":
                block = (event["size"] + 511) // 512 * 512
                live[event["addr"]] = block
                allocated += block
                if allocated > peak:
                    peak, at_peak, during = allocated, dict(live), self._phases.get(event["addr"], "forward and other")
            elif event["action"] == "free_completed" and event["addr"] in live:
                allocated -= live.pop(event["addr"])
        by_phase: Dict[str, int] = {}
        for addr, block in at_peak.items():
            phase = self._phases.get(addr, "forward and other")
            by_phase[phase] = by_phase.get(phase, 0) + block
        return {"peak_allocated": peak, "peak_during": during, "live_at_peak": dict(sorted(by_phase.items(), key=lambda kv: -kv[1]))}

    # Entering and leaving -------------------------------------------------------------------

    def __enter__(self) -> "trace":
        self._install()
        return self

    def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> None:
        self._uninstall()
        if exc is not None and not isinstance(exc, (SystemExit, KeyboardInterrupt)):
            self._stopped = str(exc).splitlines()[0] if str(exc) else exc_type.__name__
        if self._escaped is not None and not isinstance(exc, UnfollowedError):
            # The program's own error after a thread's refused work (a result that never came)
            # follows from the refusal, which is said instead.
            self._stopped = self._escaped
            raise UnfollowedError(self._escaped) from exc

    def _install(self) -> None:
        torch = self._torch
        from torch.overrides import TorchFunctionMode
        from torch.utils._python_dispatch import TorchDispatchMode

        tracer = self

        def one_gpu(device: Any) -> None:
            # A device as the program names it: an index, "cuda:1", torch.device("cuda", 1).
            index = device if isinstance(device, int) or device is None else torch.device(device).index
            if index not in (None, 0):
                raise UnfollowedError(
                    f"device cuda:{index} at {_where(_user_frame())}: the trace stands in for one GPU ({self.gpu['name']}, device 0); programs spread over several GPUs are not followed (the trace up to there is kept)"
                )

        def redirect(value: Any) -> Any:
            if isinstance(value, torch.device) and value.type == "cuda":
                one_gpu(value)
                return torch.device("meta")
            if isinstance(value, str) and value.split(":")[0] == "cuda":
                one_gpu(value)
                return "meta"
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            return value

        cuda0 = torch.device("cuda", 0)
        # A tensor standing in for a CUDA one says so to the program (and to PyTorch's own Python
        # code, which picks fast paths by it: nn.MultiheadAttention's, the optimizers'), as it
        # would on the GPU; below the program (inside PyTorch's operators) it is on "meta".
        stand_in_says = {"is_cuda": True, "device": cuda0}
        factories = (torch.tensor, torch.as_tensor, torch.asarray)

        mha_forward = torch.nn.functional.multi_head_attention_forward

        class OnTheGpu(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = dict(kwargs or {})
                name = getattr(func, "__name__", "")
                if name == "__get__" and args and isinstance(args[0], torch.Tensor) and args[0].device.type == "meta":
                    said = stand_in_says.get(getattr(getattr(func, "__self__", None), "__name__", ""))
                    if said is not None:
                        return said
                if func is mha_forward:
                    # F.multi_head_attention_forward is Python that goes to torch function modes
                    # whole, and PyTorch takes this mode off while it runs: the
                    # scaled_dot_product_attention inside would run as on the meta device (the
                    # math path, a [B, H, L, L] matrix), where the GPU picks a fused backend. It
                    # runs with this mode on instead, its own check for modes answered "none".
                    functional = torch.nn.functional
                    check = functional.has_torch_function
                    functional.has_torch_function = lambda *_: False
                    try:
                        with self:
                            return func(*args, **kwargs)
                    finally:
                        functional.has_torch_function = check
                if name == "_native_multi_head_attention":
                    attended = tracer._fast_attention(self, args, kwargs)
                    if attended is not None:
                        return attended
                if name == "_transformer_encoder_layer_fwd":
                    encoded = tracer._fast_encoder_layer(self, args, kwargs)
                    if encoded is not None:
                        return encoded
                if func is torch.Tensor.get_device and args and isinstance(args[0], torch.Tensor) and args[0].device.type == "meta":
                    return 0
                if func in factories or func is torch.Tensor.new_tensor:
                    made = tracer._from_host(func, args, kwargs, redirect)
                    if made is not None:
                        return made
                if func is torch.Tensor.type and len(args) + len(kwargs) > 1:
                    # x.type(torch.cuda.HalfTensor), x.type("torch.cuda.FloatTensor"): a cast and a
                    # move to the GPU.
                    to = args[1] if len(args) > 1 else kwargs.get("dtype")
                    text = to if isinstance(to, str) else getattr(to, "__module__", "") + "." + getattr(to, "__name__", "")
                    if "cuda" in text.split(".")[:-1]:
                        dtype = getattr(to, "dtype", None) if not isinstance(to, str) else _legacy_dtype(torch, to)
                        if isinstance(dtype, torch.dtype):
                            return args[0].to(device="meta", dtype=dtype, non_blocking=bool(kwargs.get("non_blocking", False)))
                if name == "scaled_dot_product_attention":
                    attended = tracer._attention(args, kwargs)
                    if attended is not None:
                        return attended
                if name in _RECURRENT and any(
                    isinstance(a, torch.Tensor) and a.device.type == "meta"
                    for a in torch.utils._pytree.tree_leaves((args, kwargs))
                ):
                    raise UnfollowedError(
                        f"{name} at {_where(_user_frame())}: recurrent layers run as cuDNN RNN on the GPU (nn.LSTM, nn.GRU, nn.RNN), whose workspace and reserve sizes vramlab.trace does not model yet; loops over nn.LSTMCell, nn.GRUCell or nn.RNNCell are followed (the trace up to there is kept)"
                    )
                if name == "dropout" and func is torch.nn.functional.dropout:
                    # On CUDA, dropout is one fused kernel keeping a one-byte mask; elsewhere
                    # (meta too) PyTorch draws a noise tensor of the input's dtype: the CUDA
                    # choice is taken for tensors standing in for CUDA ones.
                    bound = _bind(func, args, kwargs)
                    x = bound.get("input")
                    if isinstance(x, torch.Tensor) and x.device.type == "meta" and bound.get("training", True):
                        p, inplace = bound.get("p", 0.5), bound.get("inplace", False)
                        if p > 0 and not inplace:
                            return torch.ops.aten.native_dropout(x, p, True)[0]
                if "device" in kwargs:
                    # A device given as a number is a CUDA device's index.
                    device = kwargs["device"]
                    if (isinstance(device, torch.device) and device.type == "meta") or (isinstance(device, str) and device.split(":")[0] == "meta"):
                        # The program's own meta tensors (`with torch.device("meta")`, a model built
                        # without memory) look like the trace's stand-ins for CUDA ones.
                        tracer._note(
                            "{count} tensors the program itself made on the meta device are counted as GPU memory until freed (a trace cannot tell them from its stand-ins for CUDA tensors): peak allocated may be higher than the GPU's by what they hold while alive"
                        )
                    if isinstance(device, int) and not isinstance(device, bool):
                        one_gpu(device)
                        kwargs["device"] = "meta"
                    else:
                        kwargs["device"] = redirect(device)
                if func is torch.Tensor.cuda:
                    one_gpu(args[1] if len(args) > 1 else kwargs.get("device"))
                    return args[0].to("meta")
                if func in (torch.Tensor.to, torch.Tensor.new_empty, torch.Tensor.new_zeros):
                    args = tuple(redirect(a) for a in args)
                if func is torch.Tensor.pin_memory:
                    return args[0]
                if (
                    func is torch.Tensor.__setitem__
                    and len(args) == 3
                    and isinstance(args[0], torch.Tensor)
                    and args[0].device.type == "meta"
                    and isinstance(args[2], (bool, int, float, complex))
                ):
                    # x[i] = 1.0 on a CUDA tensor makes the value on the CPU
                    # (python_variable_indexing.cpp), not on the device.
                    args = (args[0], args[1], torch.tensor(args[2], dtype=args[0].dtype))
                return func(*args, **kwargs)

        class Allocations(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                op = func._schema.name.split("::")[-1]
                # Only tensors standing in for CUDA ones have no values: the program's own CPU
                # tensors (an optimizer's step count) read back as they would.
                on_gpu = any(
                    isinstance(a, torch.Tensor) and a.device.type == "meta"
                    for a in torch.utils._pytree.tree_leaves((args, kwargs))
                )
                if op == "_amp_foreach_non_finite_check_and_unscale_" and on_gpu:
                    # GradScaler's found_inf: read back by its step, answered as a healthy step's.
                    tracer._found_inf[args[1].untyped_storage()._cdata] = args[1].untyped_storage()
                if op == "_local_scalar_dense" and on_gpu and args[0].untyped_storage()._cdata in tracer._found_inf:
                    tracer._note(
                        "{count} reads of GradScaler's found_inf answered 0 (no gradient overflowed, as in a healthy step; a step the GPU would skip for inf or NaN gradients is traced as taken)"
                    )
                    return 0.0
                # bool(x) and x.item() reach the mode whole where autograd is off (inference_mode),
                # and as _local_scalar_dense elsewhere: all read one value.
                if op in _READS_ONE_VALUE and on_gpu:
                    known = tracer._shadows.read(args[0])
                    if known is not None:
                        tracer._note(
                            "{count} values read back were known without a GPU (from the CPU or from known factories, through operations run again on small CPU copies: vramlab/_values.py) and answered"
                        )
                        return bool(known) if op == "is_nonzero" else known
                if op in ("_to_copy", "copy_") and on_gpu and _to_host(torch, op, args, kwargs or {}):
                    # A GPU tensor's values copied to the host: known values are copied; others
                    # the trace does not have.
                    source = args[0] if op == "_to_copy" else args[1]
                    known = tracer._shadows.view(source) if isinstance(source, torch.Tensor) else None
                    if known is None and tracer._answer_reads is not None:
                        dtype = (kwargs or {}).get("dtype") or source.dtype
                        known = torch.full(source.shape, tracer._answered(source.dtype), dtype=source.dtype).to(dtype)
                    if known is None:
                        raise UnfollowedError(
                            f"{op} at {_where(_user_frame())}: the program copies a GPU tensor's values to the host (.cpu(), .numpy(), .tolist()), and a trace without data has none; the trace up to there is kept (values only printed can be answered: vramlab.trace(answer_reads=0.0), --answer-reads 0)"
                        )
                    tracer._note(
                        "{count} values read back were known without a GPU (from the CPU or from known factories, through operations run again on small CPU copies: vramlab/_values.py) and answered"
                    )
                    if op == "copy_":
                        return args[0].copy_(known)
                    return known.to(**{k: v for k, v in (kwargs or {}).items() if k in ("dtype", "memory_format")}).clone()
                if op in _READS_ONE_VALUE and on_gpu and tracer._answer_reads is not None:
                    return tracer._answered(torch.bool if op == "is_nonzero" else args[0].dtype)
                if op in _FAST_PATHS and on_gpu:
                    raise UnfollowedError(
                        f"{op} at {_where(_user_frame())}: PyTorch's fused inference fast path with nested tensors (nn.TransformerEncoder given a key padding mask) or attention between different tensors, whose kernels' temporaries vramlab.trace does not size; the trace up to there is kept (torch.backends.mha.set_fastpath_enabled(False) traces the path taken in training)"
                    )
                if op in ("index", "_unsafe_index") and on_gpu and _boolean_indices(torch, args):
                    # A boolean mask's elements that are set pick the elements: a shape made from
                    # values, known where the mask's values are (ATen turns it into nonzero's
                    # indices on the GPU first: an allocation of its own).
                    args = tracer._mask_indices(op, args)
                if op in _READS_VALUES and on_gpu and op not in _READS_ONE_VALUE:
                    known = tracer._known_shape(func, args, kwargs or {})
                    if known is not None:
                        return known
                if op in _READS_VALUES and on_gpu:
                    raise UnfollowedError(
                        f"{op} at {_where(_user_frame())}: the program reads values back or makes a shape from them, and a trace without data has none; the trace up to there is kept"
                        + ("" if op != "_local_scalar_dense" else " (a value only printed can be answered: vramlab.trace(answer_reads=0.0), --answer-reads 0)")
                    )
                if op == "_grouped_mm" and on_gpu and args[0].dtype != torch.bfloat16:
                    # PyTorch's meta kernel takes bfloat16 only; what CUDA's fallback for other
                    # types allocates is not known here (MoE layers in bfloat16 are followed).
                    raise UnfollowedError(
                        f"{op} at {_where(_user_frame())}: a grouped matrix multiply (mixture-of-experts layers) in {str(args[0].dtype).replace('torch.', '')}, which vramlab.trace follows in bfloat16 only; the trace up to there is kept"
                    )
                if op in _RECURRENT and on_gpu:
                    raise UnfollowedError(
                        f"{op} at {_where(_user_frame())}: recurrent layers run as cuDNN RNN on the GPU (nn.LSTM, nn.GRU, nn.RNN), whose workspace and reserve sizes vramlab.trace does not model yet; loops over nn.LSTMCell, nn.GRUCell or nn.RNNCell are followed (the trace up to there is kept)"
                    )
                partial_norms = None
                if op == "_foreach_norm" and on_gpu:
                    partial_norms = tracer._foreach_norm_partials(args[0], _user_frame())
                grad_copy = None
                if op == "_scaled_dot_product_efficient_attention_backward" and on_gpu:
                    grad_copy = tracer._efficient_grad_copy(args[0], _user_frame())
                into = _engine_accumulation(torch, func, args, kwargs or {})
                if into is not None:
                    # As the GPU does it: the autograd engine adds a gradient into the one it
                    # holds alone (InputBuffer's accumulate), where under a dispatch mode PyTorch
                    # would make a new tensor.
                    return into.add_(args[1])
                try:
                    out = func(*args, **(kwargs or {}))
                except NotImplementedError as error:
                    if not on_gpu:
                        raise
                    # No meta kernel (or one that needs values): the trace cannot say what the
                    # GPU's kernel allocates.
                    why = "its result's shape depends on values, which a trace without data has none of" if "nonzero" in str(error) else "PyTorch has no kernel for it that runs without data (no meta kernel), so what the GPU's kernel allocates is unknown"
                    raise UnfollowedError(f"{op} at {_where(_user_frame())}: {why}; the trace up to there is kept") from None
                on_meta = [
                    t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor) and t.device.type == "meta"
                ]
                if any(t.layout != torch.strided for t in on_meta):
                    raise UnfollowedError(
                        f"{op} at {_where(_user_frame())}: sparse tensors on the GPU are not followed (their storages are not the caching allocator's blocks one to one); the trace up to there is kept"
                    )
                frame = _user_frame() if on_meta else None
                if op in _ALLOCATION_ORDER and len(on_meta) == len(_ALLOCATION_ORDER[op]):
                    on_meta = [on_meta[i] for i in _ALLOCATION_ORDER[op]]
                bound = _schema_values(func, args, kwargs or {}) if on_meta and op in _KERNEL_SCRATCH else {}
                full = tracer._loss_storage(op, bound) if op in _LOSSES else None
                if op == "_scaled_dot_product_efficient_attention":
                    # The dropout seed and offset stay on the host (the meta kernel makes them).
                    on_meta = [t for t in out[:2] if isinstance(t, torch.Tensor)]
                if op == "_scaled_dot_product_cudnn_attention":
                    # On the GPU: the dropout seed and offset first, then the output, and the
                    # log-sum-exp only where a gradient will be needed (the meta kernel always
                    # makes one).
                    kept = [out[6], out[7], out[0]] + ([out[1]] if args[4] else [])
                    on_meta = [t for t in kept if isinstance(t, torch.Tensor)]
                if on_gpu or on_meta:
                    tracer._shadows.after(func, op, args, kwargs or {}, out)
                if op in ("convolution", "convolution_backward") and on_meta:
                    tracer._convolution(op, _schema_values(func, args, kwargs or {}), out, frame)
                for t in on_meta:
                    tracer._track(t, frame, full)
                if op == "_scaled_dot_product_cudnn_attention":
                    tracer._scratch([_attention.CUDNN_FORWARD_WORKSPACE], frame)
                elif op == "_scaled_dot_product_cudnn_attention_backward":
                    tracer._scratch([_attention.cudnn_backward_workspace(args[1], args[2])], frame)
                elif op == "_scaled_dot_product_efficient_attention_backward" and on_gpu:
                    tracer._efficient_backward_scratch(args, grad_copy, frame)
                if bound:
                    tracer._kernel_scratch(op, bound, on_meta[0], frame)
                if partial_norms is not None:
                    tracer._free(*partial_norms)
                if op in _UNSIZED_SCRATCH and on_meta:
                    tracer._note(
                        "{count} sorts, scans, top-k and embedding backwards are traced without the scratch their CUDA kernels allocate for themselves (CUB's temporary storage, not derived yet): peak reserved may be higher by up to its size"
                    )
                if op in _MATMULS and on_meta:
                    tracer._matmul(op, frame)
                if op in _CONVOLUTIONS and op not in ("convolution", "convolution_backward") and on_meta:
                    tracer._note(
                        "{count} cuDNN convolutions (forward and backward) are in the trace without their workspaces, which cuDNN chooses at run time on the GPU: peak reserved may be higher, by up to the largest workspace"
                    )
                return out

        def unfollowed(what: str):
            def refuse(*args: Any, **kwargs: Any) -> Any:
                raise UnfollowedError(f"{what} at {_where(_user_frame())}: vramlab.trace does not follow it yet (the trace up to there is kept)")

            return refuse

        def empty_cache() -> None:
            self._events.append({"action": "empty_cache", "addr": 0, "size": 0, "stream": 0, "frames": []})

        def reset_peak(device: Any = None) -> None:
            self._peak = self._allocated

        def reserved_read(answer: Any) -> Any:
            # Reserved memory is the caching allocator's decision, which the replay makes from the
            # finished trace: while tracing, the program is told the allocated bytes (a lower
            # bound), and the snapshot says so.
            self._note(
                "{count} reads of reserved or free memory (memory_reserved, memory_stats, mem_get_info) were answered with the bytes allocated so far, a lower bound: the reserved figures are the replay's"
            )
            return answer

        def memory_stats(device: Any = None) -> Dict[str, int]:
            return reserved_read(
                {
                    "allocated_bytes.all.current": self._allocated,
                    "allocated_bytes.all.peak": self._peak,
                    "reserved_bytes.all.current": self._allocated,
                    "reserved_bytes.all.peak": self._peak,
                    "active_bytes.all.current": self._allocated,
                    "active_bytes.all.peak": self._peak,
                    "num_alloc_retries": 0,
                    "num_ooms": 0,
                }
            )

        set_default_device = torch.set_default_device
        props = _Properties(self.gpu)
        cuda = torch.cuda
        patches = {
            (cuda, "is_available"): lambda: True,
            (cuda, "device_count"): lambda: 1,
            (cuda, "current_device"): lambda: 0,
            (cuda, "get_device_name"): lambda device=None: self.gpu["name"],
            (cuda, "get_device_properties"): lambda device=None: props,
            (cuda, "get_device_capability"): lambda device=None: (props.major, props.minor),
            (cuda, "synchronize"): lambda device=None: None,
            (cuda, "empty_cache"): empty_cache,
            (cuda, "memory_allocated"): lambda device=None: self._allocated,
            (cuda, "max_memory_allocated"): lambda device=None: self._peak,
            (cuda, "reset_peak_memory_stats"): reset_peak,
            (cuda, "reset_max_memory_allocated"): reset_peak,
            (cuda, "memory_reserved"): lambda device=None: reserved_read(self._allocated),
            (cuda, "max_memory_reserved"): lambda device=None: reserved_read(self._peak),
            (cuda, "memory_stats"): memory_stats,
            (cuda, "memory_summary"): lambda device=None, abbreviated=False: reserved_read(
                f"vramlab.trace: {self._allocated} bytes allocated, {self._peak} at most; reserved memory is the replay's answer"
            ),
            (cuda, "mem_get_info"): lambda device=None: reserved_read((self.gpu["memory_bytes"] - self._allocated, self.gpu["memory_bytes"])),
            (cuda, "manual_seed"): lambda seed: None,
            (cuda, "manual_seed_all"): lambda seed: None,
            (cuda, "set_device"): lambda device: None,
            (cuda, "is_current_stream_capturing"): lambda: False,
            (cuda, "Event"): _Event,
            (cuda, "current_stream"): lambda device=None: _DefaultStream(),
            (cuda, "default_stream"): lambda device=None: _DefaultStream(),
            (cuda, "device"): _NoContext,
            (cuda, "device_of"): _NoContext,
            (cuda.memory, "_record_memory_history"): lambda *args, **kwargs: None,
            (cuda.memory, "_snapshot"): lambda device=None: self.snapshot(),
            (cuda.memory, "_dump_snapshot"): lambda filename="dump_snapshot.pickle": self.save(filename),
            (torch, "set_default_device"): lambda device: set_default_device(redirect(device)),
            (cuda, "Stream"): _refusing_class(cuda.Stream, unfollowed("torch.cuda.Stream")),
            (cuda, "stream"): unfollowed("torch.cuda.stream"),
        }
        # torch.load puts storages saved from the GPU (or mapped to it with map_location) on the
        # device through the "cuda" deserializer of torch.serialization's registry: the trace's
        # own puts them on the stand-in device, each one allocation, in the file's order.
        from torch import serialization

        def restore_on_gpu(storage: Any, location: str) -> Any:
            if location != "cuda" and not location.startswith("cuda:"):
                return None
            one_gpu(location)
            placed = torch.UntypedStorage(storage.nbytes(), device="meta")
            self._track(torch.empty(0, dtype=torch.uint8, device="meta").set_(placed), _user_frame())
            return placed

        registry = serialization._package_registry
        patches[(serialization, "_package_registry")] = [
            (priority, tagger, restore_on_gpu if getattr(restore, "args", None) == ("cuda",) else restore)
            for priority, tagger, restore in registry
        ]
        # Non-reentrant checkpointing compares each saved tensor's device with its recomputed
        # one's; code that PyTorch runs with the trace's function mode off (a custom
        # autograd.Function's forward) sees the stand-ins' own device: both are the GPU.
        from torch.utils import checkpoint as checkpointing

        def checked_metadata(x: Any) -> Dict[str, Any]:
            device = cuda0 if x.device.type in ("meta", "cuda") else x.device
            return {"shape": x.shape, "dtype": x.dtype, "device": device}

        checks = dict(checkpointing._allowed_determinism_checks_to_fns)
        checks[checkpointing._DEFAULT_DETERMINISM_MODE] = checked_metadata
        patches[(checkpointing, "_allowed_determinism_checks_to_fns")] = checks
        # CUDA graphs capture and replay kernels on the device, which the trace does not stand in for.
        patches[(cuda, "CUDAGraph")] = _refusing_class(cuda.CUDAGraph, unfollowed("torch.cuda.CUDAGraph"))
        patches[(cuda, "graph")] = _refusing_class(cuda.graph, unfollowed("torch.cuda.graph"))
        patches[(cuda, "make_graphed_callables")] = unfollowed("torch.cuda.make_graphed_callables")
        self._thread = threading.current_thread()

        def reached_cuda() -> None:
            # PyTorch calls torch.cuda._lazy_init before anything reaches the driver: only work
            # the trace does not stand in for gets here (another thread's, chiefly).
            thread = threading.current_thread()
            elsewhere = thread is not self._thread
            where = _where(_user_frame())
            message = (
                f"the CUDA runtime at {where} in thread {thread.name!r}: the program used the GPU from a thread the trace does not follow (it follows the thread that opened it); the trace up to there is kept"
                if elsewhere
                else f"the CUDA runtime at {where}: the program reached CUDA by a path vramlab.trace does not stand in for; the trace up to there is kept"
            )
            if elsewhere and self._escaped is None:
                self._escaped = message
            raise UnfollowedError(message)

        patches[(cuda, "_lazy_init")] = reached_cuda
        # What initialises CUDA or tidies inter-process memory has nothing to do in a trace.
        patches[(cuda, "init")] = lambda: None
        patches[(cuda, "ipc_collect")] = lambda: None
        nested = torch.nested

        def nested_constructor(name: str) -> Any:
            made_by = getattr(nested, name)

            def construct(*args: Any, **kwargs: Any) -> Any:
                device = kwargs.get("device")
                leaves = torch.utils._pytree.tree_leaves((args, kwargs))
                if any(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in leaves) or (device is not None and torch.device(device).type == "cuda"):
                    raise UnfollowedError(f"torch.nested.{name} at {_where(_user_frame())}: nested tensors on the GPU are not followed; the trace up to there is kept")
                return made_by(*args, **kwargs)

            return construct

        for name in ("nested_tensor", "as_nested_tensor", "nested_tensor_from_jagged"):
            if hasattr(nested, name):
                patches[(nested, name)] = nested_constructor(name)
        # A DataLoader that pins memory asks which device to pin for and pins in a thread of its
        # own: pinned host memory is not the GPU's, so the batches are used as they are.
        accelerator = getattr(torch, "accelerator", None)
        if accelerator is not None:
            patches[(accelerator, "current_device_index")] = lambda: 0
            patches[(accelerator, "set_device_index")] = lambda device: None
        from torch.utils.data._utils import pin_memory as pinning

        patches[(pinning, "pin_memory")] = lambda data, device=None: data
        # torch.jit.trace checks its graph by running it again and comparing values, which a trace
        # has none of: the graph is made without that check.
        jit_trace = torch.jit.trace

        def trace_without_check(*args: Any, **kwargs: Any) -> Any:
            kwargs["check_trace"] = False
            return jit_trace(*args, **kwargs)

        patches[(torch.jit, "trace")] = trace_without_check
        # The legacy constructors (torch.cuda.FloatTensor(4, 4)) make the tensor on the device in
        # C++, which needs a driver: they make it as torch.empty and torch.tensor would.
        for name in _LEGACY_CUDA_TYPES:
            if hasattr(cuda, name):
                patches[(cuda, name)] = _legacy_cuda_type(torch, name)
        # torch.cuda.memory's own names for the same queries (torch.cuda's are re-exports).
        for (owner, name), value in list(patches.items()):
            if owner is cuda and hasattr(cuda.memory, name) and name not in ("device", "Stream", "stream", "Event"):
                patches[(cuda.memory, name)] = value
        for owner in (cuda, cuda.memory):
            patches[(owner, "reset_accumulated_memory_stats")] = lambda device=None: None
            patches[(owner, "memory_cached")] = patches[(cuda, "memory_reserved")]
            patches[(owner, "max_memory_cached")] = patches[(cuda, "max_memory_reserved")]
            patches[(owner, "reset_max_memory_cached")] = reset_peak
            patches[(owner, "get_per_process_memory_fraction")] = lambda device=None: 1.0
            patches[(owner, "set_per_process_memory_fraction")] = lambda fraction, device=None: self._note(
                "{count} calls to set_per_process_memory_fraction were not applied: the trace asks for every allocation; replay with a capacity (vramlab.replay(..., capacity=...)) to see where the cap would bite"
            )
        # The CUDA generator's state (checkpoint saves and restores it, as do fork_rng and the
        # program): a trace draws no numbers, so it is a fixed state, as the GPU's is after a seed.
        cuda_rng_state = lambda device="cuda": torch.zeros(16, dtype=torch.uint8)
        for owner in (cuda, cuda.random):
            patches[(owner, "get_rng_state")] = cuda_rng_state
            patches[(owner, "get_rng_state_all")] = lambda: [torch.zeros(16, dtype=torch.uint8)]
            patches[(owner, "set_rng_state")] = lambda new_state, device="cuda": None
            patches[(owner, "set_rng_state_all")] = lambda new_states: None
            patches[(owner, "seed")] = lambda: None
            patches[(owner, "seed_all")] = lambda: None
            patches[(owner, "initial_seed")] = lambda: 0
            patches[(owner, "manual_seed")] = lambda seed: None
            patches[(owner, "manual_seed_all")] = lambda seed: None
        # torch.Generator(device="cuda"): draws on stand-ins take any generator, and make nothing.
        patches[(torch, "Generator")] = _host_generator(torch.Generator)
        # PyTorch's fast paths (nn.MultiheadAttention's) are refused where any torch function mode
        # is on; the GPU runs the program without the trace's, so the trace's own is not counted.
        has_torch_function = torch.overrides.has_torch_function

        def program_has_torch_function(values: Any) -> bool:
            stack = torch.overrides._get_current_function_mode_stack()
            if stack and stack[-1] is self._modes[0]:
                with torch.overrides._pop_mode_temporarily():
                    return bool(has_torch_function(values))
            return bool(has_torch_function(values))

        patches[(torch.overrides, "has_torch_function")] = program_has_torch_function
        # torch.save of stand-ins: the GPU copies their values to the host, which allocates nothing
        # on the GPU; a trace has no values, so the file holds the tensors without data (as
        # PyTorch saves meta tensors), and the snapshot says so.
        save = torch.save

        def save_without_values(*args: Any, **kwargs: Any) -> Any:
            stack = torch.overrides._get_current_function_mode_stack()
            if not (stack and stack[-1] is self._modes[0]):
                return save(*args, **kwargs)
            target = args[1] if len(args) > 1 else kwargs.get("f")
            if isinstance(target, (str, bytes, os.PathLike)):
                # A file of tensors without values would replace the program's real checkpoint.
                self._note(
                    "{count} torch.save calls to files were not written (a trace has no values, and the file would replace a real checkpoint); copying to the host allocates nothing on the GPU"
                )
                return None
            self._note(
                "{count} torch.save calls wrote the GPU's tensors without their values into the program's buffers (a trace has none); copying to the host allocates nothing on the GPU"
            )
            with torch.overrides._pop_mode_temporarily():
                return save(*args, **kwargs)

        patches[(torch, "save")] = save_without_values
        # autocast("cuda"): PyTorch's own context manager keeps the thread's autocast state (so
        # torch.is_autocast_enabled("cuda") and get_autocast_dtype answer as on the GPU), and
        # vramlab's kernels (vramlab/_autocast.py) make the casts while it is on. A device type that
        # PyTorch's own code reads below the program ("meta") means "cuda".
        kernels = Autocast(torch, lambda: _where(_user_frame()))
        kernels.install()
        self._autocast = kernels
        for kernels_for in (RecurrentCells, LinearPath, InPlaceWithoutMeta):
            registered = kernels_for(torch)
            registered.install()
            self._registered.append(registered)
        autocast = torch.amp.autocast_mode.autocast
        original_init, original_enter, original_exit = autocast.__init__, autocast.__enter__, autocast.__exit__
        original_clear, original_available = torch.clear_autocast_cache, torch.amp.autocast_mode.is_autocast_available

        def autocast_init(mode: Any, device_type: str, *args: Any, **kwargs: Any) -> None:
            original_init(mode, "cuda" if device_type == "meta" else device_type, *args, **kwargs)

        def autocast_enter(mode: Any) -> Any:
            entered = original_enter(mode)
            kernels.switch(torch.is_autocast_enabled("cuda"))
            return entered

        def autocast_exit(mode: Any, *exc: Any) -> Any:
            left = original_exit(mode, *exc)
            kernels.switch(torch.is_autocast_enabled("cuda"))
            return left

        def clear_autocast_cache() -> None:
            original_clear()
            kernels.clear_cache()

        patches[(autocast, "__init__")] = autocast_init
        patches[(autocast, "__enter__")] = autocast_enter
        patches[(autocast, "__exit__")] = autocast_exit
        patches[(torch, "clear_autocast_cache")] = clear_autocast_cache
        patches[(torch.amp.autocast_mode, "is_autocast_available")] = lambda device_type: device_type == "meta" or original_available(device_type)
        patches[(cuda, "is_bf16_supported")] = lambda including_emulation=True: props.major >= 8
        from torch.optim import optimizer as optim_module

        # On the GPU the optimizers take their multi-tensor (foreach) path by default, with its own
        # temporaries: the same choice is made for the meta tensors that stand in for CUDA ones.
        supported = optim_module._get_foreach_kernels_supported_devices

        def foreach_devices() -> List[str]:
            return list(supported()) + ["meta"]

        # clip_grad_norm_ and the other users of torch.utils._foreach_utils ask it the same question.
        for owner in (optim_module, torch.utils._foreach_utils):
            patches[(owner, "_get_foreach_kernels_supported_devices")] = foreach_devices
        module_apply = torch.nn.Module._apply

        def moving(module: Any, *args: Any, **kwargs: Any) -> Any:
            self._in_module_move += 1
            try:
                return module_apply(module, *args, **kwargs)
            finally:
                self._in_module_move -= 1

        patches[(torch.nn.Module, "_apply")] = moving
        # `fused=True` asks for CUDA tensors; the meta ones stand in for them.
        fused = optim_module._get_fused_kernels_supported_devices
        patches[(optim_module, "_get_fused_kernels_supported_devices")] = lambda: list(fused()) + ["meta"]
        # `capturable=True` too; each optimizer's module holds its own reference.
        capturable = optim_module._get_capturable_supported_devices
        for module in [optim_module] + [m for n, m in list(sys.modules.items()) if n.startswith("torch.optim.") and m is not None]:
            if getattr(module, "_get_capturable_supported_devices", None) is capturable:
                patches[(module, "_get_capturable_supported_devices")] = lambda supports_xla=True: list(capturable(supports_xla)) + ["meta"]
        # The autograd engine runs checkpoints' recomputations without the program's torch
        # function modes (they are not carried into backward), so without this the recomputed
        # forward would run as on the meta device (attention's math path, unfused dropout, a
        # "cuda" device left as it is) and differ from the first; both run as on the GPU here.
        import torch.utils.checkpoint as checkpointing

        def on_the_gpu(fn: Any) -> Any:
            def run(*args: Any, **kwargs: Any) -> Any:
                if self._modes and self._modes[0] not in torch.overrides._get_current_function_mode_stack():
                    with self._modes[0]:
                        return fn(*args, **kwargs)
                return fn(*args, **kwargs)

            return run

        without_reentrant = checkpointing._checkpoint_without_reentrant_generator
        reentrant_backward = checkpointing.CheckpointFunction.backward
        patches[(checkpointing, "_checkpoint_without_reentrant_generator")] = lambda fn, *args, **kwargs: without_reentrant(
            on_the_gpu(fn), *args, **kwargs
        )
        patches[(checkpointing.CheckpointFunction, "backward")] = staticmethod(on_the_gpu(reentrant_backward))
        for (owner, name), value in patches.items():
            # The attribute as stored (a class's staticmethod stays one when put back).
            self._patches.append((owner, name, vars(owner).get(name, getattr(owner, name))))
            setattr(owner, name, value)
        # On CUDA, `module.to("cuda")` moves each parameter in place, so a parameter two modules
        # share (tied embeddings) moves once and stays shared; from CPU to meta PyTorch would make
        # a new Parameter per module instead. Swapping keeps each parameter's identity, as on CUDA.
        self._swap_was = torch.__future__.get_swap_module_params_on_conversion()
        torch.__future__.set_swap_module_params_on_conversion(True)
        # The default device as PyTorch keeps it: a DeviceContext mode, or none at all.
        self._device_context = getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None)
        _ACTIVE.append(self)
        # What the program is doing, for breakdown(): in an optimizer's step, moving a module.
        from torch.nn.modules import module as module_module
        from torch.optim import optimizer as optimizer_module

        def step_started(*args: Any) -> None:
            self._in_optimizer += 1

        def step_ended(*args: Any) -> None:
            self._in_optimizer -= 1

        self._hooks = [
            optimizer_module.register_optimizer_step_pre_hook(step_started),
            optimizer_module.register_optimizer_step_post_hook(step_ended),
            module_module.register_module_parameter_registration_hook(lambda module, name, value: self._parameter(value)),
            module_module.register_module_buffer_registration_hook(lambda module, name, value: self._parameter(value)),
        ]
        self._modes = [OnTheGpu(), Allocations()]
        for mode in self._modes:
            mode.__enter__()

    def _uninstall(self) -> None:
        torch = self._torch
        if self in _ACTIVE:
            _ACTIVE.remove(self)
            # A default device the program set to "cuda" inside was "meta"; the one before stays.
            # Put back as it was (no mode where there was none: setting "cpu" would leave one on
            # the stack, which turns off PyTorch's fast paths after the trace), and before the
            # trace's own modes leave, which must be on top of the stack to leave it.
            if getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None) is not self._device_context:
                torch.set_default_device(None if self._device_context is None else self._device_context.device)
        for mode in reversed(self._modes):
            mode.__exit__(None, None, None)
        self._modes = []
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        if self._autocast is not None:
            self._autocast.uninstall()
            self._autocast = None
        for registered in reversed(self._registered):
            registered.uninstall()
        self._registered = []
        for owner, name, value in reversed(self._patches):
            setattr(owner, name, value)
        if self._patches:
            self._torch.__future__.set_swap_module_params_on_conversion(self._swap_was)
        self._patches = []

    def _from_host(self, func: Any, args: Any, kwargs: Dict[str, Any], redirect: Any) -> Any:
        """``torch.tensor(data, device="cuda")`` and its kin: PyTorch makes them on the host and
        copies them over out of sight of dispatch modes, so they are made here as the same host
        tensor and a copy to the stand-in device, which the trace records (and whose values it
        keeps where they are known: vramlab/_values.py). None where the tensor is not for the GPU."""
        torch = self._torch
        device = kwargs.get("device")
        if func is torch.Tensor.new_tensor:
            if not args or not isinstance(args[0], torch.Tensor):
                return None
            data = args[1] if len(args) > 1 else kwargs.get("data")
            target = redirect(device) if device is not None else args[0].device
            made_by, made_args = torch.tensor, (data,)
            kwargs = {"dtype": args[0].dtype, **{k: v for k, v in kwargs.items() if k != "data"}}
        else:
            data = args[0] if args else kwargs.get("data", kwargs.get("obj"))
            target = redirect(device)
            made_by, made_args = func, tuple(args)
        if target is None or torch.device(target).type != "meta":
            return None
        if isinstance(data, torch.Tensor) and data.device.type == "meta":
            return None
        requires_grad = bool(kwargs.get("requires_grad", False))
        kwargs = {k: v for k, v in kwargs.items() if k not in ("device", "pin_memory", "requires_grad")}
        made = made_by(*made_args, device="cpu", **kwargs).to("meta")
        return made.requires_grad_(True) if requires_grad else made

    def _known_shape(self, func: Any, args: Any, kwargs: Dict[str, Any]) -> Any:
        """An operation whose result's shape comes from values (nonzero, masked_select, unique),
        on stand-ins whose values are all known: run on their CPU copies, and its outputs made
        as stand-ins of the shapes that gives (recorded, their values kept). None where a value is
        not known."""
        torch = self._torch
        leaves = torch.utils._pytree.tree_leaves((args, kwargs))
        stand_ins = [a for a in leaves if isinstance(a, torch.Tensor) and a.device.type == "meta"]
        if not stand_ins or any(self._shadows.view(a) is None for a in stand_ins):
            return None
        on_cpu = torch.utils._pytree.tree_map(self._shadows._on_cpu, (args, kwargs))
        result = func(*on_cpu[0], **on_cpu[1])
        frame = _user_frame()
        self._note(
            "{count} operations whose result's shape comes from values (nonzero, masked_select, unique, a boolean mask's indexing) had inputs whose values were known without a GPU (vramlab/_values.py) and were answered; the scratch their CUDA kernels allocate for themselves (CUB's) is not in the trace"
        )

        def stand_in(value: Any) -> Any:
            if not isinstance(value, torch.Tensor):
                return value
            made = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
            self._track(made, frame)
            self._shadows.adopt(made, value)
            return made

        return torch.utils._pytree.tree_map(stand_in, result)

    def _mask_indices(self, op: str, args: Any) -> Any:
        """`index`'s arguments with each boolean mask replaced by the indices of its set elements
        (ATen's expandTensors: ``mask.nonzero()``, then a view per dimension), where the mask's
        values are known; UnfollowedError where they are not."""
        torch = self._torch
        indices = []
        for index in args[1]:
            if isinstance(index, torch.Tensor) and index.dtype in (torch.bool, torch.uint8):
                known = self._known_shape(torch.ops.aten.nonzero.default, (index,), {})
                if known is None:
                    raise UnfollowedError(
                        f"{op} at {_where(_user_frame())}: indexing with a boolean mask makes a shape from the mask's values, and a trace without data has none; the trace up to there is kept"
                    )
                indices.extend(known.unbind(1))
            else:
                indices.append(index)
        return (args[0], indices) + tuple(args[2:])

    def _fast_attention(self, mode: Any, args: Any, kwargs: Dict[str, Any]) -> Any:
        """``torch._native_multi_head_attention`` (nn.MultiheadAttention's inference fast path:
        torchvision's ViT, say) as native_multi_head_attention_cuda (attention.cu) runs it for
        self-attention: its scaled-dot-product branch where it takes it (see `_sdp_branch`), else
        its general branch (`_general_attention`), with the trace's mode on. None for attention
        between different tensors: it stops the trace."""
        bound = _schema_values(self._torch.ops.aten._native_multi_head_attention.default, args, kwargs)
        query, key, value = bound["query"], bound["key"], bound["value"]
        embed_dim, num_head = int(bound["embed_dim"]), int(bound["num_head"])
        if not (query is key and key is value) or not self._dense_query(query):
            return None
        weights = (bound["qkv_weight"], bound["qkv_bias"], bound["proj_weight"], bound["proj_bias"])
        need_weights = bool(bound["need_weights"])
        fused = not need_weights and self._sdp_branch(query, embed_dim, num_head, bound["mask"])
        with mode:
            return self._self_attention(query, embed_dim, num_head, weights, fused, bound["mask"], need_weights, bool(bound["average_attn_weights"]))

    def _dense_query(self, query: Any) -> bool:
        torch = self._torch
        return isinstance(query, torch.Tensor) and query.device.type == "meta" and query.dim() == 3 and not query.is_nested

    def _self_attention(self, query: Any, embed_dim: int, num_head: int, weights: Tuple[Any, Any, Any, Any], fused: bool, mask: Any, need_weights: bool, average: bool) -> Any:
        """native_multi_head_attention_cuda on one dense tensor: (output, attention weights or
        None), by its scaled-dot-product branch where `fused` (`_sdp_branch`, decided before the
        trace's mode is on, while the stand-ins say they are on meta), else its general branch.
        Run with the trace's mode on."""
        if fused:
            return self._sdp_attention(query, embed_dim, num_head, *weights), None
        return self._general_attention(query, embed_dim, num_head, weights, mask, need_weights, average)

    def _sdp_branch(self, query: Any, embed_dim: int, num_head: int, mask: Any) -> bool:
        """Whether native_multi_head_attention_cuda (attention.cu) takes its scaled-dot-product
        branch for self-attention on `query` with no weights asked for: no mask, heads a multiple
        of 8 wide, and flash, memory-efficient or cuDNN attention chosen for the heads (the H100
        recordings show cuDNN attention, picked for half precision, taken here too); autocast left
        to the other branch."""
        torch = self._torch
        if not self._dense_query(query) or mask is not None:
            return False
        per_head = embed_dim // num_head
        if per_head % 8 or (self._autocast is not None and torch.is_autocast_enabled("cuda")):
            return False
        heads = query.view(query.size(0), -1, num_head, per_head).transpose(1, 2)
        choice = dict(_attention.bind((heads, heads, heads), {}), dropout_p=0.0, is_causal=False)
        return _attention.choose(torch, choice, self._major) in ("flash", "efficient", "cudnn")

    def _general_attention(self, query: Any, embed_dim: int, num_head: int, weights: Tuple[Any, Any, Any, Any], mask: Any, need_weights: bool, average: bool) -> Any:
        """The general branch of native_multi_head_attention_cuda (attention.cu), taken where
        weights are asked for, a mask is given or no fused kernel fits: the packed projection
        (gemm_nt, no bias), _transform_bias_rescale_qkv's one buffer of q, k and v (the bias added
        and q scaled in place: [3, B, heads, T, head size]), the scores (bmm_nt), the softmax (in
        place without a mask; with one, the mask made boolean and _masked_softmax's new output),
        the context written into q's storage (bmm_nn), then transform0213_gemm_nt_bias (the heads
        merged into a new tensor, then the output projection with its bias), and the weights
        averaged over heads where asked. Run with the trace's mode on."""
        torch = self._torch
        qkv_weight, _, proj_weight, proj_bias = weights
        batch, length = query.size(0), query.size(1)
        per_head = embed_dim // num_head
        qkv = torch.matmul(query.view(batch * length, embed_dim), qkv_weight.t()).view(batch, length, 3 * embed_dim)
        packed = torch.empty(3, batch, num_head, length, per_head, dtype=qkv.dtype, device=qkv.device)
        del qkv
        q, k, v = packed.unbind(0)
        scores = torch.bmm(q.reshape(batch * num_head, length, per_head), k.reshape(batch * num_head, length, per_head).transpose(2, 1))
        scores = scores.view(batch, num_head, length, length)
        if mask is not None:
            flags = mask if mask.dtype == torch.bool else mask.to(torch.bool)
            output = torch.empty_like(scores)
            if length > 1024 or length * scores.element_size() > 4096:
                # masked_softmax_cuda (SoftMax.cu) past its persistent kernel: softmax of a masked
                # copy, its own output let go.
                expanded = flags.view(batch, 1, 1, length).expand_as(scores) if flags.dim() == 2 else flags
                filled = scores.masked_fill(expanded, float("-inf"))
                output = torch.softmax(filled, -1)
                del filled
            scores = output
            del flags, output
        context = q.view(batch * num_head, length, per_head)
        torch.bmm(scores.view(batch * num_head, length, length), v.reshape(batch * num_head, length, per_head), out=context)
        if not need_weights:
            scores = None
        merged = context.view(batch, num_head, length, per_head).permute(0, 2, 1, 3).contiguous().view(batch * length, embed_dim)
        out = torch.nn.functional.linear(merged, proj_weight, proj_bias).view(batch, length, embed_dim)
        del merged
        if scores is not None and average:
            scores = scores.sum(1)
            scores.div_(num_head)
        return out, scores

    def _sdp_attention(self, query: Any, embed_dim: int, num_head: int, qkv_weight: Any, qkv_bias: Any, proj_weight: Any, proj_bias: Any) -> Any:
        """The scaled-dot-product branch of native_multi_head_attention_cuda: the projection, its
        three chunks viewed as heads, the attention (as the trace runs it), the heads merged, the
        output projection. Run with the trace's mode on."""
        functional = self._torch.nn.functional
        per_head = embed_dim // num_head
        x = functional.linear(query, qkv_weight, qkv_bias)
        q, k, v = (chunk.view(x.size(0), -1, num_head, per_head).transpose(1, 2) for chunk in x.chunk(3, -1))
        y = functional.scaled_dot_product_attention(q, k, v, None, 0.0, False)
        return functional.linear(y.transpose(1, 2).reshape(x.size(0), -1, embed_dim), proj_weight, proj_bias)

    def _fast_encoder_layer(self, mode: Any, args: Any, kwargs: Dict[str, Any]) -> Any:
        """``torch._transformer_encoder_layer_fwd`` (nn.TransformerEncoderLayer's inference fast
        path) as transformer_encoder_layer_forward (transformer.cpp) runs it: layer norms, the
        attention (either branch, `_self_attention`), residual adds in place, the feed-forward as
        two addmm (the first with its activation fused, _addmm_activation). None for nested
        tensors: they stop the trace."""
        torch = self._torch
        bound = _schema_values(torch.ops.aten._transformer_encoder_layer_fwd.default, args, kwargs)
        src = bound["src"]
        embed_dim, num_heads = int(bound["embed_dim"]), int(bound["num_heads"])
        if not self._dense_query(src) or src.numel() == 0:
            return None
        functional = torch.nn.functional

        def norm(x: Any, which: int) -> Any:
            return functional.layer_norm(x, (embed_dim,), bound[f"norm_weight_{which}"], bound[f"norm_bias_{which}"], float(bound["eps"]))

        def linear(bias: Any, x: Any, weight: Any, gelu: Optional[bool]) -> Any:
            flat = x.view(x.size(0) * x.size(1), x.size(2))
            out = torch._addmm_activation(bias, flat, weight.t(), beta=1, alpha=1, use_gelu=gelu) if gelu is not None else torch.addmm(bias, flat, weight.t())
            return out.view(x.size(0), x.size(1), -1)

        norm_first = bool(bound["norm_first"])
        fused = self._sdp_branch(src, embed_dim, num_heads, bound["mask"])
        with mode:
            x = norm(src, 1) if norm_first else src
            weights = (bound["qkv_weight"], bound["qkv_bias"], bound["proj_weight"], bound["proj_bias"])
            x = self._self_attention(x, embed_dim, num_heads, weights, fused, bound["mask"], False, False)[0]
            x.add_(src)
            if not norm_first:
                x = norm(x, 1)
            before_ffn = x
            if norm_first:
                x = norm(x, 2)
            # ffn() takes its input by reference: the caller's tensor lives until both products
            # are made and the first is let go.
            hidden = linear(bound["ffn_bias_1"], x, bound["ffn_weight_1"], bool(bound["use_gelu"]))
            hidden = linear(bound["ffn_bias_2"], hidden, bound["ffn_weight_2"], None)
            x = hidden
            x.add_(before_ffn)
            if not norm_first:
                x = norm(x, 2)
            return x

    def _attention(self, args: Any, kwargs: Dict[str, Any]) -> Any:
        """F.scaled_dot_product_attention on tensors standing in for CUDA ones, as the backend
        PyTorch would pick on the target GPU runs it (vramlab/_attention.py); None for other
        tensors, which run as the program would."""
        torch = self._torch
        bound = _attention.bind(args, kwargs)
        q, k, v = bound["query"], bound["key"], bound["value"]
        if not all(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in (q, k, v)):
            return None
        if self._autocast is not None and torch.is_autocast_enabled("cuda"):
            # scaled_dot_product_attention is on autocast's lower-precision list: its tensors are
            # cast before PyTorch picks the backend.
            lower = torch.get_autocast_dtype("cuda")
            for name in ("query", "key", "value", "attn_mask"):
                bound[name] = self._autocast.cast(lower, bound[name])
            q, k, v = bound["query"], bound["key"], bound["value"]
        where = _where(_user_frame())
        backend = _attention.choose(torch, bound, self._major)
        if backend == "efficient" and q.size(-1) > 128:
            backend = "efficient (head sizes over 128)"
        if backend not in ("cudnn", "efficient", "math"):
            what = backend or "no backend (PyTorch raises 'No available kernel')"
            raise UnfollowedError(
                f"scaled_dot_product_attention at {where}: on the {self.gpu['name']} these arguments run {what} attention, whose workspaces vramlab.trace does not size yet (it follows cuDNN attention, the math path, and memory-efficient attention for heads up to 128); the trace up to there is kept"
            )
        # attention.cpp turns a boolean mask into an additive one before any backend runs.
        mask = _attention.additive_mask(torch, bound["attn_mask"], q.dtype)
        if backend == "math":
            return _attention.math(torch, q, k, v, mask, bound["dropout_p"], bound["is_causal"], bound["scale"], bound["enable_gqa"])
        compute_lse = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
        if backend == "efficient":
            self._note(
                "{count} memory-efficient attention calls: their backward workspaces are sized by a fit to 90 shapes measured on an H100 (torch 2.11), not by a rule"
            )
            if mask is not None:
                # attention.cpp's preprocess_mask (torch 2.11: mem_eff_alignment = 8): a mask whose
                # strides are not multiples of 8 (or not 1 for the last dimension) is padded by
                # 8 - Lk % 8 (a copy) and sliced back, then expanded to [B, H, Lq, Lk] (views).
                lk = mask.size(-1)
                aligned = all(mask.stride(i) % 8 == 0 for i in range(mask.dim() - 1)) and mask.stride(-1) == 1
                if not aligned:
                    mask = torch.nn.functional.pad(mask, (0, 8 - lk % 8))[..., :lk]
                mask = mask.expand(q.size(0), q.size(1), q.size(2), k.size(2))
            outputs = torch.ops.aten._scaled_dot_product_efficient_attention(
                q, k, v, mask, compute_lse, bound["dropout_p"], bound["is_causal"], scale=bound["scale"]
            )
            return outputs[0]
        self._note(
            "{count} cuDNN attention calls: their backward workspaces are sized by a fit to cuDNN 9.19 measured on an H100 (three shapes), not by a rule"
        )
        outputs = torch.ops.aten._scaled_dot_product_cudnn_attention(
            q, k, v, mask, compute_lse, bound["dropout_p"], bound["is_causal"], False, scale=bound["scale"]
        )
        return outputs[0]

    def _efficient_grad_copy(self, grad_out: Any, frame: Optional[Dict[str, Any]]) -> Optional[Tuple[int, int]]:
        """`_efficient_attention_backward` first makes the output gradient contiguous in
        [B, L, H, D] order: a copy where it is not so already."""
        if grad_out.transpose(1, 2).is_contiguous():
            return None
        size = grad_out.numel() * grad_out.element_size()
        return self._alloc(size, frame), size

    def _efficient_backward_scratch(self, args: Any, grad_copy: Optional[Tuple[int, int]], frame: Optional[Dict[str, Any]]) -> None:
        """After dq, dk, dv: the row sums `delta` and the workspace, in the order the H100
        recorded them (vramlab/_attention.py)."""
        grad_out, query = args[0], args[1]
        b, h, lq, _ = grad_out.shape
        rows = 4 * b * h * lq
        if grad_out.dtype == self._torch.float32:
            # ATen computes delta: (grad_out * out).sum(-1), then a contiguous [B, H, Lq] copy.
            product = self._alloc(grad_out.numel() * 4, frame)
            summed = self._alloc(rows, frame)
            if h > 1 and lq > 1:
                delta = self._alloc(rows, frame)
                self._free(summed, rows)
            else:
                delta = summed
            self._free(product, grad_out.numel() * 4)
        else:
            delta = self._alloc(rows, frame)
        size = _attention.efficient_backward_workspace(b, h, lq, query.size(-1), grad_out.dtype != self._torch.float32)
        workspace = self._alloc(size, frame)
        self._free(delta, rows)
        self._free(workspace, size)
        if grad_copy is not None:
            self._free(*grad_copy)

    def _foreach_norm_partials(self, tensors: Any, frame: Optional[Dict[str, Any]]) -> Optional[Tuple[int, int]]:
        """foreach_tensor_norm_cuda (ForeachReduceOp.cu) first zeroes one partial norm per chunk
        of 65,536 elements (MultiTensorApply.cuh's kChunkSize) of the tensor with the most, for
        every tensor, in the math type: allocated before the norms, freed after."""
        torch = self._torch
        tensors = [t for t in tensors if isinstance(t, torch.Tensor)]
        if not tensors or any(t.device.type != "meta" for t in tensors):
            return None
        chunks = max((t.numel() + 65535) // 65536 for t in tensors)
        math_width = 8 if tensors[0].dtype == torch.float64 else 4
        size = len(tensors) * chunks * math_width
        return self._alloc(size, frame), size

    def _scratch(self, sizes: List[int], frame: Optional[Dict[str, Any]]) -> None:
        """Allocations a kernel makes and frees before it returns, freed in reverse order."""
        made = [(self._alloc(size, frame), size) for size in sizes]
        for addr, size in reversed(made):
            self._free(addr, size)

    def _reduction(self, x: Any, dims: Any, out_elsize: int, mean: bool, frame: Optional[Dict[str, Any]]) -> None:
        """The global buffer and semaphores of `gpu_reduce_kernel` for a CUDA sum or mean of `x`."""
        torch = self._torch
        arg_size = _kernels.accumulation_size(x.dtype, torch)
        if arg_size is None:
            return
        shape, strides, elsize = list(x.shape), list(x.stride()), x.element_size()
        if not _kernels.fits_32bit_indexing(shape, strides, elsize):
            self._note(
                "{count} reductions over more than 2^31 elements are in the trace without the buffers their split kernels allocate: peak reserved may be higher by up to their size"
            )
            return
        # sum_functor loads 16-bit inputs 8 at a time, other types and MeanOps 4 (vt0 = 4).
        vector = 8 if elsize == 2 and not mean else 4
        sizes = _kernels.reduce_buffers(
            shape,
            strides,
            x.storage_offset(),
            elsize,
            _kernels.reduced_dims(x.dim(), dims),
            out_elsize,
            arg_size,
            vector,
            self.gpu["multiprocessors"],
            self._threads_per_sm,
        )
        self._scratch(sizes, frame)

    def _loss_storage(self, op: str, bound: Dict[str, Any]) -> Optional[int]:
        """The bytes a reduced loss's output holds on the GPU: made at the inputs' full shape and
        then resized to a scalar, its storage keeps the full size (Loss.cpp's structured meta)."""
        if bound.get("reduction", 1) == 0:
            return None
        x, target = bound["self"], bound["target"]
        shape = self._torch.broadcast_shapes(x.shape, target.shape)
        numel = 1
        for n in shape:
            numel *= n
        return numel * x.element_size()

    def _kernel_scratch(self, op: str, bound: Dict[str, Any], out: Any, frame: Optional[Dict[str, Any]]) -> None:
        torch = self._torch
        if op in ("sum", "mean"):
            x = bound["self"]
            if isinstance(x, torch.Tensor) and x.device.type == "meta" and x.is_floating_point():
                self._reduction(x, bound.get("dim"), out.element_size(), op == "mean", frame)
        elif op == "_softmax_backward_data":
            # SoftMax.cu's softmax_backward_cuda_out first multiplies the gradient by the output
            # into a temporary (log_softmax's backward does not).
            grad, output = bound["grad_output"], bound["output"]
            if isinstance(grad, torch.Tensor) and grad.device.type == "meta":
                dtype = torch.promote_types(grad.dtype, output.dtype)
                numel = 1
                for n in torch.broadcast_shapes(grad.shape, output.shape):
                    numel *= n
                self._scratch([numel * torch.empty((), dtype=dtype, device="meta").element_size()], frame)
        elif op == "_safe_softmax":
            # SoftMax.cpp's _safe_softmax: after the softmax, which of the inputs are -inf, whether
            # a whole row is, and a zero to fill those rows with, freed in reverse (as the H100
            # recorded: reports/reference/h100/sdpa-backends).
            x = bound["self"]
            if isinstance(x, torch.Tensor) and x.device.type == "meta" and x.dim() > 0:
                rows = x.numel() // max(1, x.size(bound["dim"]))
                self._scratch([x.numel(), rows, out.element_size()], frame)
        elif op == "convolution_backward":
            # Convolution.cpp: backends that do not compute the bias gradient (cuDNN) leave it to
            # grad_output.sum over every dimension but the channels, after the other two.
            mask, grad = bound.get("output_mask") or [False] * 3, bound["grad_output"]
            if mask[2] and isinstance(grad, torch.Tensor) and grad.device.type == "meta" and grad.is_floating_point():
                dims = [0] + list(range(2, grad.dim()))
                self._reduction(grad, dims, grad.element_size(), False, frame)
        elif op == "native_layer_norm_backward":
            # layer_norm_backward_cuda (layer_norm_kernel.cu) passes dY.contiguous() to its
            # kernel after making its outputs: a copy of a strided gradient, freed on return.
            grad = bound["grad_out"]
            if isinstance(grad, torch.Tensor) and grad.device.type == "meta" and not grad.is_contiguous():
                self._scratch([grad.numel() * grad.element_size()], frame)
        elif op in _LOSSES:
            full = self._loss_storage(op, bound)
            if full is None:
                return
            x = bound["self"]
            shape = list(torch.broadcast_shapes(x.shape, bound["target"].shape))
            # The unreduced loss, a full-size temporary reduced by mean_out or sum_out.
            temp = self._alloc(full, frame)
            unreduced = torch.empty(shape, dtype=out.dtype, device="meta")
            self._reduction(unreduced, None, out.element_size(), bound["reduction"] == 1, frame)
            self._free(temp, full)

    def _convolution(self, op: str, bound: Dict[str, Any], out: Any, frame: Optional[Dict[str, Any]]) -> None:
        """A convolution's outputs, each with the workspace cuDNN allocates and frees after it
        (Convolution.cpp: cudnn_convolution makes its output, then runs its plan; the backward
        makes the input's gradient and runs its plan, then the weight's), sized by the GPU's
        measured table (vramlab/_convolution.py). The bias gradient comes after both."""
        torch = self._torch
        x, weight = bound["input"], bound["weight"]
        backward = op == "convolution_backward"
        outputs = list(out) if backward else [out]
        entry = None
        why = _convolution.outside_defaults(torch, x, weight, bool(bound["transposed"]))
        measured = _convolution.table(self.gpu["name"])
        if why is None and measured is not None:
            n, c, h, w = x.shape
            k, cg, r, s = weight.shape
            # The output's batch size is the input's; torch's default memory format for both.
            entry = measured["entries"].get(
                _convolution.key(x.dtype, [n, c, h, w], [k, cg, r, s], bound["stride"], bound["padding"], bound["dilation"], bound["groups"])
            )
            if entry is None:
                why = "shapes or dtypes outside the measured table"
        if entry is None or measured is None:
            self._note(
                "{count} convolutions (forward or backward) are traced without cuDNN's workspaces: "
                + (why or f"no convolution workspaces were measured on the {self.gpu['name']}")
                + " (vramlab/_convolution.py); peak reserved may be higher, by up to the largest workspace"
            )
        else:
            self._note(
                "{count} convolutions (forward or backward) have the workspaces cuDNN "
                + f"{measured['cudnn'] // 10000}.{measured['cudnn'] // 100 % 100} chose for the same shapes on the {self.gpu['name']} with torch {measured['torch']}, "
                + "as measured (reports/reference/"
                + f"{measured['profile']}/conv-workspaces), not derived by a rule"
                + ("" if self._torch.__version__.split("+")[0] == measured["torch"].split("+")[0] else f"; this torch is {self._torch.__version__}")
            )
        forward_ws, data_ws, weight_ws = _convolution.workspaces(entry)
        sizes = [data_ws, weight_ws, 0] if backward else [forward_ws]
        for t, workspace in zip(outputs, sizes):
            if isinstance(t, torch.Tensor) and t.device.type == "meta":
                self._track(t, frame)
                if workspace:
                    self._scratch([workspace], frame)

    def _matmul(self, op: str, frame: Optional[Dict[str, Any]]) -> None:
        # The autograd engine runs CUDA backward on a thread of its own, with its own handle.
        handle = "backward" if self._torch._C._current_autograd_node() is not None else threading.get_ident()
        if handle not in self._handles:
            self._handles.add(handle)
            self._phases[self._alloc(self._workspace, frame)] = "workspaces"
        if op in _WITH_BIAS and handle not in self._lt_handles:
            self._lt_handles.add(handle)
            self._phases[self._alloc(_CUBLASLT_WORKSPACE, frame)] = "workspaces"


def _boolean_indices(torch: Any, args: Any) -> bool:
    """Whether an `index` call's indices include a boolean (or byte) mask."""
    return len(args) > 1 and any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in args[1])


def _dense(t: Any) -> bool:
    """``is_non_overlapping_and_dense``: the elements fill the storage span exactly once."""
    dims = sorted((stride, size) for size, stride in zip(t.shape, t.stride()) if size != 1)
    expected = 1
    for stride, size in dims:
        if stride != expected:
            return False
        expected *= size
    return True


# A gradient the autograd engine holds alone, as seen from inside the dispatch mode: the mode's
# own arguments and the Python objects add references (measured on torch 2.11: a tensor the
# engine holds alone shows a use count of 4 here, its storage 2).
_ALONE_USE_COUNT = 4
_ALONE_STORAGE_COUNT = 2


def _engine_accumulation(torch: Any, func: Any, args: Any, kwargs: Dict[str, Any]) -> Any:
    """The gradient the autograd engine would add the other into in place, where this `add` is the
    engine accumulating two gradients of one input (InputBuffer's accumulate: in place into a
    buffered gradient when it holds it alone and it is dense; torch/csrc/autograd/input_buffer.cpp),
    else None. PyTorch makes a
    new tensor instead whenever a dispatch mode is on (isTensorSubclassLike), which the trace's
    is; on the GPU there is none."""
    if func is not torch.ops.aten.add.Tensor or torch.is_grad_enabled() or kwargs.get("alpha", 1) != 1:
        return None
    if torch._C._current_autograd_node() is None or len(args) != 2:
        return None
    a, b = args
    if not all(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in (a, b)):
        return None
    if a.shape != b.shape or a.dtype != b.dtype:
        return None
    # Engine work has no Python frame of the program's between it and backward(); a Python
    # backward (autograd.Function) adding its own gradients does.
    frame: Optional[types.FrameType] = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith(_TORCH_DIR or "\0") or name == __file__):
            return None
        if name.replace(os.sep, "/").endswith(("autograd/graph.py", "autograd/__init__.py")):
            break
        frame = frame.f_back
    # Only the buffered gradient is reused: adding into the incoming one is input_buffer.cpp's
    # path for sparse buffers alone, so a dense buffered gradient held elsewhere too (a view of
    # another gradient, one also passed on) makes a new tensor.
    if (
        _dense(a)
        and a._use_count() <= _ALONE_USE_COUNT
        and torch._C._storage_Use_Count(a.untyped_storage()._cdata) <= _ALONE_STORAGE_COUNT
    ):
        return a
    return None


def _schema_values(func: Any, args: Any, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """An ATen operator's arguments by their schema's names, defaults filled in."""
    values: Dict[str, Any] = {}
    for i, arg in enumerate(func._schema.arguments):
        if i < len(args):
            values[arg.name] = args[i]
        elif arg.name in kwargs:
            values[arg.name] = kwargs[arg.name]
        elif arg.has_default_value():
            values[arg.name] = arg.default_value
    return values


def _bind(func: Any, args: Any, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """The arguments of a call by name (as far as Python's signature of `func` tells)."""
    import inspect

    try:
        return dict(inspect.signature(func).bind(*args, **kwargs).arguments)
    except (TypeError, ValueError):
        return {}


def _to_host(torch: Any, op: str, args: Any, kwargs: Dict[str, Any]) -> bool:
    """Whether this copy takes a stand-in's values to a real (host) tensor."""
    if op == "_to_copy":
        device = kwargs.get("device")
        return isinstance(args[0], torch.Tensor) and args[0].device.type == "meta" and device is not None and torch.device(device).type != "meta"
    return (
        len(args) > 1
        and isinstance(args[0], torch.Tensor)
        and args[0].device.type != "meta"
        and isinstance(args[1], torch.Tensor)
        and args[1].device.type == "meta"
    )


class _Event:
    """``torch.cuda.Event`` in a trace: recorded and waited on as nothing (one stream), and a
    trace has no time (``elapsed_time`` answers 0.0, which the snapshot notes)."""

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
        _notes_hook("{count} CUDA event timings answered 0.0 ms: a trace has no time")
        return 0.0


class _DefaultStream:
    """The default CUDA stream, the one stream a trace follows."""

    cuda_stream = 0
    stream_id = 0
    device_index = 0
    priority = 0

    def synchronize(self) -> None:
        return None

    def query(self) -> bool:
        return True

    def wait_event(self, event: Any) -> None:
        return None

    def wait_stream(self, stream: Any) -> None:
        return None

    def record_event(self, event: Any = None) -> Any:
        return event if event is not None else _Event()

    def __enter__(self) -> "_DefaultStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class _NoContext:
    """``torch.cuda.device(i)`` and the like: the trace has one device."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> "_NoContext":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


# The trace whose patches are installed (notes from module-level stand-ins go to it).
_ACTIVE: List[Any] = []


def _notes_hook(what: str) -> None:
    if _ACTIVE:
        _ACTIVE[-1]._note(what)


def _host_generator(base: Any) -> Any:
    """``torch.Generator`` in a trace: one asked for on CUDA is made on the host (still a
    ``torch.Generator``), which operations on stand-ins take as they would the GPU's."""

    def new(cls: Any, device: Any = "cpu") -> Any:
        kind = device.type if hasattr(device, "type") else str(device).split(":")[0]
        return base.__new__(cls, device="cpu" if kind in ("cuda", "meta") else device)

    return type(base.__name__, (base,), {"__new__": staticmethod(new)})


def _refusing_class(base: Any, refuse: Any) -> Any:
    """A subclass of `base` that refuses to be made: still a type, so annotations such as
    ``torch.cuda.Stream | None`` in imported libraries keep working."""
    return type(base.__name__, (base,), {"__new__": staticmethod(lambda cls, *a, **k: refuse())})


_LEGACY_CUDA_TYPES = (
    "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "ByteTensor", "CharTensor",
    "ShortTensor", "IntTensor", "LongTensor", "BoolTensor",
)


def _legacy_cuda_type(torch: Any, name: str) -> Any:
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


def _legacy_dtype(torch: Any, name: str) -> Any:
    """The dtype of a legacy tensor type's name ("torch.cuda.HalfTensor"), or None."""
    kind = getattr(torch, name.split(".")[-1], None)
    return getattr(kind, "dtype", None)


def _workspace_size(major: int) -> int:
    """cuBLAS's workspace per handle: CUBLAS_WORKSPACE_CONFIG where set (the sum of SIZE_KiB x
    COUNT over its entries, as PyTorch reads it), else PyTorch's default for the architecture."""
    config = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    if config:
        total = 0
        for entry in config.split(":"):
            if "," in entry or entry.isdigit():
                parts = entry.split(",")
                if len(parts) == 2 and all(p.isdigit() for p in parts):
                    total += int(parts[0]) * 1024 * int(parts[1])
        if total:
            return total
    return _CUBLAS_WORKSPACE_SM90 if major == 9 else _CUBLAS_WORKSPACE_OTHER


class _Properties:
    """What ``torch.cuda.get_device_properties`` says of the profile's GPU."""

    def __init__(self, gpu: Dict[str, Any]) -> None:
        major, minor = (int(x) for x in str(gpu["compute_capability"]).split("."))
        self.name = gpu["name"]
        self.major, self.minor = major, minor
        self.total_memory = gpu["memory_bytes"]
        self.multi_processor_count = gpu["multiprocessors"]

    def __repr__(self) -> str:
        return f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, total_memory={self.total_memory >> 20}MB, multi_processor_count={self.multi_processor_count})"


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m vramlab.trace --gpu h100 --out snap.pickle script.py [args]``: runs a script
    unchanged under :class:`trace` and writes its snapshot (also where the tracer stops)."""
    import argparse
    import runpy

    parser = argparse.ArgumentParser(
        prog="python -m vramlab.trace",
        description="Trace a PyTorch script's CUDA memory without a GPU; writes a memory snapshot that vramlab replay and tune read.",
    )
    parser.add_argument("--gpu", default="h100", help="device profile to trace for (h100, h200, or a profile file)")
    parser.add_argument(
        "--answer-reads",
        type=float,
        metavar="VALUE",
        help="answer values a trace cannot know (loss.item() in a log line) with VALUE instead of stopping; the snapshot says how many",
    )
    parser.add_argument("--out", required=True, help="snapshot file to write (.pickle, or .pickle.gz)")
    parser.add_argument("script", help="the Python script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    options = parser.parse_args(argv)
    if not os.path.isfile(options.script):
        print(f"error: {options.script}: no such script", file=sys.stderr)
        return 2
    tracer = trace(gpu=options.gpu, answer_reads=options.answer_reads)
    sys.argv = [options.script] + options.args
    status = 0
    failure: Optional[BaseException] = None
    try:
        with tracer:
            runpy.run_path(options.script, run_name="__main__")
    except UnfollowedError as e:
        print(f"error: {e}", file=sys.stderr)
        status = 1
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Exception as e:
        # The script's own error: its traceback is the program's to show, after the trace up
        # to there is written.
        failure = e
        status = 1
    tracer.save(options.out)
    if failure is not None:
        import traceback

        traceback.print_exception(failure)
        print(f"error: the script raised {type(failure).__name__}; the trace up to there is in {options.out}", file=sys.stderr)
    events = len(tracer.snapshot()["device_traces"][0])
    print(f"trace: {events} events, peak allocated {tracer.peak_allocated} B -> {options.out}", file=sys.stderr)
    where = tracer.breakdown()
    if where["peak_allocated"]:
        parts = ", ".join(f"{name} {size / 2**20:,.1f} MiB" for name, size in where["live_at_peak"].items())
        print(f"at the peak (during {where['peak_during']}): {parts}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
