"""The backward of reductions that select values (max and min along a dimension, topk, kthvalue,
mode, median, nanmedian, sort; ``value_selecting_reduction_backward_symint`` in
``aten/src/ATen/native/ReduceOps.cpp``) and of cummax/cummin (``cummaxmin_backward``, same file):
each makes a zero gradient of the input's shape and scatters the incoming gradient into it *in
place* (``scatter_``, ``scatter_add_``), unless a tensor is subclass-like
(``areAnyTensorSubclassLike``), when it scatters out of place into a new tensor. A dispatch mode
makes every tensor subclass-like (``isTensorSubclassLike``), and the trace runs under one; the GPU
runs under none, so here the scatter is done in place, as there (the 65,536-byte extra gradient
of a top-2 router's backward, ISSUE35E's moe_dense_top2, was the trace's out-of-place copy).
"""

from __future__ import annotations

from typing import Any

from . import PASS, Call, Rule, register

# The autograd nodes whose formulas above scatter into a zero gradient of their own
# (derivatives.yaml: max.dim, min.dim, topk, kthvalue, mode, median.dim, nanmedian.dim, sort,
# sort.stable; cummax, cummin).
SELECTING_NODES = ("MaxBackward", "MinBackward", "TopkBackward", "KthvalueBackward", "ModeBackward", "MedianBackward", "NanmedianBackward", "SortBackward")
CUMULATIVE_NODES = ("CummaxBackward", "CumminBackward")


@register
class InPlaceScatterInBackward(Rule):
    ops = {"scatter", "scatter_add"}
    source = "aten/src/ATen/native/ReduceOps.cpp (value_selecting_reduction_backward_symint, cummaxmin_backward)"
    order = 30

    def before(self, call: Call) -> Any:
        torch = self.torch
        node = torch._C._current_autograd_node()
        if node is None or torch.is_grad_enabled() or len(call.args) != 4 or call.kwargs:
            return PASS
        name = type(node).__name__
        nodes = SELECTING_NODES if call.op == "scatter" else CUMULATIVE_NODES
        if not name.startswith(nodes):
            return PASS
        into, dim, index, src = call.args
        if not all(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in (into, index, src)):
            return PASS
        if call.op == "scatter":
            return into.scatter_(dim, index, src)
        return into.scatter_add_(dim, index, src)
