"""Grouped matrix multiplies (``torch._grouped_mm``: mixture-of-experts layers, Hugging Face's
``integrations/moe.py``) as CUDA runs them.

Sources (torch 2.11, ``aten/src/ATen/native/cuda/GroupedBlas.cpp`` ``_grouped_mm_cuda`` and
``GroupedMMUtils.h``): the output is made first, ``create_grouped_gemm_output_tensor``, its last
dimension's stride padded to 16 bytes for TMA. In bfloat16 (inputs and output) on compute
capability 9.0 or 10.x (``_scaled_mm_allowed_device(sm90_only, sm100_only)``) CUTLASS's kernel
fills it, allocating nothing more (PyTorch's meta kernel makes the same output). Otherwise
(float32, float16, or other GPUs) ``_grouped_mm_fallback`` copies the offsets to the host and runs
one ``mm_out`` per group into slices of that output, or one ``bmm_out`` without offsets: cuBLAS
with the handle's workspace, and nothing more on the GPU, whatever the groups' sizes.
"""

from __future__ import annotations

from typing import Any, List

from . import PASS, Call, Rule, register
from .cublas import CublasWorkspaces

# The output's last stride is padded to this many bytes (GroupedMMUtils.h, for TMA transfers).
TMA_ALIGNMENT = 16


def grouped_output(shape_a: List[int], shape_b: List[int], offsets: int, element: int) -> tuple:
    """The size and strides of ``create_grouped_gemm_output_tensor``'s output."""
    a2, b2 = len(shape_a) == 2, len(shape_b) == 2
    if a2 and b2:
        size = [offsets, shape_a[0], shape_b[1]]
    elif a2:
        size = [shape_a[0], shape_b[-1]]
    elif b2:
        size = [shape_a[1], shape_b[1]]
    else:
        size = [shape_a[0], shape_a[1], shape_b[-1]]
    per = TMA_ALIGNMENT // element
    padded = (size[-1] + per - 1) // per * per
    stride = [padded, 1] if a2 != b2 else [size[1] * padded, padded, 1]
    return size, stride


@register
class GroupedMatmul(Rule):
    ops = {"_grouped_mm"}
    source = "aten/src/ATen/native/cuda/GroupedBlas.cpp (_grouped_mm_cuda), GroupedMMUtils.h (create_grouped_gemm_output_tensor, _grouped_mm_fallback)"
    order = 20

    def before(self, call: Call) -> Any:
        torch, session = self.torch, self.session
        bound = call.bound()
        a, b, offs = bound["self"], bound["mat2"], bound.get("offs")
        out_dtype = bound.get("out_dtype") or a.dtype
        fast = a.dtype == b.dtype == out_dtype == torch.bfloat16 and session.major in (9, 10)
        if fast:
            return PASS
        size, stride = grouped_output(list(a.shape), list(b.shape), int(offs.shape[0]) if offs is not None else 0, out_dtype.itemsize)
        with session.modes[1]:
            out = torch.empty_strided(size, stride, dtype=out_dtype, device=a.device)
        for rule in session.rules.of("mm"):
            if isinstance(rule, CublasWorkspaces):
                rule.cublas_call(Call(session, torch.ops.aten.mm.default, "mm", (a, b), {}, True))
        return out
