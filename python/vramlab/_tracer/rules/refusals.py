"""Operators the trace refuses in one line, because what the GPU allocates for them is not known
here: PyTorch's fused inference fast paths on nested tensors, grouped matrix multiplies outside
bfloat16, and cuDNN's recurrent layers (whose workspace and reserve sizes are cuDNN's choice:
reports/reference/h100/recurrent/README.md says what was measured and why it is not enough)."""

from __future__ import annotations

from typing import Any

from ...errors import UnfollowedError
from ..where import here
from . import PASS, Call, FunctionRule, Rule, register, register_function

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
RECURRENT = {"lstm", "gru", "rnn_tanh", "rnn_relu"}


def recurrent_refusal(name: str) -> UnfollowedError:
    return UnfollowedError(
        f"{name} at {here()}: recurrent layers run as cuDNN RNN on the GPU (nn.LSTM, nn.GRU, nn.RNN), whose workspace and reserve sizes vramlab.trace does not model yet (reports/reference/h100/recurrent: measured, not settled); loops over nn.LSTMCell, nn.GRUCell or nn.RNNCell are followed (the trace up to there is kept)"
    )


@register
class Refusals(Rule):
    ops = FAST_PATHS | RECURRENT | {"_grouped_mm"}
    source = "attention.cu, transformer.cpp (fast paths); RNN.cpp (cuDNN RNN); GroupedBlas.cpp (_grouped_mm)"
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
        raise recurrent_refusal(op)


@register_function
class RecurrentLayers(FunctionRule):
    names = RECURRENT
    source = "RNN.cpp: nn.LSTM, nn.GRU and nn.RNN run as _cudnn_rnn on CUDA"
    order = 20

    def call(self, mode: Any, func: Any, args: Any, kwargs: Any) -> Any:
        torch = self.torch
        if any(isinstance(a, torch.Tensor) and a.device.type == "meta" for a in torch.utils._pytree.tree_leaves((args, kwargs))):
            raise recurrent_refusal(getattr(func, "__name__", "rnn"))
        return PASS
