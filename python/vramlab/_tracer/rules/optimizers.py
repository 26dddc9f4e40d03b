"""The optimizers' multi-tensor kernels: what they allocate beyond their outputs.

``_foreach_norm`` (``clip_grad_norm_``'s foreach path): foreach_tensor_norm_cuda
(ATen/native/cuda/ForeachReduceOp.cu) first zeroes one partial norm per chunk of 65,536 elements
(MultiTensorApply.cuh's kChunkSize) of the tensor with the most, for every tensor, in the math
type: allocated before the norms, freed after them."""

from __future__ import annotations

from typing import Any, List

from . import PASS, Call, Rule, register

CHUNK_ELEMENTS = 65536


@register
class ForeachNorm(Rule):
    ops = {"_foreach_norm"}
    source = "ATen/native/cuda/ForeachReduceOp.cu (foreach_tensor_norm_cuda), MultiTensorApply.cuh"
    order = 40

    def before(self, call: Call) -> Any:
        torch = self.torch
        tensors = [t for t in call.args[0] if isinstance(t, torch.Tensor)]
        if tensors and all(t.device.type == "meta" for t in tensors):
            chunks = max((t.numel() + CHUNK_ELEMENTS - 1) // CHUNK_ELEMENTS for t in tensors)
            math_width = 8 if tensors[0].dtype == torch.float64 else 4
            size = len(tensors) * chunks * math_width
            call.state["partials"] = (call.record.alloc(size, self.session.frame()), size)
        return PASS

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        partials = call.state.get("partials")
        if partials is not None:
            call.record.free(*partials)
