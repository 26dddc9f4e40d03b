"""``nn.GroupNorm`` on CUDA (``aten/src/ATen/native/cuda/group_norm_kernel.cu``,
``GroupNormKernelImplInternal``, 2.11 to 2.15): with an affine weight or bias and more than one
element per channel, the forward folds mean, rstd, weight and bias into a scale and a shift per
(sample, channel), two ``[N, C]`` tensors of the accumulation type (float32 for half and bfloat16
inputs), made after the outputs and freed when the kernel returns. Found on ISSUE35H's
text-conditioned U-Net (reports/reference/h200/trace-workloads-35h): 4,096 and 8,192 bytes twice
per GroupNorm at batch 16 of 64 and 128 channels.
"""

from __future__ import annotations

from typing import Any, List

from . import Call, Rule, register
from .kernels import accumulation_type


@register
class GroupNormScaleShift(Rule):
    ops = {"native_group_norm"}
    source = "aten/src/ATen/native/cuda/group_norm_kernel.cu (GroupNormKernelImplInternal)"
    order = 60

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        torch = self.torch
        bound = call.bound()
        x = bound["input"]
        if not made or not isinstance(x, torch.Tensor) or x.device.type != "meta":
            return
        n, c, hxw = int(bound["N"]), int(bound["C"]), int(bound["HxW"])
        if n == 0 or hxw == 1 or (bound.get("weight") is None and bound.get("bias") is None):
            return
        size = n * c * accumulation_type(x.dtype, torch).itemsize
        call.record.scratch([size, size], call.frame)
