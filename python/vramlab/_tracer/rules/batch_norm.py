"""Batch norm on PyTorch's own CUDA kernels (not cuDNN's), which PyTorch 2.11 takes for bfloat16,
for inputs of fewer than three dimensions (``nn.BatchNorm1d`` on ``[N, C]``), for batches past
cuDNN's limits and where cuDNN is off (``_select_batch_norm_backend``,
``aten/src/ATen/native/Normalization.cpp``). Where the input is laid out with the channels
innermost (channels-last, or a contiguous ``[N, C]``: ``batch_norm_use_channels_last_kernels``),
its kernels allocate beyond their outputs (``aten/src/ATen/native/cuda/Normalization.cuh``, shipped
in the wheel's headers; ``Normalization.cu``):

- training forward, statistics (``batch_norm_stats_channels_last_cuda_template``): where the grid
  splits the reduction (``flexible_launch_configs`` with ``coop_flag``, ``grid.y > 1``) a staging
  buffer of ``4 * C * grid.y`` accumulation-type values and ``grid.x`` int semaphores, after the
  outputs, freed before the kernel returns;
- backward, unless the fused kernel runs (it does for other layouts when the input's gradient is
  wanted): ``batch_norm_backward_reduce`` first (the channels-last template: ``sum_dy``,
  ``sum_dy_xmu``, then the weight's and bias's gradients, then a staging buffer of
  ``2 * C * grid.y`` and the semaphores; the general one: each where asked for), then the input's
  gradient, then ``sum_dy_xmu`` and ``sum_dy`` freed. The meta kernel makes the three gradients
  alone, input's first.

Where cuDNN runs it, ``_batch_norm_impl_index`` first copies the input to its suggested memory format
(``input.contiguous(input.suggest_memory_format())``: a transposed ``[N, L, C]`` sequence handed to
``nn.BatchNorm1d``, say), and ``cudnn_batch_norm`` keeps that copy for its backward;
``cudnn_batch_norm_backward`` copies the output's gradient likewise, freed when it returns
(``cudnn/BatchNorm.cpp``). Seen on ISSUE35T's PatchTST, whose batch norms take such sequences.

Seen on ISSUE35E: BatchNorm1d's backward in a triplet-loss embedder (each step's order and two
8 KiB sums), and the staging buffers of a channels-last ResNet-26d under bfloat16 autocast.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from . import PASS, Call, FunctionRule, Rule, register, register_function
from .kernels import converted_copy, fits_32bit_index_math, welford_scratch

# Normalization.cuh (CUDA, not ROCm): MAX_BLOCK_SIZE, ELEMENTS_PER_THREAD, OPTIMAL_TILE_W, MAX_H_BLOCK.
MAX_BLOCK_SIZE = 512
ELEMENTS_PER_THREAD = 16
OPTIMAL_TILE_W = 32
MAX_H_BLOCK = 128
# cuDNN's persistent batch norm (cudnn/BatchNorm.cpp, getCudnnBatchNormMode: training on a
# channels-last input) asks for workspaces of its own choosing, one in the forward and one in the
# backward, each freed within its call; measured on the H200 (reports/reference/h200/cudnn-batch-norm)
# about one bit per element of the input, and not derived.
CUDNN_PERSISTENT_NOTE = (
    "{count} batch norms trained on channels-last inputs run cuDNN's persistent kernels, whose forward and backward "
    "workspaces (freed within each call; on the H200 about one bit per element of the input, float32 rows 1/8 byte per "
    "element plus about 1 KiB) are not traced: peak allocated and reserved may be higher by up to the largest of them"
)
# _select_batch_norm_backend's limits on the batch for cuDNN (training, evaluation).
CUDNN_MAX_BATCH = (880801, 65535)


def _last_pow2(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def flexible_launch_configs(reduction: int, stride: int, coop: bool) -> Tuple[int, int]:
    """Normalization.cuh's flexible_launch_configs: the grid's (x, y)."""
    block_x = min(_last_pow2(stride), OPTIMAL_TILE_W)
    block_y = min(_last_pow2(_ceil_div(reduction, ELEMENTS_PER_THREAD)), MAX_BLOCK_SIZE // block_x)
    if block_x * block_y != MAX_BLOCK_SIZE:
        block_x = min(_last_pow2(stride), MAX_BLOCK_SIZE // block_y)
    grid_x = _ceil_div(stride, block_x)
    grid_y = min(_ceil_div(reduction, block_y * ELEMENTS_PER_THREAD), MAX_H_BLOCK)
    if coop and grid_y < 8:
        grid_y = 1
    return grid_x, grid_y


class BatchNormRules:
    """What the native kernels decide from the tensors' layouts and types."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch

    def native(self, x: Any, weight: Optional[Any], has_bias: bool, running: bool, training: bool) -> bool:
        """Not cuDNN, by _select_batch_norm_backend (2.11)."""
        torch = self.torch
        half, bf16 = torch.float16, torch.bfloat16
        cudnn = (
            x.dtype != bf16
            and weight is not None
            and weight.dtype != bf16
            and (x.dtype != half or weight.dtype == torch.float32)
            and has_bias
            and (running or training)
            and x.dim() >= 3
            and x.size(0) <= CUDNN_MAX_BATCH[0 if training else 1]
            and bool(torch.backends.cudnn.enabled)
            and x.numel() < 2**31 - 1
        )
        return not cudnn

    def suggested_format(self, t: Any) -> Any:
        """Tensor::suggest_memory_format: channels-last where the strides are ordered so
        (c10's is_channels_last_strides_2d/3d, ambiguous cases contiguous), else contiguous."""
        torch = self.torch
        orders = {4: ((1, 3, 2, 0), torch.channels_last), 5: ((1, 4, 3, 2, 0), torch.channels_last_3d)}
        if t.dim() not in orders or t.stride(1) == 0:
            return torch.contiguous_format
        order, channels_last = orders[t.dim()]
        least = 0
        for d in order:
            if t.size(d) == 0 or t.stride(d) < least or (d == 0 and least == t.stride(1)):
                return torch.contiguous_format
            least = t.stride(d) * (t.size(d) if t.size(d) > 1 else 1)
        return channels_last

    def channels_last_kernels(self, t: Any) -> bool:
        torch = self.torch
        if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last):
            return True
        if t.dim() == 5 and t.is_contiguous(memory_format=torch.channels_last_3d):
            return True
        return t.dim() >= 2 and t.is_contiguous() and t.stride(1) == 1

    def fits_32bit(self, t: Any) -> bool:
        return fits_32bit_index_math(list(t.shape), list(t.stride()))

    def statistics_impl(self, t: Any) -> str:
        """batch_norm_choose_impl, which batch_norm_mean_var follows for the training forward's
        statistics: "general" past 32-bit indexing and for every layout but a contiguous one and
        the 4-d channels-last one (a channels-last 3-d input is general here, though the backward's
        channels-last kernels take it)."""
        if not self.fits_32bit(t):
            return "general"
        if t.is_contiguous():
            return "channels_last" if t.stride(1) == 1 else "contiguous"
        if t.dim() == 4 and t.is_contiguous(memory_format=self.torch.channels_last):
            return "channels_last"
        return "general"

    def channels_last_reduce(self, grad_out: Any, x: Any, mean: Any, invstd: Any, weight: Optional[Any]) -> bool:
        """Whether batch_norm_backward_reduce takes its channels-last template (Normalization.cu)."""
        return (
            self.fits_32bit(grad_out)
            and self.channels_last_kernels(grad_out)
            and self.channels_last_kernels(x)
            and (weight is None or weight.is_contiguous())
            and mean.is_contiguous()
            and invstd.is_contiguous()
        )

    def staging(self, x: Any, per_channel: int, acc_size: int) -> List[int]:
        """The staging buffer and semaphores of a cooperative channels-last reduction, or none."""
        channels = x.size(1)
        grid_x, grid_y = flexible_launch_configs(x.numel() // channels, channels, coop=True)
        return [per_channel * channels * grid_y * acc_size, grid_x * 4] if grid_y > 1 else []


@register
class NativeBatchNorm(Rule):
    ops = {"native_batch_norm", "native_batch_norm_backward"}
    source = "aten/src/ATen/native/Normalization.cpp (_select_batch_norm_backend); cuda/Normalization.cu and Normalization.cuh (the channels-last kernels, batch_norm_choose_impl); ReduceOpsUtils.h (make_reduction)"
    order = 60

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.kernels = BatchNormRules(session.torch)

    def result(self, call: Call, out: Any) -> Any:
        """cudnn_batch_norm in evaluation makes its statistics empty (``at::empty({0})``, "a
        consistent output with native_batch_norm"; cudnn/BatchNorm.cpp): only the output is
        allocated, as the H200 recorded (reports/reference/h200/cudnn-batch-norm)."""
        if call.op != "native_batch_norm" or not isinstance(out, tuple) or len(out) != 3:
            return out
        torch = self.torch
        x, weight, bias, running_mean, _, training = call.args[:6]
        if training or not (isinstance(x, torch.Tensor) and x.device.type == "meta") or x.numel() == 0:
            return out
        if self.kernels.native(x, weight, bias is not None, running_mean is not None, False):
            return out
        with torch.utils._python_dispatch._disable_current_modes():
            empty = [torch.empty(0, dtype=t.dtype, device=t.device) for t in out[1:]]
        return (out[0], *empty)

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        if call.op != "native_batch_norm" or not made:
            return
        torch, kernels = self.torch, self.kernels
        x, weight, bias, running_mean, _, training = call.args[:6]
        if not (isinstance(x, torch.Tensor) and x.device.type == "meta") or x.numel() == 0 or not training:
            return
        if not kernels.native(x, weight, bias is not None, running_mean is not None, True):
            if kernels.channels_last_kernels(x):
                self.session.note(CUDNN_PERSISTENT_NOTE)
            return
        save_mean = out[1]
        impl = kernels.statistics_impl(x)
        if impl == "channels_last":
            call.record.scratch(kernels.staging(x, 4, save_mean.element_size()), call.frame)
        elif impl == "general":
            self.general_statistics(call, x, save_mean.dtype)

    def general_statistics(self, call: Call, x: Any, acc: Any) -> None:
        """batch_norm_mean_var's general branch: var_mean_out over every dimension but the
        channels, whose two-output make_reduction reads ``self.to(acc)`` (a copy made after the
        outputs and freed on return) unless the input is float16 summed into float32 (not
        bfloat16: the mixed-precision shortcut of the two-output overload is float16's alone), then
        Welford's reduction with its buffers (seen on ISSUE35T's S3D, a channels-last 3-d video
        network under bfloat16 autocast)."""
        torch, record, frame = self.torch, call.record, call.frame
        copy = None
        if x.dtype != acc and not (x.dtype == torch.float16 and acc == torch.float32):
            x, copy = converted_copy(record, x, acc, frame)
        welford_scratch(self.session, x, [0] + list(range(2, x.dim())), acc.itemsize, frame)
        if copy is not None:
            record.free(*copy)

    def track(self, call: Call, out: Any, made: List[Any]) -> bool:
        if call.op != "native_batch_norm_backward" or not made:
            return False
        torch, kernels = self.torch, self.kernels
        grad_out, x, weight, running_mean, _, save_mean, save_invstd, train, _, mask = call.args[:10]
        if not (isinstance(x, torch.Tensor) and x.device.type == "meta") or x.numel() == 0 or not train:
            return False
        if not kernels.native(x, weight, weight is not None, running_mean is not None, True):
            return self.cudnn_backward(call, grad_out, x, made)
        fused = mask[0] and not kernels.channels_last_kernels(x) and kernels.fits_32bit(x) and kernels.fits_32bit(grad_out)
        if fused:
            return False
        record, frame = call.record, call.frame
        grads = list(out)
        channels = x.size(1)
        acc = save_mean.element_size()
        channels_last_reduce = kernels.channels_last_reduce(grad_out, x, save_mean, save_invstd, weight)
        sums: List[Tuple[int, int]] = []
        dropped: List[Tuple[int, int]] = []
        if channels_last_reduce or mask[0]:
            sums = [(record.alloc(channels * acc, frame), channels * acc) for _ in range(2)]
        for index in (1, 2):
            grad = grads[index]
            if isinstance(grad, torch.Tensor) and any(grad is m for m in made):
                record.track(grad, frame)
            elif channels_last_reduce and weight is not None:
                # Made by the channels-last reduction whatever the mask; the engine drops it.
                size = channels * weight.element_size()
                dropped.append((record.alloc(size, frame), size))
        if channels_last_reduce:
            record.scratch(kernels.staging(x, 2, acc), frame)
        if isinstance(grads[0], torch.Tensor) and any(grads[0] is m for m in made):
            record.track(grads[0], frame)
        for addr, size in reversed(sums):
            record.free(addr, size)
        for addr, size in dropped:
            record.free(addr, size)
        return True

    def cudnn_backward(self, call: Call, grad_out: Any, x: Any, made: List[Any]) -> bool:
        """cudnn_batch_norm_backward: the output's gradient copied to the input's format first
        where it is not so laid out, freed after the gradients are made."""
        if grad_out.is_contiguous(memory_format=self.kernels.suggested_format(x)):
            return False
        record, frame = call.record, call.frame
        size = grad_out.numel() * grad_out.element_size()
        copy = record.alloc(size, frame)
        for grad in made:
            record.track(grad, frame)
        record.free(copy, size)
        return True


@register_function
class CudnnBatchNormInput(FunctionRule):
    """``F.batch_norm`` and ``torch.batch_norm`` where cuDNN runs them on an input not laid out in its
    suggested memory format: the copy ``_batch_norm_impl_index`` makes, which autograd keeps with
    the batch norm as cuDNN's does (the meta path would normalise the input as it is)."""

    names = ("batch_norm",)
    source = "aten/src/ATen/native/Normalization.cpp (_batch_norm_impl_index, the cuDNN branch)"

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.kernels = BatchNormRules(session.torch)

    def call(self, mode: Any, func: Any, args: Any, kwargs: Dict[str, Any]) -> Any:
        torch = self.torch
        if func is torch.nn.functional.batch_norm:
            order = ("input", "running_mean", "running_var", "weight", "bias", "training")
        elif func is torch.batch_norm:
            order = ("input", "weight", "bias", "running_mean", "running_var", "training")
        else:
            return PASS
        bound: Dict[str, Any] = dict(zip(order, args))
        bound.update((k, v) for k, v in kwargs.items() if k in order)
        x = bound.get("input")
        if not (isinstance(x, torch.Tensor) and x.device.type == "meta") or x.numel() == 0:
            return PASS
        kernels = self.kernels
        training = bool(bound.get("training", False))
        if kernels.native(x, bound.get("weight"), bound.get("bias") is not None, bound.get("running_mean") is not None, training):
            return PASS
        layout = kernels.suggested_format(x)
        if x.is_contiguous(memory_format=layout):
            return PASS
        with mode:
            copy = x.contiguous(memory_format=layout)
            if "input" in kwargs:
                return func(*args, **{**kwargs, "input": copy})
            return func(copy, *args[1:], **kwargs)

