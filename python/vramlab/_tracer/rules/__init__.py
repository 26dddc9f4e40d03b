"""The tracer's rules: one module per operator family, each saying what the GPU allocates for its
operators that the meta kernels alone do not, and naming its source.

A rule is a class registered with `register`, for the ATen operators it handles (by name, without
overload: ``"mm"``) or, with ``ops=None``, for every operator. The dispatch mode (`..modes`)
consults the rules of each operator on stand-ins in registration order:

- ``before(call)``: before the meta kernel runs. It may answer the operator itself (return the
  result), refuse it (raise ``UnfollowedError``), change ``call.args``, or keep state in
  ``call.state`` for ``after``; `PASS` lets it run.
- ``result(call, out)``: the result as the GPU's kernel lays it out, where the meta kernel's
  strides differ (a cuDNN convolution's channels-last output);
- ``outputs(call, out, made)``: the outputs the GPU allocates, in the order it allocates them
  (default: every meta tensor in ``out``, in order).
- ``track(call, out, made)``: records the outputs' allocations itself (a convolution interleaves
  its workspaces), returning True; the first rule that does wins, else each is tracked in order.
- ``after(call, out, made)``: what the kernel allocates and frees after its outputs (scratch,
  workspaces).

Function-level rules (`FunctionRule`, `register_function`) see the program's calls of Python
functions (``F.scaled_dot_product_attention``) before PyTorch decomposes them, where the GPU's
choice is made above ATen.

Adding a rule is writing one module in this package, its class decorated by `register` (every
module here is imported when a trace starts), and its test in ``python/tests/test_trace_rules.py``.
Rules are consulted by their ``order`` (reads of values first, since they may answer an operator
whole; then refusals; then the families that add allocations), then by module name.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Dict, Iterable, List, Optional, Type

# Returned by a rule's `before` to let the operator run.
PASS = object()


class Call:
    """One operator on stand-ins, as the rules see it."""

    __slots__ = ("session", "torch", "func", "op", "args", "kwargs", "on_gpu", "frame", "state")

    def __init__(self, session: Any, func: Any, op: str, args: Any, kwargs: Dict[str, Any], on_gpu: bool) -> None:
        self.session = session
        self.torch = session.torch
        self.func = func
        self.op = op
        self.args = args
        self.kwargs = kwargs
        self.on_gpu = on_gpu
        self.frame: Optional[Dict[str, Any]] = None
        self.state: Dict[str, Any] = {}

    @property
    def record(self) -> Any:
        return self.session.record

    def bound(self) -> Dict[str, Any]:
        """The arguments by their schema's names, defaults filled in."""
        return schema_values(self.func, self.args, self.kwargs)


class Rule:
    """A family of operators: what the GPU allocates for them beyond their meta kernels' outputs."""

    # The ATen operators (names without overload) this rule handles; None for every operator.
    ops: Optional[Iterable[str]] = ()
    # Where the rule's facts come from (a PyTorch source file, a measurement).
    source: str = ""
    # When it is consulted among the rules of an operator (lower first).
    order: int = 50

    def __init__(self, session: Any) -> None:
        self.session = session
        self.torch = session.torch

    def before(self, call: Call) -> Any:
        return PASS

    def result(self, call: Call, out: Any) -> Any:
        """The operator's result as the GPU's kernel makes it, where the meta kernel's differs in
        layout (not in size): made below the trace's modes, so it records nothing itself."""
        return out

    def outputs(self, call: Call, out: Any, made: List[Any]) -> List[Any]:
        return made

    def track(self, call: Call, out: Any, made: List[Any]) -> bool:
        return False

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        return None


def relaid(torch: Any, t: Any, layout: Any) -> Any:
    """`t` as a kernel that makes its result in `layout` (a memory format) makes it: a new meta
    tensor of the same shape and dtype, made below the trace's modes (so it records nothing), or
    `t` itself where it is laid out so already."""
    if not isinstance(t, torch.Tensor) or t.is_contiguous(memory_format=layout):
        return t
    with torch.utils._python_dispatch._disable_current_modes():
        return torch.empty(t.shape, dtype=t.dtype, device=t.device, memory_format=layout)


class FunctionRule:
    """A Python function of PyTorch's whose GPU path is chosen above ATen (by its ``__name__``)."""

    names: Iterable[str] = ()
    source: str = ""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.torch = session.torch

    def call(self, mode: Any, func: Any, args: Any, kwargs: Dict[str, Any]) -> Any:
        return PASS


_RULES: List[Type[Rule]] = []
_FUNCTION_RULES: List[Type[FunctionRule]] = []


def register(cls: Type[Rule]) -> Type[Rule]:
    _RULES.append(cls)
    return cls


def register_function(cls: Type[FunctionRule]) -> Type[FunctionRule]:
    _FUNCTION_RULES.append(cls)
    return cls


def rule_modules() -> List[str]:
    """Every module of this package (each may register rules)."""
    return sorted(info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_"))


class Rules:
    """The rules of one trace, instantiated for it, indexed by operator."""

    def __init__(self, session: Any) -> None:
        for module in rule_modules():
            importlib.import_module(f"{__name__}.{module}")
        ordered = sorted(_RULES, key=lambda cls: (cls.order, cls.__module__, cls.__name__))
        self.all = [cls(session) for cls in ordered]
        self._every = [r for r in self.all if r.ops is None]
        self._by_op: Dict[str, List[Rule]] = {}
        for rule in self.all:
            for op in rule.ops or ():
                self._by_op.setdefault(op, [])
        for op, rules in self._by_op.items():
            rules.extend(r for r in self.all if r.ops is None or op in (r.ops or ()))
        self.functions: Dict[str, List[FunctionRule]] = {}
        for fcls in _FUNCTION_RULES:
            function_rule = fcls(session)
            for name in function_rule.names:
                self.functions.setdefault(name, []).append(function_rule)

    def of(self, op: str) -> List[Rule]:
        return self._by_op.get(op, self._every)

    def own(self, op: str) -> bool:
        """Whether a rule names `op` (not only the rules every operator consults)."""
        return op in self._by_op

    def instance(self, cls: Type[Any]) -> Any:
        for rule in self.all:
            if isinstance(rule, cls):
                return rule
        raise KeyError(cls.__name__)


def schema_values(func: Any, args: Any, kwargs: Dict[str, Any]) -> Dict[str, Any]:
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


def on_meta(torch: Any, value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "meta"
