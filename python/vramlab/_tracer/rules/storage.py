"""Storages that change size in place. On CUDA a tensor's ``resize_`` past its storage's end
(resize_cuda_ -> maybe_resize_storage_cuda, aten/src/ATen/native/cuda/Resize.cpp) and a storage's
own ``UntypedStorage.resize_`` (FSDP frees and refills its all-gather buffers so) both go through
resize_bytes_cuda: a new block of the new size is allocated (none for 0 bytes), the old contents
copied, and the old block freed. The meta device grows the storage in place, so the rule compares
the storage's size with the block the record holds for it (the storage's own resize_ does not
reach dispatch modes: the stand-in wraps it, session.py)."""

from __future__ import annotations

from typing import Any, List

from . import Call, Rule, register


@register
class Resizes(Rule):
    ops = {"resize_", "resize_as_"}
    source = "aten/src/ATen/native/cuda/Resize.cpp (resize_bytes_cuda, maybe_resize_storage_cuda)"
    order = 80

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        target = call.args[0]
        if isinstance(target, self.torch.Tensor) and target.device.type == "meta":
            call.record.resized(target.untyped_storage(), call.frame or self.session.frame())
