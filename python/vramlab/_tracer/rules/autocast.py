"""``torch.autocast("cuda")`` inside ``vramlab.trace``: the casts CUDA's autocast would make, on the
meta tensors that stand in for CUDA ones.

PyTorch decides mixed precision per operator, in kernels registered for the ``AutocastCUDA``
dispatch key, which only CUDA tensors reach. A trace has none, so the same policies are registered
here, as Python kernels for a dispatch key no tensor of the trace carries (``AutocastPrivateUse1``),
switched on for the thread while the program's ``autocast("cuda")`` is on. They sit where PyTorch's
own sit (above autograd), so each cast is an operation autograd records, as on the GPU, and each
makes the allocation the GPU's cast would.

The policies are PyTorch's (torch 2.11): ``AT_FORALL_LOWER_PRECISION_FP``, ``AT_FORALL_FP32``,
``AT_FORALL_FP32_SET_OPT_DTYPE``, ``AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE`` and
``AT_FORALL_PROMOTE`` in ``torch/include/ATen/autocast_mode.h``, and the kernels
``autocast_mode.cpp`` registers beside them (``cudnn_convolution``, ``binary_cross_entropy``,
``_cudnn_rnn``). ``cached_cast``'s rules are followed: only floating tensors other than float64
are cast, and a float32 leaf that requires grad, cast down, is cast once per outermost autocast
region and kept until it ends. Every operator the installed torch gives a CUDA autocast kernel
must have a policy here, or tracing it stops with one line (``vramlab.UnfollowedError``).
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ...errors import UnfollowedError

LOWER = "lower_precision_fp"
FP32 = "fp32"
SET_OPT_DTYPE = "fp32_set_opt_dtype"
APPEND_DTYPE = "fp32_append_dtype"
PROMOTE = "promote"
BANNED = "banned"
RECURRENT = "recurrent"

# Operator (with its overload, "default" where none) -> policy, as autocast_mode.h lists them.
POLICIES: Dict[str, str] = {}
for _name in (
    "_convolution.deprecated _convolution conv1d conv2d conv3d conv_tbc conv_transpose1d "
    "conv_transpose2d.input conv_transpose3d.input convolution prelu addmm addmv addr matmul einsum "
    "mm mv linalg_vecdot linear addbmm baddbmm bmm chain_matmul linalg_multi_dot "
    "_thnn_fused_lstm_cell _thnn_fused_gru_cell lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell "
    "_scaled_dot_product_flash_attention scaled_dot_product_attention "
    # autocast_mode.cpp, beside the list:
    "cudnn_convolution cudnn_convolution_transpose"
).split():
    POLICIES[_name] = LOWER
for _name in (
    "acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan pow.Tensor_Scalar "
    "pow.Tensor_Tensor pow.Scalar softplus layer_norm native_layer_norm group_norm frobenius_norm.dim "
    "nuclear_norm nuclear_norm.dim cosine_similarity poisson_nll_loss cosine_embedding_loss nll_loss "
    "nll_loss2d hinge_embedding_loss kl_div l1_loss smooth_l1_loss huber_loss mse_loss "
    "margin_ranking_loss multilabel_margin_loss soft_margin_loss triplet_margin_loss multi_margin_loss "
    "binary_cross_entropy_with_logits dist pdist cdist renorm logsumexp upsample_nearest1d "
    "_upsample_nearest_exact1d upsample_nearest2d _upsample_nearest_exact2d upsample_nearest3d "
    "_upsample_nearest_exact3d upsample_linear1d upsample_bilinear2d _upsample_bilinear2d_aa "
    "upsample_trilinear3d upsample_bicubic2d _upsample_bicubic2d_aa"
).split():
    POLICIES[_name] = FP32
for _name in (
    "prod prod.dim_int prod.dim_Dimname softmax.int softmax.Dimname log_softmax.int log_softmax.Dimname "
    "cumprod cumprod.dimname cumsum cumsum.dimname linalg_vector_norm linalg_matrix_norm "
    "linalg_matrix_norm.str_ord sum sum.dim_IntList sum.dim_DimnameList"
).split():
    POLICIES[_name] = SET_OPT_DTYPE
for _name in "norm.Scalar norm.ScalarOpt_dim norm.names_ScalarOpt_dim".split():
    POLICIES[_name] = APPEND_DTYPE
for _name in "addcdiv addcmul atan2 bilinear cross dot vdot grid_sampler index_put tensordot scatter_add".split():
    POLICIES[_name] = PROMOTE
POLICIES["binary_cross_entropy"] = BANNED
POLICIES["_cudnn_rnn"] = RECURRENT

# Operators a later release adds to a list, keyed by the first release that has them: rms_norm is
# in autocast_mode.h of 2.12.1, 2.13.0, 2.14.1 and 2.15.0 (read from each wheel's torch/include)
# and not 2.11's (pytorch#188955 dates the policy to 2.12); linalg_matrix_sqrth is an operator 2.13
# does not have and 2.15 registers for AutocastCUDA (2.14 not checked: taken as 2.13).
ADDED: Dict[Tuple[int, int], Dict[str, str]] = {
    (2, 12): {"rms_norm": FP32},
    (2, 15): {"linalg_matrix_sqrth": FP32},
}


def policies(release: Tuple[int, int]) -> Dict[str, str]:
    """The CUDA autocast policy of every operator in `release`."""
    chosen = dict(POLICIES)
    for first, added in sorted(ADDED.items()):
        if release >= first:
            chosen.update(added)
    return chosen

# fp32_append_dtype: the overload each one calls instead, with dtype=float32 added.
_APPENDED = {"norm.Scalar": "ScalarOpt_dtype", "norm.ScalarOpt_dim": "ScalarOpt_dim_dtype", "norm.names_ScalarOpt_dim": "names_ScalarOpt_dim_dtype"}

# PyTorch's words (autocast_mode.cpp), for the one operator CUDA's autocast refuses.
_BANNED_MESSAGE = (
    "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
    "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
    "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
    "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
    "safe to autocast."
)


def registered_cuda_policies(torch: Any) -> List[str]:
    """The operators the installed torch gives a CUDA autocast kernel, named as POLICIES names them."""
    names = []
    for full in torch._C._dispatch_get_all_op_names():
        if full.startswith("aten::") and torch._C._dispatch_has_kernel_for_dispatch_key(full, "AutocastCUDA"):
            names.append(full[len("aten::"):])
    return sorted(names)


class Autocast:
    """CUDA's autocast for one trace: installed on entering it, removed on leaving."""

    KEY = "AutocastPrivateUse1"

    def __init__(self, torch: Any, where: Callable[[], str], release: Tuple[int, int] = (2, 11)) -> None:
        self.torch = torch
        self.policies = policies(release)
        self.where = where
        self.cache: Dict[int, Tuple[Any, Any]] = {}
        self.libraries: List[Any] = []
        self.key = getattr(torch._C.DispatchKey, self.KEY)

    def install(self) -> None:
        torch = self.torch
        unknown = [name for name in registered_cuda_policies(torch) if name not in self.policies]
        self.unknown = set(unknown)
        try:
            fallback = torch.library.Library("_", "IMPL")
            fallback.fallback(torch.library.fallthrough_kernel, self.KEY)
        except RuntimeError as err:
            raise UnfollowedError(
                f"autocast: the dispatch key vramlab.trace uses for CUDA's autocast ({self.KEY}) is taken in this process ({err}); the trace cannot follow autocast('cuda')"
            ) from None
        kernels = torch.library.Library("aten", "IMPL")
        self.libraries = [fallback, kernels]
        for name, policy in self.policies.items():
            op = self._overload(name)
            if op is not None:
                kernels.impl(name, self._kernel(name, op, policy), self.KEY)
        for name in unknown:
            op = self._overload(name)
            if op is not None:
                kernels.impl(name, self._kernel(name, op, "unknown"), self.KEY)

    def uninstall(self) -> None:
        self.switch(False)
        for library in reversed(self.libraries):
            library._destroy()
        self.libraries = []
        self.cache.clear()

    def switch(self, on: bool) -> None:
        """Turns the kernels on or off for this thread (as autocast's state is per thread)."""
        self.torch._C._dispatch_tls_set_dispatch_key_included(self.key, on)
        self.torch._C._dispatch_tls_set_dispatch_key_excluded(self.key, not on)

    def clear_cache(self) -> None:
        self.cache.clear()

    @contextlib.contextmanager
    def below(self) -> Iterator[None]:
        """Inside an operator autocast has already handled: the operators it runs are not cast
        again (autocast_mode.cpp's kernels call the operator under ExcludeDispatchKeyGuard), as
        the math path of scaled_dot_product_attention computes half-precision inputs in float32."""
        C = self.torch._C
        included = C._dispatch_tls_is_dispatch_key_included(self.key)
        excluded = C._dispatch_tls_is_dispatch_key_excluded(self.key)
        C._dispatch_tls_set_dispatch_key_included(self.key, False)
        C._dispatch_tls_set_dispatch_key_excluded(self.key, True)
        try:
            yield
        finally:
            C._dispatch_tls_set_dispatch_key_included(self.key, included)
            C._dispatch_tls_set_dispatch_key_excluded(self.key, excluded)

    def _overload(self, name: str) -> Optional[Any]:
        base, _, overload = name.partition(".")
        packet = getattr(self.torch.ops.aten, base, None)
        return None if packet is None else getattr(packet, overload or "default", None)

    def _eligible(self, value: Any) -> bool:
        torch = self.torch
        return (
            isinstance(value, torch.Tensor)
            and value.device.type == "meta"
            and value.is_floating_point()
            and value.dtype != torch.float64
        )

    def cast(self, to: Any, value: Any) -> Any:
        """``cached_cast``: tensors, and tensors in lists, cast where eligible."""
        torch = self.torch
        if isinstance(value, (list, tuple)):
            return type(value)(self.cast(to, v) for v in value)
        if not self._eligible(value) or value.dtype == to:
            return value
        lower = torch.get_autocast_dtype("cuda")
        cacheable = (
            to == lower
            and value.dtype == torch.float32
            and value.requires_grad
            and value.is_leaf
            and not value._is_view()
            and torch.is_autocast_cache_enabled()
        )
        if not cacheable:
            return value.to(to)
        key = id(value)
        hit = self.cache.get(key)
        if hit is not None and hit[0]() is value:
            return hit[1]
        cast = value.to(to)
        self.cache[key] = (weakref.ref(value), cast)
        return cast

    def _call_cast(self, op: Any, to: Any, args: Any, kwargs: Dict[str, Any]) -> Any:
        """`op` on its arguments cast to `to`, the casts made last argument first: the kernels'
        `(*F)(cached_cast(to_type, args, device_type)...)` is evaluated right to left by GCC, which
        builds PyTorch's CUDA wheels (the H100 recordings show the weight cast before the input)."""
        cast_kwargs = {k: self.cast(to, v) for k, v in reversed(list(kwargs.items()))}
        cast_args = [self.cast(to, a) for a in reversed(args)][::-1]
        return op(*cast_args, **cast_kwargs)

    def _promoted(self, values: List[Any]) -> Any:
        torch = self.torch
        current = torch.get_autocast_dtype("cuda")
        flat = [v for value in values for v in (value if isinstance(value, (list, tuple)) else [value])]
        for value in flat:
            if not self._eligible(value):
                continue
            if current == torch.float32 or value.dtype == torch.float32:
                current = torch.float32
            elif value.dtype != current:
                raise RuntimeError(f"Unexpected floating ScalarType in at::autocast::prioritize: {value.dtype}")
        return current

    def _cudnn_rnn_cast_reflatten(self, op: Any, args: Any, kwargs: Dict[str, Any]) -> Any:
        """AutocastRNN.cpp's kernel for ``_cudnn_rnn``: float16 whatever autocast's dtype (bfloat16
        included). Unless the weights (their flat buffer, where given) are float16 already, a new
        zeroed float16 buffer is made each call (RNNUtils' copy_weights_to_flat_buf_views, without
        biases where the layer has none), and each weight is copied into a tensor set on it at
        cuDNN's offset: the copies are what autograd records, so each weight's gradient is cast
        back from float16 in the backward. Then the input, hx and cx are cast (cx first)."""
        from .cudnn_rnn import layout, num_weights

        torch = self.torch
        half = torch.float16
        names = [a.name for a in op._schema.arguments]
        b = dict(zip(names, args))
        b.update(kwargs)
        weights, buf, stride0 = list(b["weight"]), b["weight_buf"], b["weight_stride0"]
        lead = buf if buf is not None else weights[0]
        if self._eligible(lead) and lead.dtype != half:
            x, proj, directions = b["input"], b["proj_size"], 2 if b["bidirectional"] else 1
            geometry = (b["mode"], x.shape[-1], b["hidden_size"], proj, b["num_layers"], directions)
            include_bias = not (stride0 == 2 or (stride0 == 3 and proj > 0))
            buf = torch.zeros(num_weights(*geometry), dtype=half, device=lead.device)
            flat = []
            for weight, at in zip(weights, layout(*geometry, include_bias)):
                param = torch.empty(0, dtype=half, device=lead.device).set_(buf.untyped_storage(), at, weight.shape)
                param.copy_(weight)
                flat.append(param)
            weights = flat
        b["cx"] = self.cast(half, b["cx"])
        b["hx"] = self.cast(half, b["hx"])
        b["input"] = self.cast(half, b["input"])
        b["weight"], b["weight_buf"] = weights, buf
        return op(*(b[n] for n in names[: len(args)]), **{n: b[n] for n in kwargs})

    def _kernel(self, name: str, op: Any, policy: str) -> Callable[..., Any]:
        torch = self.torch
        excluded = torch._C.DispatchKeySet(self.key)
        dtype_at = next((i for i, a in enumerate(op._schema.arguments) if a.name == "dtype"), None)

        def kernel(*args: Any, **kwargs: Any) -> Any:
            with torch._C._ExcludeDispatchKeyGuard(excluded):
                if policy == LOWER:
                    to = torch.get_autocast_dtype("cuda")
                    return self._call_cast(op, to, args, kwargs)
                if policy == FP32:
                    to = torch.float32
                    return self._call_cast(op, to, args, kwargs)
                if policy == SET_OPT_DTYPE:
                    if args and self._eligible(args[0]):
                        given = kwargs.get("dtype")
                        if dtype_at is not None and dtype_at < len(args):
                            given = args[dtype_at]
                        if given is None:
                            if dtype_at is not None and dtype_at < len(args):
                                args = args[:dtype_at] + (torch.float32,) + args[dtype_at + 1 :]
                            else:
                                kwargs = dict(kwargs, dtype=torch.float32)
                    return op(*args, **kwargs)
                if policy == APPEND_DTYPE:
                    if args and self._eligible(args[0]):
                        base = name.partition(".")[0]
                        return getattr(getattr(torch.ops.aten, base), _APPENDED[name])(*args, **kwargs, dtype=torch.float32)
                    return op(*args, **kwargs)
                if policy == PROMOTE:
                    to = self._promoted(list(args) + list(kwargs.values()))
                    return self._call_cast(op, to, args, kwargs)
                if policy == BANNED:
                    raise RuntimeError(_BANNED_MESSAGE)
                if policy == RECURRENT:
                    return self._cudnn_rnn_cast_reflatten(op, args, kwargs)
                raise UnfollowedError(
                    f"{name} under autocast('cuda') at {self.where()}: vramlab.trace has no autocast policy for it (the installed torch casts it, and torch 2.11 did not); the trace up to there is kept"
                )

        return kernel
