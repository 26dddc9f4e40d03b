"""Backward formulas that make a zero gradient of their own and write the incoming gradient into
it *in place* on the GPU, but out of place, into a second new tensor, whenever a tensor is
subclass-like (``areAnyTensorSubclassLike``, "for composite compliance"). A dispatch mode makes
every tensor subclass-like (``isTensorSubclassLike``) and the trace runs under one; the GPU runs
under none, so here the write is done in place, as there:

- reductions that select values (max and min along a dimension, topk, kthvalue, mode, median,
  nanmedian, sort): ``scatter_`` (``value_selecting_reduction_backward_symint``,
  ``aten/src/ATen/native/ReduceOps.cpp``);
- cummax and cummin: ``scatter_add_`` (``cummaxmin_backward``, same file);
- gather: ``scatter_add_`` (``gather_backward``, ``TensorAdvancedIndexing.cpp``);
- index_select: ``index_add_`` (``index_select_backward_symint``, same file).

Found on ISSUE35E: a top-2 router's backward (moe_dense_top2) and a masked autoencoder's
gathers (mae_random_masking) each made a gradient-sized copy the H100 did not.
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

from . import PASS, Call, Rule, register

# The autograd nodes (by name prefix; derivatives.yaml) whose formulas write into their own zero
# gradient, by the operator they write with.
NODES: Dict[str, Tuple[str, ...]] = {
    "scatter": ("MaxBackward", "MinBackward", "TopkBackward", "KthvalueBackward", "ModeBackward", "MedianBackward", "NanmedianBackward", "SortBackward"),
    "scatter_add": ("CummaxBackward", "CumminBackward", "GatherBackward"),
    "index_add": ("IndexSelectBackward",),
}


@register
class InPlaceInBackward(Rule):
    ops = set(NODES)
    source = "aten/src/ATen/native/ReduceOps.cpp (value_selecting_reduction_backward_symint, cummaxmin_backward); TensorAdvancedIndexing.cpp (gather_backward, index_select_backward_symint)"
    order = 30

    def before(self, call: Call) -> Any:
        torch = self.torch
        node = torch._C._current_autograd_node()
        if node is None or torch.is_grad_enabled() or len(call.args) != 4 or call.kwargs:
            return PASS
        if not type(node).__name__.startswith(NODES[call.op]):
            return PASS
        into, dim, index, src = call.args
        if not all(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in (into, index, src)):
            return PASS
        return getattr(into, call.op + "_")(dim, index, src)
