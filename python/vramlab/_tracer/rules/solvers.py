"""cuSOLVER's, MAGMA's and cuFFT's working memory, which the trace does not size: said in the
snapshot, so that a figure for a program that uses them is not read as exact.

- Dense linear algebra (``torch.linalg``: QR, SVD, eigh, Cholesky, LU, solve, inverse, lstsq):
  PyTorch asks cuSOLVER for a buffer size per call and allocates it from the caching allocator
  (aten/src/ATen/native/cuda/linalg/BatchLinearAlgebraLib.cpp, ``at::cuda::getCUDADeviceAllocator()
  ->allocate(lwork * sizeof(scalar_t))``), or runs MAGMA, whose device buffers are its own; the
  sizes are cuSOLVER's and MAGMA's choices per shape, which the trace has no rule for.
- FFTs (``torch.fft``): each transform's cuFFT work area is allocated from the caching allocator
  on every call, after the output, and freed when the transform returns
  (aten/src/ATen/native/cuda/SpectralOps.cpp, ``_exec_fft``: ``at::empty({config->workspace_size()},
  kByte)``; the plan, kept in PyTorch's plan cache, holds none); its size is cuFFT's choice per
  plan. Measured on the H200 (reports/reference/h200/cufft, scripts/measure_cufft_workspaces.py):
  none for every 2-D and 3-D transform measured and most 1-D ones; one or two times the transformed
  data for 1-D lengths from 32,768 points (16,384 in float16, 8,192 in float64 real transforms) and
  for some real-to-complex lengths (500, 1,536, 1,792, 2,000, 6,000); four to ten times for lengths with a large prime factor (1,021;
  4,099; 12,289).

What PyTorch's own code allocates around those calls is followed:

- ``cholesky_solve`` of one system (``_cholesky_solve_helper_cuda_cusolver``,
  aten/src/ATen/native/cuda/linalg/BatchLinearAlgebra.cpp, 2.11 to 2.15; taken for one matrix
  whatever the preferred backend, save an explicit MAGMA): an ``int`` info tensor by ``zeros({1})``,
  the right-hand side's column-major copy (the result), then the factor's; the factor's copy and
  the info are freed on return. Batches may take MAGMA's path instead, which is noted.
- ``linalg_matrix_exp`` (also ``parametrizations.orthogonal``'s ``matrix_exp`` map, and its own
  backward, the exponential of a 2n x 2n block matrix): for one matrix ATen reads the matrix's
  1-norm back on the host and picks from it the degree of its approximant and the number of
  squarings (aten/src/ATen/native/LinearAlgebra.cpp, ``mexp_impl``: ``norm.to(at::kCPU)``), so
  the temporaries it makes depend on values: the trace keeps the result alone and says that the
  peak is not known.
- ``_linalg_check_errors`` (``linalg.cholesky``, ``linalg.inv`` and the other checked solvers;
  BatchLinearAlgebra.cpp): ``infos.any()`` (one bool) of a bool copy of the infos, the copy freed
  in the reduction, the bool after its value is read (the trace answers it as no error, as a run
  that goes on).
"""

from __future__ import annotations

from typing import Any, List

from ..recorder import UNKNOWN_PEAK
from ..where import user_frame
from . import Call, Rule, register

LINEAR_ALGEBRA = {
    "linalg_qr", "geqrf", "_linalg_svd", "_linalg_eigh", "linalg_eig", "_linalg_eigvals", "linalg_cholesky_ex",
    "cholesky_solve", "cholesky_inverse", "linalg_lu", "linalg_lu_factor_ex", "linalg_lu_solve", "_linalg_solve_ex",
    "linalg_inv_ex", "_linalg_det", "_linalg_slogdet", "linalg_lstsq", "linalg_householder_product", "ormqr",
    "linalg_ldl_factor_ex", "linalg_ldl_solve", "lu_unpack", "triangular_solve", "linalg_solve_triangular",
}
FFTS = {"_fft_r2c", "_fft_c2r", "_fft_c2c"}


@register
class CholeskySolveCopies(Rule):
    ops = {"cholesky_solve"}
    source = "aten/src/ATen/native/cuda/linalg/BatchLinearAlgebra.cpp (_cholesky_solve_helper_cuda_cusolver)"
    order = 55

    def track(self, call: Call, out: Any, made: List[Any]) -> bool:
        if len(made) != 1 or not call.on_gpu or made[0].dim() < 2:
            return False
        result, factor = made[0], call.bound()["input2"]
        if result.numel() != result.shape[-2] * result.shape[-1]:
            self.session.note(
                "{count} batched cholesky_solve calls are traced without the copies and info tensor of the backend PyTorch picks for batches (cuSOLVER or MAGMA, BatchLinearAlgebra.cpp)"
            )
            return False
        record = call.record
        info_bytes = 4  # at::kInt
        info = record.alloc(info_bytes, call.frame)
        record.track(result, call.frame)
        copy_bytes = factor.numel() * factor.element_size()
        record.free(record.alloc(copy_bytes, call.frame), copy_bytes)
        record.free(info, info_bytes)
        return True


@register
class CheckErrorsReduction(Rule):
    ops = {"_linalg_check_errors"}
    source = "aten/src/ATen/native/BatchLinearAlgebra.cpp (_linalg_check_errors: infos.any().item())"
    order = 55

    def before(self, call: Call) -> Any:
        torch = self.torch
        infos = call.args[0] if call.args else None
        if isinstance(infos, torch.Tensor) and infos.device.type == "meta" and infos.numel() > 0:
            call.record.scratch([1, infos.numel()], user_frame())
        return None


@register
class SolverWorkspaces(Rule):
    ops = LINEAR_ALGEBRA | FFTS
    source = "BatchLinearAlgebraLib.cpp (cuSOLVER buffers), SpectralOps.cpp _exec_fft (cuFFT work areas): sizes not derived"
    order = 60

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        if not made:
            return
        if call.op in FFTS:
            self.session.note(
                "{count} FFTs are traced without cuFFT's work areas, which PyTorch allocates from the caching allocator for each call and frees when it returns (sizes are cuFFT's choice: on the H200 none for most transforms, up to twice the transformed data for lengths from 32,768 points and some real-to-complex ones, up to ten times for lengths with a large prime factor; reports/reference/h200/cufft): peak allocated and reserved may be higher by the largest"
            )
        else:
            self.session.note(
                "{count} linear-algebra calls (torch.linalg) are traced without cuSOLVER's or MAGMA's working buffers (sizes are the library's choice per shape): peak allocated and reserved may be higher by their size"
            )


MATRIX_EXP_NOTE = (
    f"{UNKNOWN_PEAK} {{count}} matrix exponentials (torch.linalg.matrix_exp, the orthogonal parametrization's "
    "matrix_exp map, and their backwards) are traced with their results only: ATen picks the degree of its "
    "approximant and the number of squarings from the matrix's norm, read back on the host (LinearAlgebra.cpp: "
    "mexp_impl), so its temporaries depend on values a trace does not have; peak allocated and reserved may be "
    "higher by them"
)


@register
class MatrixExponential(Rule):
    ops = {"linalg_matrix_exp"}
    source = "aten/src/ATen/native/LinearAlgebra.cpp (mexp_impl: the degree and squarings chosen from the norm on the host)"
    order = 60

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        if made:
            self.session.note(MATRIX_EXP_NOTE)
