"""cumsum and cumprod into another dtype than their input's (``impl_func_cum_ops``,
``aten/src/ATen/native/ReduceOps.cpp``): the kernel runs on ``self.to(result.scalar_type())``, a
copy of the input in the result's dtype made after the result and freed when the operator
returns. PyTorch gives an integer or bool input an int64 result unless ``dtype`` says otherwise,
so ``torch.cumsum(mask.int(), dim)`` (Hugging Face's RoBERTa position ids) makes one; the meta
kernel makes only the result. A 0-d or empty input is filled, not copied.
"""

from __future__ import annotations

from typing import Any, List

from . import Call, Rule, register


@register
class CumulativeInResultDtype(Rule):
    ops = {"cumsum", "cumprod"}
    source = "aten/src/ATen/native/ReduceOps.cpp (impl_func_cum_ops)"
    order = 55

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        torch = self.torch
        x = call.args[0] if call.args else None
        if not made or not isinstance(x, torch.Tensor) or not isinstance(out, torch.Tensor):
            return
        if x.device.type != "meta" or x.dim() == 0 or x.numel() == 0 or x.dtype == out.dtype:
            return
        call.record.scratch([x.numel() * out.element_size()], call.frame)
