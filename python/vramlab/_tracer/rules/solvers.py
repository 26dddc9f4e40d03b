"""cuSOLVER's, MAGMA's and cuFFT's working memory, which the trace does not size: said in the
snapshot, so that a figure for a program that uses them is not read as exact.

- Dense linear algebra (``torch.linalg``: QR, SVD, eigh, Cholesky, LU, solve, inverse, lstsq):
  PyTorch asks cuSOLVER for a buffer size per call and allocates it from the caching allocator
  (aten/src/ATen/native/cuda/linalg/BatchLinearAlgebraLib.cpp, ``at::cuda::getCUDADeviceAllocator()
  ->allocate(lwork * sizeof(scalar_t))``), or runs MAGMA, whose device buffers are its own; the
  sizes are cuSOLVER's and MAGMA's choices per shape, which the trace has no rule for.
- FFTs (``torch.fft``): each cuFFT plan's work area is allocated from the caching allocator and
  kept with the plan in PyTorch's plan cache (aten/src/ATen/native/cuda/CuFFTPlanCache.h,
  ``CuFFTConfig``; up to ``torch.backends.cuda.cufft_plan_cache.max_size`` plans per device), so
  it stays reserved after the call; its size is cuFFT's choice.
"""

from __future__ import annotations

from typing import Any, List

from . import Call, Rule, register

LINEAR_ALGEBRA = {
    "linalg_qr", "geqrf", "_linalg_svd", "_linalg_eigh", "linalg_eig", "_linalg_eigvals", "linalg_cholesky_ex",
    "cholesky_solve", "cholesky_inverse", "linalg_lu", "linalg_lu_factor_ex", "linalg_lu_solve", "_linalg_solve_ex",
    "linalg_inv_ex", "_linalg_det", "_linalg_slogdet", "linalg_lstsq", "linalg_householder_product", "ormqr",
    "linalg_ldl_factor_ex", "linalg_ldl_solve", "lu_unpack", "triangular_solve", "linalg_solve_triangular",
}
FFTS = {"_fft_r2c", "_fft_c2r", "_fft_c2c"}


@register
class SolverWorkspaces(Rule):
    ops = LINEAR_ALGEBRA | FFTS
    source = "BatchLinearAlgebraLib.cpp (cuSOLVER buffers), CuFFTPlanCache.h (cuFFT work areas): sizes not derived"
    order = 60

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        if not made:
            return
        if call.op in FFTS:
            self.session.note(
                "{count} FFTs are traced without cuFFT's work areas, which PyTorch allocates from the caching allocator and keeps with each plan in its plan cache (sizes are cuFFT's choice): peak allocated and reserved may be higher by their size"
            )
        else:
            self.session.note(
                "{count} linear-algebra calls (torch.linalg) are traced without cuSOLVER's or MAGMA's working buffers (sizes are the library's choice per shape): peak allocated and reserved may be higher by their size"
            )
