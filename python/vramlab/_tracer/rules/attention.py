"""``scaled_dot_product_attention`` inside ``vramlab.trace``: the backend PyTorch 2.11 would pick on
the target GPU, and what that backend allocates.

Which backend: ``select_sdp_backend`` (``ATen/native/transformers/cuda/sdp_utils.cpp``) takes the
first of its priority order whose checks pass. The order is ``flash, efficient, math, cudnn``
(``ATen/Context.h``), with cuDNN moved first when the runtime cuDNN is newer than 9.15 and the GPU's
major compute capability is 9 or 10 and ``TORCH_CUDNN_SDPA_DEPRIORITIZED`` is not 1
(``check_prefer_cudnn_attention``). torch 2.11's CUDA 13 wheel bundles cuDNN 9.19 (measured on the
H100: reports/reference/h100/trace-workloads/machine-autocast.txt), so on an H100 half-precision
attention runs on cuDNN. The flags ``torch.backends.cuda.*_sdp_enabled()`` (and the
``sdpa_kernel`` context) are read as PyTorch reads them.

What cuDNN attention allocates (measured on an H100 with torch 2.11 and cuDNN 9.19, and matching
``_scaled_dot_product_cudnn_attention_cuda``): the forward makes its dropout seed and offset (8 B
each, even without dropout), the output, the log-sum-exp (``[B, H, Lq, 1]`` float32, only when a
gradient will be needed), then a 256-byte cuDNN workspace it frees before returning; the backward
makes dq, dk, dv, then a workspace. The backward workspace's size is cuDNN's own choice: the
trace uses a fit to three measured shapes (``4·B·Hq·Lq·D + 4·B·Hq·Lq + 256``, plus ``4·B·Hq·Lk·D``
with fewer key heads), says so in the snapshot, and is checked on held-out programs in
reports/reference/h100/trace-workloads.

Memory-efficient attention (float32, and half precision where cuDNN and flash refuse) allocates
what ``_efficient_attention_forward``/``_backward`` (``attention.cu``, ``attention_backward.cu``) do,
as measured on the H100 over 90 shapes (``scripts/measure_efficient_attention.py``,
reports/reference/h100/efficient-attention/): the forward its output and log-sum-exp; the backward
a copy of the output gradient in ``[B, L, H, D]`` order where it is not so already, dq, dk, dv, the
row sums ``delta`` (computed by the kernel in half precision; in float32 by ATen, through a product
and a sum and a transposed copy), and the kernel's workspace, whose size is a fit to those
measurements (``efficient_backward_workspace``), for head sizes up to 128.

Flash attention (head sizes cuDNN refuses, in half precision), the math path and memory-efficient
attention with a boolean mask, grouped key heads or head sizes over 128 stop the trace with one
line (``vramlab.UnfollowedError``).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from ..compat import by_release

from ...errors import UnfollowedError
from ..where import here
from . import PASS, Call, FunctionRule, Rule, register, register_function

# The cuDNN each release's CUDA wheel bundles (torch.backends.cudnn.version()): 2.11.0+cu130's
# measured on the H100, 2.15.0+cu132's read from its libcudnn (9.26). A trace takes the one of the
# installed release, as the GPU machine would load it.
CUDNN_VERSIONS = {(2, 11): 91900, (2, 15): 92600}
CUDNN_VERSION = CUDNN_VERSIONS[(2, 11)]
# cuDNN's forward workspace for attention, measured (every shape tried on the H100).
CUDNN_FORWARD_WORKSPACE = 256

_NAMES = ["query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"]
_DEFAULTS: Dict[str, Any] = {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None, "enable_gqa": False}


def bind(args: Any, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """F.scaled_dot_product_attention's arguments by name."""
    bound = dict(_DEFAULTS)
    bound.update(zip(_NAMES, args))
    bound.update(kwargs)
    return bound


def priority(major: int, cudnn_version: int = CUDNN_VERSION, minor: int = 0, release: Tuple[int, int] = (2, 11)) -> List[str]:
    """The order in which backends are tried (sdp_utils.cpp's priority_order): cuDNN first where
    check_prefer_cudnn_attention says so, which 2.11 asks of sm90, sm100 and sm103 alone (major 9
    or 10, minor 0 or 3) and 2.15 of any major 9 or 10 (both read from the releases' binaries)."""
    capable = major in (9, 10) and (release >= (2, 15) or minor in (0, 3))
    prefer_cudnn = os.environ.get("TORCH_CUDNN_SDPA_DEPRIORITIZED") != "1" and cudnn_version > 91500 and capable
    return ["cudnn", "flash", "efficient", "math"] if prefer_cudnn else ["flash", "efficient", "math", "cudnn"]


def _same_batch_and_heads(q: Any, k: Any, v: Any, gqa: bool) -> bool:
    if not (q.size(0) == k.size(0) == v.size(0)):
        return False
    hq, hk, hv = q.size(1), k.size(1), v.size(1)
    if hq == hk == hv:
        return True
    return gqa and hk > 0 and hv > 0 and hq % hk == 0 and hq % hv == 0


def _last_stride_one(*tensors: Any) -> bool:
    return all(t.size(-1) == 1 or t.stride(-1) == 1 for t in tensors)


def can_use_cudnn(torch: Any, bound: Dict[str, Any], major: int, cudnn_version: int = CUDNN_VERSION) -> bool:
    q, k, v, mask = bound["query"], bound["key"], bound["value"], bound["attn_mask"]
    if not torch.backends.cuda.cudnn_sdp_enabled() or not (8 <= major <= 12):
        return False
    if torch.are_deterministic_algorithms_enabled() and not torch.is_deterministic_algorithms_warn_only_enabled():
        return False
    if not all(t.dim() == 4 for t in (q, k, v)):
        return False
    if q.dtype not in (torch.float16, torch.bfloat16) or not (q.dtype == k.dtype == v.dtype):
        return False
    limit = 256 if major in (9, 10) and cudnn_version >= 91000 else 128
    d_qk, d_v = q.size(-1), v.size(-1)
    if cudnn_version >= 92600 and 256 < max(d_qk, d_v) <= 512 and d_qk % 16 == 0 and d_v % 16 == 0:
        # cuDNN 9.26 (torch 2.15's) takes head sizes up to 512 in multiples of 16.
        limit = 512
    if k.size(-1) != d_qk or d_qk > limit or d_v > limit or d_qk % 8 or d_v % 8:
        return False
    if mask is not None:
        if mask.requires_grad or mask.dim() not in (2, 4) or not _last_stride_one(mask):
            return False
    lq, lk = q.size(-2), k.size(-2)
    if lq == 0 or lk == 0 or lk == 1 or (lq == 1 and bound["dropout_p"] > 0):
        return False
    if bound["dropout_p"] > 0 and 91100 < cudnn_version < 91400:
        return False
    return _last_stride_one(q, k, v) and _same_batch_and_heads(q, k, v, bound["enable_gqa"])


def can_use_flash(torch: Any, bound: Dict[str, Any], major: int) -> bool:
    q, k, v = bound["query"], bound["key"], bound["value"]
    if not torch.backends.cuda.flash_sdp_enabled() or not (8 <= major <= 12):
        return False
    if not all(t.dim() == 4 for t in (q, k, v)) or bound["attn_mask"] is not None:
        return False
    if q.dtype not in (torch.float16, torch.bfloat16) or not (q.dtype == k.dtype == v.dtype):
        return False
    if not (q.size(-1) == k.size(-1) == v.size(-1)) or q.size(-1) > 256:
        return False
    if bound["is_causal"] and q.size(-2) != k.size(-2):
        return False
    if q.size(-2) == 0 or k.size(-2) == 0:
        return False
    return _last_stride_one(q, k, v) and _same_batch_and_heads(q, k, v, bound["enable_gqa"])


def can_use_efficient(torch: Any, bound: Dict[str, Any], major: int) -> bool:
    q, k, v, mask = bound["query"], bound["key"], bound["value"], bound["attn_mask"]
    if not torch.backends.cuda.mem_efficient_sdp_enabled() or not (5 <= major <= 12):
        return False
    if not all(t.dim() == 4 for t in (q, k, v)):
        return False
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32) or not (q.dtype == k.dtype == v.dtype):
        return False
    alignment = 8 if q.dtype != torch.float32 else 4
    if q.size(-1) != k.size(-1) or q.size(-1) % alignment or v.size(-1) % alignment or q.size(-1) == 0:
        return False
    if mask is not None and not _last_stride_one(mask):
        return False
    if q.size(-2) == 0 or k.size(-2) == 0:
        return False
    # Memory-efficient attention has no grouped key heads (sdp_utils.cpp checks the head counts
    # without allowing them; measured on the H100: reports/reference/h100/sdpa-backends).
    return _last_stride_one(q, k, v) and _same_batch_and_heads(q, k, v, False)


def choose(torch: Any, bound: Dict[str, Any], major: int, minor: int = 0, release: Tuple[int, int] = (2, 11)) -> Optional[str]:
    """The backend PyTorch `release` picks for these arguments on a GPU of compute capability
    major.minor, or None where none qualifies (PyTorch raises "No available kernel")."""
    cudnn_version = by_release(CUDNN_VERSIONS, release)
    checks = {
        "cudnn": lambda: can_use_cudnn(torch, bound, major, cudnn_version),
        "flash": lambda: can_use_flash(torch, bound, major),
        "efficient": lambda: can_use_efficient(torch, bound, major),
        "math": lambda: torch.backends.cuda.math_sdp_enabled(),
    }
    for backend in priority(major, cudnn_version, minor, release):
        if checks[backend]():
            return backend
    return None


def cudnn_backward_workspace(q: Any, k: Any) -> int:
    """cuDNN 9.19's backward workspace for attention: a fit to the sizes measured on the H100
    (B=2, H=8, Lq=200, Lk=300; D=64 and 256; 2 key heads), not a rule from a source."""
    b, hq, lq, d = q.size(0), q.size(1), q.size(2), q.size(3)
    size = 4 * b * hq * lq * d + 4 * b * hq * lq + 256
    if k.size(1) < hq:
        size += 4 * b * hq * k.size(2) * d
    return size


def efficient_backward_workspace(b: int, h: int, lq: int, d: int, half: bool) -> int:
    """The workspace memory-efficient attention's backward allocates, in bytes, for head sizes up
    to 128: per batch and head, R rows of the query (Lq rounded up to 64, or to 128 for heads over
    64) times the head size padded to 64 or 128 floats, and R/16 more (R/32 for half precision
    heads over 64). A fit to the 90 shapes measured on the H100 (torch 2.11), exact on all of them,
    not a rule read from the kernel."""
    block = 64 if d <= 64 else 128
    rows = -(-lq // block) * block
    extra = rows // (32 if half and d > 64 else 16)
    return 4 * b * h * (rows * block + extra)



def additive_mask(torch: Any, mask: Any, dtype: Any) -> Any:
    """attention.cpp's convert_boolean_attn_mask, as it allocates on the GPU: a boolean mask
    becomes ``where(mask, 0, -inf)`` in the query's dtype (a scalar tensor for -inf, another for
    the 0 that ``where`` wraps, then the full-size result); other masks pass through."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    negative_infinity = torch.scalar_tensor(float("-inf"), dtype=dtype, device=mask.device)
    return torch.where(mask, 0.0, negative_infinity)


def math(torch: Any, q: Any, k: Any, v: Any, mask: Any, dropout_p: float, is_causal: bool, scale: Optional[float], gqa: bool) -> Any:
    """``_scaled_dot_product_attention_math`` (attention.cpp) as the GPU runs it, step for step:
    half-precision inputs computed in float32, the query and the transposed key each scaled by the
    square root of the scale, the causal mask built as a boolean lower triangle and made additive,
    grouped key heads repeated, the mask added in place, the safe softmax, and CUDA's fused dropout.
    Run here rather than through ATen's own composite because, inside a dispatch mode, ATen adds
    the mask out of place and takes the unfused dropout (its tensor-subclass checks), which the
    GPU does not."""
    origin = q.dtype
    if origin in (torch.float16, torch.bfloat16):
        q, k, v = q.float(), k.float(), v.float()
    factor = (scale if scale is not None else 1.0 / q.size(-1) ** 0.5) ** 0.5
    query = q * factor
    if is_causal:
        causal = torch.ones(query.size(-2), k.size(-2), dtype=torch.bool, device=q.device).tril()
        mask = additive_mask(torch, causal, query.dtype)
        del causal
    if gqa and not q.size(-3) == k.size(-3) == v.size(-3):
        k = k.repeat_interleave(q.size(-3) // k.size(-3), -3)
        v = v.repeat_interleave(q.size(-3) // v.size(-3), -3)
    attn = torch.matmul(query, k.transpose(-2, -1) * factor)
    del query
    if mask is not None:
        attn.add_(mask)
    attn = torch.ops.aten._safe_softmax(attn, -1)
    if dropout_p > 0.0:
        attn = torch.ops.aten.native_dropout(attn, dropout_p, True)[0]
    return torch.matmul(attn, v).to(origin)


@register_function
class ScaledDotProductAttention(FunctionRule):
    """F.scaled_dot_product_attention on stand-ins, as the backend PyTorch would pick on the target
    GPU runs it; other tensors run as the program would."""

    names = ("scaled_dot_product_attention",)
    source = "ATen/native/transformers/cuda/sdp_utils.cpp (select_sdp_backend), attention.cpp"
    order = 45

    def call(self, mode: Any, func: Any, args: Any, kwargs: Dict[str, Any]) -> Any:
        torch, session = self.torch, self.session
        bound = bind(args, kwargs)
        q, k, v = bound["query"], bound["key"], bound["value"]
        if not all(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in (q, k, v)):
            return PASS
        if session.autocast_on():
            # scaled_dot_product_attention is on autocast's lower-precision list: its tensors are
            # cast before PyTorch picks the backend.
            lower = torch.get_autocast_dtype("cuda")
            for name in ("query", "key", "value", "attn_mask"):
                bound[name] = session.autocast.cast(lower, bound[name])
            q, k, v = bound["query"], bound["key"], bound["value"]
        unbatched = session.release >= (2, 15) and all(t.dim() == 3 for t in (q, k, v))
        if unbatched:
            # 2.15 gives unbatched inputs a batch dimension before the fused backends' checks
            # (sdp_utils_cpp.h, normalize_unbatched_input); 2.11 sends them to the math path.
            for name in ("query", "key", "value"):
                bound[name] = bound[name].unsqueeze(0)
            q, k, v = bound["query"], bound["key"], bound["value"]
        if session.autocast_on():
            with session.autocast.below():
                return self._run(bound, unbatched)
        return self._run(bound, unbatched)

    def _run(self, bound: Dict[str, Any], unbatched: bool) -> Any:
        """The attention on the backend PyTorch picks, with autocast's casts already made."""
        torch, session = self.torch, self.session
        q, k, v = bound["query"], bound["key"], bound["value"]
        backend = choose(torch, bound, session.major, session.minor, session.release)
        if backend == "efficient" and q.size(-1) > 128:
            backend = "efficient (head sizes over 128)"
        if backend not in ("cudnn", "efficient", "math"):
            what = backend or "no backend (PyTorch raises 'No available kernel')"
            raise UnfollowedError(
                f"scaled_dot_product_attention at {here()}: on the {session.gpu['name']} these arguments run {what} attention, whose workspaces vramlab.trace does not size yet (it follows cuDNN attention, the math path, and memory-efficient attention for heads up to 128); the trace up to there is kept"
            )
        # attention.cpp turns a boolean mask into an additive one before any backend runs.
        mask = additive_mask(torch, bound["attn_mask"], q.dtype)
        if backend == "math":
            out = math(torch, q, k, v, mask, bound["dropout_p"], bound["is_causal"], bound["scale"], bound["enable_gqa"])
            return out.squeeze(0) if unbatched else out
        compute_lse = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
        if backend == "efficient":
            session.note(
                "{count} memory-efficient attention calls: their backward workspaces are sized by a fit to 90 shapes measured on an H100 (torch 2.11), not by a rule"
            )
            if mask is not None:
                # attention.cpp's preprocess_mask (torch 2.11: mem_eff_alignment = 8): a mask
                # whose strides are not multiples of 8 (or not 1 for the last dimension) is padded
                # by 8 - Lk % 8 (a copy) and sliced back, then expanded to [B, H, Lq, Lk] (views).
                lk = mask.size(-1)
                aligned = all(mask.stride(i) % 8 == 0 for i in range(mask.dim() - 1)) and mask.stride(-1) == 1
                if not aligned:
                    mask = torch.nn.functional.pad(mask, (0, 8 - lk % 8))[..., :lk]
                mask = mask.expand(q.size(0), q.size(1), q.size(2), k.size(2))
            out = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, mask, compute_lse, bound["dropout_p"], bound["is_causal"], scale=bound["scale"])[0]
            return out.squeeze(0) if unbatched else out
        session.note(
            "{count} cuDNN attention calls: their backward workspaces are sized by a fit to cuDNN 9.19 measured on an H100 (three shapes), not by a rule"
        )
        out = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, mask, compute_lse, bound["dropout_p"], bound["is_causal"], False, scale=bound["scale"])[0]
        return out.squeeze(0) if unbatched else out


@register
class AttentionKernels(Rule):
    """What the fused attention kernels allocate besides their meta kernels' outputs."""

    ops = {
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_cudnn_attention_backward",
        "_scaled_dot_product_efficient_attention_backward",
    }
    source = "attention.cu, attention_backward.cu; measured on an H100 (reports/reference/h100/efficient-attention, sdpa-backends)"
    order = 45

    def before(self, call: Call) -> Any:
        if call.op == "_scaled_dot_product_efficient_attention_backward":
            # _efficient_attention_backward first makes the output gradient contiguous in
            # [B, L, H, D] order: a copy where it is not so already.
            grad_out = call.args[0]
            if not grad_out.transpose(1, 2).is_contiguous():
                size = grad_out.numel() * grad_out.element_size()
                call.state["grad_copy"] = (call.record.alloc(size, self.session.frame()), size)
        return PASS

    def outputs(self, call: Call, out: Any, made: List[Any]) -> List[Any]:
        torch = self.torch
        if call.op == "_scaled_dot_product_efficient_attention":
            # The dropout seed and offset stay on the host (the meta kernel makes them).
            return [t for t in out[:2] if isinstance(t, torch.Tensor)]
        if call.op == "_scaled_dot_product_cudnn_attention":
            # On the GPU: the dropout seed and offset first, then the output, and the log-sum-exp
            # only where a gradient will be needed (the meta kernel always makes one).
            kept = [out[6], out[7], out[0]] + ([out[1]] if call.args[4] else [])
            return [t for t in kept if isinstance(t, torch.Tensor)]
        return made

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        record, frame = call.record, call.frame
        if call.op == "_scaled_dot_product_cudnn_attention":
            record.scratch([CUDNN_FORWARD_WORKSPACE], frame)
        elif call.op == "_scaled_dot_product_cudnn_attention_backward":
            record.scratch([cudnn_backward_workspace(call.args[1], call.args[2])], frame)
        elif call.op == "_scaled_dot_product_efficient_attention_backward":
            self._efficient_backward_scratch(call, frame)

    def _efficient_backward_scratch(self, call: Call, frame: Any) -> None:
        """After dq, dk, dv: the row sums `delta` and the workspace, in the order the H100
        recorded them."""
        torch, record = self.torch, call.record
        grad_out, query = call.args[0], call.args[1]
        b, h, lq, _ = grad_out.shape
        rows = 4 * b * h * lq
        if grad_out.dtype == torch.float32:
            # ATen computes delta: (grad_out * out).sum(-1), then a contiguous [B, H, Lq] copy.
            product = record.alloc(grad_out.numel() * 4, frame)
            summed = record.alloc(rows, frame)
            if h > 1 and lq > 1:
                delta = record.alloc(rows, frame)
                record.free(summed, rows)
            else:
                delta = summed
            record.free(product, grad_out.numel() * 4)
        else:
            delta = record.alloc(rows, frame)
        size = efficient_backward_workspace(b, h, lq, query.size(-1), grad_out.dtype != torch.float32)
        workspace = record.alloc(size, frame)
        record.free(delta, rows)
        record.free(workspace, size)
        grad_copy = call.state.get("grad_copy")
        if grad_copy is not None:
            record.free(*grad_copy)
