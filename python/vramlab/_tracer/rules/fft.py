"""``torch.fft`` on CUDA: the copies PyTorch's host code makes around cuFFT
(``aten/src/ATen/native/cuda/SpectralOps.cpp``, 2.11 to 2.15; cuFFT's own work areas are the
library's choice and are noted by ``solvers.py``).

- ``_fft_r2c_cufft``: the output; a copy of the input with the last transformed dimension made
  innermost where the input's data is not aligned as a complex number would be (an odd element
  offset); then ``_exec_fft``.
- ``_fft_c2r_cufft``: the output, then a contiguous copy of the input, which a complex-to-real
  transform may overwrite (gh-34551), freed on return.
- ``_fft_c2c_cufft``: the output, then ``_exec_fft``.
- ``_exec_fft`` puts the batch dimensions first in stride order and the transformed ones last,
  then ``reshape``s the batch dimensions into one: a copy, freed when the transform returns, where
  they cannot be merged into a view (the FNO's first spectral layer, whose input is a permuted
  activation).

Up to three transformed dimensions go to cuFFT at once (``use_optimized_cufft_path``, save a
transform over dimensions 0 and 1); more, or one over (0, 1, ...), takes several passes with
working tensors, which the trace notes rather than follows. Found on ISSUE35H's Fourier neural
operator (reports/reference/h200/trace-workloads-35h).
"""

from __future__ import annotations

from typing import Any, List, Sequence

from . import Call, Rule, register

# SpectralOps.cpp: cufft_max_ndim.
CUFFT_MAX_NDIM = 3


def one_pass(dims: Sequence[int]) -> bool:
    """``use_optimized_cufft_path``: all the transformed dimensions in one cuFFT plan."""
    return not (len(dims) > CUFFT_MAX_NDIM or (len(dims) >= 2 and dims[0] == 0 and dims[1] == 1))


def batch_copy_bytes(torch: Any, input: Any, dims: Sequence[int]) -> int:
    """The bytes of ``_exec_fft``'s copy of `input` (0 where its reshape is a view)."""
    transformed = set(dims)
    batch = sorted((d for d in range(input.dim()) if d not in transformed), key=lambda d: -input.stride(d))
    permuted = input.permute(batch + list(dims))
    try:
        permuted.view([-1] + [input.shape[d] for d in dims])
        return 0
    except RuntimeError:
        return input.numel() * input.element_size()


@register
class FftCopies(Rule):
    ops = {"_fft_r2c", "_fft_c2r", "_fft_c2c"}
    source = "aten/src/ATen/native/cuda/SpectralOps.cpp (_fft_r2c_cufft, _fft_c2r_cufft, _fft_c2c_cufft, _exec_fft)"
    order = 55

    def track(self, call: Call, out: Any, made: List[Any]) -> bool:
        torch = self.torch
        bound = call.bound()
        x, dims = bound["self"], [int(d) % max(1, bound["self"].dim()) for d in bound["dim"]]
        if len(made) != 1 or not call.on_gpu or not dims or x.numel() == 0:
            return False
        if not one_pass(dims):
            self.session.note(
                "{count} FFTs over more than three dimensions, or over dimensions 0 and 1, are traced without the working tensors of their several cuFFT passes (SpectralOps.cpp)"
            )
            return False
        record, frame = call.record, call.frame
        record.track(made[0], frame)
        held = []
        if call.op == "_fft_c2r":
            size = x.numel() * x.element_size()
            held.append((record.alloc(size, frame), size))
            x = x.contiguous()
        elif call.op == "_fft_r2c" and x.storage_offset() % 2:
            size = x.numel() * x.element_size()
            held.append((record.alloc(size, frame), size))
            x = x.movedim(dims[-1], -1).contiguous().movedim(-1, dims[-1])
        copy = batch_copy_bytes(torch, x, dims)
        if copy:
            record.free(record.alloc(copy, frame), copy)
        for addr, size in reversed(held):
            record.free(addr, size)
        return True
