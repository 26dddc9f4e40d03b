"""CUDA kernels that copy an input into the layout they need and free the copy before they return,
which a meta kernel does not: the copy is made after the (structured) output and only where the
input is not already in that layout.

- softmax and log-softmax (``aten/src/ATen/native/cuda/SoftMax.cu``, ``host_softmax``:
  ``input_.contiguous()``; ``host_softmax_backward``: ``grad_.contiguous()``, the forward's output
  being contiguous always): a log-softmax over the channels of a channels-last map (cross entropy
  on a segmentation model's upsampled logits) copies the map.
- bilinear and nearest 2-D upsampling (``UpSampleBilinear2d.cu``, ``UpSampleNearest2d.cu``, 2.11
  to 2.15): the forward takes its input, and the backward its gradient, in the layout
  ``suggest_memory_format`` gives (channels-last or contiguous), copying what is not; the backward
  returns first, with a plain copy into the gradient, where the sizes match (as the H200 showed for
  SegFormer's same-size interpolation of its first stage: no copy there, one for each other stage). A gradient
  that is a channel slice of a concatenation's gradient (SegFormer's decoder) is in neither layout.

Found on ISSUE35H's SegFormer (reports/reference/h200/trace-workloads-35h): one copy of the
upsampled logits in cross entropy and one of each upsampled feature map's gradient per step.
"""

from __future__ import annotations

from typing import Any, List, Optional

from . import Call, Rule, register

SOFTMAX_FORWARD = {"_softmax", "_log_softmax"}
UPSAMPLE_FORWARD = {"upsample_bilinear2d", "upsample_nearest2d", "_upsample_nearest_exact2d"}
UPSAMPLE_BACKWARD = {"upsample_bilinear2d_backward", "upsample_nearest2d_backward", "_upsample_nearest_exact2d_backward"}


@register
class ContiguousCopies(Rule):
    ops = SOFTMAX_FORWARD | {"_log_softmax_backward_data"} | UPSAMPLE_FORWARD | UPSAMPLE_BACKWARD
    source = "aten/src/ATen/native/cuda/SoftMax.cu (host_softmax, host_softmax_backward); UpSampleBilinear2d.cu, UpSampleNearest2d.cu"
    order = 60

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        copied = self._copied(call, made)
        if copied is not None:
            call.record.scratch([copied.numel() * copied.element_size()], call.frame)

    def _copied(self, call: Call, made: List[Any]) -> Optional[Any]:
        """The input the kernel copies, or None where it takes it as it is."""
        torch = self.torch
        first = call.args[0] if call.args else None
        if not made or not isinstance(first, torch.Tensor) or first.device.type != "meta" or first.numel() == 0:
            return None
        if call.op in SOFTMAX_FORWARD or call.op == "_log_softmax_backward_data":
            return None if first.is_contiguous() else first
        if first.dim() != 4:
            return None
        layout = torch._prims_common.suggest_memory_format(first)
        if call.op in UPSAMPLE_BACKWARD and list(first.shape) == list(made[0].shape):
            return None
        return None if first.is_contiguous(memory_format=layout) else first
