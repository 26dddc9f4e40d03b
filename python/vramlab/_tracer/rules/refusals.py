"""Operators the trace refuses in one line, because what the GPU allocates for them is not known
here: PyTorch's fused inference fast paths on nested tensors and grouped matrix multiplies outside
bfloat16 (cuDNN's recurrent layers are followed: cudnn_rnn.py)."""

from __future__ import annotations

from typing import Any

from ...errors import UnfollowedError
from ..where import here
from . import PASS, Call, Rule, register

# PyTorch's fused inference fast paths, taken on the GPU where the program runs
# nn.MultiheadAttention or nn.TransformerEncoder(Layer) without gradients: their kernels make
# temporaries their meta kernels do not (their scaled-dot-product branch is followed before it
# gets here: fast_paths.py).
FAST_PATHS = {
    "_native_multi_head_attention",
    "_transformer_encoder_layer_fwd",
    "_nested_tensor_from_mask",
    "_nested_tensor_from_mask_left_aligned",
    "_masked_softmax",
    "_transform_bias_rescale_qkv",
}


@register
class Refusals(Rule):
    ops = FAST_PATHS | {"_grouped_mm"}
    source = "attention.cu, transformer.cpp (fast paths); GroupedBlas.cpp (_grouped_mm)"
    order = 20

    def before(self, call: Call) -> Any:
        op = call.op
        if op in FAST_PATHS:
            raise UnfollowedError(
                f"{op} at {here()}: PyTorch's fused inference fast path with nested tensors (nn.TransformerEncoder given a key padding mask) or attention between different tensors, whose kernels' temporaries vramlab.trace does not size; the trace up to there is kept (torch.backends.mha.set_fastpath_enabled(False) traces the path taken in training)"
            )
        if op == "_grouped_mm":
            if call.args[0].dtype == self.torch.bfloat16:
                return PASS
            # PyTorch's meta kernel takes bfloat16 only; what CUDA's fallback for other types
            # allocates is not known here (MoE layers in bfloat16 are followed).
            raise UnfollowedError(
                f"{op} at {here()}: a grouped matrix multiply (mixture-of-experts layers) in {str(call.args[0].dtype).replace('torch.', '')}, which vramlab.trace follows in bfloat16 only; the trace up to there is kept"
            )
        return PASS
