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
from typing import Any, Dict, List, Optional

# torch 2.11.0+cu130's bundled cuDNN (torch.backends.cudnn.version() on the H100).
CUDNN_VERSION = 91900
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


def priority(major: int, cudnn_version: int = CUDNN_VERSION) -> List[str]:
    """The order in which backends are tried (sdp_utils.cpp's priority_order)."""
    prefer_cudnn = os.environ.get("TORCH_CUDNN_SDPA_DEPRIORITIZED") != "1" and cudnn_version > 91500 and major in (9, 10)
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


def choose(torch: Any, bound: Dict[str, Any], major: int) -> Optional[str]:
    """The backend PyTorch picks for these arguments on a GPU of compute capability `major`.x, or
    None where none qualifies (PyTorch raises "No available kernel")."""
    checks = {
        "cudnn": lambda: can_use_cudnn(torch, bound, major),
        "flash": lambda: can_use_flash(torch, bound, major),
        "efficient": lambda: can_use_efficient(torch, bound, major),
        "math": lambda: torch.backends.cuda.math_sdp_enabled(),
    }
    for backend in priority(major):
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
