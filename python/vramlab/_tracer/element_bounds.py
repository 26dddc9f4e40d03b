"""Bounds per element of a random integer draw partly written with known values (values.py's
shadows keep one pair of bounds per storage; these, one per element).

Synthetic data is drawn on the GPU and then edited: labels drawn with ``randint``, their tail set
to -100 for padding; a segmentation target drawn, its border set to an ignore value of 255. Each
element is then either known (written) or bounded (drawn), so comparisons with a number can be
decided element by element: the decoder mask ``labels != -100`` that transformers' masking code
reads back, a confusion matrix's ``(t >= 0) & (t < C)``. What a known mask selects has the
bounds of the elements it selects. Once every element is known, the storage gets a shadow.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple


class ElementBounds:
    """The per-element bounds of the draws a program wrote into, by storage: two CPU storages of
    the draw's dtype (lowest, highest), beside `shadows` (values.Shadows), whose scalar bounds and
    shadows they keep in step."""

    def __init__(self, shadows: Any, store: Any) -> None:
        self.shadows = shadows
        self._torch = shadows._torch
        self._ranges = store

    def pop(self, key: int) -> None:
        self._ranges.pop(key)

    def _flat(self, storage: Any, dtype: Any, count: int) -> Any:
        return self._torch.empty(0, dtype=dtype).set_(storage, 0, (count,), (1,))

    def of(self, t: Any) -> Optional[Tuple[Any, Any]]:
        """Each element's lowest and highest values, as two CPU tensors of `t`'s shape, where its
        storage keeps them, else None."""
        ranges = self._ranges.get(t.untyped_storage())
        if ranges is None or self.shadows.shadowed(t):
            return None
        torch = self._torch
        lo, hi = (torch.empty(0, dtype=t.dtype).set_(r, t.storage_offset(), t.shape, t.stride()) for r in ranges)
        return lo, hi

    def write(self, target: Any, values: Any) -> bool:
        """A write of known `values` (a number, or a CPU tensor broadcast to `target`) into part of
        a storage of random integers with bounds: the written elements are known, the others keep
        the draw's bounds. False where the write is not of that kind."""
        torch, shadows = self._torch, self.shadows
        if not shadows._integral(target.dtype) or shadows.view(target) is not None:
            return False
        storage = target.untyped_storage()
        count = storage.nbytes() // target.element_size()
        if self._ranges.get(storage) is None:
            kept = shadows._bounds.get(storage)
            if kept is None or storage.nbytes() > shadows._limit(target.dtype):
                return False
            ranges = tuple(torch.UntypedStorage(storage.nbytes()) for _ in kept)
            for r, value in zip(ranges, kept):
                self._flat(r, target.dtype, count).fill_(value)
            self._ranges.put(storage, ranges)
        each = self.of(target)
        if each is None:
            return False
        for side in each:
            side.copy_(values)
        whole_lo, whole_hi = (self._flat(r, target.dtype, count) for r in self._ranges.get(storage))
        shadows._bounds.put(storage, (int(whole_lo.min()), int(whole_hi.max())))
        if bool((whole_lo == whole_hi).all()) and shadows._fits(target):
            known = whole_lo.clone()
            self._ranges.pop(storage._cdata)
            shadows._bounds.pop(storage._cdata)
            if shadows._fresh(target) is not None:
                self._flat(shadows._shadow(storage), target.dtype, count).copy_(known)
        return True

    def selected(self, op: str, args: Any) -> Optional[Tuple[int, int]]:
        """The bounds of the elements an index or masked_select with known indices picks from a
        draw with per-element bounds (a confusion matrix's ``labels[keep]``, the ignore border left
        out): those of the picked elements alone."""
        torch, shadows = self._torch, self.shadows
        each = self.of(args[0])
        if each is None or len(args) < 2:
            return None
        if op == "index":
            indices = [None if i is None else shadows.view(i) if isinstance(i, torch.Tensor) and i.device.type == "meta" else i for i in args[1]]
            if any(i is None for i, given in zip(indices, args[1]) if given is not None):
                return None
            picked = [torch.ops.aten.index.Tensor(side, indices) for side in each]
        elif op == "masked_select" and isinstance(args[1], torch.Tensor):
            mask = shadows.view(args[1]) if args[1].device.type == "meta" else args[1]
            if mask is None:
                return None
            picked = [torch.masked_select(side, mask) for side in each]
        else:
            return None
        if picked[0].numel() == 0:
            return None
        return int(picked[0].min()), int(picked[1].max())
