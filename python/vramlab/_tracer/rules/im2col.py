"""``F.unfold`` and ``F.fold`` (``im2col`` and ``col2im``, each the other's backward) as CUDA runs
them: the result starts as a tensor the size of the input and is resized to its own shape.

``aten/src/ATen/native/cuda/Im2Col.cu`` and ``Col2Im.cu`` (``im2col_cuda``, ``col2im_cuda``; the
same in 2.11 to 2.15) make the output with ``empty_like(input, LEGACY_CONTIGUOUS_MEMORY_FORMAT)``,
take ``input.contiguous()`` (a copy of a strided input, freed on return), then ``output.resize_``
to the result's shape. Growing a CUDA storage allocates the new block and frees the old one
(``resize_bytes_cuda``); shrinking keeps the block. So an unfold (more columns than pixels) makes
a block of the input's size, then its own, and frees the first; a fold keeps a block of its
columns' size for a result that may be several times smaller, for as long as the result lives.
The meta kernel makes the result at its own size only.

Found on ISSUE35L's patch autoencoder (reports/reference/h200/trace-workloads-35l): a fold of
patches with overlap holds its columns' size.
"""

from __future__ import annotations

from typing import Any, List

from . import Call, Rule, register


@register
class Im2Col(Rule):
    ops = {"im2col", "col2im"}
    source = "aten/src/ATen/native/cuda/Im2Col.cu (im2col_cuda), Col2Im.cu (col2im_cuda); c10/cuda resize_bytes_cuda"
    order = 60

    def track(self, call: Call, out: Any, made: List[Any]) -> bool:
        torch = self.torch
        source = call.args[0] if call.args else None
        if len(made) != 1 or not isinstance(source, torch.Tensor) or source.device.type != "meta":
            return False
        record, frame = call.record, call.frame
        first = source.numel() * made[0].element_size()
        wanted = made[0].numel() * made[0].element_size()
        strided = not source.is_contiguous()
        copy = None
        if wanted <= first:
            record.track(made[0], frame, first)
            if strided:
                copy = record.alloc(first, frame)
        else:
            block = record.alloc(first, frame)
            if strided:
                copy = record.alloc(first, frame)
            record.track(made[0], frame)
            record.free(block, first)
        if copy is not None:
            record.free(copy, first)
        return True
