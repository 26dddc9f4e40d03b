"""The recurrent cells (``nn.LSTMCell``, ``nn.GRUCell``) inside ``vramlab.trace``: the path their
operators take on CUDA, on the meta tensors that stand in for CUDA ones.

``lstm_cell`` and ``gru_cell`` are composite operators whose C++ picks a path by device
(``aten/src/ATen/native/RNN.cpp``, ``LSTMCell`` and ``GRUCell``): on CUDA the two gate products
(``matmul(input, w_ih.t())``, then ``matmul(hx, w_hh.t())``) feed one fused kernel
(``_thnn_fused_lstm_cell``, ``_thnn_fused_gru_cell``, ``aten/src/ATen/native/cuda/RNN.cu``) that
keeps a workspace of the gates for its backward; elsewhere, meta included, the gates are added and
split by separate operators, with other allocations. The CUDA path is registered here for
``AutogradMeta``, below autocast (whose casts come first, as on the GPU) and above autograd's
composite, so each product and fused kernel is an operation autograd records, as on the GPU.

The GRU's fused kernel and its backward have no meta kernels in PyTorch: theirs are written here
from ``RNN.cu``'s shapes (workspace ``[B, 5H]``, then ``hy``; in backward the input and hidden
gates' gradients ``[B, 3H]`` each, ``hx``'s ``[B, H]``, and the bias gradients, their sums over
the batch, where there are biases). ``nn.RNNCell``'s ``rnn_tanh_cell`` and ``rnn_relu_cell`` take
one path on every device and need nothing here.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

from ..registered import RegisteredKernels
from . import Call, Rule, register

# The fused cells' outputs in the order RNN.cu allocates them: the workspace first.
ALLOCATION_ORDER = {"_thnn_fused_lstm_cell": (2, 0, 1), "_thnn_fused_gru_cell": (1, 0)}


@register
class FusedCellOrder(Rule):
    ops = set(ALLOCATION_ORDER)
    source = "ATen/native/cuda/RNN.cu (the workspace is allocated before hy and cy)"
    order = 50

    def outputs(self, call: Call, out: Any, made: List[Any]) -> List[Any]:
        order = ALLOCATION_ORDER[call.op]
        return [made[i] for i in order] if len(made) == len(order) else made


class RecurrentCells(RegisteredKernels):
    """The CUDA path of the recurrent cells for one trace: installed on entering it, removed on
    leaving."""

    def kernels(self) -> List[Tuple[str, Callable[..., Any], str]]:
        return [
            ("lstm_cell", self._lstm_cell, "AutogradMeta"),
            ("gru_cell", self._gru_cell, "AutogradMeta"),
            ("_thnn_fused_gru_cell", self._fused_gru_cell, "Meta"),
            ("_thnn_fused_gru_cell_backward", self._fused_gru_cell_backward, "Meta"),
        ]

    def _lstm_cell(self, input: Any, hx: Any, w_ih: Any, w_hh: Any, b_ih: Optional[Any] = None, b_hh: Optional[Any] = None) -> Any:
        torch = self.torch
        input_gates = torch.matmul(input, w_ih.t())
        hidden_gates = torch.matmul(hx[0], w_hh.t())
        hy, cy, _ = torch.ops.aten._thnn_fused_lstm_cell(input_gates, hidden_gates, hx[1], b_ih, b_hh)
        return hy, cy

    def _gru_cell(self, input: Any, hx: Any, w_ih: Any, w_hh: Any, b_ih: Optional[Any] = None, b_hh: Optional[Any] = None) -> Any:
        torch = self.torch
        input_gates = torch.matmul(input, w_ih.t())
        hidden_gates = torch.matmul(hx, w_hh.t())
        return torch.ops.aten._thnn_fused_gru_cell(input_gates, hidden_gates, hx, b_ih, b_hh)[0]

    def _fused_gru_cell(self, input_gates: Any, hidden_gates: Any, hx: Any, input_bias: Optional[Any] = None, hidden_bias: Optional[Any] = None) -> Any:
        torch = self.torch
        batch, hidden = hx.shape[0], hx.shape[-1]
        workspace = torch.empty(batch, 5 * hidden, dtype=input_gates.dtype, device="meta")
        return torch.empty_like(hx, memory_format=torch.contiguous_format), workspace

    def _fused_gru_cell_backward(self, grad_hy: Any, workspace: Any, has_bias: bool) -> Any:
        torch = self.torch
        batch, hidden = grad_hy.shape[0], grad_hy.shape[-1]
        made = dict(dtype=grad_hy.dtype, device="meta")
        grad_input_gates = torch.empty(batch, 3 * hidden, **made)
        grad_hidden_gates = torch.empty(batch, 3 * hidden, **made)
        grad_hx = torch.empty(batch, hidden, **made)
        if not has_bias:
            return grad_input_gates, grad_hidden_gates, grad_hx, None, None
        return grad_input_gates, grad_hidden_gates, grad_hx, torch.empty(3 * hidden, **made), torch.empty(3 * hidden, **made)
