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
gradient will be needed), then a 256-byte cuDNN workspace it frees before returning (none for a
single query: the decoding steps of ISSUE35E's generate); the backward
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

Flash attention, the default for half precision without a mask on compute capability 8.x (A100,
A10G, L4, L40S, RTX 3090 and 4090: cuDNN is not put first there), and on 9.x and 10.x where cuDNN
refuses (deterministic algorithms, a key of length 1), allocates what PyTorch's FlashAttention-2
wrapper does, read from PyTorch's sources (``flash_api.cpp`` at pytorch/pytorch 03b7c19, the newest
stored; ``attention.cu``'s ``_scaled_dot_product_flash_attention_cuda`` and ``_flash_attention_forward``,
``attention_backward.cu``'s ``_flash_attention_backward``); see `flash_forward_plan` and
`flash_backward_plan`. Checked after the rule was committed on an H100 with the flash backend
forced (the same flash_api.cpp an A100 runs by default; only the split-KV heuristic's SM count
differs): 14 of 14 cases identical allocation by allocation, forward and backward
(reports/reference/h100/flash-attention, ``python scripts/compare_flash_attention.py``). No GPU
that picks flash by default was measured, and the snapshot says so.

The math path and memory-efficient attention with a boolean mask, grouped key heads or head
sizes over 128 stop the trace with one line (``vramlab.UnfollowedError``).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from ..compat import by_release

from ...errors import UnfollowedError
from ..where import here
from . import PASS, Call, FunctionRule, Rule, register, register_function

# The cuDNN each release's CUDA wheel bundles (torch.backends.cudnn.version()): 2.11.0+cu130's
# measured on the H100, 2.13.0's and 2.15.0+cu132's read from their libcudnn (9.20, 9.26), 2.12.1's
# and 2.14.1's from their wheels' pins (nvidia-cudnn-cu13 9.20.0.48, 9.24.0.43). A trace takes the
# one of the installed release, as the GPU machine would load it.
CUDNN_VERSIONS = {(2, 11): 91900, (2, 12): 92000, (2, 14): 92400, (2, 15): 92600}
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


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def flash_num_splits(batch_nheads_mblocks: int, num_sms: int, num_n_blocks: int, max_splits: int) -> int:
    """flash_api.cpp's ``num_splits_heuristic``: how many splits of the keys the forward runs, the
    fewest whose wave efficiency is within 85% of the best (1 where the blocks nearly fill the
    GPU)."""
    if batch_nheads_mblocks >= 0.8 * num_sms:
        return 1
    max_splits = min(max_splits, num_sms, num_n_blocks)

    def eligible(splits: int) -> bool:
        return splits == 1 or -(-num_n_blocks // splits) != -(-num_n_blocks // (splits - 1))

    efficiency: List[float] = []
    best = 0.0
    for splits in range(1, max_splits + 1):
        if not eligible(splits):
            efficiency.append(0.0)
            continue
        waves = batch_nheads_mblocks * splits / num_sms
        eff = waves / -(-waves // 1) if waves else 0.0
        best = max(best, eff)
        efficiency.append(eff)
    for splits in range(1, max_splits + 1):
        if eligible(splits) and efficiency[splits - 1] >= 0.85 * best:
            return splits
    return 1


def flash_forward_plan(b: int, h: int, hk: int, lq: int, lk: int, d: int, dropout: float, sms: int) -> Dict[str, int]:
    """What ``mha_fwd`` (flash_api.cpp) allocates besides the output and the log-sum-exp (both
    the meta kernel's, ``empty_like(q)`` and ``[B, H, Lq]`` float32, not rounded), in bytes:
    ``splits`` and its two float32 accumulators, ``set_params_splitkv``'s
    ``softmax_lse_accum [splits, B, H, Lq]`` and ``out_accum [splits, B, H, Lq, D rounded to 32
    (64 over 128)]``, made only without dropout where ``num_splits_heuristic`` gives more than
    one split (small batches of short queries), and freed when mha_fwd returns. With ``Lq == 1``
    and grouped key heads the query is folded (``seqlenq_ngroups_swapped``): Lq becomes H/Hk and
    H becomes Hk."""
    head = _round_up(d, 8)
    rounded = _round_up(head, 32 if head <= 128 else 64)
    if lq == 1 and h > hk and dropout == 0.0 and d % 8 == 0:
        lq, h = h // hk, hk
    plan = {"splits": 1, "lse_accum": 0, "out_accum": 0}
    if dropout == 0.0:
        block_n = 256 if head <= 64 else (128 if head <= 128 else 64)
        splits = flash_num_splits(b * h * -(-lq // 64), sms * 2, -(-lk // block_n), 128)
        if splits > 1:
            plan = {"splits": splits, "lse_accum": 4 * splits * b * h * lq, "out_accum": 4 * splits * b * h * lq * rounded}
    return plan


def flash_backward_plan(b: int, h: int, hk: int, lq: int, lk: int, d: int, element: int, deterministic: bool, sms: int) -> Dict[str, int]:
    """What ``mha_bwd`` (flash_api.cpp) allocates after dq, dk and dv (``empty_like``), in bytes:
    ``softmax_d`` ``[B, H, Lq rounded to 128]`` float32, then ``dq_accum`` ``[B, Lq rounded to 128,
    H, D rounded to 32 (64 over 128)]`` float32 (``loop`` is always true), or with deterministic
    algorithms ``zeros`` of ``ceil(SMs / (B*H))`` of those; with grouped key heads ``dk_expanded``
    and ``dv_expanded`` ``[B, Lk, H, D]`` in the inputs' dtype, summed into dk and dv. All are freed
    by the time ``_flash_attention_backward`` returns (softmax_d is returned to it and dropped)."""
    head = _round_up(d, 8)
    rounded = _round_up(head, 32 if head <= 128 else 64)
    lq_rounded = _round_up(lq, 128)
    accum = 4 * b * lq_rounded * h * rounded
    if deterministic:
        accum *= -(-sms // (b * h))
    expanded = b * lk * h * head * element if hk != h else 0
    return {"softmax_d": 4 * b * h * lq_rounded, "dq_accum": accum, "dk_expanded": expanded, "dv_expanded": expanded}


def deterministic_on(torch: Any) -> bool:
    """ATen's ``deterministicAlgorithms() && !deterministicAlgorithmsWarnOnly()``."""
    return bool(torch.are_deterministic_algorithms_enabled() and not torch.is_deterministic_algorithms_warn_only_enabled())


FLASH_NOTE = (
    "{count} flash attention calls: their allocations are derived from PyTorch's sources (flash_api.cpp mha_fwd/mha_bwd, "
    "attention.cu, attention_backward.cu; vramlab/_tracer/rules/attention.py), checked on an H100 with the flash backend "
    "forced (14 of 14 cases identical), not on a GPU that runs flash attention by default: the A100, A10G, L4, L40S and "
    "RTX cards were not measured (their split-KV choices follow their SM counts)"
)


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
        if backend not in ("cudnn", "efficient", "math", "flash"):
            what = backend or "no backend (PyTorch raises 'No available kernel')"
            raise UnfollowedError(
                f"scaled_dot_product_attention at {here()}: on the {session.gpu['name']} these arguments run {what} attention, whose workspaces vramlab.trace does not size yet (it follows cuDNN, flash and memory-efficient attention for heads up to 128, and the math path); the trace up to there is kept"
            )
        # attention.cpp turns a boolean mask into an additive one before any backend runs.
        mask = additive_mask(torch, bound["attn_mask"], q.dtype)
        if backend == "math":
            out = math(torch, q, k, v, mask, bound["dropout_p"], bound["is_causal"], bound["scale"], bound["enable_gqa"])
            return out.squeeze(0) if unbatched else out
        if backend == "flash":
            return self._flash(bound, unbatched)
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

    def _flash(self, bound: Dict[str, Any], unbatched: bool) -> Any:
        """attention.cpp's flash branch (``_fused_sdp_choice`` -> flash_attention): the head size
        padded to a multiple of 8 (``pad_last_dim<8, false>``, a copy of each of q, k and v where
        it is not), the scale taken from the unpadded size, and the output sliced back
        (``post_process_flash_output``, a view)."""
        torch, session = self.torch, self.session
        q, k, v = bound["query"], bound["key"], bound["value"]
        session.note(FLASH_NOTE)
        size = q.size(-1)
        scale = bound["scale"] if bound["scale"] is not None else 1.0 / size ** 0.5
        if size % 8:
            q, k, v = (torch.nn.functional.pad(t, (0, 8 - size % 8)) for t in (q, k, v))
        out = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, bound["dropout_p"], bound["is_causal"], False, scale=scale)[0]
        if size % 8:
            out = out[..., :size]
        return out.squeeze(0) if unbatched else out


@register
class AttentionKernels(Rule):
    """What the fused attention kernels allocate besides their meta kernels' outputs."""

    ops = {
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_cudnn_attention_backward",
        "_scaled_dot_product_efficient_attention_backward",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_flash_attention_backward",
    }
    source = "attention.cu, attention_backward.cu, flash_attn/flash_api.cpp; measured on an H100 (reports/reference/h100/efficient-attention, sdpa-backends) except flash"
    order = 45

    def before(self, call: Call) -> Any:
        if call.op == "_scaled_dot_product_flash_attention_backward":
            # _scaled_dot_product_flash_attention_backward_cuda hands _flash_attention_backward the
            # [B, L, H, D] views of grad_out and out, which it makes contiguous
            # (attention_backward.cu: contiguous_grad_out, then contiguous_out): a copy of each
            # whose [B, L, H, D] view is not contiguous already, freed when it returns.
            copies = []
            for tensor in (call.args[0], call.args[4]):
                if not tensor.transpose(1, 2).is_contiguous():
                    size = tensor.numel() * tensor.element_size()
                    copies.append((call.record.alloc(size, self.session.frame()), size))
            call.state["flash_copies"] = copies
            return PASS
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

    def track(self, call: Call, out: Any, made: List[Any]) -> bool:
        if call.op != "_scaled_dot_product_flash_attention":
            return False
        # mha_fwd (flash_api.cpp), in its order: out (empty_like(q)), softmax_lse [B, H, Lq]
        # float32, the split-KV accumulators where it splits, rng_state (uint64[2]) and _unused
        # (uint64 scalar), both made even without dropout ("[Note] BC breaking change to flash
        # seed/offset"); with dropout a second rng_state replaces the first. The accumulators
        # are freed on return. _flash_attention_forward's debug mask without return_debug_mask is
        # at::empty({0}): no block.
        torch, record, frame = self.torch, call.record, call.frame
        bound = call.bound()
        q, k = bound["query"], bound["key"]
        b, h, lq, d = q.shape
        dropout = float(bound["dropout_p"])
        plan = flash_forward_plan(b, h, k.size(1), lq, k.size(2), d, dropout, int(self.session.gpu["multiprocessors"]))
        attention, logsumexp, seed, offset, debug = out[0], out[1], out[6], out[7], out[8]
        record.track(attention, frame)
        record.track(logsumexp, frame)
        if bound["return_debug_mask"] and dropout > 0 and isinstance(debug, torch.Tensor):
            # mha_fwd's p: [B, H, Lq rounded to 128, Lk rounded to 128] in q's dtype.
            record.track(debug, frame, b * h * _round_up(lq, 128) * _round_up(k.size(2), 128) * q.element_size())
        accumulators = [(record.alloc(size, frame), size) for size in (plan["lse_accum"], plan["out_accum"]) if size]
        if dropout > 0:
            first = record.alloc(16, frame)
            record.track(offset, frame)
            record.track(seed, frame)
            record.free(first, 16)
        else:
            record.track(seed, frame)
            record.track(offset, frame)
        for addr, size in accumulators:
            record.free(addr, size)
        return True

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        record, frame = call.record, call.frame
        if call.op == "_scaled_dot_product_flash_attention_backward":
            self._flash_backward_scratch(call, frame)
            return
        if call.op == "_scaled_dot_product_cudnn_attention":
            # Measured on the H100 (cuDNN 9.19): a single query (a decoding step) runs with no
            # workspace; 48 queries (a prompt) and every training length recorded take 256 B.
            if call.args[0].size(2) > 1:
                record.scratch([CUDNN_FORWARD_WORKSPACE], frame)
        elif call.op == "_scaled_dot_product_cudnn_attention_backward":
            record.scratch([cudnn_backward_workspace(call.args[1], call.args[2])], frame)
        elif call.op == "_scaled_dot_product_efficient_attention_backward":
            self._efficient_backward_scratch(call, frame)

    def _flash_backward_scratch(self, call: Call, frame: Any) -> None:
        """After dq, dk, dv (the meta kernel's, tracked in order): mha_bwd's softmax_d, dq_accum
        and, for grouped key heads, dk_expanded and dv_expanded; then the frees in the order the
        C++ scopes end (mha_bwd's locals in reverse, softmax_d, the contiguous copies)."""
        record, bound = call.record, call.bound()
        q, k = bound["query"], bound["key"]
        b, h, lq, d = q.shape
        plan = flash_backward_plan(b, h, k.size(1), lq, k.size(2), d, q.element_size(), deterministic_on(self.torch), int(self.session.gpu["multiprocessors"]))
        made = [(record.alloc(plan[name], frame), plan[name]) for name in ("softmax_d", "dq_accum", "dk_expanded", "dv_expanded") if plan[name]]
        for addr, size in reversed(made[1:]):
            record.free(addr, size)
        record.free(*made[0])
        for addr, size in reversed(call.state.get("flash_copies", [])):
            record.free(addr, size)

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
