"""``torch.nn.init.trunc_normal_`` on a GPU tensor. In torch 2.15 (torch/nn/init.py,
_no_grad_trunc_normal_) it samples, then resamples the values that fall outside [a, b] (a normal
proposal where most of the mass is inside, a uniform one with rejection otherwise) until none is
left, reading ``mask.any()`` back each round; 2.11 samples once by the inverse CDF and reads
nothing. The number of rounds depends on the values drawn, which a trace does not have. Each read
is answered as the expected run goes: rounds go on while the expected number of values left,
n * q^k, is at least 1/2 (q: a value's chance of being drawn again, from the bounds and the
normal's CDF, as init.py computes them). Every round's temporaries are freed before the next, so
the peak does not depend on how many there are; the event count does, which the snapshot says."""

from __future__ import annotations

import inspect
import math
from typing import Any, Dict, List


NOTE = (
    "{count} reads by torch.nn.init.trunc_normal_ of whether any value is left to draw again (torch 2.15's torch/nn/init.py "
    "resamples GPU tensors until no value falls outside [a, b]; 2.11's draws once): how many rounds depends on the values drawn, and each "
    "read was answered as the expected run goes (rounds while the expected number left is at least 1/2); every round's "
    "temporaries are freed before the next, so the peak does not depend on the count"
)


def expected_rounds(numel: int, again: float) -> int:
    """Rounds after the first draw while numel * again^k >= 1/2 (k = 1, 2, ...)."""
    if numel <= 0 or again <= 0.0:
        return 0
    if again >= 1.0:
        return 1 << 20
    rounds = 0
    left = float(numel) * again
    while left >= 0.5:
        rounds += 1
        left *= again
    return rounds


def chance_drawn_again(mean: float, std: float, a: float, b: float) -> float:
    """A value's chance of being rejected in one round, as _no_grad_trunc_normal_ draws it: outside
    [a, b] under N(mean, std) where the interval holds more than 0.3 of the mass, else rejected by
    the uniform proposal's test against the density's peak on [a, b]."""

    def cdf(x: float) -> float:
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    inside = cdf((b - mean) / std) - cdf((a - mean) / std)
    if inside > 0.3:
        return 1.0 - inside
    mode = max(a, min(mean, b))
    log_peak = -0.5 * ((mode - mean) / std) ** 2
    accepted = math.exp(-log_peak) * std * math.sqrt(2.0 * math.pi) * inside / (b - a)
    return min(1.0, max(0.0, 1.0 - accepted))


_ROUNDS: Dict[int, List[int]] = {}


def answer(session: Any, value: Any) -> Any:
    """The answer to a read of `value` made by _no_grad_trunc_normal_'s loop (found by its frame,
    whose arguments give the tensor's size and the bounds), or None for any other read."""
    torch = session.torch
    if not isinstance(value, torch.Tensor) or value.dtype != torch.bool or value.numel() != 1:
        return None
    frame = inspect.currentframe()
    while frame is not None and not (frame.f_code.co_name == "_no_grad_trunc_normal_" and frame.f_code.co_filename.replace("\\", "/").endswith("nn/init.py")):
        frame = frame.f_back
    if frame is None:
        return None
    found = frame.f_locals
    try:
        params = [float(found[name]) for name in ("mean", "std", "a", "b")]
        numel = int(found["tensor"].numel())
    except (KeyError, TypeError, ValueError):
        return None
    rounds, reads = _ROUNDS.setdefault(id(frame), [expected_rounds(numel, chance_drawn_again(*params)), 0])
    _ROUNDS[id(frame)][1] = reads + 1
    if reads + 1 > rounds:
        # The loop ends here: its frame's count is not needed again.
        del _ROUNDS[id(frame)]
    session.note(NOTE)
    return reads + 1 <= rounds
