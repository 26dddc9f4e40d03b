"""Composite operators whose C++ takes one path on CUDA and another on meta tensors, written here
as the CUDA path runs, on the meta tensors that stand in for CUDA ones.

``one_hot`` (``aten/src/ATen/native/Onehot.cpp``, 2.11 to 2.15): for a meta or Python-keyed tensor
it compares against an ``arange`` (a bool tensor of the result's shape, then its long copy); on
CUDA it makes the result with ``zeros`` and ``scatter_``s ones into it, with nothing besides, and
reads ``self.max()`` back only where ``num_classes`` is -1. Registered for ``AutogradMeta``, as
the cells' path is (cells.py), so it stands before the composite.

``softmax`` and ``log_softmax`` with ``dtype`` (``aten/src/ATen/native/SoftMax.cpp``, 2.11 to 2.15):
a CUDA tensor of float16 asked for float32 goes to ``_softmax(input, dim, half_to_float=True)``,
one kernel that reads half and writes float; any other (meta, or bfloat16) is converted first
(``input_.toType(dtype)``), a copy of the input in float32, then ``_softmax``. Autocast calls them
so for every float16 softmax (``fp32_set_opt_dtype``): CANINE's attention under fp16 (ISSUE35Y)
made a float32 copy of its 2.25 GiB scores per layer in the trace that the GPU does not make.
"""

from __future__ import annotations

from typing import Any, Callable, List, Tuple

from ..registered import RegisteredKernels


class CudaComposites(RegisteredKernels):
    """The CUDA paths of composite operators for one trace: installed on entering it, removed on
    leaving."""

    def kernels(self) -> List[Tuple[str, Callable[..., Any], str]]:
        return [
            ("one_hot", self._one_hot, "AutogradMeta"),
            ("softmax.int", self._softmax, "AutogradMeta"),
            ("log_softmax.int", self._log_softmax, "AutogradMeta"),
        ]

    def _softmax(self, input: Any, dim: int, dtype: Any = None) -> Any:
        return self._half_to_float(self.torch._softmax, input, dim, dtype)

    def _log_softmax(self, input: Any, dim: int, dtype: Any = None) -> Any:
        return self._half_to_float(self.torch._log_softmax, input, dim, dtype)

    def _half_to_float(self, kernel: Callable[..., Any], input: Any, dim: int, dtype: Any) -> Any:
        """SoftMax.cpp's CUDA path of softmax and log_softmax with a dtype."""
        torch = self.torch
        if input.dtype == torch.float16 and dtype == torch.float32:
            return kernel(input, dim, True)
        return kernel(input.to(dtype) if dtype is not None else input, dim, False)

    def _one_hot(self, input: Any, num_classes: int = -1) -> Any:
        torch = self.torch
        if input.dtype != torch.long:
            raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
        shape = list(input.shape)
        if input.numel() == 0:
            if num_classes <= 0:
                raise RuntimeError("Can not infer total number of classes from empty tensor.")
            return torch.empty(shape + [num_classes], dtype=input.dtype, device=input.device)
        if num_classes == -1:
            num_classes = int(input.max().item()) + 1
        elif num_classes < 1:
            raise RuntimeError("num_classes should be positive")
        result = torch.zeros(shape + [num_classes], dtype=input.dtype, device=input.device)
        result.scatter_(-1, input.unsqueeze(-1), 1)
        return result
