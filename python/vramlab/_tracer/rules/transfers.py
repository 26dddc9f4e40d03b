"""Copies from the host to the GPU that need a temporary on the GPU
(``aten/src/ATen/native/cuda/Copy.cu``, ``copy_kernel_cuda`` and ``copy_requires_temporaries``):
a cross-device copy is one ``cudaMemcpyAsync`` only where both sides have one dtype and the
copy's TensorIterator is contiguous (the two tensors laid out alike and dense). Otherwise the
copy goes through contiguous temporaries, a conversion happening on the host for a blocking copy
and on the GPU for a non-blocking one:

the GPU side is written through a contiguous temporary of its shape, in its own dtype (blocking)
or the host's (non-blocking), unless it is contiguous and, non-blocking, of the host's dtype. A
parameter moved with ``.to("cuda", memory_format=torch.channels_last)`` makes one (ISSUE35E's
timm ResNet-26d, once per convolution weight). The temporary is made after the destination and
freed when the copy returns. (Copies from the GPU to the host are read-backs, which the trace
answers elsewhere: rules/reads.py.)
"""

from __future__ import annotations

from typing import Any, List

from . import Call, Rule, register


def _iterator_contiguous(a: Any, b: Any) -> bool:
    """TensorIteratorBase::is_contiguous for a copy between `a` and `b` of one shape: one
    element, or the two coalesce into one dense dimension (alike strides, no gaps)."""
    if a.numel() <= 1:
        return True
    dims = [(s, n) for n, s in zip(a.shape, a.stride()) if n != 1]
    if [(s, n) for n, s in zip(b.shape, b.stride()) if n != 1] != dims:
        return False
    expected = 1
    for stride, size in sorted(dims):
        if stride != expected:
            return False
        expected *= size
    return True


@register
class HostDeviceTemporaries(Rule):
    ops = {"_to_copy", "copy_"}
    source = "aten/src/ATen/native/cuda/Copy.cu (copy_kernel_cuda, copy_requires_temporaries)"
    order = 65

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        torch = self.torch
        if call.op == "_to_copy":
            src, dst = (call.args[0] if call.args else None), out
            non_blocking = bool(call.kwargs.get("non_blocking", False))
        else:
            dst, src = call.args[0], call.args[1]
            non_blocking = bool(call.args[2] if len(call.args) > 2 else call.kwargs.get("non_blocking", False))
        if not (isinstance(src, torch.Tensor) and isinstance(dst, torch.Tensor)) or dst.numel() == 0:
            return
        if (src.device.type, dst.device.type) != ("cpu", "meta") or tuple(src.shape) != tuple(dst.shape):
            return
        if src.dtype == dst.dtype and _iterator_contiguous(src, dst):
            return
        sizes = []
        if non_blocking and not (dst.is_contiguous() and src.dtype == dst.dtype):
            sizes.append(dst.numel() * src.element_size())
        elif not non_blocking and not dst.is_contiguous():
            sizes.append(dst.numel() * dst.element_size())
        if sizes:
            call.record.scratch(sizes, call.frame)
