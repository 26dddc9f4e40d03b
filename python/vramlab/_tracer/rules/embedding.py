"""The temporaries of the CUDA embedding backwards of PyTorch 2.11 (``nn.Embedding`` and
``nn.EmbeddingBag``, dense gradients), around and inside their CUB calls.

Read from 2.11-era sources of aten/src/ATen/native/cuda/ (the repository's own 2.11 tag was not
available here: the copies read are those whose allocations the H100 recordings bear out, to the
byte; Embedding.cu's line numbers are those of the copy read, the rest cited by function):

- ``embedding_dense_backward_cuda`` (Embedding.cu:242-333): ``indices_.contiguous()`` and
  ``grad_.contiguous()`` (copies only where not contiguous); with at most 3072 indices and no
  ``scale_grad_by_freq``, the feature kernel writes into the zeroed output and nothing else is
  allocated (lines 256-287). Otherwise ``sorted_indices`` and ``orig_indices`` (``empty_like``, lines
  289-290), ``range`` (``at::arange``, line 293), and ``cuda::cub::radix_sort_pairs`` of the indices
  on all their bits (the ``nbits`` argument is commented out, line 298): CUB's temporary storage,
  freed, then ``range`` freed at the end of the dispatch lambda.
- ``_embedding_bag_backward`` (EmbeddingBag.cpp, ``_embedding_bag_backward_symint``): on CUDA the
  forward's ``offset2bag`` is passed on (nothing allocated) to ``_embedding_bag_dense_backward`` when
  not sparse; the sparse path is not derived.
- ``_embedding_bag_dense_backward_cuda`` (EmbeddingBag.cu): ``grad_.contiguous()``; mode max
  (``embedding_bag_backward_cuda_max``) zeroes the output and runs one kernel; modes sum and mean
  (``embedding_bag_backward_cuda_sum_avg``) allocate as above, without the 3072 shortcut.
- ``embedding_backward_cuda_kernel`` (EmbeddingBackwardKernel.cu, the version with the fused
  one-pass kernel, which sizes its buffers by bounds rather than by a synchronised count): the output ``grad_weight`` (``at::zeros``),
  ``segment_offsets`` (numel indices) and ``num_of_segments`` (one int64), then
  ``cuda::cub::unique_by_key`` (ATen/cuda/cub.cuh:174-187: a ``keys_out`` buffer of numel keys it
  owns, and CUB's temporary storage, freed in reverse); ``max_segments = min(numel, num_weights)``;
  ``partials_per_segment`` and ``partials_per_segment_offset`` (max_segments indices each),
  ``cuda::cub::exclusive_sum`` over max_segments (its temporary storage), ``num_of_partial_segments``
  (one int64), ``max_partial_segment = numel / NROWS_PER_THREAD (10) + max_segments``,
  ``partial_segment_offset`` (that many indices); then, where ``use_fused_kernel`` holds (no bags,
  sum_and_scatter's grid ``ceil(max_segments x stride_warped / block)`` under 4 blocks an SM and
  under a quarter of max_partial_segment, not deterministic), ``partial_to_segment_idx``
  (max_partial_segment indices) and, for half and bfloat16, a float ``grad_weight_acc`` of the
  output's shape; otherwise ``grad_weight_per_segment`` (max_partial_segment x stride in the
  accumulation type: float for half and bfloat16). Freed in
  reverse order of declaration as the two dispatch lambdas' scopes end, then the caller's
  ``count``, ``orig_indices``, ``sorted_indices`` and the contiguous copies.

CUB's sizes are rules/cub.py's (CCCL 3.0.1 on sm90). Checked against every embedding backward of
the H100 recordings (reports/reference/h100/trace-workloads; the table is in the commit).

Not derived: ``scale_grad_by_freq`` (``count`` is allocated; the temporary storage of its two
by-key scans is not), and GPUs other than sm90 (PyTorch's own buffers are traced, CUB's are not);
the snapshot says so.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from ..compat import by_release
from . import Call, Rule, register
from .cub import exclusive_sum_temp, radix_sort_temp, unique_by_key_temp
from .kernels import accumulation_type

# EmbeddingBackwardKernel.cu: NROWS_PER_THREAD, MAX_ATOMIC_ACCUM_BLOCKS_PER_SM; SortingCommon.cuh:
# MAX_BLOCK_SIZE (CUDA); the warp; Embedding.cu: the feature kernel's bound.
NROWS_PER_THREAD = 10
MAX_ATOMIC_ACCUM_BLOCKS_PER_SM = 4
MAX_BLOCK_SIZE = 1024
WARP_SIZE = 32
FEATURE_KERNEL_INDICES = 3072
INT64 = 8

Event = Tuple[str, Any]


class Plan:
    """Allocations in order: ("alloc", (name, size)), ("free", name), ("output", None)."""

    def __init__(self) -> None:
        self.events: List[Event] = []

    def alloc(self, name: str, size: int) -> None:
        self.events.append(("alloc", (name, size)))

    def free(self, *names: str) -> None:
        for name in names:
            self.events.append(("free", name))

    def scratch(self, name: str, size: Optional[int]) -> None:
        if size is not None:
            self.alloc(name, size)
            self.free(name)

    def output(self) -> None:
        self.events.append(("output", None))


def backward_kernel(plan: Plan, numel: int, num_weights: int, stride: int, index_size: int, acc_size: int, sm90: bool,
                    fused: bool = False, grad_size: int = 4) -> None:
    """embedding_backward_cuda_kernel (EmbeddingBackwardKernel.cu), the output first."""
    plan.output()
    plan.alloc("segment_offsets", numel * index_size)
    plan.alloc("num_of_segments", INT64)
    plan.alloc("keys_out", numel * index_size)
    plan.scratch("unique_by_key", unique_by_key_temp(numel, index_size) if sm90 else None)
    plan.free("keys_out")
    max_segments = min(numel, num_weights)
    plan.alloc("partials_per_segment", max_segments * index_size)
    plan.alloc("partials_per_segment_offset", max_segments * index_size)
    plan.scratch("exclusive_sum", exclusive_sum_temp(max_segments, index_size) if sm90 else None)
    plan.alloc("num_of_partial_segments", INT64)
    max_partial_segment = numel // NROWS_PER_THREAD + max_segments
    plan.alloc("partial_segment_offset", max_partial_segment * index_size)
    if fused:
        # The one-pass kernel: partial_to_segment_idx, and for half and bfloat16 a float
        # accumulator of the output's shape (zeroed, copied into the output, freed).
        plan.alloc("partial_to_segment_idx", max_partial_segment * index_size)
        if acc_size != grad_size:
            plan.alloc("grad_weight_acc", num_weights * stride * acc_size)
            plan.free("grad_weight_acc")
        plan.free("partial_to_segment_idx")
    else:
        plan.alloc("grad_weight_per_segment", max_partial_segment * stride * acc_size)
        plan.free("grad_weight_per_segment")
    plan.free("partial_segment_offset", "num_of_partial_segments",
              "partials_per_segment_offset", "partials_per_segment", "num_of_segments", "segment_offsets")


def use_fused_kernel(numel: int, num_weights: int, stride: int, bags: bool, multiprocessors: int, deterministic: bool) -> bool:
    """EmbeddingBackwardKernel.cu's heuristic: the one-pass atomic kernel where sum_and_scatter's
    grid would be small against the GPU (not for bags, not under deterministic algorithms)."""
    max_segments = min(numel, num_weights)
    max_partial_segment = numel // NROWS_PER_THREAD + max_segments
    stride_warped = -(-stride // WARP_SIZE) * WARP_SIZE
    block = min(stride_warped, MAX_BLOCK_SIZE)
    sum_scatter_grid = -(-(max_segments * stride_warped) // block)
    return (not bags and sum_scatter_grid < multiprocessors * MAX_ATOMIC_ACCUM_BLOCKS_PER_SM
            and max_partial_segment > sum_scatter_grid * 4 and not deterministic)


def sorted_backward(plan: Plan, numel: int, num_weights: int, stride: int, index_size: int, acc_size: int,
                    scale_grad_by_freq: bool, sm90: bool, fused: bool, grad_size: int) -> None:
    """The sort of the indices and the backward kernel (Embedding.cu:289-332; EmbeddingBag.cu's
    embedding_bag_backward_cuda_sum_avg)."""
    plan.alloc("sorted_indices", numel * index_size)
    plan.alloc("orig_indices", numel * index_size)
    plan.alloc("range", numel * index_size)
    bits = index_size * 8
    plan.scratch("radix_sort", radix_sort_temp(numel, index_size, index_size, 0, bits) if sm90 else None)
    plan.free("range")
    if scale_grad_by_freq:
        plan.alloc("count", numel * index_size)
    backward_kernel(plan, numel, num_weights, stride, index_size, acc_size, sm90, fused, grad_size)
    if scale_grad_by_freq:
        plan.free("count")
    plan.free("orig_indices", "sorted_indices")


def embedding_dense_backward_plan(numel: int, num_weights: int, stride: int, index_size: int, acc_size: int,
                                  scale_grad_by_freq: bool, grad_copy: int, indices_copy: int, sm90: bool,
                                  grad_size: int = 4, multiprocessors: int = 132, deterministic: bool = False) -> List[Event]:
    """embedding_dense_backward_cuda (Embedding.cu:242-333): `grad_copy`/`indices_copy` are the
    bytes of the contiguous copies (0 where the inputs are contiguous)."""
    plan = Plan()
    if indices_copy:
        plan.alloc("indices", indices_copy)
    if grad_copy:
        plan.alloc("grad", grad_copy)
    if numel <= FEATURE_KERNEL_INDICES and not scale_grad_by_freq:
        plan.output()
    else:
        fused = use_fused_kernel(numel, num_weights, stride, False, multiprocessors, deterministic)
        sorted_backward(plan, numel, num_weights, stride, index_size, acc_size, scale_grad_by_freq, sm90, fused, grad_size)
    if grad_copy:
        plan.free("grad")
    if indices_copy:
        plan.free("indices")
    return plan.events


def embedding_bag_dense_backward_plan(numel: int, num_weights: int, stride: int, index_size: int, acc_size: int,
                                      scale_grad_by_freq: bool, mode: int, grad_copy: int, sm90: bool,
                                      grad_size: int = 4) -> List[Event]:
    """_embedding_bag_dense_backward_cuda (EmbeddingBag.cu): mode 0 sum, 1 mean, 2 max."""
    plan = Plan()
    if grad_copy:
        plan.alloc("grad", grad_copy)
    if mode == 2 or numel == 0:
        plan.output()
    else:
        # offset2bag is defined: never the fused kernel.
        sorted_backward(plan, numel, num_weights, stride, index_size, acc_size, scale_grad_by_freq, sm90, False, grad_size)
    if grad_copy:
        plan.free("grad")
    return plan.events


@register
class EmbeddingBagForwardOrder(Rule):
    """_embedding_bag_cuda (EmbeddingBag.cu) allocates ``bag_size``, ``offset2bag``, ``output`` and
    ``max_indices`` in that order, and nothing else where indices and offsets share a dtype
    (``promoteIndicesAndOffsets`` converts one of them otherwise); the meta kernel returns them as
    (output, offset2bag, bag_size, max_indices)."""

    ops = {"_embedding_bag", "_embedding_bag_forward_only"}
    source = "aten/src/ATen/native/cuda/EmbeddingBag.cu (_embedding_bag_cuda)"
    order = 60

    def outputs(self, call: Call, out: Any, made: List[Any]) -> List[Any]:
        if not isinstance(out, (tuple, list)) or len(out) != 4:
            return made
        bound = call.bound()
        indices, offsets = bound.get("indices"), bound.get("offsets")
        if getattr(indices, "dtype", None) != getattr(offsets, "dtype", None):
            self.session.note(
                "{count} EmbeddingBags with indices and offsets of different dtypes are traced without the conversion promoteIndicesAndOffsets makes (rules/embedding.py)"
            )
            return made
        order = [out[2], out[1], out[0], out[3]]
        ids = {id(t) for t in made}
        ordered = [t for t in order if id(t) in ids]
        return ordered if len(ordered) == len(made) else made


@register
class EmbeddingIndicesFlattened(Rule):
    """``embedding`` (aten/src/ATen/native/Embedding.cpp, embedding_symint) looks rows up with
    ``weight.index_select(0, indices.reshape(-1))`` for indices of more than one dimension: indices
    that cannot be viewed flat (a buffer expanded over the batch, as Hugging Face's
    ``token_type_ids``) are copied first, freed once the lookup is made. The meta kernel looks up
    without the copy."""

    ops = {"embedding"}
    source = "aten/src/ATen/native/Embedding.cpp (embedding_symint)"
    order = 60

    def track(self, call: Call, out: Any, made: List[Any]) -> bool:
        torch = self.torch
        indices = call.args[1] if len(call.args) > 1 else None
        if len(made) != 1 or not isinstance(indices, torch.Tensor) or indices.device.type != "meta" or indices.dim() <= 1:
            return False
        try:
            indices.view(-1)
            return False
        except RuntimeError:
            pass
        size = indices.numel() * indices.element_size()
        addr = call.record.alloc(size, call.frame)
        call.record.track(made[0], call.frame)
        call.record.free(addr, size)
        return True


# By release (the first that has them): the plans above, read for 2.11.
PLANS = {(2, 11): (embedding_dense_backward_plan, embedding_bag_dense_backward_plan)}


@register
class EmbeddingBackwardScratch(Rule):
    """The temporaries of CUDA embedding backwards beyond their output (see the module's notes)."""

    # _embedding_bag_backward has a CUDA kernel of its own (EmbeddingBag.cpp's
    # _embedding_bag_backward_symint, registered for CUDA), so the trace sees it rather than the
    # _embedding_bag_dense_backward it calls when not sparse.
    ops = {"embedding_dense_backward", "_embedding_bag_backward", "_embedding_bag_dense_backward"}
    source = "aten/src/ATen/native/cuda/Embedding.cu, EmbeddingBag.cu, EmbeddingBackwardKernel.cu, ATen/cuda/cub.cuh, cub.cu; CCCL 3.0.1 (rules/cub.py)"
    order = 60

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.dense, self.bag = by_release(PLANS, session.release)

    def track(self, call: Call, out: Any, made: List[Any]) -> bool:
        torch, session = self.torch, self.session
        if len(made) != 1:
            return False
        if session.release > (2, 11):
            session.note(
                "{count} embedding backwards under a torch release after 2.11 take 2.11's rules (rules/embedding.py; later releases' sources were not read)"
            )
        bound = call.bound()
        grad: Any = bound.get("grad_output", bound.get("grad"))
        indices: Any = bound.get("indices")
        if not all(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in (grad, indices)):
            return False
        weight = made[0]
        if weight.dim() != 2 or indices.dtype not in (torch.int64, torch.int32):
            return False
        sm90 = (session.major, session.minor) == (9, 0)
        if not sm90:
            session.note(
                "{count} embedding backwards are traced without CUB's temporary storage: its sizes are derived for sm90 (H100, H200) only (rules/embedding.py)"
            )
        numel, num_weights, stride = indices.numel(), weight.size(0), weight.size(1)
        index_size = indices.element_size()
        acc_size = accumulation_type(grad.dtype, torch).itemsize
        grad_copy = 0 if grad.is_contiguous() else grad.numel() * grad.element_size()
        scale = bool(bound.get("scale_grad_by_freq", False))
        if scale:
            session.note(
                "{count} embedding backwards with scale_grad_by_freq are traced without the temporary storage of their two by-key scans (rules/embedding.py)"
            )
        if call.op == "_embedding_bag_backward" and bound.get("sparse"):
            session.note("{count} sparse EmbeddingBag backwards are traced without their temporaries (rules/embedding.py reads the dense path only)")
            return False
        if call.op == "embedding_dense_backward":
            indices_copy = 0 if indices.is_contiguous() else numel * index_size
            events = self.dense(numel, num_weights, stride, index_size, acc_size, scale, grad_copy, indices_copy, sm90,
                                grad.element_size(), session.gpu["multiprocessors"], torch.are_deterministic_algorithms_enabled())
        else:
            events = self.bag(numel, num_weights, stride, index_size, acc_size, scale, int(bound.get("mode", 0)), grad_copy, sm90,
                              grad.element_size())
        record, frame = call.record, call.frame
        live = {}
        for action, value in events:
            if action == "output":
                record.track(weight, frame)
            elif action == "alloc":
                name, size = value
                live[name] = (record.alloc(size, frame), size)
            else:
                record.free(*live.pop(value))
        return True
