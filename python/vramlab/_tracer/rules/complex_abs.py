"""``abs`` of a complex tensor on CUDA (``aten/src/ATen/native/UnaryOps.cpp``,
``unary_op_impl_with_complex_to_float``, 2.11 to 2.15): the real result is made first, then the
complex absolute value into a complex temporary of the input's size (TensorIterator computes
complex to complex), whose real part is copied into the result; the temporary is freed on return.
Found on ISSUE35I's spectral network (``spectrum.abs()``; reports/reference/h200/trace-workloads-35i).
"""

from __future__ import annotations

from typing import Any, List

from . import Call, Rule, register


@register
class ComplexAbsTemporary(Rule):
    ops = {"abs"}
    source = "aten/src/ATen/native/UnaryOps.cpp (unary_op_impl_with_complex_to_float)"
    order = 60

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        x = call.args[0] if call.args else None
        if made and isinstance(x, self.torch.Tensor) and x.device.type == "meta" and x.is_complex() and x.numel():
            call.record.scratch([x.numel() * x.element_size()], call.frame)
