"""Device memory CUDA kernels ask the caching allocator for on their own, which a trace on the meta
device does not see because no kernel runs there: the rules of PyTorch 2.11's host code, each
named where it is applied.

- ``gpu_reduce_kernel`` (``ATen/native/cuda/Reduce.cuh``, shipped in torch's wheel under
  ``torch/include``): a reduction whose inputs are split across thread blocks stages partial
  results in a global buffer and counts finished blocks in semaphores, both allocated after the
  output and freed before the operator returns. Whether it splits, and the sizes, follow
  ``setReduceConfig`` on the reduction's TensorIterator (dimensions reordered and coalesced as
  ``TensorIteratorBase::reorder_dimensions`` and ``coalesce_dimensions`` do) and the GPU's SM count
  and threads per SM.
- ``mse_loss``, ``smooth_l1_loss`` and ``huber_loss`` with a reduction (``ATen/native/Loss.cpp``):
  the structured output is first made at the inputs' full shape and only then resized to a scalar
  (its storage keeps the full size for as long as the loss lives), and the unreduced loss is a
  full-size temporary, reduced by ``mean_out``/``sum_out`` and freed when the operator returns.

- ``_softmax_backward_data`` (``ATen/native/cuda/SoftMax.cu``, ``softmax_backward_cuda_out``):
  ``grad * output`` into a temporary the size of the gradient before the kernel runs.
- The autograd engine adds two gradients of one input in place into one it holds alone
  (``torch/csrc/autograd/input_buffer.cpp``, ``accumulate``), which PyTorch does not do while a
  dispatch mode is on (``isTensorSubclassLike``); ``rules/engine.py`` does it as the GPU would.

Checked against every ``gpu_reduce_kernel`` and loss allocation in the H100 recordings of
reports/reference/h100/trace-workloads (torch 2.11).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import Call, Rule, register, relaid

# Reduce.cuh: mnt_wrapper<T>::MAX_NUM_THREADS (512 but for complex<double>), at::cuda::warp_size(),
# min_values_per_thread and max_values_per_thread in setReduceConfig (CUDA, not ROCm).
_MAX_NUM_THREADS = 512
_WARP = 32
_MIN_VALUES_PER_THREAD = 16
_MAX_VALUES_PER_THREAD = 256

# The CUDA programming guide's table of compute capabilities: resident threads per multiprocessor.
_THREADS_PER_SM = {(7, 5): 1024, (8, 6): 1536, (8, 7): 1536, (8, 9): 1536, (12, 0): 1536}


def threads_per_sm(major: int, minor: int) -> int:
    """``maxThreadsPerMultiProcessor`` for a compute capability (2048 unless the table says less)."""
    return _THREADS_PER_SM.get((major, minor), 2048)


def _last_pow2(n: int) -> int:
    n |= n >> 1
    n |= n >> 2
    n |= n >> 4
    n |= n >> 8
    n |= n >> 16
    n |= n >> 32
    return max(1, n - (n >> 1))


def _div_up(a: int, b: int) -> int:
    return (a + b - 1) // b


def _reduction_iterator(
    shape: Sequence[int], in_strides: Sequence[int], reduced: Sequence[int], out_elsize: int
) -> Tuple[List[int], List[int], List[int]]:
    """The reduction's TensorIterator after reordering and coalescing: its shape and the output's
    and input's byte strides (the output contiguous over the kept dimensions, 0 on reduced ones)."""
    ndim = len(shape)
    out_strides = [0] * ndim
    step = out_elsize
    for d in reversed(range(ndim)):
        if d not in reduced:
            out_strides[d] = step
            step *= shape[d]
    operands = [out_strides, list(in_strides)]

    def should_swap(d0: int, d1: int) -> int:
        for index, strides in enumerate(operands):
            s0, s1 = strides[d0], strides[d1]
            if index == 0 and (s0 == 0) != (s1 == 0):
                return 1 if s1 == 0 else -1
            if s0 == 0 or s1 == 0:
                continue
            if s0 < s1:
                return -1
            if s0 > s1:
                return 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    perm = list(reversed(range(ndim)))
    for i in range(1, ndim):
        dim1 = i
        for dim0 in range(i - 1, -1, -1):
            comparison = should_swap(perm[dim0], perm[dim1])
            if comparison > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif comparison < 0:
                break
    sizes = [shape[p] for p in perm]
    strides = [[s[p] for p in perm] for s in operands]
    if ndim > 1:
        prev = 0
        for dim in range(1, ndim):
            mergeable = sizes[prev] == 1 or sizes[dim] == 1 or all(sizes[prev] * s[prev] == s[dim] for s in strides)
            if mergeable:
                if sizes[prev] == 1:
                    for s in strides:
                        s[prev] = s[dim]
                sizes[prev] *= sizes[dim]
            else:
                prev += 1
                if prev != dim:
                    for s in strides:
                        s[prev] = s[dim]
                    sizes[prev] = sizes[dim]
        del sizes[prev + 1 :]
        for s in strides:
            del s[prev + 1 :]
    return sizes, strides[0], strides[1]


def reduce_buffers(
    shape: Sequence[int],
    strides: Sequence[int],
    storage_offset: int,
    elsize: int,
    reduced: Sequence[int],
    out_elsize: int,
    arg_elsize: int,
    input_vec_size: int,
    multiprocessors: int,
    threads_per_multiprocessor: int,
) -> List[int]:
    """The bytes ``gpu_reduce_kernel`` allocates for one reduction, in order (the global buffer,
    then the semaphores), or nothing where it reduces within blocks. ``strides`` are the input's in
    elements; ``arg_elsize`` is the accumulation type's size (``sizeof(arg_t)``)."""
    numel = 1
    for n in shape:
        numel *= n
    if numel == 0:
        return []
    sizes, out_strides, in_strides = _reduction_iterator(shape, [s * elsize for s in strides], reduced, out_elsize)
    ndim = len(sizes)
    num_outputs = 1
    for n, s in zip(sizes, out_strides):
        if s != 0:
            num_outputs *= n
    inputs_per_output = numel // num_outputs
    num_reduce_dims = sum(1 for s in out_strides if s == 0)
    if ndim > 0:
        fastest_reduced = num_reduce_dims == ndim or in_strides[0] < in_strides[num_reduce_dims]
        if fastest_reduced:
            dim0, dim1, fastest_stride = inputs_per_output, num_outputs, in_strides[0]
        else:
            dim0, dim1, fastest_stride = num_outputs, inputs_per_output, in_strides[num_reduce_dims]
    else:
        fastest_reduced, dim0, dim1, fastest_stride = True, 1, 1, elsize
    output_vec_size = 1
    if fastest_stride == elsize:
        if fastest_reduced and dim0 >= 128 and num_reduce_dims == 1:
            dim0 //= input_vec_size
        elif not fastest_reduced:
            vec = 4
            # The input's address in elements: allocations are 512-byte aligned, so its storage
            # offset decides it.
            for n in [storage_offset, sizes[num_reduce_dims]] + [s // elsize for j, s in enumerate(in_strides) if j != num_reduce_dims]:
                while n % vec != 0:
                    vec //= 2
            output_vec_size = vec
            dim0 //= output_vec_size
    max_threads = _MAX_NUM_THREADS // output_vec_size
    dim0_pow2 = _last_pow2(dim0) if dim0 < max_threads else max_threads
    dim1_pow2 = _last_pow2(dim1) if dim1 < max_threads else max_threads
    block_width = min(dim0_pow2, _WARP)
    block_height = min(dim1_pow2, max_threads // block_width)
    block_width = min(dim0_pow2, max_threads // block_height)
    num_threads = block_width * block_height
    step_input = step_output = 1
    block_x_reduce = False
    if ndim == 0 or fastest_reduced:
        block_x_reduce = True
        step_input *= block_width
    else:
        step_output *= block_width
    split_across_warps = _div_up(inputs_per_output, step_input) >= min(block_height * 16, _MAX_VALUES_PER_THREAD)
    if split_across_warps:
        step_input *= block_height
    else:
        step_output *= block_height
    target_grid = multiprocessors * (threads_per_multiprocessor // num_threads)
    grid_x = _div_up(num_outputs // output_vec_size, step_output)
    values_per_thread = _div_up(inputs_per_output, step_input)
    ctas = 1
    if split_across_warps and values_per_thread >= _MAX_VALUES_PER_THREAD and grid_x <= target_grid:
        ctas = max(
            min(_div_up(target_grid, grid_x), _div_up(values_per_thread, _MIN_VALUES_PER_THREAD)),
            _div_up(values_per_thread, _MAX_VALUES_PER_THREAD),
        )
    if ctas <= 1:
        return []
    staging = arg_elsize * num_outputs * ctas
    if not block_x_reduce:
        staging *= block_width * output_vec_size
    return [staging, 4 * grid_x]


def fits_32bit_indexing(shape: Sequence[int], strides: Sequence[int], elsize: int) -> bool:
    """``TensorIteratorBase::can_use_32bit_indexing`` for one operand: past it the kernel splits the
    reduction into pieces (and may keep an accumulation buffer), which the trace does not model."""
    numel = 1
    for n in shape:
        numel *= n
    if numel > 2**31 - 1:
        return False
    # max_offset starts at 1 there.
    offset = sum((n - 1) * abs(s) for n, s in zip(shape, strides)) * elsize
    return offset < 2**31 - 1


def fits_32bit_index_math(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """``at::cuda::detail::canUse32BitIndexMath`` (``ATen/cuda/detail/IndexUtils.cu``), which the
    batch norm kernels ask: counted in elements, not bytes as TensorIterator's check is, and
    refusing at 2^31 - 1 itself."""
    limit = 2**31 - 1
    numel = _numel(shape)
    if numel >= limit:
        return False
    return numel == 0 or sum((n - 1) * s for n, s in zip(shape, strides)) < limit


def reduced_dims(ndim: int, dims: Optional[Sequence[int]]) -> List[int]:
    """The dimensions a ``dim`` argument names (all of them for None or an empty list, as
    ``sum.dim_IntList`` and ``mean.dim`` read it)."""
    if not dims:
        return list(range(ndim))
    return sorted({d % ndim for d in dims}) if ndim else []


def accumulation_type(dtype: Any, torch: Any) -> Any:
    """``at::toAccumulateType(dtype, /*is_cuda=*/true)`` for a floating ``dtype``: float32 for the
    16-bit types, the type itself for float32 and float64 (c10/core/ScalarType's ``acc_type``)."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def accumulation_size(dtype: Any, torch: Any) -> Optional[int]:
    """``sizeof(arg_t)`` of a CUDA sum or mean over ``dtype`` (``accumulation_type``); None
    where the trace does not model it (the integer types)."""
    if dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        return accumulation_type(dtype, torch).itemsize
    if dtype == torch.int64:
        # Integer sums accumulate in int64 (a narrower input is first converted: make_reduction_from_out_ty).
        return 8
    return None


# Reductions to the extreme values (ReduceMinValuesKernel.cu, ReduceMaxValuesKernel.cu:
# min_values_kernel_cuda_impl and min_all_launch_kernel, for every dtype): gpu_reduce_kernel with
# the input's own type as its accumulator and four values per load. min and max count only in their
# whole-tensor overload (one result, one argument), which reduces ``self.contiguous()``
# (ReduceOps.cpp, min and max: a copy of a strided input, made after the result and freed on
# return); over a dimension they return indices too, and with two tensors they are elementwise.
EXTREMA = {"min", "max", "amin", "amax"}
# all and any (ReduceLogicKernel.cu, and_kernel_cuda and or_kernel_cuda): gpu_reduce_kernel over an
# input of any dtype, four values per load, staging one input element per block and output (the H200
# measured so: reports/reference/h200/reductions).
LOGICAL = {"all", "any"}
# Losses whose CUDA kernels keep a full-size output storage and a full-size temporary.
LOSSES = {"mse_loss", "smooth_l1_loss", "huber_loss"}
# Operators whose CUDA kernels allocate scratch of their own that the trace does not size (CUB's
# temporary storage in scans): noted in the snapshot. Sorts' (and argsort's, which ATen runs as a
# sort) are traced by rules/cub.py, embedding backwards' by rules/embedding.py.
UNSIZED_SCRATCH = {
    "topk", "kthvalue", "median", "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp",
    "searchsorted", "bincount", "histc", "randperm",
}


def converted_copy(record: Any, x: Any, dtype: Any, frame: Any) -> Tuple[Any, Tuple[int, int]]:
    """``self.to(dtype)`` as a reduction's make_reduction reads it: a stand-in laid out like `x`
    and the (address, size) of its allocation, for the caller to free when the kernel returns."""
    converted = record.torch.empty_like(x, dtype=dtype)
    size = converted.untyped_storage().nbytes()
    return converted, (record.alloc(size, frame), size)


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for size in shape:
        n *= size
    return n


@register
class KernelScratch(Rule):
    """Scratch the kernels of reductions, softmaxes, layer norm and losses allocate for themselves
    (see the module's notes)."""

    ops = {"sum", "mean", "linalg_vector_norm", "var", "std", "var_mean", "std_mean", "convolution_backward", "_softmax_backward_data", "_safe_softmax", "native_layer_norm", "native_layer_norm_backward"} | LOSSES | EXTREMA | LOGICAL
    source = "ATen/native/cuda/Reduce.cuh, ReduceNormKernel.cu, ReduceMomentKernel.cu, ReduceMinValuesKernel.cu, ReduceMaxValuesKernel.cu, ReduceLogicKernel.cu, SoftMax.cu, SoftMax.cpp, layer_norm_kernel.cu, Loss.cpp, Convolution.cpp"
    order = 60

    def result(self, call: Call, out: Any) -> Any:
        """layer_norm_backward_cuda makes the input's gradient contiguous, like X (empty_like with
        LEGACY_CONTIGUOUS_MEMORY_FORMAT); the meta kernel (torch/_decomp's
        native_layer_norm_backward) lays it out like a strided gradient (Swin's, from the permute
        after its last norm), which the next kernels would then copy."""
        if call.op != "native_layer_norm_backward" or not isinstance(out, tuple) or not out:
            return out
        return (relaid(self.torch, out[0], self.torch.contiguous_format), *out[1:])

    def track(self, call: Call, out: Any, made: List[Any]) -> bool:
        if call.op in ("native_layer_norm", "native_layer_norm_backward") and made:
            # layer_norm_cuda and layer_norm_backward_cuda: X = input.expect_contiguous(), made
            # before their outputs and freed when they return (Whisper's permuted conv output).
            x = call.bound()["input"]
            if not (isinstance(x, self.torch.Tensor) and x.device.type == "meta" and not x.is_contiguous()):
                return False
            size = x.numel() * x.element_size()
            call.state["contiguous_input"] = (call.record.alloc(size, call.frame), size)
            for t in made:
                call.record.track(t, call.frame)
            return True
        if call.op not in LOSSES or not made:
            return False
        full = self._loss_storage(call.bound())
        if full is None:
            return False
        for t in made:
            call.record.track(t, call.frame, full)
        return True

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        if not made:
            return
        torch, op, frame, record = self.torch, call.op, call.frame, call.record
        bound = call.bound()
        first = made[0]
        if op in ("sum", "mean"):
            x = bound["self"]
            if not (isinstance(x, torch.Tensor) and x.device.type == "meta"):
                return
            # make_reduction_from_out_ty (ReduceOps.cpp): the kernel reads self.to(the result's
            # dtype), a copy made after the result and freed on return, except 16-bit floats
            # summed into float32 on CUDA (a bool mask's sum into int64 copies it).
            in_dtype = first.dtype
            if x.dtype in (torch.float16, torch.bfloat16) and first.dtype == torch.float32:
                in_dtype = x.dtype
            copy = None
            if x.dtype != in_dtype and x.numel():
                x, copy = converted_copy(record, x, in_dtype, frame)
            if x.is_floating_point() or (op == "sum" and x.dtype == torch.int64):
                self._reduction(x, bound.get("dim"), first.element_size(), op == "mean", frame)
            if copy is not None:
                record.free(*copy)
        elif op in EXTREMA or op in LOGICAL:
            x = bound["self"]
            whole = op in ("amin", "amax", "all", "any") or (len(made) == 1 and len(call.args) == 1 and not call.kwargs)
            if whole and isinstance(x, torch.Tensor) and x.device.type == "meta" and not x.is_complex() and x.numel():
                dims = bound.get("dim")
                dims = [dims] if isinstance(dims, int) else dims
                copy = None
                if op in ("min", "max") and not x.is_contiguous():
                    copy = (record.alloc(x.numel() * x.element_size(), frame), x.numel() * x.element_size())
                    x = torch.empty(x.shape, dtype=x.dtype, device="meta")
                reduction_scratch(self.session, x, dims, first.element_size(), frame=frame, four_per_load=True, arg_size=x.element_size())
                if copy is not None:
                    record.free(*copy)
        elif op in ("var", "std", "var_mean", "std_mean"):
            # std_var_out and std_var_mean_out (ReduceOps.cpp): the results take the input's real
            # type, so the input is read as it is (no copy), by Welford's reduction.
            x = bound["self"]
            if isinstance(x, torch.Tensor) and x.device.type == "meta" and x.is_floating_point() and x.numel():
                welford_scratch(self.session, x, bound.get("dim"), first.element_size(), frame)
        elif op == "linalg_vector_norm":
            # ReduceNormKernel.cu's norm_launch_kernel: gpu_reduce_kernel with its default four
            # values per load, accumulating 16-bit inputs in float, as sum does.
            x = bound["self"]
            if isinstance(x, torch.Tensor) and x.device.type == "meta" and x.is_floating_point():
                reduction_scratch(self.session, x, bound.get("dim"), first.element_size(), frame=frame, four_per_load=True)
        elif op == "_softmax_backward_data":
            # softmax_backward_cuda_out first multiplies the gradient by the output into a
            # temporary (log_softmax's backward does not).
            grad, output = bound["grad_output"], bound["output"]
            if isinstance(grad, torch.Tensor) and grad.device.type == "meta":
                dtype = torch.promote_types(grad.dtype, output.dtype)
                numel = _numel(torch.broadcast_shapes(grad.shape, output.shape))
                record.scratch([numel * torch.empty((), dtype=dtype, device="meta").element_size()], frame)
        elif op == "_safe_softmax":
            # SoftMax.cpp's _safe_softmax: after the softmax, which of the inputs are -inf, whether
            # a whole row is, and a zero to fill those rows with, freed in reverse (as the H100
            # recorded: reports/reference/h100/sdpa-backends).
            x = bound["self"]
            if isinstance(x, torch.Tensor) and x.device.type == "meta" and x.dim() > 0:
                rows = x.numel() // max(1, x.size(bound["dim"]))
                record.scratch([x.numel(), rows, first.element_size()], frame)
        elif op == "convolution_backward":
            # Convolution.cpp: backends that do not compute the bias gradient (cuDNN) leave it to
            # grad_output.sum over every dimension but the channels, after the other two.
            mask, grad = bound.get("output_mask") or [False] * 3, bound["grad_output"]
            if mask[2] and isinstance(grad, torch.Tensor) and grad.device.type == "meta" and grad.is_floating_point():
                dims = [0] + list(range(2, grad.dim()))
                self._reduction(grad, dims, grad.element_size(), False, frame)
        elif op == "native_layer_norm_backward":
            # layer_norm_backward_cuda passes dY.contiguous() to its kernel after making its
            # outputs: a copy of a strided gradient, freed on return.
            grad = bound["grad_out"]
            if isinstance(grad, torch.Tensor) and grad.device.type == "meta" and not grad.is_contiguous():
                record.scratch([grad.numel() * grad.element_size()], frame)
        if op in ("native_layer_norm", "native_layer_norm_backward") and "contiguous_input" in call.state:
            record.free(*call.state.pop("contiguous_input"))
        elif op in LOSSES:
            full = self._loss_storage(bound)
            if full is None:
                return
            shape = list(torch.broadcast_shapes(bound["self"].shape, bound["target"].shape))
            # The unreduced loss, a full-size temporary reduced by mean_out or sum_out.
            temp = record.alloc(full, frame)
            unreduced = torch.empty(shape, dtype=first.dtype, device="meta")
            self._reduction(unreduced, None, first.element_size(), bound["reduction"] == 1, frame)
            record.free(temp, full)

    def _loss_storage(self, bound: Dict[str, Any]) -> Optional[int]:
        """The bytes a reduced loss's output holds on the GPU: made at the inputs' full shape and
        then resized to a scalar, its storage keeps the full size (Loss.cpp's structured meta)."""
        if bound.get("reduction", 1) == 0:
            return None
        x, target = bound["self"], bound["target"]
        return _numel(self.torch.broadcast_shapes(x.shape, target.shape)) * x.element_size()

    def _reduction(self, x: Any, dims: Any, out_elsize: int, four_per_load: bool, frame: Any) -> None:
        reduction_scratch(self.session, x, dims, out_elsize, four_per_load, frame)


def reduction_scratch(session: Any, x: Any, dims: Any, out_elsize: int, four_per_load: bool, frame: Any, arg_size: Optional[int] = None, per_load: Optional[int] = None) -> None:
    """The global buffer and semaphores of `gpu_reduce_kernel` for a CUDA reduction of `x` (a sum,
    a mean, a norm, an extremum or a logical one), allocated and freed in the trace.
    `four_per_load`: the kernel loads four values at a time whatever the dtype (MeanOps, the norms,
    the extrema); a sum loads eight 16-bit ones. `arg_size`: the accumulator's bytes, where it is
    not a sum's (``accumulation_size``). `per_load`: the values loaded at a time where the kernel
    sets its own (``vt0``), over `four_per_load`."""
    torch = session.torch
    if arg_size is None:
        arg_size = accumulation_size(x.dtype, torch)
    if arg_size is None:
        return
    shape, strides, elsize = list(x.shape), list(x.stride()), x.element_size()
    if not fits_32bit_indexing(shape, strides, elsize):
        session.note(
            "{count} reductions over more than 2^31 elements are in the trace without the buffers their split kernels allocate: peak reserved may be higher by up to their size"
        )
        return
    # sum_functor loads 16-bit inputs 8 at a time, other types and MeanOps 4 (vt0 = 4).
    vector = per_load or (8 if elsize == 2 and not four_per_load else 4)
    sizes = reduce_buffers(
        shape, strides, x.storage_offset(), elsize, reduced_dims(x.dim(), dims), out_elsize, arg_size, vector,
        session.gpu["multiprocessors"], session.threads_per_sm,
    )
    session.record.scratch(sizes, frame)


# std_var_kernel_impl (ReduceMomentKernel.cu): gpu_reduce_kernel loading two values at a time
# (vt0 = 2, to spare registers) with WelfordData<acc, int32_t> (mean, m2, n, nf) as its accumulator.
WELFORD_VALUES_PER_LOAD = 2


def welford_scratch(session: Any, x: Any, dims: Any, out_elsize: int, frame: Any) -> None:
    """The buffers of a variance's (or a standard deviation's, with or without the mean) CUDA
    reduction of `x`, whose accumulator is sizeof(WelfordData<acc, int32_t>): three values of the
    accumulation type and an int32, aligned to that type."""
    acc = accumulation_type(x.dtype, session.torch).itemsize
    reduction_scratch(session, x, dims, out_elsize, four_per_load=True, frame=frame, arg_size=3 * acc + max(4, acc), per_load=WELFORD_VALUES_PER_LOAD)


@register
class UnsizedScratch(Rule):
    ops = UNSIZED_SCRATCH
    source = "CUB's temporary storage (cub::DeviceRadixSort, DeviceScan, ...), not derived yet"
    order = 60

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        if made:
            self.session.note(
                "{count} sorts, scans, top-k and searches not sized by rules/cub.py or rules/embedding.py (rules/kernels.py's UNSIZED_SCRATCH) are traced without the scratch their CUDA kernels allocate for themselves (CUB's temporary storage, not derived yet): peak reserved may be higher by up to its size"
            )
