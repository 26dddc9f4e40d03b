"""``unfold_backward`` on CUDA: the gradient of ``Tensor.unfold`` (sliding windows), and the
overlap-add of ``torch.istft``, which calls it twice (the signal and the window's envelope).

``aten/src/ATen/native/UnfoldBackward.cpp`` makes the result, ``zeros(input_sizes)`` (the meta
kernel's output), and the kernel (``aten/src/ATen/native/cuda/UnfoldBackwardKernel.cu``,
``_make_unfold_backward_iter_over_grad_out`` in ``UnfoldBackward.h``; 2.11 to 2.15) iterates over
the result with an index along the unfolded dimension: ``arange(0, iter_dim_size)`` in int64,
where ``iter_dim_size = min(input_sizes[dim], (grad_in.size(dim) - 1) * step + size)``, freed when
the kernel returns.

Found on ISSUE35R's speech-enhancement net (reports/reference/h200/trace-workloads-35r): each
``istft`` allocated two such indices of the padded signal's length (516,096 B for 64,512 samples),
and ``scripts/measure_cufft_workspaces.py``'s istft rows (reports/reference/h200/cufft) show them
on every call.
"""

from __future__ import annotations

from typing import Any, List

from . import Call, Rule, register

# The index's dtype (at::kLong).
INDEX_BYTES = 8


def index_length(grad_in: Any, input_sizes: List[int], dim: int, size: int, step: int) -> int:
    """``iter_dim_size``: the elements of the result along `dim` some window covers."""
    # ensure_nonempty_size: a 0-d tensor counts as one element along its one dimension.
    out_dim = int(input_sizes[dim]) if input_sizes else 1
    folds = int(grad_in.shape[dim]) if grad_in.dim() > 0 else 1
    return min(out_dim, (folds - 1) * int(step) + int(size))


@register
class UnfoldBackwardIndex(Rule):
    ops = {"unfold_backward"}
    source = "aten/src/ATen/native/UnfoldBackward.h (_make_unfold_backward_iter_over_grad_out), cuda/UnfoldBackwardKernel.cu"
    order = 60

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        if len(made) != 1 or not call.on_gpu or made[0].numel() == 0:
            return
        bound = call.bound()
        sizes = [int(s) for s in bound["input_sizes"]]
        dim = int(bound["dim"]) % max(1, len(sizes))
        length = index_length(bound["grad_in"], sizes, dim, bound["size"], bound["step"])
        if length > 0:
            call.record.scratch([length * INDEX_BYTES], call.frame)
