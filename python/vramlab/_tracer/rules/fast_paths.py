"""PyTorch's inference fast paths for attention, followed as the GPU runs them:
nn.MultiheadAttention's (``_native_multi_head_attention``, attention.cu's
native_multi_head_attention_cuda) and nn.TransformerEncoderLayer's
(``_transformer_encoder_layer_fwd``, transformer.cpp), for self-attention on dense tensors; nested
tensors (a key padding mask given to nn.TransformerEncoder) and attention between different
tensors are refused (refusals.py). Also ``F.multi_head_attention_forward``, which runs with the
trace's mode on so that the attention inside it picks the GPU's backend."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from . import PASS, FunctionRule, register_function, schema_values
from .attention import bind, choose


@register_function
class MultiHeadAttentionForward(FunctionRule):
    """F.multi_head_attention_forward is Python that goes to torch function modes whole, and
    PyTorch takes the mode off while it runs: the scaled_dot_product_attention inside would run as
    on the meta device (the math path, a [B, H, L, L] matrix), where the GPU picks a fused backend.
    It runs with the mode on instead, its own check for modes answered "none"."""

    names = ("multi_head_attention_forward",)
    source = "torch/nn/functional.py (multi_head_attention_forward)"

    def call(self, mode: Any, func: Any, args: Any, kwargs: Dict[str, Any]) -> Any:
        functional = self.torch.nn.functional
        check = functional.has_torch_function
        functional.has_torch_function = lambda *_: False
        try:
            with mode:
                return func(*args, **kwargs)
        finally:
            functional.has_torch_function = check


@register_function
class FastPaths(FunctionRule):
    names = ("_native_multi_head_attention", "_transformer_encoder_layer_fwd")
    source = "ATen/native/transformers/attention.cu (native_multi_head_attention_cuda), transformer.cpp (transformer_encoder_layer_forward)"

    def call(self, mode: Any, func: Any, args: Any, kwargs: Dict[str, Any]) -> Any:
        name = getattr(func, "__name__", "")
        made = self._attention(mode, args, kwargs) if name == "_native_multi_head_attention" else self._encoder_layer(mode, args, kwargs)
        return PASS if made is None else made

    def _attention(self, mode: Any, args: Any, kwargs: Dict[str, Any]) -> Any:
        """nn.MultiheadAttention's fast path for self-attention: its scaled-dot-product branch
        where it takes it (see `_sdp_branch`), else its general branch (`_general`). None for
        attention between different tensors: it stops the trace."""
        bound = schema_values(self.torch.ops.aten._native_multi_head_attention.default, args, kwargs)
        query, key, value = bound["query"], bound["key"], bound["value"]
        embed_dim, num_head = int(bound["embed_dim"]), int(bound["num_head"])
        if not (query is key and key is value) or not self._dense(query):
            return None
        weights = (bound["qkv_weight"], bound["qkv_bias"], bound["proj_weight"], bound["proj_bias"])
        need_weights = bool(bound["need_weights"])
        fused = not need_weights and self._sdp_branch(query, embed_dim, num_head, bound["mask"])
        with mode:
            return self._self_attention(query, embed_dim, num_head, weights, fused, bound["mask"], need_weights, bool(bound["average_attn_weights"]))

    def _dense(self, query: Any) -> bool:
        torch = self.torch
        return isinstance(query, torch.Tensor) and query.device.type == "meta" and query.dim() == 3 and not query.is_nested

    def _self_attention(self, query: Any, embed_dim: int, num_head: int, weights: Tuple[Any, Any, Any, Any], fused: bool, mask: Any, need_weights: bool, average: bool) -> Any:
        """native_multi_head_attention_cuda on one dense tensor: (output, attention weights or
        None), by its scaled-dot-product branch where `fused` (decided before the trace's mode is
        on, while the stand-ins say they are on meta), else its general branch."""
        if fused:
            return self._sdp(query, embed_dim, num_head, *weights), None
        return self._general(query, embed_dim, num_head, weights, mask, need_weights, average)

    def _sdp_branch(self, query: Any, embed_dim: int, num_head: int, mask: Any) -> bool:
        """Whether native_multi_head_attention_cuda takes its scaled-dot-product branch for
        self-attention on `query` with no weights asked for: no mask, heads a multiple of 8 wide,
        and flash, memory-efficient or cuDNN attention chosen for the heads (the H100 recordings
        show cuDNN attention, picked for half precision, taken here too); autocast left to the
        other branch."""
        if not self._dense(query) or mask is not None:
            return False
        per_head = embed_dim // num_head
        if per_head % 8 or self.session.autocast_on():
            return False
        heads = query.view(query.size(0), -1, num_head, per_head).transpose(1, 2)
        choice = dict(bind((heads, heads, heads), {}), dropout_p=0.0, is_causal=False)
        return choose(self.torch, choice, self.session.major, self.session.minor, self.session.release) in ("flash", "efficient", "cudnn")

    def _general(self, query: Any, embed_dim: int, num_head: int, weights: Tuple[Any, Any, Any, Any], mask: Any, need_weights: bool, average: bool) -> Any:
        """The general branch of native_multi_head_attention_cuda, taken where weights are asked
        for, a mask is given or no fused kernel fits: the packed projection (gemm_nt, no bias),
        _transform_bias_rescale_qkv's one buffer of q, k and v ([3, B, heads, T, head size]), the
        scores (bmm_nt), the softmax (in place without a mask; with one, the mask made boolean and
        _masked_softmax's new output), the context written into q's storage (bmm_nn), then
        transform0213_gemm_nt_bias (the heads merged into a new tensor, then the output projection
        with its bias), and the weights averaged over heads where asked."""
        torch = self.torch
        qkv_weight, _, proj_weight, proj_bias = weights
        batch, length = query.size(0), query.size(1)
        per_head = embed_dim // num_head
        qkv = torch.matmul(query.view(batch * length, embed_dim), qkv_weight.t()).view(batch, length, 3 * embed_dim)
        packed = torch.empty(3, batch, num_head, length, per_head, dtype=qkv.dtype, device=qkv.device)
        del qkv
        q, k, v = packed.unbind(0)
        scores = torch.bmm(q.reshape(batch * num_head, length, per_head), k.reshape(batch * num_head, length, per_head).transpose(2, 1))
        scores = scores.view(batch, num_head, length, length)
        if mask is not None:
            flags = mask if mask.dtype == torch.bool else mask.to(torch.bool)
            output = torch.empty_like(scores)
            if length > 1024 or length * scores.element_size() > 4096:
                # masked_softmax_cuda (SoftMax.cu) past its persistent kernel: softmax of a masked
                # copy, its own output let go.
                expanded = flags.view(batch, 1, 1, length).expand_as(scores) if flags.dim() == 2 else flags
                filled = scores.masked_fill(expanded, float("-inf"))
                output = torch.softmax(filled, -1)
                del filled
            scores = output
            del flags, output
        context = q.view(batch * num_head, length, per_head)
        torch.bmm(scores.view(batch * num_head, length, length), v.reshape(batch * num_head, length, per_head), out=context)
        if not need_weights:
            scores = None
        merged = context.view(batch, num_head, length, per_head).permute(0, 2, 1, 3).contiguous().view(batch * length, embed_dim)
        out = torch.nn.functional.linear(merged, proj_weight, proj_bias).view(batch, length, embed_dim)
        del merged
        if scores is not None and average:
            scores = scores.sum(1)
            scores.div_(num_head)
        return out, scores

    def _sdp(self, query: Any, embed_dim: int, num_head: int, qkv_weight: Any, qkv_bias: Any, proj_weight: Any, proj_bias: Any) -> Any:
        """The scaled-dot-product branch: the projection, its three chunks viewed as heads, the
        attention (as the trace runs it), the heads merged, the output projection."""
        functional = self.torch.nn.functional
        per_head = embed_dim // num_head
        x = functional.linear(query, qkv_weight, qkv_bias)
        q, k, v = (chunk.view(x.size(0), -1, num_head, per_head).transpose(1, 2) for chunk in x.chunk(3, -1))
        y = functional.scaled_dot_product_attention(q, k, v, None, 0.0, False)
        return functional.linear(y.transpose(1, 2).reshape(x.size(0), -1, embed_dim), proj_weight, proj_bias)

    def _encoder_layer(self, mode: Any, args: Any, kwargs: Dict[str, Any]) -> Any:
        """nn.TransformerEncoderLayer's fast path as transformer_encoder_layer_forward runs it:
        layer norms, the attention (either branch), residual adds in place, the feed-forward as
        two addmm (the first with its activation fused, _addmm_activation). None for nested
        tensors: they stop the trace."""
        torch = self.torch
        bound = schema_values(torch.ops.aten._transformer_encoder_layer_fwd.default, args, kwargs)
        src = bound["src"]
        embed_dim, num_heads = int(bound["embed_dim"]), int(bound["num_heads"])
        if not self._dense(src) or src.numel() == 0:
            return None
        functional = torch.nn.functional

        def norm(x: Any, which: int) -> Any:
            return functional.layer_norm(x, (embed_dim,), bound[f"norm_weight_{which}"], bound[f"norm_bias_{which}"], float(bound["eps"]))

        def linear(bias: Any, x: Any, weight: Any, gelu: Optional[bool]) -> Any:
            flat = x.view(x.size(0) * x.size(1), x.size(2))
            out = torch._addmm_activation(bias, flat, weight.t(), beta=1, alpha=1, use_gelu=gelu) if gelu is not None else torch.addmm(bias, flat, weight.t())
            return out.view(x.size(0), x.size(1), -1)

        norm_first = bool(bound["norm_first"])
        fused = self._sdp_branch(src, embed_dim, num_heads, bound["mask"])
        with mode:
            x = norm(src, 1) if norm_first else src
            weights = (bound["qkv_weight"], bound["qkv_bias"], bound["proj_weight"], bound["proj_bias"])
            x = self._self_attention(x, embed_dim, num_heads, weights, fused, bound["mask"], False, False)[0]
            x.add_(src)
            if not norm_first:
                x = norm(x, 1)
            before_ffn = x
            if norm_first:
                x = norm(x, 2)
            # ffn() takes its input by reference: the caller's tensor lives until both products
            # are made and the first is let go.
            hidden = linear(bound["ffn_bias_1"], x, bound["ffn_weight_1"], bool(bound["use_gelu"]))
            hidden = linear(bound["ffn_bias_2"], hidden, bound["ffn_weight_2"], None)
            x = hidden
            x.add_(before_ffn)
            if not norm_first:
                x = norm(x, 2)
            return x
