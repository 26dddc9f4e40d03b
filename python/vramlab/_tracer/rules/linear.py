"""``F.linear`` inside ``vramlab.trace``: ATen's own composite, with the bias added in place where
the GPU adds it in place.

``linear`` (``aten/src/ATen/native/Linear.cpp``) adds the bias with ``addmm`` for 2-D input and for
contiguous input (flattened to 2-D); otherwise (a transposed or sliced input, as
``F.multi_head_attention_forward`` gives it for ``batch_first``) it multiplies with ``matmul`` and
adds the bias with ``output.add_(bias)``, unless ``isTensorSubclassLike(bias)``, when it makes a new
tensor ("for composite compliance"). ``isTensorSubclassLike`` is true whenever a dispatch mode is
on, as the trace's is, so under the trace PyTorch would make one output more than on the GPU. The
same composite is registered here for ``AutogradMeta`` (below autocast, whose casts come first, as
on the GPU, and above autograd) with the GPU's in-place add.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

from ..registered import RegisteredKernels


class LinearPath(RegisteredKernels):
    """ATen's ``linear`` for the meta tensors standing in for CUDA ones, for one trace."""

    def kernels(self) -> List[Tuple[str, Callable[..., Any], str]]:
        return [("linear", self._linear, "AutogradMeta")]

    def _linear(self, input: Any, weight: Any, bias: Optional[Any] = None) -> Any:
        torch = self.torch
        if bias is not None and input.dim() == 2:
            return torch.addmm(bias, input, weight.t())
        if bias is not None and input.is_contiguous() and (input.dim() == 3 or bias.dim() == 1) and input.dim() > 0:
            rows = 1
            for size in input.shape[:-1]:
                rows *= size
            result = torch.addmm(bias, input.reshape(rows, input.size(-1)), weight.t())
            return result.view(*input.shape[:-1], result.size(1))
        output = torch.matmul(input, weight.t())
        if bias is not None:
            output.add_(bias)
        return output
