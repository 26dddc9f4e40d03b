"""Advanced indexing with two or more index tensors on CUDA (``aten/src/ATen/native/TensorAdvancedIndexing.cpp``,
``make_info`` and ``AdvancedIndex``): the index tensors are broadcast together (``expand_outplace``,
views), moved next to each other (``transposeToFront`` where they are not), given unit dimensions
for the indexed tensor's other dimensions (``reshape_indexer``), and, for a CUDA tensor, where their
strides then differ, each made contiguous, "to simplify the CUDA kernel": a copy of every one not
already so, made before the result and freed once it is filled. Hugging Face's masks index a
padding mask by a batch and a key range broadcast against each other (ISSUE35E's left-padded
Llama: two 1,536-byte copies per mask). The meta kernel makes the result alone.
"""

from __future__ import annotations

from typing import Any, List

from . import Call, Rule, register


@register
class IndexTensorsMadeAlike(Rule):
    ops = {"index"}
    source = "aten/src/ATen/native/TensorAdvancedIndexing.cpp (make_info, AdvancedIndex, all_strides_match)"
    order = 60

    def track(self, call: Call, out: Any, made: List[Any]) -> bool:
        torch = self.torch
        if len(made) != 1 or len(call.args) < 2:
            return False
        x, indices = call.args[0], list(call.args[1])
        defined = [(position, t) for position, t in enumerate(indices) if t is not None]
        if len(defined) < 2 or not isinstance(x, torch.Tensor) or x.device.type != "meta":
            return False
        if any(not isinstance(t, torch.Tensor) or t.device.type != "meta" or t.dtype in (torch.bool, torch.uint8) for _, t in defined):
            return False
        expanded = torch.broadcast_tensors(*[t for _, t in defined])
        positions = [position for position, _ in defined]
        adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
        before = positions[0] if adjacent else 0
        after = x.dim() - before - len(defined)
        reshaped = [e.reshape([1] * before + list(e.shape) + [1] * after) for e in expanded]
        if all(r.stride() == reshaped[0].stride() for r in reshaped[1:]):
            return False
        record, frame = call.record, call.frame
        copies = [(record.alloc(size, frame), size) for size in (r.numel() * r.element_size() for r in reshaped if not r.is_contiguous())]
        record.track(made[0], frame)
        for addr, size in copies:
            record.free(addr, size)
        return True
