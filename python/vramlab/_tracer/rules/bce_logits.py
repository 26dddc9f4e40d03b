"""``binary_cross_entropy_with_logits`` (``BCEWithLogitsLoss``) forward and backward as CUDA runs
them, where the meta kernel makes the result alone and the dispatch mode turns the backward's
in-place steps out of place:

- forward (``aten/src/ATen/native/Loss.cpp``): ``log_sigmoid(input)``, with ``pos_weight`` the
  weighting ``(pos_weight - 1).mul(target)`` (its ``pos_weight - 1`` freed at once), the
  unreduced loss ``(1 - target)`` (then updated in place), the reduction's result (a mean or a
  sum through ``gpu_reduce_kernel``), then the unreduced loss, the weighting and
  ``log_sigmoid``'s output freed; with ``reduction='none'`` the unreduced loss is the result;
- backward (``binary_cross_entropy_with_logits_backward``, ``torch/csrc/autograd/FunctionsManual.cpp``):
  ``input.sigmoid()`` and, with ``pos_weight``, ``pos_weight * target``, each step after them in
  place (``sub_``, ``mul_``, ``div_``) unless a tensor is subclass-like or grad mode is on.

Found on ISSUE35E's ELECTRA discriminator (two forward temporaries missing, two backward ones
added, each the logits' size).
"""

from __future__ import annotations

from typing import Any, List

from . import PASS, Call, Rule, register
from .engine import dense
from .kernels import reduction_scratch


def _bytes(torch: Any, shape: Any, dtype: Any) -> int:
    n = 1
    for d in shape:
        n *= d
    return n * torch.empty((), dtype=dtype, device="meta").element_size()


@register
class BinaryCrossEntropyWithLogits(Rule):
    ops = {"binary_cross_entropy_with_logits"}
    source = "aten/src/ATen/native/Loss.cpp (binary_cross_entropy_with_logits); torch/csrc/autograd/FunctionsManual.cpp (binary_cross_entropy_with_logits_backward)"
    order = 60

    def track(self, call: Call, out: Any, made: List[Any]) -> bool:
        torch = self.torch
        bound = call.bound()
        x, target = bound["self"], bound["target"]
        weight, pos_weight, reduction = bound.get("weight"), bound.get("pos_weight"), bound.get("reduction", 1)
        if len(made) != 1 or not (isinstance(x, torch.Tensor) and x.device.type == "meta"):
            return False
        record, frame = call.record, call.frame
        shape = torch.broadcast_shapes(x.shape, target.shape)
        held = [(record.alloc(x.numel() * x.element_size(), frame), x.numel() * x.element_size())]
        if isinstance(pos_weight, torch.Tensor):
            minus_one = pos_weight.numel() * pos_weight.element_size()
            first = record.alloc(minus_one, frame)
            weighting = _bytes(torch, torch.broadcast_shapes(pos_weight.shape, target.shape), torch.promote_types(pos_weight.dtype, target.dtype))
            held.append((record.alloc(weighting, frame), weighting))
            record.free(first, minus_one)
        loss_dtype = torch.promote_types(target.dtype, torch.int64) if not target.is_floating_point() else target.dtype
        loss_size = _bytes(torch, shape, loss_dtype)
        if reduction == 0:
            record.track(made[0], frame)
        else:
            loss = (record.alloc(loss_size, frame), loss_size)
            record.track(made[0], frame)
            unreduced = torch.empty(list(shape), dtype=loss_dtype, device="meta")
            reduction_scratch(self.session, unreduced, None, made[0].element_size(), reduction == 1, frame)
            held.append(loss)
        for addr, size in reversed(held):
            record.free(addr, size)
        return True


@register
class BinaryCrossEntropyWithLogitsBackwardInPlace(Rule):
    """The backward's steps on its own temporaries, in place as on the GPU: every ``sub`` and
    ``mul`` of the formula but, where there is a ``pos_weight``, its first (``pos_weight * target``,
    a new tensor on the GPU too)."""

    ops = {"sub", "mul"}
    source = "torch/csrc/autograd/FunctionsManual.cpp (binary_cross_entropy_with_logits_backward)"
    order = 30

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        # The node being run, by its sequence number (each call hands a new Python wrapper, and a
        # reference would keep its graph and saved tensors alive).
        self.node: Any = None
        self.muls = 0

    def before(self, call: Call) -> Any:
        torch = self.torch
        node = torch._C._current_autograd_node()
        if node is None or torch.is_grad_enabled() or not type(node).__name__.startswith("BinaryCrossEntropyWithLogitsBackward"):
            return PASS
        key = node._sequence_nr()
        if key != self.node:
            self.node, self.muls = key, 0
        if call.op == "mul":
            self.muls += 1
            if self.muls == 1 and getattr(node, "_saved_pos_weight", None) is not None:
                return PASS
        if len(call.args) != 2 or call.kwargs:
            return PASS
        a, b = call.args
        if not (isinstance(a, torch.Tensor) and a.device.type == "meta" and isinstance(b, torch.Tensor)):
            return PASS
        if torch.broadcast_shapes(a.shape, b.shape) != a.shape or torch.promote_types(a.dtype, b.dtype) != a.dtype or not dense(a):
            return PASS
        return a.sub_(b) if call.op == "sub" else a.mul_(b)
