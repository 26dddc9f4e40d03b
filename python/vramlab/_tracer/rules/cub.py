"""CUB's temporary storage, and PyTorch's own temporaries around its CUB calls, for the sorts of
PyTorch 2.11 (torch 2.11+cu130, built against CUDA 13.0's CCCL 3.0.1: the ``THRUST_300001``
namespace in the H100 recordings' frames).

Every CUB call PyTorch makes goes through ``CUB_WRAPPER`` (aten/src/ATen/cuda/cub.cuh, lines 43-49
in 2.11's installed header): CUB is asked for ``temp_storage_bytes``, that many bytes are allocated
from the caching allocator, the call runs, and the block is freed when the wrapper's scope ends.
The size is CUB's own arithmetic, reproduced here from CCCL v3.0.1's sources for the sm90 policies:

- ``AliasTemporaries`` (cub/util_temporary_storage.cuh:74-116): each sub-allocation rounded up to
  256 bytes, plus 255.
- ``DispatchRadixSort::Invoke`` (cub/device/dispatch/dispatch_radix_sort.cuh:965-1004): 1 byte for
  an empty sort, a copy (begin_bit == end_bit) or one tile (``InvokeSingleTile``, line 207), else
  onesweep on sm90 (``Policy900`` sets ``ONESWEEP``), whose ``InvokeOnesweep`` (lines 459-494)
  asks for bins ``portions x passes x 256 x sizeof(OffsetT)``, lookback ``max_blocks x 256 x 4``,
  the extra key and value buffers where not double-buffered and passes > 1, and counters
  ``portions x passes x 4``.
- The policies (cub/device/dispatch/tuning/tuning_radix_sort.cuh: ``sm90_small_key_tuning``
  lines 54-92, ``OnesweepSmallKeyTunedPolicy`` lines 866-909, ``Policy900`` line 988), scaled by
  ``RegBoundScaling`` (cub/util_arch.cuh:142-149) over the larger of key and value, with
  ``max_smem_per_block`` = 48 KiB.
- ``OffsetT``: ``choose_offset_t<int64_t>`` = unsigned long long (cub/detail/choose_offset.cuh),
  since PyTorch passes ``n`` as int64_t (cub-RadixSortPairs.cuh, cub.cu).
- ``DispatchSegmentedRadixSort::InvokePasses`` (dispatch_radix_sort.cuh:1336-1364): the extra key
  and value buffers.

Which temporaries PyTorch allocates around them (aten/src/ATen/native/cuda/Sort.cpp
``sort_cuda_kernel``, SortStable.cu ``do_launch_stable_sort_kernel``; 2.11's Sort.h in the
installed headers: the in-place sort for a sorted dimension of at most 4096):

- nsort <= 4096: ``sortKeyValueInplace`` in place, after ``fillSliceWithIndex`` has copied an
  ``arange`` of the sorted dimension (nsort x 8, freed at once) into the indices.
- one segment, or nsort >= 1,000,000 (``segmented_sort_large_segments``): the initial indices
  (nsort x 8, kept), then per segment a CUB pair sort into the outputs (temp only).
- 2 to 127 segments (``segmented_sort_pairs_by_full_sort``): two int2 buffers of numel x 8; a pair
  sort of (key, int2) with no key output (cub-RadixSortPairs.cuh allocates ``n x sizeof(key)``),
  then a keys-only sort of the int64 buffer on ``ceil(log2(nsegments))`` bits; the buffers freed
  in reverse.
- 128 segments or more (``segmented_sort_pairs``): the reverse indices (numel x 8) and
  ``DeviceSegmentedRadixSort`` into the outputs.

The backward of indexing (IndexPutAccumulate): ``_index_put_impl_(zeros, indices, grad,
accumulate, unsafe)`` in place, through ``index_put_with_sort_kernel`` (Indexing.cu): self's
contiguous copy if needed; per index tensor ``remainder`` and its product with the stride (the
remainder freed; a CPU index computed there and copied over), each after the first added into the
first and freed; the value's contiguous copy; src's copy if the indices were transposed to the
front; sorted_indices, orig_indices, arange and a CUB pair sort on
``get_num_bits((numel - 1) / sliceSize)`` bits; freed in reverse. The program's own index_put_
with accumulate (range checks on) is noted, not sized. Checked against all 51 index_put_ calls of
the H100 recordings (tv_swin_t_bf16, tv_swin_t_bf16_batch16: 24 each; dlrm_embeddingbag_adagrad:
3), allocation by allocation.

Checked against every radix-sort allocation of the H100 recordings
(reports/reference/h100/trace-workloads; the table is in the commit and the report).

torch 2.15: not read (its sources were not available here); traces under later releases take
these rules and the snapshot says so.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

from ..compat import by_release
from ..where import user_frame
from . import PASS, Call, Rule, register

# CCCL's constants (see the module's notes).
ALIGN = 256
MAX_SMEM_PER_BLOCK = 48 * 1024
ONESWEEP_RADIX_BITS = 8
RADIX_DIGITS = 1 << ONESWEEP_RADIX_BITS
# PyTorch passes n as int64_t: CUB's offset is unsigned long long.
OFFSET_SIZE = 8

# sm90_small_key_tuning<KeySize, ValueSize, OffsetSize>: (threads, items); anything else 384 x 23.
SM90_SMALL_KEY: Dict[Tuple[int, int, int], Tuple[int, int]] = {
    (1, 0, 4): (512, 19), (1, 0, 8): (512, 19), (2, 0, 4): (512, 19), (2, 0, 8): (512, 19),
    (1, 1, 4): (512, 15), (1, 1, 8): (448, 16), (1, 2, 4): (512, 17), (1, 2, 8): (512, 14),
    (1, 4, 4): (512, 17), (1, 4, 8): (512, 14), (1, 8, 4): (384, 23), (1, 8, 8): (384, 18),
    (1, 16, 4): (512, 22), (1, 16, 8): (512, 22),
    (2, 1, 4): (384, 14), (2, 1, 8): (384, 16), (2, 2, 4): (384, 15), (2, 2, 8): (448, 16),
    (2, 4, 4): (512, 17), (2, 4, 8): (512, 12), (2, 8, 4): (384, 23), (2, 8, 8): (512, 23),
    (2, 16, 4): (512, 21), (2, 16, 8): (576, 22),
}
SM90_SMALL_KEY_DEFAULT = (384, 23)

# Sort.h: the in-place sort handles a sorted dimension of at most this many elements.
SMALL_SORT = 4096
# SortStable.cu: a single sort per segment from this length on, or for one segment.
LARGE_SEGMENT = 1_000_000
# ... the full-sort trick below this many segments, DeviceSegmentedRadixSort from it on.
FULL_SORT_SEGMENTS = 128
INT_MAX = 2**31 - 1


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def alias_temporaries(sizes: List[int]) -> int:
    """cub::detail::AliasTemporaries: the blob holding `sizes`, each aligned to 256 bytes."""
    return sum(ceil_div(size, ALIGN) * ALIGN for size in sizes) + ALIGN - 1


def reg_bound_scaling(threads: int, items: int, size: int) -> Tuple[int, int]:
    """cub::detail::RegBoundScaling: (block threads, items per thread) for a type of `size` bytes."""
    per_thread = max(1, items * 4 // max(4, size))
    block = min(threads, ceil_div(MAX_SMEM_PER_BLOCK // (size * per_thread), 32) * 32)
    return block, per_thread


def onesweep_tile(key_size: int, value_size: int, float_keys: bool, offset_size: int = OFFSET_SIZE) -> int:
    """Items per onesweep tile under Policy900 (value_size 0: keys only)."""
    keys_only = value_size == 0
    dominant = max(key_size, value_size if not keys_only else 1)
    offset_64 = 1 if offset_size == 8 else 0
    if key_size < 4:
        threads, items = SM90_SMALL_KEY.get((key_size, value_size, offset_size), SM90_SMALL_KEY_DEFAULT)
    elif key_size == 4:
        threads = 384
        if keys_only:
            items = 20 - offset_64 - (1 if float_keys else 0)
        elif value_size < 8:
            items = 17 if offset_64 else 23
        else:
            items = 29 if offset_64 else 30
    else:
        threads = 384
        # sizeof(ValueT) < 8 ? 30 : 24, where keys only have ValueT = NullType (1 byte).
        items = 30 if (keys_only or value_size < 8) else 24
    block, per_thread = reg_bound_scaling(threads, items, dominant)
    return block * per_thread


def single_tile_items(key_size: int, value_size: int) -> int:
    """The largest sort one tile takes: SingleTilePolicy, 256 threads x 19 items, RegBoundScaling."""
    dominant = max(key_size, value_size)
    block, per_thread = reg_bound_scaling(256, 19, dominant)
    return block * per_thread


def radix_sort_temp(n: int, key_size: int, value_size: int, begin_bit: int = 0, end_bit: Optional[int] = None,
                    float_keys: bool = False, overwrite: bool = False) -> int:
    """temp_storage_bytes of cub::DeviceRadixSort::SortPairs (SortKeys where value_size is 0) on
    sm90 for `n` items, as CCCL 3.0.1 computes it."""
    if end_bit is None:
        end_bit = key_size * 8
    if n == 0 or begin_bit == end_bit:
        return 1
    if n <= single_tile_items(key_size, value_size):
        return 1
    tile = onesweep_tile(key_size, value_size, float_keys)
    portion = ((1 << 28) - 1) // tile * tile
    passes = ceil_div(end_bit - begin_bit, ONESWEEP_RADIX_BITS)
    portions = ceil_div(n, portion)
    max_blocks = ceil_div(min(n, portion), tile)
    extra = not overwrite and passes > 1
    return alias_temporaries([
        portions * passes * RADIX_DIGITS * OFFSET_SIZE,
        max_blocks * RADIX_DIGITS * 4,
        n * key_size if extra else 0,
        n * value_size if extra else 0,
        portions * passes * 4,
    ])


def segmented_radix_sort_temp(n: int, key_size: int, value_size: int) -> int:
    """temp_storage_bytes of cub::DeviceSegmentedRadixSort::SortPairs (not double-buffered)."""
    size = alias_temporaries([n * key_size, n * value_size])
    return size if size else 1


# ScanTileState (cub/agent/single_pass_scan_operators.cuh): one state per tile plus a warp's worth
# of padding (num_tiles_to_num_tile_states, lines 544-547); for a primitive T each state is one
# TxnWord (ulonglong2 for 8 bytes, uint2 for 4, unsigned int below: lines 608-614, 632-633), and
# tile_state_allocation_size (lines 549-566) lays them out with AliasTemporaries, whose result the
# dispatch aligns once more (dispatch_scan.cuh:289-301, dispatch_unique_by_key.cuh:305-319).
WARP_THREADS = 32


def tile_state_bytes(num_tiles: int, value_size: int) -> int:
    """ScanTileState<T, true>::AllocationSize for a primitive T of `value_size` bytes."""
    txn_word = 16 if value_size == 8 else 8 if value_size == 4 else 4
    return alias_temporaries([(WARP_THREADS + num_tiles) * txn_word, 0, 0])


def mem_bound_scaling(threads: int, items: int, size: int) -> Tuple[int, int]:
    """cub::detail::MemBoundScaling (cub/util_arch.cuh:151-159): (block threads, items per thread)."""
    per_thread = max(1, min(items * 4 // size, items * 2))
    block = min(threads, ceil_div(MAX_SMEM_PER_BLOCK // (size * per_thread), 32) * 32)
    return block, per_thread


# PyTorch's exclusive_scan splits at this many items (ATen/cuda/cub.cuh:201, impl::max_cub_size).
MAX_CUB_SIZE = 2**30


def exclusive_sum_temp(n: int, accum_size: int) -> int:
    """temp_storage_bytes of the cub::DeviceScan::ExclusiveScan that at::cuda::cub::exclusive_sum
    runs (cub.cu: exclusive_sum_in_common_type passes its own SumOp, which CUB does not count as a
    primitive operator, so sm90 takes DefaultPolicy: AgentScanPolicy<128, 15> under
    MemBoundScaling, tuning_scan.cuh:477-481, 514-517); one pass of at most 2**30 items."""
    n = min(n, MAX_CUB_SIZE)
    block, per_thread = mem_bound_scaling(128, 15, accum_size)
    num_tiles = ceil_div(n, block * per_thread)
    return alias_temporaries([tile_state_bytes(num_tiles, accum_size)])


# sm90_tuning of DeviceSelect::UniqueByKey (tuning_unique_by_key.cuh:442-449 and 492-500, picked by
# policy_hub::Policy900, line 847), (key bytes, value bytes):
# (threads, items); PyTorch's values are a counting_iterator<int>.
SM90_UNIQUE_BY_KEY: Dict[Tuple[int, int], Tuple[int, int]] = {(8, 4): (640, 7), (4, 4): (512, 14)}


def unique_by_key_temp(n: int, key_size: int, value_size: int = 4) -> Optional[int]:
    """temp_storage_bytes of cub::DeviceSelect::UniqueByKey on sm90 (DispatchUniqueByKey::Invoke,
    dispatch_unique_by_key.cuh:291-319): the tile states of its unsigned long long offsets (PyTorch
    passes n as int64_t: choose_offset_t) and no virtual shared memory (the agent fits 48 KiB);
    None for key and value sizes whose tuning is not read here."""
    tuning = SM90_UNIQUE_BY_KEY.get((key_size, value_size))
    if tuning is None:
        return None
    threads, items = tuning
    num_tiles = ceil_div(n, threads * items)
    return alias_temporaries([tile_state_bytes(num_tiles, OFFSET_SIZE), 0])


def key_bits(dtype: Any, torch: Any) -> Tuple[int, bool]:
    """(bytes, is float32) of a sort key as CUB sees it (c10::Half as __half, and so on)."""
    size = torch.empty((), dtype=dtype, device="meta").element_size()
    return size, dtype == torch.float32


class AllocationPlan:
    """A kernel's requests to the caching allocator, in order: ("alloc", size) and ("free", index
    of the alloc)."""

    def __init__(self) -> None:
        self.events: List[Tuple[str, int]] = []
        self.count = 0

    def alloc(self, size: int) -> int:
        self.events.append(("alloc", size))
        self.count += 1
        return self.count - 1

    def free(self, index: int) -> None:
        self.events.append(("free", index))


def stable_sort_allocations(numel: int, nsort: int, key_size: int, float_keys: bool) -> List[Tuple[str, int]]:
    """What launch_stable_sort_kernel asks the caching allocator for, in order: ("alloc", size),
    ("free", index of the alloc), for a contiguous input sorted on its last dimension into
    int64 indices."""
    plan = AllocationPlan()
    events, alloc, free = plan.events, plan.alloc, plan.free

    if numel == 0:
        return events
    numel_or_intmax = min(numel, INT_MAX)
    nbatch = (numel_or_intmax // nsort) * nsort
    remaining = numel
    while remaining > 0:
        n = min(remaining, nbatch)
        nsegments = n // nsort
        if nsegments == 1 or nsort >= LARGE_SEGMENT:
            indices = alloc(nsort * 8)
            for _ in range(nsegments):
                free(alloc(radix_sort_temp(nsort, key_size, 8, float_keys=float_keys)))
            free(indices)
        elif nsegments < FULL_SORT_SEGMENTS:
            first = alloc(n * 8)
            second = alloc(n * 8)
            keys_out = alloc(n * key_size)
            free(alloc(radix_sort_temp(n, key_size, 8, float_keys=float_keys)))
            free(keys_out)
            segment_bits = max(1, math.ceil(math.log2(nsegments)))
            free(alloc(radix_sort_temp(n, 8, 0, 0, segment_bits)))
            free(second)
            free(first)
        else:
            reverse = alloc(n * 8)
            free(alloc(segmented_radix_sort_temp(n, key_size, 8)))
            free(reverse)
        remaining -= n
    return events


def non_overlapping_and_dense(sizes: List[int], strides: List[int]) -> bool:
    """c10's compute_non_overlapping_and_dense: the dimensions ordered by stride tile the storage
    with no gap or overlap."""
    expected = 1
    for size, stride in sorted(zip(sizes, strides), key=lambda d: (d[1], d[0])):
        if size == 1:
            continue
        if stride != expected:
            return False
        expected *= size
    return True


# By release (the first that has them): the rules above, read for 2.11.
STABLE_SORT = {(2, 11): stable_sort_allocations}


@register
class CubSortScratch(Rule):
    """The temporaries of a CUDA sort beyond its outputs (Sort.cpp, SortStable.cu, CUB)."""

    ops = {"sort"}
    source = "aten/src/ATen/native/cuda/Sort.cpp, SortStable.cu, ATen/cuda/cub.cuh; CCCL 3.0.1 cub/device/dispatch/dispatch_radix_sort.cuh, tuning_radix_sort.cuh"
    order = 60

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.plan = by_release(STABLE_SORT, session.release)

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        if len(made) < 2:
            return
        torch, session, record, frame = self.torch, self.session, call.record, call.frame
        if session.release > (2, 11):
            session.note(
                "{count} sorts under a torch release after 2.11 take 2.11's CUB scratch rules (rules/cub.py; later releases' sources were not read)"
            )
        bound = call.bound()
        x = bound["self"]
        if not (isinstance(x, torch.Tensor) and x.device.type == "meta") or x.numel() == 0:
            return
        dim = bound.get("dim", -1)
        dim = dim + x.dim() if dim < 0 else dim
        if x.dim() > 0 and x.size(dim) <= SMALL_SORT:
            # fillSliceWithIndex: an arange of the sorted dimension, copied into the indices.
            record.scratch([x.size(dim) * made[1].element_size()], frame)
            return
        if (session.major, session.minor) != (9, 0):
            session.note(
                "{count} sorts are traced without CUB's temporary storage: its sizes are derived for sm90 (H100, H200) only (rules/cub.py)"
            )
            return
        if x.dim() == 0:
            return
        nsort = x.size(dim)
        values, indices = made[0], made[1]
        simple = (
            non_overlapping_and_dense(list(x.shape), list(x.stride())) and x.stride(dim) == 1
            and values.stride() == x.stride() and indices.stride() == x.stride()
            and indices.dtype == torch.int64
        )
        if not simple:
            session.note(
                "{count} sorts of inputs not dense along the sorted dimension are traced without their temporaries (Sort.cpp's copies and CUB's storage; rules/cub.py)"
            )
            return
        key_size, float_keys = key_bits(x.dtype, torch)
        addrs: List[Tuple[int, int]] = []
        for action, value in self.plan(x.numel(), nsort, key_size, float_keys):
            if action == "alloc":
                addrs.append((record.alloc(value, frame), value))
            else:
                record.free(*addrs[value])


# index_put_ with accumulate=True on CUDA (aten/src/ATen/native/cuda/Indexing.cu, 2.11):
# _index_put_impl_ sends it to index_put_with_sort_kernel, which linearises the indices
# (makeLinearIndex, computeLinearIndex), sorts them with CUB and accumulates.


def get_num_bits(max_key: int) -> int:
    """at::cuda::cub::get_num_bits (ATen/cuda/cub.h:14-21)."""
    bits = 1
    while max_key > 1:
        max_key >>= 1
        bits += 1
    return bits


def index_put_with_sort_allocations(self_copy: int, indices: List[Tuple[bool, int]], value_copy: int, src_copy: int,
                                    num_indices: int, slice_size: int, nbits: int) -> List[Tuple[str, int]]:
    """What index_put_with_sort_kernel (Indexing.cu) asks the caching allocator for without its
    range checks (unsafe, as the backward of indexing calls it), in order: ("alloc", size),
    ("free", index of the alloc). `self_copy`, `value_copy`, `src_copy`: the bytes of
    self.contiguous(), the expanded value's .contiguous() and the transposed src's .contiguous()
    (0 where no copy is made); `indices`: (on the GPU, elements) of each index tensor after
    broadcasting, in dimension order."""
    plan = AllocationPlan()
    events, alloc, free = plan.events, plan.alloc, plan.free

    own_self = alloc(self_copy) if self_copy else None
    # computeLinearIndex: (index.remainder(size) * stride).to(device) for each index; on the GPU
    # the remainder is freed once the product is made, a CPU index is computed on the CPU and
    # copied over; every index after the first is added into the first and freed.
    linear = None
    for on_gpu, n in indices:
        if on_gpu:
            remainder = alloc(n * 8)
            index = alloc(n * 8)
            free(remainder)
        else:
            index = alloc(n * 8)
        if linear is None:
            linear = index
        else:
            free(index)
    value = alloc(value_copy) if value_copy else None
    if num_indices > 0 and slice_size > 0:
        src = alloc(src_copy) if src_copy else None
        sorted_indices = alloc(num_indices * 8)
        orig_indices = alloc(num_indices * 8)
        arange = alloc(num_indices * 8)
        free(alloc(radix_sort_temp(num_indices, 8, 8, 0, nbits)))
        free(arange)
        free(orig_indices)
        free(sorted_indices)
        if src is not None:
            free(src)
    if value is not None:
        free(value)
    if linear is not None:
        free(linear)
    if own_self is not None:
        free(own_self)
    return events


INDEX_PUT_WITH_SORT = {(2, 11): index_put_with_sort_allocations}


@register
class IndexPutAccumulate(Rule):
    """The backward of indexing: IndexBackward0 (index_backward, FunctionsManual.cpp) runs
    ``_index_put_impl_(zeros, indices, grad, accumulate=true, unsafe=true)`` in place on the GPU,
    but the functional ``index_put`` (a clone first) whenever a tensor is subclass-like, which a
    dispatch mode makes every tensor: here the trace puts in place, as the GPU does, with
    index_put_with_sort_kernel's temporaries (Indexing.cu)."""

    ops = {"index_put", "index_put_", "_index_put_impl_"}
    source = "torch/csrc/autograd/FunctionsManual.cpp (index_backward), aten/src/ATen/native/cuda/Indexing.cu (index_put_with_sort_kernel)"
    order = 40

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.plan = by_release(INDEX_PUT_WITH_SORT, session.release)

    def before(self, call: Call) -> Any:
        torch, session = self.torch, self.session
        bound = call.bound()
        x, indices, values = bound["self"], list(bound["indices"]), bound["values"]
        if not bound.get("accumulate") or not isinstance(x, torch.Tensor) or x.device.type != "meta":
            return PASS
        node = torch._C._current_autograd_node()
        if call.op != "index_put" or node is None or torch.is_grad_enabled() or not type(node).__name__.startswith("IndexBackward"):
            # The program's own: its range checks (wrapIndexOnce's reductions and asserts) are
            # not read for 2.11 and no recording has one.
            session.note(
                "{count} index_put_ with accumulate called by the program are traced without their temporaries (the index sort's and the range checks'; rules/cub.py derives the backward of indexing only)"
            )
            return PASS
        plan = self._linearise(x, indices, values)
        if plan is None:
            return PASS
        if (session.major, session.minor) != (9, 0):
            session.note(
                "{count} index_put_ with accumulate are traced without CUB's temporary storage: its sizes are derived for sm90 (H100, H200) only (rules/cub.py)"
            )
        torch.ops.aten.index_put_.default(x, indices, values, True)
        frame, record = user_frame(), session.record
        addrs: List[Tuple[int, int]] = []
        for action, value in self.plan(*plan):
            if action == "alloc":
                addrs.append((record.alloc(value, frame), value))
            else:
                record.free(*addrs[value])
        return x

    def _linearise(self, x: Any, indices: List[Any], values: Any) -> Optional[Tuple[Any, ...]]:
        """makeLinearIndex and the shapes index_put_with_sort_kernel derives from it, for int64
        index tensors (None where the trace does not follow: masks, int32 indices)."""
        torch = self.torch
        defined = [i for i in indices if i is not None]
        if not defined or any(not isinstance(i, torch.Tensor) or i.dtype != torch.int64 for i in defined):
            self.session.note(
                "{count} index_put_ with accumulate and masks or int32 indices are traced without their temporaries (rules/cub.py)"
            )
            return None
        shape = list(torch.broadcast_shapes(*(tuple(i.shape) for i in defined)))
        n = 1
        for size in shape:
            n *= size
        padded = indices + [None] * (x.dim() - len(indices))
        where = [d for d, i in enumerate(padded) if i is not None]
        adjacent = where == list(range(where[0], where[-1] + 1))
        dims = where + [d for d in range(x.dim()) if d not in where] if not adjacent else list(range(x.dim()))
        src_sizes = [x.size(d) for d in dims]
        order = [padded[d] for d in dims]
        first = next(k for k, i in enumerate(order) if i is not None)
        count = len(where)
        slice_size = 1
        for size in src_sizes[first + count:]:
            slice_size *= size
        element = x.element_size()
        self_copy = 0 if x.is_contiguous() else x.numel() * element
        vals_shape = src_sizes[:first] + shape + src_sizes[first + count:]
        expanded = values.expand(vals_shape)
        value_copy = 0 if expanded.is_contiguous() else expanded.numel() * values.element_size()
        src_copy = x.numel() * element if not adjacent else 0
        largest = max(x.numel() - 1, 0)
        nbits = get_num_bits(largest // slice_size) if slice_size else 1
        gpu = [(i.device.type == "meta", n) for i in order if i is not None]
        return self_copy, gpu, value_copy, src_copy, n, slice_size, nbits
