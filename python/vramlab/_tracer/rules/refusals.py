"""Operators the trace refuses in one line, because what the GPU allocates for them is not known
here: PyTorch's fused inference fast paths on nested tensors (cuDNN's recurrent layers are
followed: cudnn_rnn.py; grouped matrix multiplies: grouped_mm.py)."""

from __future__ import annotations

from typing import Any

from ...errors import UnfollowedError
from ..where import here
from . import Call, Rule, register

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
    ops = FAST_PATHS
    source = "attention.cu, transformer.cpp (fast paths)"
    order = 20

    def before(self, call: Call) -> Any:
        raise UnfollowedError(
            f"{call.op} at {here()}: PyTorch's fused inference fast path with nested tensors (nn.TransformerEncoder given a key padding mask) or attention between different tensors, whose kernels' temporaries vramlab.trace does not size; the trace up to there is kept (torch.backends.mha.set_fastpath_enabled(False) traces the path taken in training)"
        )
