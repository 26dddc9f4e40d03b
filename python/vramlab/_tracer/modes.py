"""The trace's two modes, thin: they make stand-ins of CUDA tensors and ask the rules.

- `OnTheGpu` (a torch function mode) sees the program's calls: it turns "cuda" into the stand-in
  device ("meta") wherever a device is named, makes host data into stand-ins as a copy to the
  device would, and hands Python functions whose GPU path is chosen above ATen to the function
  rules. A stand-in says it is on ``cuda:0`` to the program and to PyTorch's own Python code,
  which picks fast paths by it (nn.MultiheadAttention's, the optimizers').
- `Allocations` (a torch dispatch mode) sees each ATen operator: the rules of the operator are
  consulted (`rules.Rule`), the meta kernel runs, and each storage made is recorded. An operator
  on a tensor subclass that wraps others (DTensor, functional collectives' AsyncCollectiveTensor)
  is handed back to the subclass, whose operators on its local tensors come back here: only those
  own GPU memory, as FakeTensorMode too declines subclasses it does not know (fake_tensor.py,
  ``FakeTensorMode.__torch_dispatch__``'s NotImplemented for unrecognized types).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass_type

from ..errors import UnfollowedError
from .rules import PASS, Call
from .rules.reads import READS_HOST_VALUES, READS_VALUES, UNKNOWN_HOST_READ, boolean_indices
from .standin import legacy_dtype
from .printed import ROLL_SHIFT_NOTE, read_only_printed
from .unknown import PLACEHOLDER_NOTE, UnknownFloat, UnknownInt
from .where import here, user_frame


def _placeholder_dtype(torch: Any, dtype: Any) -> bool:
    """Values of this type only printed or counted can be placeholders (unknown.py): floating
    point and integers, not booleans (a boolean read is a decision)."""
    return dtype.is_floating_point or (dtype != torch.bool and not dtype.is_complex)


def _unknown(t: Any) -> Any:
    return UnknownFloat if t.dtype.is_floating_point else UnknownInt


# Elements of a tensor whose .tolist() only printed is answered with placeholders, at most: a
# printed list of more is not read by a person, and each placeholder is a Python object.
PRINTED_LIST_LIMIT = 10_000


def _placeholders(unknown: Any, read_at: str, shape: List[int]) -> Any:
    """`t.tolist()` of a tensor of `shape`, each value a placeholder read at `read_at`."""
    if not shape:
        return unknown(read_at)
    return [_placeholders(unknown, read_at, shape[1:]) for _ in range(shape[0])]


class OnTheGpu(TorchFunctionMode):
    def __init__(self, session: Any) -> None:
        super().__init__()
        self.session = session
        torch = session.torch
        self.torch = torch
        self.cuda0 = torch.device("cuda", session.device_index)
        self.says = {"is_cuda": True, "is_meta": False, "device": self.cuda0}
        self.factories = (torch.tensor, torch.as_tensor, torch.asarray)
        # What hands a tensor's memory to another library.
        self.host_views = tuple(f for f in (torch.Tensor.numpy, getattr(torch.Tensor, "__dlpack__", None), getattr(torch.Tensor, "__array__", None)) if f is not None)
        # What reads a host tensor's values outside ATen's operators.
        self.host_reads = self.host_views + (torch.Tensor.tolist, torch.Tensor.__repr__, torch.Tensor.__format__)
        self.mha_forward = torch.nn.functional.multi_head_attention_forward
        # What reads one value of a tensor for printing or logging at least. Not float(t): Python
        # makes a plain float of what __float__ returns, which could then decide in silence.
        self.one_value_reads = (torch.Tensor.item, torch.Tensor.__format__, torch.Tensor.__repr__)
        # int(t) and float(t): answered only where the program's source shows the number is only
        # printed (printed.py).
        self.number_reads = (torch.Tensor.__int__, torch.Tensor.__float__)
        self.indexing = (torch.Tensor.__getitem__, torch.Tensor.__setitem__)

    def _printable_value(self, t: Any) -> bool:
        """A stand-in of one floating-point value, read where the program did not ask every read
        answered (answer_reads)."""
        torch = self.torch
        if not (isinstance(t, torch.Tensor) and t.numel() == 1 and _placeholder_dtype(torch, t.dtype) and self.session.answer_reads is None):
            return False
        if t.device.type != "meta":
            # A host copy of a GPU value the trace does not have (model.weight[0].cpu()[0]).
            return self.session.shadows.unknown_host([t]) is not None
        return not self.session.record.program_meta(t)

    def _bounded_indices(self, indexed: Any, index: Any) -> Any:
        """`index` with each one-element integer stand-in whose values have known bounds (topk's
        indices) as its lowest value, where `indexed`'s values are unknown. PyTorch reads such an
        index back and selects by it (python_variable_indexing.cpp: a 0-dim integer tensor is an
        integer): a view, whose allocations do not depend on which element it is, and of values
        the trace does not know either way."""
        torch, shadows = self.torch, self.session.shadows

        def bounded(i: Any) -> Any:
            if not (isinstance(i, torch.Tensor) and i.device.type == "meta" and i.dim() == 0 and not i.dtype.is_floating_point and i.dtype != torch.bool):
                return None
            try:
                # A tensor without storage of its own (vmap's batched tensors) has no values here.
                return shadows.bounds(i) if shadows.view(i) is None and shadows.view(indexed) is None else None
            except (NotImplementedError, RuntimeError):
                return None

        def answered(i: Any) -> Any:
            bounds = bounded(i)
            if bounds is None:
                return i
            self.session.note(BOUNDED_INDEX_NOTE)
            return bounds[0]

        return tuple(answered(i) for i in index) if isinstance(index, tuple) else answered(index)

    def _printable_list(self, t: Any) -> bool:
        """A stand-in of unknown values, few enough to print, of a type placeholders stand for."""
        torch = self.torch
        return (
            isinstance(t, torch.Tensor)
            and t.device.type == "meta"
            and t.numel() <= PRINTED_LIST_LIMIT
            and _placeholder_dtype(torch, t.dtype)
            and self.session.answer_reads is None
            and self.session.shadows.view(t) is None
            and not self.session.record.program_meta(t)
        )

    def _placeholder_repr(self, t: Any, value: Any) -> str:
        """A one-element tensor printed as torch/_tensor_str.py prints it (brackets per dimension;
        the device unless it is the host; the dtype unless it is the default; grad_fn, or
        requires_grad on a leaf), with the placeholder for its value."""
        torch = self.torch
        parts = ["[" * t.dim() + str(value) + "]" * t.dim()]
        if t.device.type == "meta":
            parts.append(f"device='{self.cuda0}'")
        if t.dtype not in (torch.get_default_dtype(), torch.int64):
            parts.append(f"dtype={t.dtype}")
        if t.grad_fn is not None:
            parts.append(f"grad_fn=<{type(t.grad_fn).__name__}>")
        elif t.requires_grad:
            parts.append("requires_grad=True")
        return f"tensor({', '.join(parts)})"

    def _read_one_value(self, t: Any, note: Optional[str] = PLACEHOLDER_NOTE) -> Any:
        """The value, where the trace knows it (or a rule answers it), else an UnknownFloat (and
        the snapshot says `note`)."""
        session = self.session
        if t.device.type != "meta":
            if note:
                session.note(note)
            return _unknown(t)(f"{here()} (of values copied from the GPU to the host at {session.shadows.unknown_host([t])})")
        session.placeholder_reads, session.placeholder_given = True, False
        try:
            value = self.torch.Tensor.item(t)
        finally:
            session.placeholder_reads = False
        if session.placeholder_given:
            session.placeholder_given = False
            if note:
                session.note(note)
            return _unknown(t)(here())
        return value

    def _sequence_indices(self, index: Any) -> Any:
        """An index whose lists of integers become index tensors on the GPU, as PyTorch makes them
        (python_variable_indexing.cpp, sequenceToVariable: indexing_tensor_from_data with the
        indexed tensor's options, so a CUDA tensor's list index is copied to the GPU, 8 bytes an
        entry, and autograd keeps it with the indexing's backward)."""
        def on_gpu(sequence: List[int]) -> Any:
            return self.session.from_host(self.torch.tensor, (sequence,), {"device": "cuda"})

        if _int_sequence(index):
            return on_gpu(index)
        if isinstance(index, tuple) and any(_int_sequence(i) for i in index):
            return tuple(on_gpu(i) if _int_sequence(i) else i for i in index)
        return index

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        torch, session = self.torch, self.session
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", "")
        if session.host.short is not None and not session.host.said:
            session.host.said = True
            raise UnfollowedError(f"{name} at {here()}: {session.host.short}; the trace up to there is kept")
        if name == "__get__" and args and isinstance(args[0], torch.Tensor) and args[0].device.type == "meta":
            said = self.says.get(getattr(getattr(func, "__self__", None), "__name__", ""))
            if said is not None and not session.record.program_meta(args[0]):
                return said
        if func is self.mha_forward:
            name = "multi_head_attention_forward"
        for rule in session.rules.functions.get(name, ()):
            answer = rule.call(self, func, args, kwargs)
            if answer is not PASS:
                return answer
        if func is torch.Tensor.get_device and args and isinstance(args[0], torch.Tensor) and args[0].device.type == "meta":
            return session.device_index
        if kwargs.get("pin_memory"):
            # Pinned host memory is the host's (CUDA's host allocator), not the GPU's: made as
            # plain host memory, which needs no driver.
            kwargs["pin_memory"] = False
            session.note(PINNED_NOTE)
        if func in self.one_value_reads and args and self._printable_value(args[0]):
            if func is torch.Tensor.__format__ and args[0].dim() > 0:
                # As Tensor.__format__ does: only a 0-dim tensor formats as its value; others go to
                # object.__format__, a TypeError for a spec such as ".4f", else their repr.
                if len(args) > 1 and args[1]:
                    raise TypeError(f"unsupported format string passed to {type(args[0]).__name__}.__format__")
                func = torch.Tensor.__repr__
            value = self._read_one_value(args[0])
            if func is torch.Tensor.__format__:
                return format(value, *args[1:2])
            if func is torch.Tensor.__repr__:
                return self._placeholder_repr(args[0], value) if isinstance(value, (UnknownFloat, UnknownInt)) else func(args[0])
            return value
        if func in self.number_reads and args and self._printable_value(args[0]):
            value = self._read_one_value(args[0], note=None)
            if not isinstance(value, (UnknownFloat, UnknownInt)):
                return float(value) if func is torch.Tensor.__float__ else int(value)
            answered = read_only_printed()
            if answered is not None:
                session.note(answered)
                if answered is ROLL_SHIFT_NOTE:
                    session.shadows.answered_shifts += 1
                return 0.0 if func is torch.Tensor.__float__ else 0
        if func in self.indexing and len(args) > 1 and isinstance(args[0], torch.Tensor) and args[0].device.type == "meta":
            args = (args[0], self._bounded_indices(args[0], args[1])) + tuple(args[2:])
        if func is torch.Tensor.tolist and args and self._printable_list(args[0]) and read_only_printed() is not None:
            # Values copied only to be printed: placeholders, as .item()'s (unknown.py).
            session.note(PLACEHOLDER_NOTE)
            return _placeholders(_unknown(args[0]), here(), list(args[0].shape))
        if func in self.host_reads and args and isinstance(args[0], torch.Tensor):
            if args[0].device.type != "meta":
                unknown = session.shadows.unknown_host(args[:1])
                if unknown is not None:
                    raise UnfollowedError(UNKNOWN_HOST_READ.format(op=name, here=here(), where=unknown))
            elif session.reading_values is None and func not in self.host_views:
                # A stand-in's values read through a copy to the host (x.tolist(), print(x)):
                # that copy is the read (rules/reads.py).
                session.reading_values = name
                try:
                    return func(*args, **kwargs)
                finally:
                    session.reading_values = None
        if func in self.host_views and args and isinstance(args[0], torch.Tensor) and args[0].device.type == "meta":
            if func is torch.Tensor.numpy:
                # As PyTorch says it of a CUDA tensor.
                raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first.")
            raise UnfollowedError(
                f"{name} at {here()}: a GPU tensor handed to another library (DLPack, the array interface) is read there from GPU memory, which a trace has none of; the trace up to there is kept"
            )
        if func in self.factories or func is torch.Tensor.new_tensor:
            made = session.from_host(func, args, kwargs)
            if made is not None:
                return made
        if func is torch.Tensor.type and len(args) + len(kwargs) > 1:
            # x.type(torch.cuda.HalfTensor), x.type("torch.cuda.FloatTensor"): a cast and a move
            # to the GPU.
            to = args[1] if len(args) > 1 else kwargs.get("dtype")
            text = to if isinstance(to, str) else getattr(to, "__module__", "") + "." + getattr(to, "__name__", "")
            if "cuda" in text.split(".")[:-1]:
                dtype = getattr(to, "dtype", None) if not isinstance(to, str) else legacy_dtype(torch, to)
                if isinstance(dtype, torch.dtype):
                    return args[0].to(device="meta", dtype=dtype, non_blocking=bool(kwargs.get("non_blocking", False)))
        if func is torch._C._nn._parse_to:
            # Module.to parses its arguments here, where a "cuda" device is made the stand-ins'
            # meta; whether the program itself named meta is kept for the conversion that follows.
            session.module_to_meta = names_meta(torch, kwargs.get("device", args[0] if args else None))
        if func is torch.Tensor.to and self._gpu_to_meta(args, kwargs):
            # On the GPU, .to("meta") makes a tensor without memory, and the CUDA one dies with
            # its last reference (a module moved to meta frees its parameters there); a stand-in
            # is on meta already, where .to would hand back the tensor itself and keep it alive.
            dtype = kwargs.get("dtype") or next((a for a in args[1:] if isinstance(a, torch.dtype)), args[0].dtype)
            outer = session.explicit_device
            session.explicit_device = "meta"
            try:
                return torch.empty_like(args[0], device="meta", dtype=dtype)
            finally:
                session.explicit_device = outer
        explicit = None
        if "device" in kwargs:
            device = kwargs["device"]
            if names_meta(torch, device):
                # The program's own meta tensors (`with torch.device("meta")`, a model built
                # without memory) are not GPU memory, though the trace's stand-ins for CUDA
                # tensors are on meta too: Allocations keeps them apart.
                explicit = "gpu" if session.stand_in_meta else "meta"
                if not session.stand_in_meta:
                    session.note(PROGRAM_META_NOTE)
            elif device is not None and torch.device(device).type != "cpu":
                explicit = "gpu"
            if isinstance(device, int) and not isinstance(device, bool):
                # A device given as a number is a CUDA device's index.
                session.one_gpu(device)
                kwargs["device"] = "meta"
            else:
                kwargs["device"] = session.redirect(device)
        if func is torch.Tensor.cuda:
            session.one_gpu(args[1] if len(args) > 1 else kwargs.get("device"))
            return args[0].to("meta")
        if func in (torch.Tensor.to, torch.Tensor.new_empty, torch.Tensor.new_zeros):
            if any(isinstance(a, (str, torch.device)) and a != "meta" and torch.device(a).type == "cuda" for a in args[1:]):
                explicit = "gpu"
            args = tuple(session.redirect(a) for a in args)
        if func is torch.Tensor.pin_memory:
            return args[0]
        if func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__) and len(args) >= 2 and isinstance(args[0], torch.Tensor) and args[0].device.type == "meta":
            args = (args[0], self._sequence_indices(args[1]), *args[2:])
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
        outer = session.explicit_device
        if explicit is not None:
            session.explicit_device = explicit
        try:
            result = func(*args, **kwargs)
        finally:
            session.explicit_device = outer
        streams = getattr(session, "_streams", None)
        if streams is not None and streams.current is not streams.default and torch.is_grad_enabled():
            # Its backward runs on this stream (streams.py: backward_on_current).
            streams.backward_on_current(result)
        return result


    def _gpu_to_meta(self, args: Any, kwargs: Dict[str, Any]) -> bool:
        """Whether a Tensor.to call moves a GPU stand-in to the meta device by the program's own
        asking (``.to("meta")``, ``.to(torch.device("meta"))``, ``.to(device="meta")``)."""
        torch, session = self.torch, self.session
        if session.stand_in_meta or not args or not isinstance(args[0], torch.Tensor) or args[0].device.type != "meta" or session.record.program_meta(args[0]):
            return False
        if session.in_module_move and not session.module_to_meta:
            # A module moved to the GPU: its meta is the trace's redirect (a parameter tied to one
            # already moved is met again).
            return False
        return any(names_meta(torch, a) for a in [*args[1:], kwargs.get("device")])


def names_meta(torch: Any, value: Any) -> bool:
    """Whether `value` names the meta device (a torch.device or a string such as "meta")."""
    return (isinstance(value, torch.device) and value.type == "meta") or (isinstance(value, str) and value.split(":")[0] == "meta")


def _int_sequence(value: Any) -> bool:
    return isinstance(value, list) and len(value) > 0 and all(isinstance(v, int) for v in value)


BOUNDED_INDEX_NOTE = "{count} indexings by a one-element integer tensor of unknown value within known bounds (topk's or sort's indices) selected by its lowest value: a view of unknown values either way, whose allocations do not depend on which element"
PINNED_NOTE = "{count} tensors asked for in pinned host memory (pin_memory=True) were made in plain host memory: pinned memory is the host's, not in a GPU snapshot"
PROGRAM_META_NOTE = "{count} tensors the program itself made on the meta device (a model built without memory), and what was computed from them alone, were not recorded: they hold no GPU memory"


class Allocations(TorchDispatchMode):
    def __init__(self, session: Any) -> None:
        super().__init__()
        self.session = session
        self.torch = session.torch
        self.fake_key = session.torch._C._TorchDispatchModeKey.FAKE

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if any(is_traceable_wrapper_subclass_type(t) for t in types):
            # A DTensor's storage is not its memory: the wrapper says the global shape, and a
            # rank holds its local shard (and whatever the redistribution makes), which the
            # subclass's own dispatch computes with operators this mode then sees.
            return NotImplemented
        # Operators asked for by PyTorch's C++ called straight from Python (DDP's Reducer, c10d's
        # broadcast_coalesced) arrive with the function mode still on: below ATen the stand-ins
        # are on meta, as for every other operator.
        with self.torch._C.DisableTorchFunction():
            return self._dispatch(func, types, args, kwargs)

    def _dispatch(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        torch, session = self.torch, self.session
        op = func._schema.name.split("::")[-1]
        kwargs = kwargs or {}
        if kwargs.get("pin_memory"):
            # A factory PyTorch's own Python calls inside an operator the function mode is already
            # handling (save_on_cpu's pack hook, run as autograd saves a tensor) reaches this mode
            # without passing the function mode: the same pinned host memory, made plain.
            kwargs = {**kwargs, "pin_memory": False}
            session.note(PINNED_NOTE)
        leaves = torch.utils._pytree.tree_leaves((args, kwargs))
        # Only tensors standing in for CUDA ones have no values: the program's own CPU tensors (an
        # optimizer's step count) read back as they would.
        on_gpu = any(isinstance(a, torch.Tensor) and a.device.type == "meta" for a in leaves)
        unknown = session.shadows.unknown_host(leaves)
        if unknown is not None and (op in READS_VALUES or op in READS_HOST_VALUES or (op in ("index", "_unsafe_index", "index_put", "index_put_", "_index_put_impl_") and boolean_indices(torch, args))):
            raise UnfollowedError(UNKNOWN_HOST_READ.format(op=op, here=here(), where=unknown))
        if on_gpu and not session.rules.own(op) and runs_as_composite_on_cuda(torch, func):
            # Where autograd is off (inference_mode) a composite operator reaches the mode whole, and
            # its meta kernel would make below the mode what the GPU makes with operators of its own
            # (linear's addmm and its cuBLAS workspaces, layer_norm's mean and rstd): run the
            # composite with the mode on, as FakeTensorMode does (fake_tensor.py, decompose).
            with self:
                if op == "linear":
                    return session.linear(*args, **kwargs)
                return func.decompose(*args, **kwargs)
        composite = explicit_composite_on_cuda(torch, func) if on_gpu and op in EXPLICIT_COMPOSITES else None
        if composite is not None:
            # CUDA runs it as other operators, which allocate what the GPU allocates; the same
            # kernel on meta would make them below the mode.
            with self:
                return func._op_dk(composite, *args, **kwargs)
        if self._program_meta(leaves) or torch._C._get_dispatch_mode(self.fake_key) is not None:
            # The program's own meta tensors, what is computed from them alone, and what
            # FakeTensorMode computes (PyTorch's code learning shapes without memory: DTensor's
            # sharding propagation; an infrastructure mode, it comes after this one): not GPU
            # memory, and nothing the GPU's kernels would do.
            out = func(*args, **kwargs)
            for t in torch.utils._pytree.tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.device.type == "meta":
                    session.record.mark_program_meta(t.untyped_storage())
            return out
        call = Call(session, func, op, args, kwargs, on_gpu)
        rules = session.rules.of(op)
        if on_gpu:
            for rule in rules:
                answer = rule.before(call)
                if answer is not PASS:
                    return answer
        args, kwargs = call.args, call.kwargs
        try:
            out = func(*args, **kwargs)
        except NotImplementedError as error:
            device = kwargs.get("device")
            # A factory has no tensor to say so: its device does (cuDNN's dropout state).
            if not (on_gpu or (device is not None and torch.device(device).type == "meta")):
                raise
            # No meta kernel (or one that needs values): the trace cannot say what the GPU's
            # kernel allocates.
            why = "its result's shape depends on values, which a trace without data has none of" if "nonzero" in str(error) else "PyTorch has no kernel for it that runs without data (no meta kernel), so what the GPU's kernel allocates is unknown"
            raise UnfollowedError(f"{op} at {here()}: {why}; the trace up to there is kept") from None
        if unknown is not None:
            # What is computed on the host from values the trace does not have has none either.
            for t in torch.utils._pytree.tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.device.type != "meta":
                    session.shadows.mark_unknown_host(t, unknown)
        if on_gpu:
            for rule in rules:
                out = rule.result(call, out)
        made = [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor) and t.device.type == "meta"]
        if any(t.layout != torch.strided for t in made):
            raise UnfollowedError(
                f"{op} at {here()}: sparse tensors on the GPU are not followed (their storages are not the caching allocator's blocks one to one); the trace up to there is kept"
            )
        call.frame = user_frame() if made else None
        for rule in rules:
            made = rule.outputs(call, out, made)
        if on_gpu or made:
            session.shadows.after(func, op, args, kwargs, out)
        if not any(rule.track(call, out, made) for rule in rules):
            for t in made:
                session.record.track(t, call.frame)
        for rule in rules:
            rule.after(call, out, made)
        return out


    def _program_meta(self, leaves: Any) -> bool:
        """Whether an operator works on the program's own meta tensors: asked for on meta by the
        program, or every meta tensor among its inputs is the program's, and it was not asked to
        make its result on the GPU (``to_empty(device="cuda")``)."""
        explicit = self.session.explicit_device
        if explicit is not None:
            return explicit == "meta"
        record, torch = self.session.record, self.torch
        metas = [a for a in leaves if isinstance(a, torch.Tensor) and a.device.type == "meta"]
        return bool(metas) and all(record.program_meta(a) for a in metas)


def runs_as_composite_on_cuda(torch: Any, func: Any) -> bool:
    """Whether CUDA runs `func` as its CompositeImplicitAutograd decomposition: it has one, and no
    kernel of CUDA's own or an explicit composite, which would win (silu_backward has both a CUDA
    kernel and a composite, for double backward)."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    name = func.name()
    return has(name, "CompositeImplicitAutograd") and not any(
        has(name, key) for key in ("CUDA", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")
    )


# Operators CUDA runs by their CompositeExplicitAutograd kernel whose own operators allocate,
# read in their sources (2.11 to 2.15): ReduceOps.cpp logsumexp_out_impl (row maxima, an infinity
# check, the shifted exponentials, their sum) and AffineGridGenerator.cpp (the base grid and each
# side's linspace), PackedSequence.cpp _pack_padded_sequence (a contiguous copy of each block of
# time steps where the batch narrows, then their cat), Distance.cpp _euclidean_dist (cdist's path
# for p=2 past 25 rows: squared norms, ones, both sides' cat, their matmul by cuBLAS). Named one by one: taken for every such
# operator, the same path sent tensor parallelism's DTensor operators through kernels that
# allocated 20-30% more than the H100 did.
EXPLICIT_COMPOSITES = {"logsumexp", "affine_grid_generator", "_pack_padded_sequence", "_euclidean_dist"}


def explicit_composite_on_cuda(torch: Any, func: Any) -> Any:
    """The dispatch key of the kernel CUDA runs `func` by where it is a CompositeExplicitAutograd
    one (no CUDA kernel of its own): a function of other operators, each of which the mode then
    sees (logsumexp's amax, its shifted exp and sum; affine_grid_generator's base grid). None for
    views and in-place operators, whose allocations are their results if anything, and for those
    taking a number, whose kernels wrap it in a tensor that Python dispatch hands the mode back as
    a number (remainder.Scalar's call of remainder.Tensor would not take it)."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    name = func.name()
    if has(name, "CUDA"):
        return None
    schema = func._schema
    outs = any(a.is_out for a in schema.arguments)
    if not outs and any(r.alias_info is not None for r in schema.returns):
        return None
    for a in schema.arguments:
        if "number" in str(a.type) or (a.alias_info is not None and a.alias_info.is_write and not a.is_out):
            return None
    for key in ("CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional"):
        if has(name, key):
            return getattr(torch._C.DispatchKey, key)
    return None
