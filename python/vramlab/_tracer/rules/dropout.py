"""Dropout as CUDA runs it: one fused kernel (``native_dropout``, Dropout.cu's fused_dropout) that
keeps a one-byte mask, made before its output (as recorded on the H100). Elsewhere, meta included,
``F.dropout`` draws a noise tensor of the input's dtype (Dropout.cpp's is_fused_kernel_acceptable
asks for CUDA): the CUDA choice is taken for stand-ins."""

from __future__ import annotations

import inspect
from typing import Any, Dict, List

from . import PASS, Call, FunctionRule, Rule, register, register_function


@register_function
class FusedDropout(FunctionRule):
    names = ("dropout",)
    source = "ATen/native/Dropout.cpp (is_fused_kernel_acceptable), ATen/native/cuda/Dropout.cu"
    order = 50

    def call(self, mode: Any, func: Any, args: Any, kwargs: Dict[str, Any]) -> Any:
        torch = self.torch
        if func is not torch.nn.functional.dropout:
            return PASS
        try:
            bound = dict(inspect.signature(func).bind(*args, **kwargs).arguments)
        except (TypeError, ValueError):
            return PASS
        x = bound.get("input")
        if isinstance(x, torch.Tensor) and x.device.type == "meta" and bound.get("training", True):
            p, inplace = bound.get("p", 0.5), bound.get("inplace", False)
            if p > 0 and not inplace:
                return torch.ops.aten.native_dropout(x, p, True)[0]
        return PASS


@register
class DropoutOrder(Rule):
    ops = {"native_dropout"}
    source = "ATen/native/cuda/Dropout.cu (the mask is made before the output; recorded on the H100)"
    order = 50

    def outputs(self, call: Call, out: Any, made: List[Any]) -> List[Any]:
        return [made[1], made[0]] if len(made) == 2 else made
