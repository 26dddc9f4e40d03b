"""cuBLAS's and cuBLASLt's workspaces, which PyTorch allocates from the caching allocator behind the
program's back (aten/src/ATen/cuda/CublasHandlePool.cpp). How long they live changed:

- torch 2.11 (measured on the H100: reports/reference/h100/trace-workloads): the first matrix
  multiply of each handle (one per thread: the program's and the autograd engine's) allocates the
  cuBLAS workspace right after its output and keeps it (setWorkspaceForHandle); the first cuBLASLt
  call on it (``addmm`` with a bias) another, cuBLASLt's, of ``CUBLASLT_WORKSPACE_SIZE`` KiB
  (1 MiB), clamped to the cuBLAS workspace unless ``TORCH_CUBLASLT_UNIFIED_WORKSPACE`` is false,
  and none at all where it is true (cuBLASLt then shares cuBLAS's).
- torch 2.15 (read from the release's libtorch_cuda.so, PR #194311 "Always eagerly allocate
  cuBLAS(Lt) workspaces"; no GPU measurement exists for it): unless ``TORCH_CUBLAS_WORKSPACE_CACHE``
  is true, every cuBLAS call allocates the workspace after its output and frees it when it returns
  (getCurrentCUDABlasHandleWithWorkspace), and every cuBLASLt call its own 1 MiB
  (CublasLtWorkspace), unclamped. With the cache on, cuBLAS's is kept per handle as in 2.11 and
  cuBLASLt shares it.

The cuBLAS workspace's size is ``CUBLAS_WORKSPACE_CONFIG`` where set, read as PyTorch reads it
(parseChosenWorkspaceSize: every ``:SIZE_KiB:COUNT`` match of the regex ``:([0-9]+):([0-9]+)``
adds SIZE x 1024 x COUNT bytes; a value with no match gives the default, with PyTorch's warning),
else PyTorch's default for the GPU's compute capability (`DEFAULTS`, by release). The first cuBLAS
call of a handle may be a solver's, not a multiply's: triangular solves and most LU solves run on
cuBLAS (``LINALG_ON_CUBLAS``), and a normalizing flow's ``slogdet`` backward is the engine
thread's only cuBLAS call. Releases 2.12 to 2.14 keep workspaces per handle as 2.11 does: their
wheels' libtorch_cuda.so (2.12.1, 2.13.0, 2.14.1) have no ``TORCH_CUBLAS_WORKSPACE_CACHE``, which
2.15's per-call workspaces come with. Their default size for majors other than 9 was not read (PR
#175344 of February 2026 gives majors 10 and 12 the 32 MiB, PR #189312 of July 2026 major 11; which
release each entered is not known here): for those GPUs the snapshot says the size is 2.11's.
Hopper (major 9) has 32 MiB in every release.
"""

from __future__ import annotations

import os
import re
import threading
import warnings
from typing import Any, Callable, Dict, FrozenSet, List, Tuple

from ..compat import by_release
from ..where import user_frame
from . import Call, Rule, register
from .engine import dense

# PyTorch's two default sizes (CublasHandlePool.cpp): 4096 KiB x 8 on the GPUs it names, and
# ":4096:2:16:8" (4096 KiB x 2 + 16 KiB x 8) elsewhere.
LARGE_WORKSPACE = 4096 * 8 * 1024
SMALL_WORKSPACE = 4096 * 1024 * 2 + 16 * 1024 * 8
# cuBLASLt's workspace (CUBLASLT_WORKSPACE_SIZE, in KiB, overrides it).
CUBLASLT_WORKSPACE = 1 << 20

# Per release (the first that has it): which GPUs get the large default, by compute capability.
DEFAULTS: Dict[Tuple[int, int], Callable[[int, int], bool]] = {
    # 2.11's libtorch_cuda.so compares {major, minor} with {9, 0}: sm90 alone.
    (2, 11): lambda major, minor: (major, minor) == (9, 0),
    # 2.15's tests major - 9 < 4 (PR #175344, majors 9, 10 and 12; #189312 adds 11).
    (2, 15): lambda major, minor: 9 <= major <= 12,
}
# Whether workspaces are allocated per call unless TORCH_CUBLAS_WORKSPACE_CACHE says keep them.
PER_CALL: Dict[Tuple[int, int], bool] = {(2, 11): False, (2, 15): True}

_CONFIG = re.compile(r":([0-9]+):([0-9]+)")


def config_size(config: str, default: int) -> int:
    """CUBLAS_WORKSPACE_CONFIG's bytes, as parseChosenWorkspaceSize reads them."""
    matches = _CONFIG.findall(config)
    if not matches:
        warnings.warn(f"Could not parse CUBLAS_WORKSPACE_CONFIG, using default workspace size of {default} bytes.", stacklevel=2)
        return default
    return sum(int(size) * 1024 * int(count) for size, count in matches)


def workspace_size(release: Tuple[int, int], major: int, minor: int, environ: Any = os.environ) -> int:
    """The cuBLAS workspace per handle, for torch `release` on a GPU of compute capability
    major.minor, under `environ`'s CUBLAS_WORKSPACE_CONFIG."""
    default = LARGE_WORKSPACE if by_release(DEFAULTS, release)(major, minor) else SMALL_WORKSPACE
    config = environ.get("CUBLAS_WORKSPACE_CONFIG")
    return default if config is None else config_size(config, default)


def lt_workspace_size(environ: Any = os.environ) -> int:
    """cuBLASLt's workspace before any clamp: CUBLASLT_WORKSPACE_SIZE (KiB) where set, else 1 MiB."""
    value = environ.get("CUBLASLT_WORKSPACE_SIZE")
    if value is not None and value.strip().isdigit():
        return int(value) * 1024
    return CUBLASLT_WORKSPACE


def truthy(value: Any) -> bool:
    """c10::utils::check_env: "1", "true", "y", "yes", "on" (any case) are true."""
    return value is not None and str(value).strip().lower() in ("1", "true", "y", "yes", "on")


class Plan:
    """How one trace allocates the workspaces: sizes, and whether they are kept or per call."""

    def __init__(self, release: Tuple[int, int], major: int, minor: int, environ: Any = os.environ) -> None:
        self.size = workspace_size(release, major, minor, environ)
        per_call = by_release(PER_CALL, release)
        self.per_call = per_call and not truthy(environ.get("TORCH_CUBLAS_WORKSPACE_CACHE"))
        unified_setting = environ.get("TORCH_CUBLASLT_UNIFIED_WORKSPACE")
        if self.per_call:
            self.lt_size = lt_workspace_size(environ)
            self.lt_shares = False
        elif per_call:
            # 2.15 with the cache on: unified unless said otherwise.
            self.lt_shares = unified_setting is None or truthy(unified_setting)
            self.lt_size = 0 if self.lt_shares else lt_workspace_size(environ)
        else:
            # 2.11: clamped unless unified is false; shared only where it is true.
            self.lt_shares = truthy(unified_setting)
            clamp = unified_setting is None or truthy(unified_setting)
            self.lt_size = 0 if self.lt_shares else (min(lt_workspace_size(environ), self.size) if clamp else lt_workspace_size(environ))


MATMULS: FrozenSet[str] = frozenset({"mm", "addmm", "bmm", "baddbmm", "addbmm", "addmv", "mv", "dot", "vdot", "_addmm_activation"})
WITH_BIAS: FrozenSet[str] = frozenset({"addmm", "_addmm_activation"})
BATCHED: FrozenSet[str] = frozenset({"bmm", "baddbmm"})
# Those on addmm_out_cuda_impl's 2-D GEMM.
GEMMS: FrozenSet[str] = frozenset({"mm", "addmm", "_addmm_activation"})
# Linear algebra that takes the thread's cuBLAS handle on CUDA (BatchLinearAlgebraLibBlas.cpp:
# getCurrentCUDABlasHandle, which gives a new handle its workspace under 2.11's rule): triangular
# solves are cuBLAS's trsm always, and linalg_lu_solve takes cuBLAS on most of its paths.
LINALG_ON_CUBLAS: FrozenSet[str] = frozenset({"linalg_solve_triangular", "triangular_solve", "linalg_lu_solve"})


def lu_solve_takes_cublas(n: int, k: int, batches: int, no_transpose: bool) -> bool:
    """Whether lu_solve_kernel (aten/src/ATen/native/cuda/linalg/BatchLinearAlgebra.cpp, default
    backend) runs a cuBLAS path for an n x n factor and k right-hand sides: getrs batched or two
    triangular solves, rather than looped cuSOLVER or MAGMA."""
    if n == k:
        return True
    if n <= 8:
        return not (no_transpose and k >= 256)
    if n <= 64:
        return not (batches <= 2 and (k <= 64 or not no_transpose or n <= 32))
    if n <= 128:
        return not (batches <= 2 and k <= 2)
    return True


def _owned_copy(tensor: Any, transpose_result: bool, m: int, n: int) -> int:
    """The bytes prepare_batch_matrix_for_cublas (Blas.cpp) clones one operand into, or 0 where
    cuBLAS takes it as it is: a unit stride with the other at least the matrix's extent, or a
    contiguous tensor with no zero stride."""
    strides = tensor.stride()
    fast, leading = (2, 1) if transpose_result else (1, 2)
    if strides[fast] == 1 and strides[leading] >= max(1, m):
        return 0
    if strides[leading] == 1 and strides[fast] >= max(1, n):
        return 0
    if tensor.is_contiguous() and strides[1] != 0 and strides[2] != 0:
        return 0
    return tensor.numel() * tensor.element_size()


def gemm_operand_copies(result: Any, mat1: Any, mat2: Any) -> List[int]:
    """The contiguous copies addmm_out_cuda_impl's cublasCommonArgs (Blas.cpp, behind mm and addmm)
    makes before its GEMM, in the order it makes them (the result's, then the first operand cuBLAS
    takes, then the second), each freed when it returns: prepare_matrix_for_cublas clones a matrix
    that is neither dense nor column- or row-major with a leading stride at least its extent (an
    expanded one, such as forward-mode AD's zero tangents made real)."""
    if result.dim() != 2 or mat1.dim() != 2 or mat2.dim() != 2:
        return []

    def cloned(t: Any) -> int:
        if dense(t):
            return 0
        (rows, cols), (row_stride, col_stride) = t.shape, t.stride()
        if row_stride == 1 and col_stride >= max(1, rows):
            return 0
        if col_stride == 1 and row_stride >= max(1, cols):
            return 0
        return t.numel() * t.element_size()

    if dense(result):
        transpose_result = result.is_contiguous()
    else:
        transpose_result = not (result.stride(0) == 1 and result.stride(1) >= max(1, result.shape[0]))
    first, second = (mat2, mat1) if transpose_result else (mat1, mat2)
    return [size for size in (cloned(result), cloned(first), cloned(second)) if size]


def batched_operand_copies(result: Any, batch1: Any, batch2: Any) -> List[int]:
    """The contiguous copies baddbmm_out_cuda_impl (Blas.cpp, behind bmm and baddbmm) makes before
    its batched GEMM, in the order it makes them (the result's, then each operand's), each freed
    when it returns: a result whose matrices are neither column- nor row-major, and operands
    whose strides cuBLAS cannot take."""
    if result.numel() == 0 or batch1.size(2) == 0:
        return []
    sizes, strides = result.shape, result.stride()
    copies = []
    transpose_result = False
    if strides[1] == 1 and (sizes[2] == 1 or strides[2] >= max(1, sizes[1])):
        pass
    elif strides[2] == 1 and (sizes[1] == 1 or strides[1] >= max(1, sizes[2])):
        transpose_result = True
    else:
        copies.append(result.numel() * result.element_size())
    leading = 1 if transpose_result else 2
    m, n = sizes[2 if transpose_result else 1], sizes[leading]
    first, second = (batch2, batch1) if transpose_result else (batch1, batch2)
    k = first.shape[leading]
    copies += [_owned_copy(first, transpose_result, m, k), _owned_copy(second, transpose_result, k, n)]
    return [size for size in copies if size]


@register
class CublasWorkspaces(Rule):
    ops = MATMULS | LINALG_ON_CUBLAS
    source = "aten/src/ATen/cuda/CublasHandlePool.cpp; measured on the H100 (torch 2.11); BatchLinearAlgebra.cpp's solvers on cuBLAS"
    order = 70

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.plan = Plan(session.release, session.major, session.minor)
        self.handles: set = set()
        self.lt_handles: set = set()
        if (2, 11) < session.release < (2, 15) and session.major != 9:
            session.note(
                "{count} traces under a torch release between 2.11 and 2.15 take 2.11's default cuBLAS workspace size for a GPU of compute capability other than 9.x (those releases' default was not read; PRs #175344 and #189312 raised it to 32 MiB for majors 10 to 12): each cuBLAS handle's workspace may be 32 MiB instead"
            )

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        if not made:
            return
        if call.op in LINALG_ON_CUBLAS:
            # A solver asks for the handle alone: the workspace a new handle is given under the
            # kept rule (ISSUE35K's Glow flow: slogdet's backward, on the engine's thread).
            if not self._on_cublas(call):
                return
            if self.plan.per_call:
                self.session.note(
                    "{count} triangular or LU solves on cuBLAS are traced without a cuBLAS workspace: under this release's per-call workspaces, whether a solver's cuBLAS call allocates one (getCurrentCUDABlasHandleWithWorkspace) was not read"
                )
                return
            self._workspaces(call)
            return
        record, frame = call.record, call.frame
        copies = []
        if call.op in BATCHED and isinstance(out, self.torch.Tensor):
            batch1, batch2 = call.args[0 if call.op == "bmm" else 1], call.args[1 if call.op == "bmm" else 2]
            copies = [(record.alloc(size, frame), size) for size in batched_operand_copies(out, batch1, batch2)]
        elif call.op in GEMMS and isinstance(out, self.torch.Tensor):
            mat1, mat2 = call.args[0 if call.op == "mm" else 1], call.args[1 if call.op == "mm" else 2]
            copies = [(record.alloc(size, frame), size) for size in gemm_operand_copies(out, mat1, mat2)]
        self._workspaces(call)
        for addr, size in reversed(copies):
            record.free(addr, size)

    def cublas_call(self, call: Call) -> None:
        """A cuBLAS call made inside another operator's kernel (grouped_mm.py's fallback, one
        ``mm_out`` per group): the workspace its handle is given, as for a matmul of its own."""
        if call.frame is None:
            call.frame = user_frame()
        self._workspaces(call)

    def _on_cublas(self, call: Call) -> bool:
        if call.op != "linalg_lu_solve":
            return True
        bound = call.bound()
        lu, b = bound["LU"], bound["B"]
        left, adjoint = bool(bound.get("left", True)), bool(bound.get("adjoint", False))
        k = b.shape[-1] if left else b.shape[-2]
        batches = b.numel() // max(1, b.shape[-1] * b.shape[-2])
        return lu_solve_takes_cublas(int(lu.shape[-1]), int(k), batches, left != adjoint)

    def _workspaces(self, call: Call) -> None:
        record, frame, plan = call.record, call.frame, self.plan
        lt = call.op in WITH_BIAS
        if plan.per_call:
            record.scratch([plan.lt_size if lt else plan.size], frame)
            return
        # The autograd engine runs CUDA backward on a thread of its own, with its own handle; a
        # handle keeps one workspace per stream it runs on (CublasHandlePool.cpp: the maps
        # cublas_handle_stream_to_workspace and cublaslt_handle_stream_to_workspace are keyed by
        # handle and current stream), so a multiply on a side stream, or in a future's callback
        # on a pool stream, gets a workspace of its own, kept as the default stream's is.
        thread = "backward" if self.torch._C._current_autograd_node() is not None else threading.get_ident()
        handle = (thread, record.stream)
        if handle not in self.handles:
            self.handles.add(handle)
            record.phases[record.alloc(plan.size, frame)] = "workspaces"
        if lt and plan.lt_size and handle not in self.lt_handles:
            self.lt_handles.add(handle)
            record.phases[record.alloc(plan.lt_size, frame)] = "workspaces"
