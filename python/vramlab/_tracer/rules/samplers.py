"""The random samplers behind ``torch.distributions`` (Gamma, Chi2, StudentT, Beta, Dirichlet,
Binomial) and their reparameterised gradients, which PyTorch 2.11 has no meta kernels for (2.15
has one for ``_standard_gamma`` alone). On CUDA each makes its result with
``at::empty(input.sizes(), input.options())``, contiguous whatever the input's strides, and runs
one kernel (``aten/src/ATen/native/cuda/Distributions.cpp``: ``_s_gamma_cuda``,
``_s_dirichlet_cuda``, ``_s_binomial_cuda``, ``_standard_gamma_grad_cuda``,
``_dirichlet_grad_cuda``). The Dirichlet sampler alone allocates more: the gammas' sum over the
last dimension (``ret.sum(-1, true)``), made after the result and freed when it returns.

Registered at the meta key for the trace's duration, where PyTorch has none.
"""

from __future__ import annotations

from typing import Any, Callable, List, Tuple

from ..registered import RegisteredKernels
from . import Call, Rule, register, relaid
from .kernels import reduction_scratch

# Each operator's tensor argument whose sizes and options the result takes.
SAMPLERS = {
    "_standard_gamma": "self",
    "_sample_dirichlet": "self",
    "binomial": "count",
    "_standard_gamma_grad": "self",
    "_dirichlet_grad": "x",
}


class SamplerKernels(RegisteredKernels):
    """Meta kernels for the samplers PyTorch has none for: a contiguous result like the input."""

    def kernels(self) -> List[Tuple[str, Callable[..., Any], str]]:
        torch = self.torch
        missing = [name for name in SAMPLERS if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "Meta")]
        return [(name, self._like_first, "Meta") for name in missing]

    def _like_first(self, first: Any, *args: Any, **kwargs: Any) -> Any:
        return self.torch.empty(first.shape, dtype=first.dtype, device=first.device)


@register
class Samplers(Rule):
    """The samplers' results contiguous as the CUDA kernels make them (a meta kernel of PyTorch's
    own, 2.15's ``_standard_gamma``, may lay one out like its input); ``_s_dirichlet_cuda``'s sum
    of the gammas over the last dimension, kept while the kernel normalises them and freed on
    return (with the sum's own reduction buffers, if it splits)."""

    ops = set(SAMPLERS)
    source = "aten/src/ATen/native/cuda/Distributions.cpp (_s_gamma_cuda, _s_dirichlet_cuda, _s_binomial_cuda, _standard_gamma_grad_cuda, _dirichlet_grad_cuda)"
    order = 60

    def result(self, call: Call, out: Any) -> Any:
        return relaid(self.torch, out, self.torch.contiguous_format)

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        torch = self.torch
        if call.op != "_sample_dirichlet" or not made or not isinstance(out, torch.Tensor) or out.dim() == 0 or out.numel() == 0:
            return
        size = out.numel() // out.size(-1) * out.element_size()
        record, frame = call.record, call.frame
        addr = record.alloc(size, frame)
        reduction_scratch(self.session, out, [out.dim() - 1], out.element_size(), four_per_load=False, frame=frame)
        record.free(addr, size)
