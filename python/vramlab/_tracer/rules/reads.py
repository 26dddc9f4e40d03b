"""Values read back from the GPU (``.item()``, ``bool(x)``, ``.cpu()``) and shapes made from values
(``nonzero``, boolean-mask indexing, ``unique``): answered where the values are known without a GPU
(`..values`: from the CPU or from deterministic factories), answered with ``answer_reads`` where
the program asked for that, else refused in one line. GradScaler's overflow check is answered as a
healthy step's, and said so."""

from __future__ import annotations

from typing import Any, Dict, List

from ...errors import UnfollowedError
from ..printed import EQUAL_PRINTED_NOTE, SHAPE_PRINTED_NOTE, equal_only_printed, shape_only_printed
from ..recorder import PEAK_AT_MOST
from ..where import here
from . import PASS, Call, FunctionRule, Rule, register, register_function, trunc_normal

READS_ONE_VALUE = {"_local_scalar_dense", "item", "is_nonzero"}
READS_VALUES = READS_ONE_VALUE | {
    "nonzero",
    "masked_select",
    "unique",
    "_unique",
    "_unique2",
    "unique_consecutive",
    "unique_dim",
    "equal",
    "repeat_interleave",
    "bincount",
    "nonzero_static",
}
# The unique family, whose output's length is the number of distinct values.
UNIQUE = {"_unique", "_unique2", "unique_consecutive", "unique_dim", "unique_dim_consecutive"}
UNKNOWN_HOST_NOTE = "{count} copies of GPU tensors to the host (.cpu(), .to(\"cpu\")) were made without their values, which a trace has none of; nothing the program did later read them (a read, .item(), .tolist(), .numpy() or printing, stops the trace at its line)"
UNKNOWN_HOST_READ = "{op} at {here}: the program reads values it copied from the GPU to the host at {where}, and a trace without data has none; the trace up to there is kept (values only printed can be answered: vramlab.trace(answer_reads=0.0), --answer-reads 0)"
# Operators whose kernels (meta ones too) read the values of host tensors among their arguments
# to make their results' shapes: packed sequences' lengths, tensor_split's and narrow's indices.
READS_HOST_VALUES = {"_pack_padded_sequence", "tensor_split", "narrow"}
KNOWN_NOTE = "{count} values read back were known without a GPU (from the CPU or from known factories, through operations run again on small CPU copies: vramlab/_tracer/values.py) and answered"


@register
class Reads(Rule):
    ops = READS_VALUES | {"_amp_foreach_non_finite_check_and_unscale_", "_to_copy", "copy_", "index", "_unsafe_index"}
    source = "values known on the CPU (vramlab/_tracer/values.py); GradScaler (torch/amp/grad_scaler.py)"
    order = 10
    # What a read of GradScaler's found_inf answers: 0.0, no overflow, so every step is taken (the
    # steady state a longer run reaches). Whether the GPU's first steps overflow at the initial
    # scale depends on the gradients' values (ISSUE35K's two float16 runs skipped both steps).
    FOUND_INF_ANSWER = 0.0

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        import weakref

        # GradScaler's found_inf storages, by id, while they live.
        self.found_inf: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()

    def before(self, call: Call) -> Any:
        torch, session, op, args = self.torch, self.session, call.op, call.args
        if op == "_amp_foreach_non_finite_check_and_unscale_":
            self.found_inf[args[1].untyped_storage()._cdata] = args[1].untyped_storage()
            return PASS
        if op == "_local_scalar_dense" and args[0].untyped_storage()._cdata in self.found_inf:
            session.note(
                PEAK_AT_MOST + " {count} reads of GradScaler's found_inf answered 0 (no gradient overflowed, as in a healthy step; a step the GPU would skip for inf or NaN gradients is traced as taken): whether a step overflows depends on the gradients' values, and the first steps at GradScaler's initial scale of 65536 often do (the optimizer's state is then not made yet, and the GPU's peak is lower than the trace's, which is that of the steps taken)"
            )
            return self.FOUND_INF_ANSWER
        # bool(x) and x.item() reach the mode whole where autograd is off (inference_mode), and
        # as _local_scalar_dense elsewhere: all read one value.
        if op in READS_ONE_VALUE:
            known = session.shadows.read(args[0])
            if known is not None:
                session.note(KNOWN_NOTE)
                return bool(known) if op == "is_nonzero" else known
            for answer in session.read_answers:
                value = answer(args[0])
                if value is not None:
                    return bool(value) if op == "is_nonzero" else value
            rounds_left = trunc_normal.answer(session, args[0])
            if rounds_left is not None:
                return rounds_left
        if op in ("_to_copy", "copy_"):
            return self._to_host(call) if to_host(torch, op, args, call.kwargs) else PASS
        if op in READS_ONE_VALUE and session.answer_reads is not None:
            return session.answered(torch.bool if op == "is_nonzero" else args[0].dtype)
        if op in ("index", "_unsafe_index"):
            if boolean_indices(torch, args):
                # A boolean mask's elements that are set pick the elements: a shape made from
                # values, known where the mask's values are (ATen turns it into nonzero's indices
                # on the GPU first: an allocation of its own).
                call.args = self._mask_indices(op, args)
            return PASS
        if op == "repeat_interleave" and getattr(call.func, "_overloadname", "") == "self_int":
            # An integer count of repeats: an unsqueeze, an expand and a contiguous clone
            # (Repeat.cpp, repeat_interleave_symint), no value read (generate's beam expansion).
            return PASS
        if op not in READS_ONE_VALUE:
            known = session.known_shape(call.func, args, call.kwargs)
            if known is not None:
                if op == "equal":
                    self._equal_scratch(call)
                return known
        if op == "equal" and equal_only_printed():
            self._equal_scratch(call)
            session.note(EQUAL_PRINTED_NOTE)
            return True
        if op == "bincount":
            counted = self._bounded_bincount(call)
            if counted is not None:
                return counted
        if op == "masked_select" and len(args) > 1 and session.shadows.view(args[1]) is not None:
            # CUDA's masked_select is index with the mask, both broadcast (IndexKernel.cu,
            # masked_select_out_cuda_impl): its shape is the mask's alone, its values the input's.
            shape = torch.broadcast_shapes(args[0].shape, args[1].shape)
            with session.modes[1]:
                return torch.ops.aten.index.Tensor(args[0].expand(shape), [args[1].expand(shape)])
        if op in UNIQUE and shape_only_printed():
            return self._unique_at_most(call)
        if op in ("_local_scalar_dense", "item") and session.placeholder_reads and args[0].dtype != torch.bool and not args[0].dtype.is_complex:
            # A value the program may only print or count: modes.py hands it over as one of
            # unknown.py's placeholders.
            session.placeholder_given = True
            return 0.0
        raise UnfollowedError(
            f"{op} at {here()}: the program reads values back or makes a shape from them, and a trace without data has none; the trace up to there is kept"
            + ("" if op != "_local_scalar_dense" else " (a value only printed can be answered: vramlab.trace(answer_reads=0.0), --answer-reads 0)")
        )

    def _unique_at_most(self, call: Call) -> Any:
        """A unique of values the trace does not have whose result is only printed: as many unique
        elements as the input has (the most there can be), with the inverse indices and counts
        asked for, int64 (Unique.cu's outputs); said in SHAPE_PRINTED_NOTE."""
        torch, session = self.torch, self.session
        bound = call.bound()
        x = bound["self"]
        session.note(PEAK_AT_MOST + " " + SHAPE_PRINTED_NOTE)
        dim = bound.get("dim")
        shape = list(x.shape) if dim is not None else [x.numel()]
        with session.modes[1]:
            output = torch.empty(shape, dtype=x.dtype, device=x.device)
            inverse = torch.empty(x.shape if bound.get("return_inverse") else (0,), dtype=torch.int64, device=x.device)
            counts = torch.empty(shape[dim] if dim is not None else x.numel(), dtype=torch.int64, device=x.device) if bound.get("return_counts") else torch.empty(0, dtype=torch.int64, device=x.device)
        if call.op == "_unique":
            return output, inverse
        return output, inverse, counts

    def _equal_scratch(self, call: Call) -> None:
        """CUDA's ``torch.equal`` of two tensors of one shape is ``eq(self, src).all().item()``
        (aten/src/ATen/native/cuda/Equal.cpp, cuda_equal; 2.11 to 2.15): the elementwise result
        and the reduction's one byte, both freed once read, unless the two are the same view of
        one storage (its fast path). ``torch.istft`` checks its window's envelope this way."""
        torch, args = self.torch, call.args
        a, b = args[0], args[1]
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.device.type != "meta" or a.shape != b.shape or a.numel() == 0:
            return
        same_view = (
            a.untyped_storage()._cdata == b.untyped_storage()._cdata and a.storage_offset() == b.storage_offset()
            and a.dtype == b.dtype and a.stride() == b.stride()
        )
        if not same_view:
            call.record.scratch([a.numel(), 1], call.frame)

    def _to_host(self, call: Call) -> Any:
        """A GPU tensor's values copied to the host: known values are copied; others the trace
        does not have."""
        torch, session, op, args, kwargs = self.torch, self.session, call.op, call.args, call.kwargs
        source = args[0] if op == "_to_copy" else args[1]
        known = session.shadows.view(source) if isinstance(source, torch.Tensor) else None
        for answer in session.host_answers if known is None else ():
            fill = answer(source)
            if fill is not None:
                known = torch.full(source.shape, fill, dtype=source.dtype)
                break
        if known is None and session.answer_reads is not None:
            dtype = kwargs.get("dtype") or source.dtype
            known = torch.full(source.shape, session.answered(source.dtype), dtype=source.dtype).to(dtype)
        if known is None and session.reading_values is not None:
            raise UnfollowedError(
                f"{session.reading_values} at {here()}: the program reads a GPU tensor's values on the host, and a trace without data has none; the trace up to there is kept (values only printed can be answered: vramlab.trace(answer_reads=0.0), --answer-reads 0)"
            )
        if known is None:
            # The copy is made, without values: a read of them stops the trace where it is made
            # (modes.py), and a program that only keeps or moves them (predictions collected on
            # the CPU) goes on.
            session.note(UNKNOWN_HOST_NOTE)
            if op == "copy_":
                session.shadows.mark_unknown_host(args[0], here())
                return args[0]
            dtype = kwargs.get("dtype") or source.dtype
            host = torch.zeros_like(source, device="cpu", dtype=dtype)
            session.shadows.mark_unknown_host(host, here())
            return host
        session.note(KNOWN_NOTE)
        if op == "copy_":
            return args[0].copy_(known)
        return known.to(**{k: v for k, v in kwargs.items() if k in ("dtype", "memory_format")}).clone()

    def _bounded_bincount(self, call: Call) -> Any:
        """``bincount`` of indices whose bounds are known to lie below ``minlength`` (a router's
        choices among its experts): ``minlength`` bins, as SummaryOps.cu's
        _bincount_cuda_template makes them (the input's minimum and maximum read back through a
        0-d tensor each, then the zeroed output: the weights' dtype, or int64). None elsewhere."""
        torch, session = self.torch, self.session
        bound = call.bound()
        x, weights, minlength = bound["self"], bound.get("weights"), int(bound.get("minlength") or 0)
        known = session.shadows.bounds(x) if isinstance(x, torch.Tensor) and x.device.type == "meta" else None
        if known is None or x.dim() != 1 or x.numel() == 0 or known[0] < 0 or known[1] >= minlength:
            return None
        session.note(
            "{count} bincounts of indices known to lie below their minlength (from topk, sort or argmax over that many) were given minlength bins, as the GPU gives them whatever the indices are"
        )
        with session.modes[1]:
            for reduce in (torch.ops.aten.min.default, torch.ops.aten.max.default):
                # Read back and dropped at once, as the kernel's 0-d temporary is.
                reduce(x)
            dtype = weights.dtype if isinstance(weights, torch.Tensor) else torch.int64
            return torch.zeros(minlength, dtype=dtype, device=x.device)

    def _mask_indices(self, op: str, args: Any) -> Any:
        """`index`'s arguments with each boolean mask replaced by the indices of its set elements
        (ATen's expandTensors: ``mask.nonzero()``, then a view per dimension), where the mask's
        values are known; UnfollowedError where they are not."""
        torch = self.torch
        indices: List[Any] = []
        for index in args[1]:
            if isinstance(index, torch.Tensor) and index.dtype in (torch.bool, torch.uint8):
                known = self.session.known_shape(torch.ops.aten.nonzero.default, (index,), {})
                if known is None and any(answer(index) for answer in self.session.mask_answers):
                    self.session.shadows.adopt(index, torch.ones(index.shape, dtype=index.dtype))
                    known = self.session.known_shape(torch.ops.aten.nonzero.default, (index,), {})
                if known is None and shape_only_printed():
                    # Every element selected: the most the GPU's nonzero can make.
                    self.session.note(PEAK_AT_MOST + " " + SHAPE_PRINTED_NOTE)
                    known = self.session.stand_in(torch.ones(index.shape, dtype=torch.bool).nonzero(), keep_values=False)
                if known is None:
                    raise UnfollowedError(
                        f"{op} at {here()}: indexing with a boolean mask makes a shape from the mask's values, and a trace without data has none; the trace up to there is kept"
                    )
                indices.extend(known.unbind(1))
            else:
                indices.append(index)
        return (args[0], indices) + tuple(args[2:])


def boolean_indices(torch: Any, args: Any) -> bool:
    """Whether an `index` call's indices include a boolean (or byte) mask."""
    return len(args) > 1 and any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in args[1])


def to_host(torch: Any, op: str, args: Any, kwargs: Dict[str, Any]) -> bool:
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


# Checks for NaN and infinity, as a healthy step answers them.
HEALTHY = {"isnan": False, "isinf": False, "isposinf": False, "isneginf": False, "isfinite": True}


@register
class HealthyChecks(Rule):
    """``torch.isnan(loss)``, ``torch.isinf(loss)``, ``torch.isfinite(grad)`` of values the trace
    does not have: answered as a healthy step's (no NaN, no infinity), as GradScaler's found_inf is.
    Hugging Face's Trainer asks it of every step's loss (logging_nan_inf_filter); loops skip a step
    on it. A step the GPU would skip for a NaN is traced as taken, which the snapshot says."""

    ops = set(HEALTHY)
    source = "a healthy step's values (as GradScaler's found_inf is answered)"
    order = 10

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        if len(made) == 1 and made[0] is out:
            answer_healthy(self.session, out, HEALTHY[call.op])


@register_function
class HealthyFiniteCheck(FunctionRule):
    """``torch.isfinite`` is a composite PyTorch runs as other operators (``self == self`` and
    ``abs() != inf``) where autograd is on: its result is answered here, above them."""

    names = ("isfinite",)
    source = HealthyChecks.source

    def call(self, mode: Any, func: Any, args: Any, kwargs: Dict[str, Any]) -> Any:
        out = func(*args, **kwargs)
        if isinstance(out, self.torch.Tensor) and out.device.type == "meta":
            answer_healthy(self.session, out, True)
        return out


@register
class PassedAssertions(Rule):
    """``torch._is_all_true``, the operator PyTorch's own value checks end in: a distribution's
    argument and sample validation (``torch/distributions/distribution.py``, on by default) and
    ``torch._check_tensor_all``, each raising where it is False. Of values the trace does not have
    it is answered True, as in a program that passes them (an RL policy's Categorical validates its
    logits on every step); a program the GPU would stop there is traced as going on, which the
    snapshot says."""

    ops = {"_is_all_true"}
    source = "torch/distributions/distribution.py and torch._check_tensor_all: the checks pass"
    order = 10

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        if len(made) == 1 and made[0] is out:
            answer_healthy(
                self.session, out, True,
                "{count} of PyTorch's value checks (torch._is_all_true: distributions' argument validation, torch._check_tensor_all) of values the trace does not have were answered as passed (a program the GPU would stop at a failed check is traced as going on)",
            )


HEALTHY_NOTE = "{count} checks for NaN or infinity (isnan, isinf, isfinite) of values the trace does not have were answered as a healthy step's: none (a step the GPU would skip for a NaN is traced as taken)"


def answer_healthy(session: Any, out: Any, value: bool, note: str = HEALTHY_NOTE) -> None:
    """`out`, a check of values the trace does not have, holds `value`, as a healthy step's."""
    if session.shadows.view(out) is None:
        session.shadows.adopt(out, session.torch.full(out.shape, value, dtype=out.dtype))
        session.note(note)
