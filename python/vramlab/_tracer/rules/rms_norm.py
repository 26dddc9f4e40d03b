"""``nn.RMSNorm`` and ``F.rms_norm`` on CUDA: ``rms_norm`` (layer_norm.cpp, ``rms_norm_symint``)
calls ``_fused_rms_norm`` on every device but MPS, save for channels-last and complex inputs and a
weight of another dtype, which take the composite. ``_fused_rms_norm`` has a CUDA kernel
(layer_norm_kernel.cu) and, for other backends, a CompositeImplicitAutograd decomposition: on the
meta tensors standing in for CUDA ones, that decomposition ran above the trace's mode and
recorded what the GPU never makes (the input upcast to float32, its square, their product with
the weight: four float32 copies of the activation where the GPU makes one output).

Where autograd is on, ``_fused_rms_norm`` is registered here at ``AutogradMeta`` for the trace's
duration as the CUDA kernels allocate, with a backward of the fused kernel's (PyTorch refuses a
meta kernel for an operator with a composite in core); where it is off, the operator reaches the
trace's mode whole and the decomposition runs below it, making only the outputs, which are the
CUDA kernel's:

- forward: the output (like the contiguous input), then ``rstd``, one accumulation-type value per
  normalized row (``[M]``, viewed with the normalized dimensions as 1);
- backward: the input's gradient (like the contiguous input) where wanted, then the weight's (like
  the weight) where wanted; the inputs, ``rstd`` and the weight are kept for it, as
  ``derivatives.yaml`` saves them.

Checked on two H200s: FSDP2 over a decoder of nn.RMSNorm layers in bf16
(reports/reference/h200x2/distributed-x2e, ``fsdp2_prefetch_bf16``): forward 3,145,728 then 8,192
bytes, backward 3,145,728 then 1,536 bytes, for ``[4, 512, 768]`` inputs.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple

from ..registered import RegisteredKernels
from .kernels import accumulation_type


def _rows(input: Any, normalized_shape: Sequence[int]) -> Tuple[int, List[int]]:
    """M, the rows normalized, and the statistics' shape (layer_norm_cuda's stat_shape)."""
    axis = input.dim() - len(normalized_shape)
    rows = 1
    for size in input.shape[:axis]:
        rows *= int(size)
    return rows, list(input.shape[:axis]) + [1] * len(normalized_shape)


class FusedRmsNorm(RegisteredKernels):
    """The CUDA path of RMSNorm under autograd, for one trace."""

    def kernels(self) -> List[Tuple[str, Callable[..., Any], str]]:
        torch = self.torch

        def forward(ctx: Any, input: Any, weight: Optional[Any], normalized_shape: Sequence[int]) -> Any:
            rows, stat_shape = _rows(input, normalized_shape)
            # new_empty and empty_like name no device: made on the input's, as the kernel's.
            output = torch.empty_like(input, memory_format=torch.contiguous_format)
            rstd = input.new_empty(rows, dtype=accumulation_type(input.dtype, torch)).view(stat_shape)
            ctx.save_for_backward(input, rstd, weight)
            ctx.mark_non_differentiable(rstd)
            # No zeros for rstd's gradient (the fused backward takes none).
            ctx.set_materialize_grads(False)
            return output, rstd

        def backward(ctx: Any, grad_out: Any, grad_rstd: Any) -> Any:
            input, rstd, weight = ctx.saved_tensors
            wanted = ctx.needs_input_grad
            grad_input = torch.empty_like(input, memory_format=torch.contiguous_format) if wanted[0] else None
            grad_weight = torch.empty_like(weight, memory_format=torch.contiguous_format) if wanted[1] and weight is not None else None
            return grad_input, grad_weight, None

        # An autograd Function made for this trace's torch (type() rather than a class statement,
        # which stubtest would take for part of the package's interface).
        function: Any = type("FusedRmsNormFunction", (torch.autograd.Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)})

        def fused(input: Any, normalized_shape: Sequence[int], weight: Optional[Any] = None, eps: Optional[float] = None) -> Any:
            return function.apply(input, weight, list(normalized_shape))

        return [("_fused_rms_norm", fused, "AutogradMeta")]
