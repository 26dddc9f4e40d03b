"""Floating-point values read back that a trace cannot know, handed to the program as placeholders
as long as it only prints or logs them.

Nearly every training script logs its loss: ``print(f"loss {loss.item():.4f}")``. A trace has no
data, so it has no loss; but a value only printed changes nothing the GPU allocates. A read of one
floating-point value of unknown worth (``.item()``, formatting or printing a one-element tensor)
therefore gives an `UnknownFloat`: it prints as ``?``, and arithmetic on it (a running sum, an
average) gives another. What would let the value steer the program stops the trace at that line,
naming where the value was read: comparing it, taking its truth, or making an integer of it (a
branch, an early stop, a shape, an index). What C code reads as a plain float (``math.isnan``, a
JSON dump, ``torch.tensor(x)``) sees 0.0, a finite value, as a healthy step has; the snapshot's
note says how many reads were answered this way. ``min`` and ``max`` of a placeholder and plain
numbers, and the ``math`` module's functions of values (``math.exp(min(loss, 30))``, a perplexity),
give placeholders too while a trace is on (`python_paths`), not a function of 0.0.

An integer read so (``correct += (pred == y).sum().item()``, the count an accuracy is made of) gives
an `UnknownInt`, which is no ``int``: C code that would take it as a size or an index must ask its
``__index__``, and that stops the trace at the line; arithmetic keeps it unknown, and a division
gives an `UnknownFloat`. Booleans are not answered so (a boolean read is a decision), nor is
``float(t)`` or ``int(t)``: Python makes a plain number of what ``__float__`` or ``__int__`` returns;
those of a placeholder are answered 0 only where printed.py shows the number only printed
(``int(counts[1].item())`` in a log line). ``round()``, ``math.floor``, ``ceil`` and ``trunc`` return
what the placeholder says, so they give placeholders.
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import UnfollowedError
from . import standin
from .printed import PRINTED_NUMBER_NOTE, read_only_printed
from .where import here

PLACEHOLDER_NOTE = (
    "{count} values read back (a loss logged with .item(), a count of correct predictions, a format or print) were not known "
    "and were handed to the program as placeholders that print as '?'; nothing the program decided used them (a comparison, "
    "a truth test, or a number made of one for a size or an index, would have stopped the trace at its line)"
)


def _printed_answered() -> bool:
    """Whether the int() or float() of a placeholder the program is executing makes a number that
    only reaches output (printed.py): then it is answered 0, as int() of a GPU value is, and said."""
    if not standin.ACTIVE or read_only_printed() is not PRINTED_NUMBER_NOTE:
        return False
    standin.ACTIVE[-1].note(PRINTED_NUMBER_NOTE)
    return True


def _decision(read_at: str, how: str) -> UnfollowedError:
    """Where a value read back at `read_at` would steer the program."""
    return UnfollowedError(
        f"{how} at {here()}: the program decides on a value it read back at {read_at}, and a trace without data has none; "
        "the trace up to there is kept (values only printed or logged are traced on; vramlab.trace(answer_reads=0.0), "
        "--answer-reads 0, answers every read with 0 and follows the path that takes)"
    )


class _Unknown:
    """What both placeholders are: printed as '?', and every way to decide on them (a truth test,
    an integer or a rounding made of them, a comparison) stops the trace, naming where the value
    was read."""

    __slots__ = ()
    read_at: str

    def _decides(self, how: str) -> UnfollowedError:
        return _decision(self.read_at, how)

    def __format__(self, spec: str) -> str:
        return "?"

    def __str__(self) -> str:
        return "?"

    def __repr__(self) -> str:
        return "?"

    def __bool__(self) -> bool:
        raise self._decides("a truth test")

    def __int__(self) -> int:
        if _printed_answered():
            return 0
        raise self._decides("an integer made of it")

    def __round__(self, ndigits: Any = None) -> Any:
        # round() returns what this returns: an unknown value, whose use in a decision still stops.
        return UnknownInt(self.read_at) if ndigits is None or isinstance(self, UnknownInt) else UnknownFloat(self.read_at)

    def __lt__(self, other: Any) -> bool:
        raise self._decides("a comparison (lt)")

    def __le__(self, other: Any) -> bool:
        raise self._decides("a comparison (le)")

    def __gt__(self, other: Any) -> bool:
        raise self._decides("a comparison (gt)")

    def __ge__(self, other: Any) -> bool:
        raise self._decides("a comparison (ge)")

    def __eq__(self, other: Any) -> bool:
        raise self._decides("a comparison (eq)")

    def __ne__(self, other: Any) -> bool:
        raise self._decides("a comparison (ne)")


class UnknownFloat(_Unknown, float):
    """A value read back at `read_at` that the trace does not have (its float value is 0.0)."""

    def __new__(cls, read_at: str) -> "UnknownFloat":
        value = super().__new__(cls, 0.0)
        value.read_at = read_at
        return value

    def __floor__(self) -> Any:  # an UnknownInt: what the placeholder says is what Python returns
        return UnknownInt(self.read_at)

    def __ceil__(self) -> Any:  # an UnknownInt: what the placeholder says is what Python returns
        return UnknownInt(self.read_at)

    def __trunc__(self) -> Any:  # an UnknownInt: what the placeholder says is what Python returns
        return UnknownInt(self.read_at)

    def __hash__(self) -> int:
        return float.__hash__(self)


def _arithmetic(name: str) -> Callable[..., Any]:
    def arithmetic(self: UnknownFloat, *others: Any) -> Any:
        # A number made from an unknown one is unknown too (a running sum, an average), and is
        # not computed: its 0.0 would divide by zero.
        if all(isinstance(other, (int, float)) for other in others):
            return UnknownFloat(self.read_at)
        return NotImplemented

    return arithmetic


def _unary(self: UnknownFloat) -> UnknownFloat:
    return UnknownFloat(self.read_at)


for _name in (
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
    "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__",
):
    setattr(UnknownFloat, _name, _arithmetic(_name))
for _name in ("__neg__", "__pos__", "__abs__"):
    setattr(UnknownFloat, _name, _unary)


class UnknownInt(_Unknown):
    """An integer read back at `read_at` that the trace does not have. Not an ``int``, so that no
    C code reads it as a size or index in silence: each way to make a plain number of it stops the
    trace (`_Unknown`)."""

    __slots__ = ("read_at",)

    def __init__(self, read_at: str) -> None:
        self.read_at = read_at

    def __index__(self) -> int:
        raise self._decides("a size, an index or a range made of it")

    def __float__(self) -> float:
        if _printed_answered():
            return 0.0
        raise self._decides("a number made of it outside Python's arithmetic")

    def __hash__(self) -> int:
        return id(self)

    def _arithmetic(self, other: Any, divides: bool = False) -> Any:
        # Unknown in, unknown out: an integer stays one, a division or a float makes an UnknownFloat.
        if isinstance(other, bool) or not isinstance(other, (int, float, UnknownInt)):
            return NotImplemented
        return UnknownFloat(self.read_at) if divides or isinstance(other, float) else UnknownInt(self.read_at)

    def __add__(self, other: Any) -> Any:
        return self._arithmetic(other)

    def __radd__(self, other: Any) -> Any:
        return self._arithmetic(other)

    def __sub__(self, other: Any) -> Any:
        return self._arithmetic(other)

    def __rsub__(self, other: Any) -> Any:
        return self._arithmetic(other)

    def __mul__(self, other: Any) -> Any:
        return self._arithmetic(other)

    def __rmul__(self, other: Any) -> Any:
        return self._arithmetic(other)

    def __truediv__(self, other: Any) -> Any:
        return self._arithmetic(other, divides=True)

    def __rtruediv__(self, other: Any) -> Any:
        return self._arithmetic(other, divides=True)

    def __floordiv__(self, other: Any) -> Any:
        return self._arithmetic(other)

    def __rfloordiv__(self, other: Any) -> Any:
        return self._arithmetic(other)

    def __mod__(self, other: Any) -> Any:
        return self._arithmetic(other)

    def __rmod__(self, other: Any) -> Any:
        return self._arithmetic(other)

    def __pow__(self, other: Any) -> Any:
        return self._arithmetic(other)

    def __rpow__(self, other: Any) -> Any:
        return self._arithmetic(other)

    def __neg__(self) -> "UnknownInt":
        return UnknownInt(self.read_at)

    def __pos__(self) -> "UnknownInt":
        return UnknownInt(self.read_at)

    def __abs__(self) -> "UnknownInt":
        return UnknownInt(self.read_at)


# The math module's functions of real numbers a log line takes of a loss (a perplexity's exp, a
# log, a square root): an unknown value in, an unknown value out, rather than the function of the
# stand-in 0.0 (exp gives a confident 1.0; log fails with a domain error the GPU never raises).
MATH_OF_VALUES = (
    "exp", "expm1", "exp2", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "pow", "fabs", "tanh", "sinh", "cosh",
    "sin", "cos", "tan", "atan", "erf", "erfc", "lgamma",
)


def _first_unknown(values: Any) -> Any:
    return next((v for v in values if isinstance(v, _Unknown)), None)


def _real(value: Any) -> bool:
    return isinstance(value, (int, float, _Unknown)) and not isinstance(value, bool)


def _extreme(original: Callable[..., Any]) -> Callable[..., Any]:
    """``min`` or ``max`` that gives a placeholder where a placeholder is among plain numbers
    (``math.exp(min(loss, 30))``: which is smaller is unknown, and so is the result); otherwise
    the builtin's answer, or its comparison's refusal."""

    def extreme(*args: Any, **kwargs: Any) -> Any:
        values = args
        if len(args) == 1:
            try:
                values = tuple(args[0])
            except TypeError:
                return original(*args, **kwargs)
            args = (values,)
        unknown = None if "key" in kwargs else _first_unknown(values)
        if unknown is None or not all(_real(v) for v in values):
            return original(*args, **kwargs)
        if all(isinstance(v, (int, UnknownInt)) for v in values):
            return UnknownInt(unknown.read_at)
        return UnknownFloat(unknown.read_at)

    extreme.__name__ = original.__name__
    extreme.__doc__ = original.__doc__
    return extreme


def _of_values(original: Callable[..., Any]) -> Callable[..., Any]:
    def function(*args: Any) -> Any:
        unknown = _first_unknown(args)
        if unknown is not None and all(_real(v) for v in args):
            return UnknownFloat(unknown.read_at)
        return original(*args)

    function.__name__ = original.__name__
    function.__doc__ = original.__doc__
    return function


def python_paths() -> Any:
    """Python's own functions of numbers as a trace answers them for placeholders (standin.Table)."""
    import builtins
    import math

    table = {(builtins, name): _extreme(getattr(builtins, name)) for name in ("min", "max")}
    table.update({(math, name): _of_values(getattr(math, name)) for name in MATH_OF_VALUES if hasattr(math, name)})
    return table
