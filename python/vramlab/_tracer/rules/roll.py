"""``torch.roll`` over several dimensions, as CUDA runs it: one dimension at a time, each step a
whole new tensor.

``aten/src/ATen/native/cuda/TensorTransformations.cu`` (``roll_cuda``, 2.11 to 2.15) rolls one
dimension itself: it takes a contiguous copy of a non-contiguous input, makes its output, and
frees the copy. More dimensions (or none, the flattened roll) go to ``roll_common``
(``TensorTransformations.h``): the first dimension is rolled into a temporary, and the rest of the
dimensions rolled from it, recursively, so ``k`` dimensions make ``k - 1`` temporaries, live
until the output is made and freed newest first. The meta kernel (``torch/_refs``: ``cat`` of two
narrows per dimension) leaves only the output. Swin Transformer's shifted windows roll a feature
map over two dimensions before and after each shifted attention, and the backward rolls the
gradients back the same way.

Found on ISSUE35K's Swin-V2-T (reports/reference/h200/trace-workloads-35k): one temporary of the
feature map's size per roll.
"""

from __future__ import annotations

from typing import Any, List

from . import Call, Rule, register


@register
class Rolls(Rule):
    ops = {"roll"}
    source = "aten/src/ATen/native/cuda/TensorTransformations.cu (roll_cuda), aten/src/ATen/native/TensorTransformations.h (roll_common)"
    order = 60

    def track(self, call: Call, out: Any, made: List[Any]) -> bool:
        torch = self.torch
        source = call.args[0] if call.args else None
        if len(made) != 1 or not isinstance(source, torch.Tensor) or source.device.type != "meta" or source.numel() == 0:
            return False
        bound = call.bound()
        dims = list(bound["dims"] or [])
        size = made[0].numel() * made[0].element_size()
        record = call.record
        # The first single-dimension roll copies a non-contiguous input first (the flattened
        # roll's self.contiguous() is the same copy); every later step reads a contiguous
        # temporary.
        copy = record.alloc(size, call.frame) if not source.is_contiguous() else None
        temporaries: List[int] = []
        for _ in range(max(len(dims) - 1, 0)):
            temporaries.append(record.alloc(size, call.frame))
            if copy is not None:
                record.free(copy, size)
                copy = None
        record.track(made[0], call.frame)
        if copy is not None:
            record.free(copy, size)
        for addr in reversed(temporaries):
            record.free(addr, size)
        return True
