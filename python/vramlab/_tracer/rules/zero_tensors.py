"""Forward-mode AD's zero tangents (``torch.func.jvp``, ``torch.autograd.forward_ad``), as CUDA
makes them: no memory, and no memory for the arithmetic that only learns their shapes.

An input without a tangent gets ``at::_efficientzerotensor`` in a forward derivative's formula
(torchgen's gen_variable_type.py, FW_DERIVATIVE_DEFINED_GRAD_TEMPLATE; a wrapped number's keeps
the wrapped-number flag). On CUDA that tensor has no storage (``_efficientzerotensor_cuda``: a
ZeroTensorAllocator, which hands out no memory), and the operators with a ZeroTensor kernel
(aten/src/ATen/native/BinaryOps.cpp, LinearAlgebra.cpp; 2.11 to 2.15) compute the result's shape
and dtype on the meta device, then make:
- ``mul.Tensor`` and ``linalg_cross``: another zero tensor, no memory;
- ``div.Tensor``: a zero tensor for 0/x; ``at::full`` of NaN for 0/0 and of infinity for x/0;
- ``add.Tensor`` and ``sub.Tensor`` (``maybe_add_maybe_sub``, sub with ``-alpha``): a zero
  tensor where both are zero; else ``at::_to_copy`` of the other operand expanded to the result's
  shape, in the result's dtype on the result's device (``correct_out_device``: the second
  operand's device where the first is on the CPU), multiplied by alpha (a second tensor) where the
  first was the zero one and alpha is not 1.
Every other operator meets a zero tensor through PyTorch's ZeroTensor fallback
(aten/src/ATen/ZeroTensorFallback.cpp), which makes it real with ``at::zeros`` first: that the
trace follows as it is.

On meta tensors standing in for CUDA ones those kernels' shape arithmetic (the meta device's
kernels, PyTorch's Python references for some) reaches the trace's mode as if it ran on the GPU,
and ``_efficientzerotensor`` on meta looks like an allocation: TrigFlow's ``jvp`` through a U-Net
(ISSUE35Y) made about 1,800 blocks the GPU never made. The kernels below are CUDA's, registered
for the ZeroTensor key while the trace is on; the shape and dtype come from PyTorch's own
broadcasting and type promotion (``torch.broadcast_shapes``, ``torch.result_type``), which read
no memory.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, List, Tuple

from ..registered import RegisteredKernels
from . import Call, Rule, register


class ZeroTensorKernels(RegisteredKernels):
    """CUDA's ZeroTensor kernels for one trace: installed on entering it, removed on leaving."""

    def kernels(self) -> List[Tuple[str, Callable[..., Any], str]]:
        return [
            ("mul.Tensor", self._mul, "ZeroTensor"),
            ("div.Tensor", self._div, "ZeroTensor"),
            ("add.Tensor", self._add, "ZeroTensor"),
            ("sub.Tensor", self._sub, "ZeroTensor"),
            ("linalg_cross", self._cross, "ZeroTensor"),
        ]

    def install(self) -> None:
        # PyTorch's own ZeroTensor kernels are replaced for the trace (and come back with
        # `uninstall`); the override's warning is about exactly that.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            super().install()

    def _result(self, self_: Any, other: Any, true_division: bool = False) -> Tuple[List[int], Any, Any]:
        """The shape, dtype and device the kernel's meta computation gives the result, with what
        that computation allocates on the GPU: moving each operand to the meta device
        (``self.to(device_)``) passes a zero tensor through the ZeroTensor fallback, which makes
        it real as ``at::zeros({}, options).expand(sizes)`` (one element of its dtype, freed once
        moved), first for ``self``, then for ``other``."""
        torch = self.torch
        for operand in (self_, other):
            if operand._is_zerotensor() and operand.device.type != "cpu":
                torch.zeros([], dtype=operand.dtype, device=operand.device)
        shape = list(torch.broadcast_shapes(self_.shape, other.shape))
        dtype = torch.result_type(self._host_like(self_), self._host_like(other))
        if true_division and not (dtype.is_floating_point or dtype.is_complex):
            dtype = torch.get_default_dtype()
        device = other.device if self_.device.type == "cpu" else self_.device
        return shape, dtype, device

    def _host_like(self, operand: Any) -> Any:
        """A host tensor that type promotion treats as it treats `operand` (its dtype, and whether
        it has dimensions; a host operand, a wrapped number among them, is itself), so that
        promotion dispatches nothing on the GPU's stand-ins."""
        if operand.device.type == "cpu":
            return operand
        return self.torch.empty([1] * operand.dim(), dtype=operand.dtype)

    def _zeros(self, shape: List[int], dtype: Any, device: Any) -> Any:
        return self.torch.ops.aten._efficientzerotensor(shape, dtype=dtype, device=device)

    def _mul(self, self_: Any, other: Any) -> Any:
        return self._zeros(*self._result(self_, other))

    def _cross(self, input: Any, other: Any, dim: int = -1) -> Any:
        return self._zeros(*self._result(input, other))

    def _div(self, self_: Any, other: Any) -> Any:
        shape, dtype, device = self._result(self_, other, true_division=True)
        if self_._is_zerotensor():
            if other._is_zerotensor():
                return self.torch.full(shape, float("nan"), dtype=dtype, device=device)
            return self._zeros(shape, dtype, device)
        return self.torch.full(shape, float("inf"), dtype=dtype, device=device)

    def _add(self, self_: Any, other: Any, alpha: Any = 1) -> Any:
        return self._add_or_sub(self_, other, alpha)

    def _sub(self, self_: Any, other: Any, alpha: Any = 1) -> Any:
        return self._add_or_sub(self_, other, -alpha)

    def _add_or_sub(self, self_: Any, other: Any, alpha: Any) -> Any:
        shape, dtype, device = self._result(self_, other)
        copy = self.torch.ops.aten._to_copy
        if self_._is_zerotensor():
            if other._is_zerotensor():
                return self._zeros(shape, dtype, device)
            result = copy(other.expand(shape), dtype=dtype, device=device)
            return result if alpha == 1 else result.mul(alpha)
        return copy(self_.expand(shape), dtype=dtype, device=device)


@register
class EfficientZeroTensor(Rule):
    """``_efficientzerotensor``: a tensor without storage (ZeroTensorAllocator), so no block."""

    ops = ("_efficientzerotensor",)
    source = "aten/src/ATen/native/TensorFactories.cpp (_efficientzerotensor_cuda, ZeroTensorAllocator)"

    def track(self, call: Call, out: Any, made: List[Any]) -> bool:
        return True
