"""The CTC loss as CUDA's native kernels run it (``aten/src/ATen/native/cuda/LossCTC.cu``,
``ctc_loss_gpu_template`` and ``ctc_loss_backward_gpu_template``): what they allocate besides
their outputs, in their order.

- Both directions copy three int64 vectors of the batch to the device (the target lengths and the
  input lengths by ``at::tensor``, then the targets' batch offsets by ``.cuda()``), freed when the
  kernel returns (in reverse order).
- The forward's outputs: ``log_alpha`` ``[B, T, 2·max_target_length + 1]``, then the negative log
  likelihood ``[B]``.
- The backward: ``log_beta`` like ``log_alpha``, the gradient like ``log_probs``; for a "large"
  problem (``2·T + 24·B/10 + 2·C/10 > 450``) the blanks' term is computed with ATen operators
  (``log_alpha + log_beta`` over the blank positions, ``logsumexp`` as ReduceOps.cpp's
  ``logsumexp_out_impl`` runs it), and ``zero_infinity`` replaces the gradient by a ``where``.

Lengths given as tensors are read on the host first (LossCTC.cpp's ``ctc_loss`` for tensors, and
``ctc_loss_tensor``), then the list overloads run, with the mean's lengths copied to the device by
``at::tensor``. Under a dispatch mode PyTorch takes the composite path for tensor subclasses
instead (``areAnyTensorSubclassLike``), so `TensorLengths` turns tensor lengths into lists above
ATen, as the GPU's fast path does; lengths on the GPU whose values are not known without data stop
the trace in one line, as any value read back does.
cuDNN's CTC (float32 log-probs, int32 targets on the CPU, blank 0, every input of full length) is
not followed: ``ctc_loss`` only takes it for targets on the CPU, which the trace refuses."""

from __future__ import annotations

import inspect
from typing import Any, Dict, List

from ...errors import UnfollowedError
from ..where import here
from . import PASS, Call, FunctionRule, Rule, register, register_function
from .reads import UNKNOWN_HOST_READ


@register_function
class TensorLengths(FunctionRule):
    names = ("ctc_loss",)
    source = "ATen/native/LossCTC.cpp (ctc_loss for tensors: the lengths read on the host, then the list overload)"

    def call(self, mode: Any, func: Any, args: Any, kwargs: Dict[str, Any]) -> Any:
        torch = self.torch
        if func not in (torch.nn.functional.ctc_loss, torch.ctc_loss):
            return PASS
        try:
            bound = inspect.signature(torch.nn.functional.ctc_loss).bind(*args, **kwargs) if func is torch.nn.functional.ctc_loss else None
        except (TypeError, ValueError):
            return PASS
        values = dict(bound.arguments) if bound is not None else {"input_lengths": args[2] if len(args) > 2 else None, "target_lengths": args[3] if len(args) > 3 else None}
        if not any(isinstance(values.get(k), torch.Tensor) for k in ("input_lengths", "target_lengths")):
            return PASS
        args = list(args)
        for position, name in ((2, "input_lengths"), (3, "target_lengths")):
            lengths = values.get(name)
            if isinstance(lengths, torch.Tensor):
                with mode:
                    listed = [int(n) for n in lengths.tolist()]
                if name in kwargs:
                    kwargs = {**kwargs, name: listed}
                else:
                    args[position] = listed
        with mode:
            return func(*args, **kwargs)


@register
class CTCLoss(Rule):
    ops = {"_ctc_loss", "_ctc_loss_backward"}
    source = "ATen/native/cuda/LossCTC.cu (ctc_loss_gpu_template, ctc_loss_backward_gpu_template, ctc_loss_tensor); ATen/native/ReduceOps.cpp (logsumexp_out_impl)"
    order = 40

    def before(self, call: Call) -> Any:
        bound = call.bound()
        log_probs = bound["log_probs"]
        if log_probs.dim() != 3:
            raise UnfollowedError(f"{call.op} at {here()}: a CTC loss over unbatched log-probabilities on the GPU is not followed; the trace up to there is kept")
        # Read on the host by both directions (and refused there where not known).
        self._lengths(call, bound["input_lengths"])
        target_lengths = self._lengths(call, bound["target_lengths"])
        with self.session.modes[1]:
            if call.op == "_ctc_loss":
                return self._forward(log_probs, target_lengths)
            return self._backward(bound, log_probs)

    def _lengths(self, call: Call, lengths: Any) -> List[int]:
        torch = self.torch
        if not isinstance(lengths, torch.Tensor):
            return [int(n) for n in lengths]
        if lengths.device.type != "meta":
            copied = self.session.shadows.unknown_host([lengths])
            if copied is not None:
                raise UnfollowedError(UNKNOWN_HOST_READ.format(op=call.op, here=here(), where=copied))
            return [int(n) for n in lengths.tolist()]
        known = self.session.shadows.view(lengths)
        if known is None:
            raise UnfollowedError(
                f"{call.op} at {here()}: the CTC loss reads its lengths back on the host (LossCTC.cu, ctc_loss_tensor), and these are not known without data; the trace up to there is kept"
            )
        return [int(n) for n in known.tolist()]

    def _copied_vectors(self, batch: int) -> List[Any]:
        """The target lengths, input lengths and batch offsets the kernels copy to the device, in
        that order."""
        torch = self.torch
        return [torch.empty(batch, dtype=torch.long, device="meta") for _ in range(3)]

    def _forward(self, log_probs: Any, target_lengths: List[int]) -> Any:
        torch = self.torch
        steps, batch = log_probs.shape[0], log_probs.shape[1]
        longest = max(target_lengths, default=0)
        copied = self._copied_vectors(batch)
        log_alpha = torch.empty((batch, steps, 2 * longest + 1), dtype=log_probs.dtype, device="meta")
        nll = torch.empty((batch,), dtype=log_probs.dtype, device="meta")
        free_in_reverse(copied)
        return nll, log_alpha

    def _backward(self, bound: Any, log_probs: Any) -> Any:
        torch = self.torch
        steps, batch, labels = log_probs.shape
        log_alpha, nll, grad_out = bound["log_alpha"], bound["neg_log_likelihood"], bound["grad"]
        blank = int(bound["blank"])
        longest = log_alpha.shape[2] // 2
        copied = self._copied_vectors(batch)
        log_beta = torch.empty_like(log_alpha, memory_format=torch.contiguous_format)
        log_beta.fill_(float("-inf"))
        grad = torch.full_like(log_probs, float("-inf"), memory_format=torch.contiguous_format)
        if 2 * steps + (24 * batch) // 10 + (2 * labels) // 10 > 450:
            torch.exp(log_probs, out=grad)
            sizes = (batch, log_alpha.shape[1], longest + 1)
            alpha = log_alpha.as_strided(sizes, (log_alpha.stride(0), log_alpha.stride(1), log_alpha.stride(2) * 2))
            beta = log_beta.as_strided(sizes, (log_beta.stride(0), log_beta.stride(1), log_beta.stride(2) * 2))
            summed = alpha + beta
            blanks = logsumexp_as_cuda_runs_it(torch, summed)
            blanks.permute(1, 0, 2).add_(nll.view(1, batch, 1)).sub_(log_probs.narrow(2, blank, 1)).exp_()
            grad.narrow(2, blank, 1).sub_(blanks.permute(1, 0, 2))
            del blanks, summed, alpha, beta
            grad.mul_(grad_out.view(1, batch, 1))
            if bool(bound.get("zero_infinity", False)):
                infinite = nll.view(1, batch, 1) == float("inf")
                zero = torch.zeros((), dtype=grad.dtype, device="meta")
                grad = torch.where(infinite, zero, grad)
                del zero, infinite
        del log_beta
        free_in_reverse(copied)
        return grad


def free_in_reverse(copied: List[Any]) -> None:
    """Drops the copied vectors as C++ destroys the kernels' locals, last declared first: the input
    lengths, the target lengths, then the batch offsets (declared first, on the host, and moved to
    the device after the other two were made)."""
    for position in (1, 0, 2):
        copied[position] = None
    copied.clear()


def logsumexp_as_cuda_runs_it(torch: Any, values: Any) -> Any:
    """``logsumexp(values, 2, keepdim=True)`` as ReduceOps.cpp's logsumexp_out_impl runs on CUDA
    (a composite of ATen operators there; the meta kernel makes only the result): the maxima, the
    test for infinite maxima, the shifted exponentials, then their sum into the result."""
    maxes = torch.amax(values, 2, True)
    # C++ keeps a full expression's temporaries to its end and drops them last made first.
    magnitude = maxes.abs()
    infinite = magnitude == float("inf")
    maxes.masked_fill_(infinite, 0)
    del infinite, magnitude
    shifted = (values - maxes).exp_()
    result = torch.sum(shifted, 2, keepdim=True)
    del shifted
    return result.log_().add_(maxes)
