"""``nn.SyncBatchNorm`` in training: its autograd Function (``torch/nn/modules/_functions.py``)
runs five operators that PyTorch has no meta kernels for, and one step whose shape comes from
values. Their CUDA kernels (``aten/src/ATen/native/cuda/Normalization.cu``, and
``Normalization.cuh``, shipped in the wheel's headers) allocate:

- ``batch_norm_stats``: the mean and the inverse standard deviation, ``[C]`` each in the input's
  accumulation type (float for half and bfloat16), in that order; for channels-last inputs
  (``batch_norm_stats_channels_last_cuda_template``) also the staging buffer and semaphores of a
  split reduction, freed before it returns (as ``native_batch_norm``'s: ``batch_norm.py``);
- ``batch_norm_gather_stats_with_counts``: the global mean and inverse standard deviation,
  ``[C]`` each, float where the gathered statistics are half or bfloat16;
- ``batch_norm_elemt``: the output, ``empty_like(input)``;
- ``batch_norm_backward_reduce``: ``sum_dy`` and ``sum_dy_xmu`` (like the mean) where the input's
  gradient is wanted, then the weight's and the bias's gradients (like the weight) where wanted;
  the channels-last template makes all four whatever is wanted (zero-length gradients without a
  weight), then its staging buffer and semaphores;
- ``batch_norm_backward_elemt``: the input's gradient, shaped as the input.

Between them, the Function gathers every rank's ``(mean, invstd, count)`` and keeps the ranks
whose count is at least 1 (``count_all[mask]``): a shape made from the other ranks' counts. The
trace answers that every rank's input was non-empty where this rank's is (each rank's trace runs
the same program on its own batch, and DistributedSampler gives every rank the same number), and
says so.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

from ..registered import RegisteredKernels
from . import Call, Rule, register
from .batch_norm import BatchNormRules
from .kernels import accumulation_type

SYNC_BATCH_NORM_NOTE = "{count} SyncBatchNorm steps kept every rank's gathered statistics (count_all[count_all >= 1]): a shape made from the other ranks' batch sizes, answered as every rank's input being non-empty like this rank's"


class SyncBatchNormKernels(RegisteredKernels):
    """Meta kernels of SyncBatchNorm's operators for one trace, with Normalization.cu's outputs
    (sizes, types, order)."""

    def kernels(self) -> List[Tuple[str, Callable[..., Any], str]]:
        return [
            ("batch_norm_stats", self._stats, "Meta"),
            ("batch_norm_gather_stats_with_counts", self._gather_stats, "Meta"),
            ("batch_norm_elemt", self._elemt, "Meta"),
            ("batch_norm_backward_reduce", self._backward_reduce, "Meta"),
            ("batch_norm_backward_elemt", self._backward_elemt, "Meta"),
        ]

    def _stats(self, input: Any, eps: float) -> Any:
        torch = self.torch
        made = dict(dtype=accumulation_type(input.dtype, torch), device="meta")
        channels = input.size(1)
        return torch.empty(channels, **made), torch.empty(channels, **made)

    def _gather_stats(self, input: Any, mean: Any, invstd: Any, running_mean: Optional[Any], running_var: Optional[Any], momentum: float, eps: float, counts: Any) -> Any:
        torch = self.torch
        made = dict(dtype=accumulation_type(mean.dtype, torch), device="meta")
        features = mean.size(1)
        return torch.empty(features, **made), torch.empty(features, **made)

    def _elemt(self, input: Any, weight: Optional[Any], bias: Optional[Any], mean: Any, invstd: Any, eps: float) -> Any:
        return self.torch.empty_like(input)

    def _backward_reduce(self, grad_out: Any, input: Any, mean: Any, invstd: Any, weight: Optional[Any], input_g: bool, weight_g: bool, bias_g: bool) -> Any:
        torch = self.torch
        channels = input.size(1)
        channels_last = BatchNormRules(torch).channels_last_reduce(grad_out, input, mean, invstd, weight)
        sums = dict(dtype=mean.dtype, device="meta")
        grads = dict(dtype=(weight if weight is not None else mean).dtype, device="meta")
        # What a kernel leaves undefined is a tensor of no storage here (never an allocation).
        sum_dy = torch.empty(channels if input_g or channels_last else 0, **sums)
        sum_dy_xmu = torch.empty(channels if input_g or channels_last else 0, **sums)
        with_weight = channels_last and weight is not None
        grad_weight = torch.empty(channels if weight_g or with_weight else 0, **grads)
        grad_bias = torch.empty(channels if bias_g or with_weight else 0, **grads)
        return sum_dy, sum_dy_xmu, grad_weight, grad_bias

    def _backward_elemt(self, grad_out: Any, input: Any, mean: Any, invstd: Any, weight: Optional[Any], sum_dy: Any, sum_dy_xmu: Any, count: Any) -> Any:
        torch = self.torch
        kernels = BatchNormRules(torch)
        if kernels.fits_32bit(grad_out) and kernels.channels_last_kernels(grad_out) and kernels.channels_last_kernels(input):
            return torch.empty_like(input)
        return torch.empty(input.shape, dtype=input.dtype, device="meta")


@register
class SyncBatchNormStaging(Rule):
    """The channels-last kernels' staging buffers and semaphores, as native_batch_norm's."""

    ops = {"batch_norm_stats", "batch_norm_backward_reduce"}
    source = "aten/src/ATen/native/cuda/Normalization.cuh (batch_norm_stats_channels_last_cuda_template, batch_norm_backward_reduce_cuda_channels_last_template)"
    order = 60

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        torch = self.torch
        kernels = BatchNormRules(torch)
        if call.op == "batch_norm_stats":
            x = call.args[0]
            if kernels.fits_32bit(x) and kernels.channels_last_kernels(x):
                call.record.scratch(kernels.staging(x, 4, out[0].element_size()), call.frame)
            return
        grad_out, x, mean, invstd, weight = call.args[:5]
        if kernels.channels_last_reduce(grad_out, x, mean, invstd, weight):
            call.record.scratch(kernels.staging(x, 2, mean.element_size()), call.frame)


def sync_batch_norm_paths(session: Any) -> Any:
    """SyncBatchNorm's Function, whose mask of non-empty ranks is answered while it runs."""
    torch = session.torch
    function = getattr(getattr(torch.nn.modules, "_functions", None), "SyncBatchNorm", None)
    forward = vars(function).get("forward") if function is not None else None
    if forward is None:
        return {}
    forward = forward.__func__ if isinstance(forward, staticmethod) else forward

    def every_rank_non_empty(mask: Any) -> Optional[bool]:
        session.note(SYNC_BATCH_NORM_NOTE)
        return True

    def answered_forward(ctx: Any, input: Any, *args: Any) -> Any:
        answers = session.mask_answers
        answer = every_rank_non_empty if input.numel() > 0 else None
        if answer is not None:
            answers.append(answer)
        try:
            return forward(ctx, input, *args)
        finally:
            if answer is not None:
                answers.remove(answer)

    return {(function, "forward"): staticmethod(answered_forward)}
