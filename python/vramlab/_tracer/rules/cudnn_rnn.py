"""cuDNN's recurrent layers (``nn.LSTM``, ``nn.GRU``, ``nn.RNN``) inside ``vramlab.trace``: the path
their operators take on CUDA, on the meta tensors that stand in for CUDA ones.

Sources:

- PyTorch's ``aten/src/ATen/native/cudnn/RNN.cpp`` (2.11; 2.15 takes the same path): ``lstm``,
  ``gru``, ``rnn_tanh`` and ``rnn_relu`` run as ``_cudnn_impl`` on CUDA wherever cuDNN is enabled
  (``cudnn_is_acceptable``: every floating dtype, bfloat16 included). ``try_get_weight_buf`` finds the
  flat weight buffer that ``flatten_parameters`` made (``_cudnn_rnn_flatten_weight``: a zeroed buffer
  of every layer's weights and both biases, parameters copied in and set to views of it); without
  one ``_cudnn_rnn`` makes its own copy per call. ``get_dropout_state`` makes, on the first training
  call with dropout, an 8-byte seed and the dropout state (``_cudnn_init_dropout_state``), kept for
  the process. ``_cudnn_rnn`` allocates the input's contiguous copy (``batch_first``), the output, hy,
  cy, the weight copy where there is no flat buffer, the workspace and the reserve (training), and
  frees the workspace, then the copy. ``_cudnn_rnn_backward`` makes the missing gradients' zeros,
  then (``_cudnn_rnn_backward_input``) the contiguous input, dx, dhx, dcx and its workspace, then
  (``_cudnn_rnn_backward_weight``) the contiguous input again, dw (zeroed, the size of the weight
  buffer) and its workspace; the weights' gradients are views of dw, or copies where the layer's
  parameter count is not cuDNN's (no biases). ``get_algo`` picks cuDNN's algorithm: persistent for
  small hidden sizes (forward and backward apart), persistent static for some float16 shapes.
- ``torch/nn/modules/rnn.py``: ``flatten_parameters`` (its checks; bfloat16 is not flattened).
- The sizes cuDNN chooses (``cudnnGetRNNTempSpaceSizes``: the workspace and the reserve, and
  ``cudnnDropoutGetStatesSize``) are derived from the H100 measurements
  ``reports/reference/h100/recurrent`` (``sweep.jsonl.gz`` and ``random.jsonl.gz`` for the design;
  ``random3.jsonl.gz`` held out): the README there gives the structures and how often they hold.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from ...errors import UnfollowedError
from ..where import here, user_frame
from . import PASS, Call, FunctionRule, Rule, register, register_function

# cudnnRNNMode_t, as PyTorch's torch.backends.cudnn.rnn.get_cudnn_mode numbers them.
RNN_RELU, RNN_TANH, LSTM, GRU = 0, 1, 2, 3
MODE_OF = {"rnn_relu": RNN_RELU, "rnn_tanh": RNN_TANH, "lstm": LSTM, "gru": GRU}
GATES = {RNN_RELU: 1, RNN_TANH: 1, LSTM: 4, GRU: 3}
NAMES = {RNN_RELU: "nn.RNN (relu)", RNN_TANH: "nn.RNN (tanh)", LSTM: "nn.LSTM", GRU: "nn.GRU"}
STANDARD, PERSIST_SMALL_H, PERSIST_STATIC = "standard", "persistent small-H", "persistent static"


class Shape:
    """One cuDNN RNN call as the sizes depend on it (RNN.cpp's RNNParams)."""

    def __init__(self, mode: int, elt: int, dtype: str, input_size: int, hidden: int, proj: int, layers: int, directions: int,
                 batch: int, seq: int, batch_sizes: Sequence[int], dropout: float, train: bool) -> None:
        self.mode, self.elt, self.dtype = mode, elt, dtype
        self.input_size, self.hidden, self.proj = input_size, hidden, proj
        self.layers, self.directions = layers, directions
        self.batch, self.seq = batch, seq
        self.batch_sizes = list(batch_sizes)
        self.packed = bool(self.batch_sizes)
        self.dropout = dropout if train else 0.0
        self.train = train

    @property
    def out(self) -> int:
        return self.proj or self.hidden


def num_weights(mode: int, input_size: int, hidden: int, proj: int, layers: int, directions: int) -> int:
    """cudnnGetRNNWeightSpaceSize in elements: per layer and direction the input and hidden
    matrices of every gate, both biases (cuDNN's descriptor is always CUDNN_RNN_DOUBLE_BIAS:
    RNN.cpp's get_parameters walks the biases whatever `bias` is), and the projection."""
    gates = GATES[mode]
    out = proj or hidden
    total = 0
    for layer in range(layers):
        width = input_size if layer == 0 else out * directions
        total += directions * (gates * hidden * (width + out) + 2 * gates * hidden + proj * hidden)
    return total


def layout(mode: int, input_size: int, hidden: int, proj: int, layers: int, directions: int, has_biases: bool) -> List[int]:
    """Where flatten puts each of the module's flat weights (elements from the buffer's start), in
    the module's order (w_ih, w_hh, [b_ih, b_hh], [w_hr] per layer and direction)."""
    gates = GATES[mode]
    out = proj or hidden
    offsets, at = [], 0
    for layer in range(layers):
        width = input_size if layer == 0 else out * directions
        for _ in range(directions):
            parts = [gates * hidden * width, gates * hidden * out, gates * hidden, gates * hidden] + ([proj * hidden] if proj else [])
            starts = []
            for size in parts:
                starts.append(at)
                at += size
            offsets.extend(starts[:2] + (starts[2:4] if has_biases else []) + starts[4:])
    return offsets


def get_algo(s: Shape, forward: bool, major: int, minor: int, multiprocessors: int) -> str:
    """RNN.cpp's get_algo (with use_rnn_persist_small_h, use_persist_common_heuristics and
    use_persist_device_heuristics)."""
    if s.proj:
        return STANDARD
    if not s.packed:
        if major >= 6 and s.dtype != "float64":
            small = (384 if forward else 256) if s.mode in (RNN_RELU, RNN_TANH) else (192 if forward else 128)
            if s.hidden <= small:
                return PERSIST_SMALL_H
        if s.dtype == "float16":
            common = s.layers == 1 and s.hidden <= 1024 and s.directions == 1 and s.hidden % 128 == 0 and s.input_size % 128 == 0
            b = s.batch
            if major == 7:
                device = minor != 5 and ((b % 16 == 0 and b not in (80, 112)) or b == 8) and (
                    (s.seq >= 40 and b <= 128) or (s.seq >= 20 and b <= 96) or (s.seq >= 10 and b <= 32))
            elif major >= 8 and multiprocessors >= 98 and minor != 6:
                if s.mode == GRU:
                    device = False
                elif s.mode == LSTM:
                    device = b % 8 == 0 and b <= 128
                else:
                    device = b % 8 == 0 and b <= 128 and (b < 96 or s.hidden < 896)
            else:
                device = False
            if common and device:
                return PERSIST_STATIC
    return STANDARD


# GPUs whose cuDNN 9.19 made the sizes below: the H100's design measurements, and the H200, where
# the same 1,500 configurations (random.jsonl.gz, seed 1) allocated event for event as on the H100
# (reports/reference/h200/recurrent).
MEASURED_ON = ("NVIDIA H100", "NVIDIA H200")

# Sizes cuDNN 9.19 chose on the H100 -------------------------------------------------------------

# cudnnDropoutGetStatesSize on the H100: 49,152 bytes per multiprocessor (6,488,064 for its 132).
DROPOUT_STATE_PER_SM = 49152


def _up(size: int, to: int = 32) -> int:
    return -(-size // to) * to


# Units of T·B·D·H elements each layer keeps for its backward, besides its output (from the
# measurements: the gates' pre-activations and what each mode's cell adds).
KEPT = {LSTM: 5, GRU: 6, RNN_TANH: 1, RNN_RELU: 1}


def reserve_size(s: Shape) -> int:
    """cudnnGetRNNTempSpaceSizes' reserve for a training forward, in bytes, as cuDNN 9.19 gave it on
    the H100 (reports/reference/h100/recurrent/README.md): 32-byte-aligned parts plus 256 bytes.
    With n the steps summed over the batch (the packed rows, or T·B): the layers' kept units
    (KEPT·L·D·n·H), the hidden layers' outputs ((L − 1)·D·n·out), and with dropout one bit per
    element of every hidden layer's output seen by each direction, padded to T·B. With projections
    the outputs are every layer's projection, one part (L·D·n·P), and the cells' outputs before
    projection are two parts, every layer's (L·D·n·H) and the hidden layers' ((L − 1)·D·n·H): so
    aligned, 316 of the 325 measured LSTM rows with projections are exact, against 231 as one part
    each of (2L − 1)·D·n·H and D·n·P beside the hidden layers' outputs (the nine left are 32 bytes
    short, all 16-bit; `reports/reference/h200/recurrent-autocast/README.md`)."""
    n = sum(s.batch_sizes) if s.packed else s.seq * s.batch
    d, layers, e = s.directions, s.layers, s.elt
    size = _up(KEPT[s.mode] * layers * d * n * s.hidden * e) + 256
    if s.proj:
        size += _up(layers * d * n * s.proj * e) + _up(layers * d * n * s.hidden * e) + _up((layers - 1) * d * n * s.hidden * e)
    else:
        size += _up((layers - 1) * d * n * s.out * e)
    if s.dropout:
        size += (layers - 1) * d * _up(s.seq * s.batch * d * s.out // 8)
    return size


def workspace_features(s: Shape) -> List[float]:
    """The products of the shape the workspace estimate is linear in: a constant, the layers, the
    steps' gates and inputs, the hidden layers' outputs, per-step state, the gates of at most 256
    steps (where cuDNN's standard algorithm tiles time), and the outputs."""
    n = sum(s.batch_sizes) if s.packed else s.seq * s.batch
    d, layers = s.directions, s.layers
    return [1.0, layers * d, n * s.hidden * d * layers, n * s.input_size, n * s.out * d * d * (layers - 1),
            s.batch * s.hidden * d * layers, min(s.seq, 256) * s.batch * s.hidden * d, n * s.out * d * layers]


# The workspace estimate per (mode, float32 or 16-bit, algorithm, training): the coefficients of
# workspace_features, the largest relative error on the design rows (the note's bound) and their
# number. Made by scripts/fit_cudnn_rnn_workspace.py from sweep.jsonl.gz and random.jsonl.gz (groups of
# 20 rows or more: the persistent static algorithm, one measured shape per mode, is refused).
WORKSPACE_FIT: Dict[Tuple[str, str, str, bool], Tuple[List[float], float, int]] = {
    ('gru', '16-bit', 'persistent small-H', False): ([336427.54, 8417791.9921, -0.443, 2.2158, 2.151, 7.4111, 13.7118, -0.4425], 0.72, 128),
    ('gru', '16-bit', 'persistent small-H', True): ([-107250.9302, 8522745.8947, 0.1954, 7.5066, 1.4018, 24.3302, 10.9773, 0.195], 0.78, 247),
    ('gru', '16-bit', 'standard', False): ([-759755.511, 10309879.1878, -0.0188, 0.8921, 0.7755, 38.454, 9.0093, -0.0123], 3.0, 187),
    ('gru', '16-bit', 'standard', True): ([-425236.0092, 10068585.8208, 0.4004, 3.2943, 0.547, 40.9641, 6.8212, 0.4024], 2.94, 383),
    ('gru', 'float32', 'persistent small-H', False): ([351791.2205, 8277681.0499, 17.3606, 4.0581, -17.6547, 29.7061, 15.8205, 17.3607], 0.43, 138),
    ('gru', 'float32', 'persistent small-H', True): ([147097.3295, 8348392.3804, 20.4152, 14.211, -20.0694, 43.6208, 10.1276, 20.4151], 0.58, 261),
    ('gru', 'float32', 'standard', False): ([4609310.9929, 9410120.1414, 1.6885, -1.0806, 0.5729, 93.7112, 11.0775, 1.6885], 7.42, 182),
    ('gru', 'float32', 'standard', True): ([3275059.1353, 9806582.6825, 2.0804, 3.7161, 0.3429, 89.5014, 8.8433, 2.081], 7.38, 379),
    ('lstm', '16-bit', 'persistent small-H', False): ([398736.3515, 8315124.9007, -2.3923, 1.5457, 7.8408, 45.1043, 35.5082, -2.3923], 1.1, 110),
    ('lstm', '16-bit', 'persistent small-H', True): ([-236536.881, 8547496.0411, -1.8914, 6.9485, 6.1916, -65.0214, 33.9498, -1.8914], 0.95, 210),
    ('lstm', '16-bit', 'standard', False): ([-818395.9323, 10005167.7943, -0.1368, 0.2561, 1.0884, 65.2851, 10.4898, 0.9194], 5.28, 217),
    ('lstm', '16-bit', 'standard', True): ([-430468.4121, 9864969.2764, 0.3637, 2.7007, 1.1799, 67.2801, 8.162, 0.9581], 5.3, 444),
    ('lstm', 'float32', 'persistent small-H', False): ([1301099.2372, 7988332.1041, 12.5297, 3.3771, -9.0635, 36.5996, 43.4261, 12.5298], 0.16, 86),
    ('lstm', 'float32', 'persistent small-H', True): ([581602.2376, 8175379.5523, 6.6131, 12.5471, -1.6062, 57.4221, 51.3076, 6.613], 0.62, 162),
    ('lstm', 'float32', 'standard', False): ([4673815.8856, 8160550.8289, -4.6597, 1.2752, 6.4131, 304.5084, 20.28, 2.2384], 8.8, 204),
    ('lstm', 'float32', 'standard', True): ([4916735.5637, 8152398.4404, -4.9949, 5.4762, 7.8044, 302.0527, 18.9715, 1.6978], 8.76, 418),
    ('rnn_relu', '16-bit', 'persistent small-H', False): ([-79070.2203, 8508654.5958, -0.5403, 2.0075, 0.8961, 13.4086, 10.285, -0.5401], 0.37, 144),
    ('rnn_relu', '16-bit', 'persistent small-H', True): ([-261045.1462, 8569865.6427, 0.1683, 7.6098, 0.6111, 20.1433, 12.0198, 0.1681], 0.67, 280),
    ('rnn_relu', '16-bit', 'standard', False): ([-820155.0044, 9699436.1218, 1.1098, 0.6187, -2.0417, 33.881, 1.0922, 1.1148], 2.08, 175),
    ('rnn_relu', '16-bit', 'standard', True): ([-703983.2652, 9675929.5681, 1.7134, 6.771, -2.2904, 41.7122, -0.7997, 1.7123], 1.91, 358),
    ('rnn_relu', 'float32', 'persistent small-H', False): ([24660.3616, 8449067.6963, 2.8858, 4.0027, -1.6476, 14.5338, 15.739, 2.8854], 0.41, 158),
    ('rnn_relu', 'float32', 'persistent small-H', True): ([-483110.7588, 8631505.1989, 8.6072, 15.3421, -6.8419, 18.8579, 21.2836, 8.6073], 0.44, 306),
    ('rnn_relu', 'float32', 'standard', False): ([-2461094.5756, 10800358.2215, -0.4181, 2.5822, 2.8854, 56.8802, 7.8824, -0.4186], 1.58, 168),
    ('rnn_relu', 'float32', 'standard', True): ([-1702220.9505, 10304033.5898, 0.0824, 6.6579, 3.3955, 68.6052, 10.8646, 0.0817], 1.62, 346),
    ('rnn_tanh', '16-bit', 'persistent small-H', False): ([-187001.1056, 8536659.4265, -0.1951, 2.0859, -0.6387, 7.5302, 12.4615, -0.1951], 1.02, 156),
    ('rnn_tanh', '16-bit', 'persistent small-H', True): ([-438290.4667, 8577352.4885, 0.0345, 8.3456, -1.6208, 14.5704, 20.3829, 0.0347], 1.4, 302),
    ('rnn_tanh', '16-bit', 'standard', False): ([-733407.5689, 9549701.5482, 0.6292, 2.802, -0.2098, 36.6022, 0.6455, 0.6263], 1.83, 172),
    ('rnn_tanh', '16-bit', 'standard', True): ([-956327.2544, 9619464.0636, 1.5345, 7.2718, -1.1065, 55.8786, -1.0212, 1.5349], 2.1, 354),
    ('rnn_tanh', 'float32', 'persistent small-H', False): ([26391.1834, 8440337.41, 6.0855, 3.9616, -8.198, 24.9866, 11.244, 6.0854], 0.58, 148),
    ('rnn_tanh', 'float32', 'persistent small-H', True): ([-49695.5417, 8467395.3419, 13.8138, 13.9327, -14.5468, 39.238, 10.575, 13.8139], 0.66, 288),
    ('rnn_tanh', 'float32', 'standard', False): ([-1040239.6374, 10467403.1979, -0.9124, 3.2459, 2.6211, 35.4637, 10.0008, -0.9119], 1.71, 163),
    ('rnn_tanh', 'float32', 'standard', True): ([-256942.9116, 9964957.6254, -1.3436, 7.816, 3.7328, 67.9765, 15.0018, -1.3419], 1.73, 334),
}


def workspace_estimate(s: Shape, algo: str, training: bool) -> Optional[Tuple[int, int]]:
    """cudnnGetRNNTempSpaceSizes' workspace, estimated: (bytes, bound in bytes), or None where the
    group was not measured."""
    name = {v: k for k, v in MODE_OF.items()}[s.mode]
    fit = WORKSPACE_FIT.get((name, "float32" if s.elt == 4 else "16-bit", algo, training))
    if fit is None:
        return None
    coef, error, _ = fit
    size = max(0, int(round(sum(c * f for c, f in zip(coef, workspace_features(s))))))
    return size, int(size * error) + 1


# The rules ----------------------------------------------------------------------------------------


def _meta(torch: Any, value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "meta"


@register_function
class RecurrentLayers(FunctionRule):
    """``torch._VF.lstm``/``gru``/``rnn_tanh``/``rnn_relu`` on stand-ins: RNN.cpp's ``_cudnn_impl``."""

    names = set(MODE_OF)
    source = "aten/src/ATen/native/cudnn/RNN.cpp (_cudnn_impl, try_get_weight_buf, get_dropout_state)"

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.dropout_state: Any = None
        patches = getattr(session, "_patches", None)
        if patches is not None:
            from torch.nn.modules.rnn import RNNBase

            original = RNNBase.flatten_parameters
            rule = self

            def flatten_parameters(module: Any) -> None:
                # The stand-ins say they are on cuda:0 to the program; here they are seen as
                # they are.
                with session.torch._C.DisableTorchFunction():
                    flattened = rule.flatten(module)
                if not flattened:
                    original(module)

            flatten_parameters.__doc__ = original.__doc__
            patches.install({(RNNBase, "flatten_parameters"): flatten_parameters})

    # flatten_parameters -------------------------------------------------------------------------

    def flatten(self, module: Any) -> bool:
        """RNNBase.flatten_parameters on stand-ins, as on the GPU; False where the module's
        weights are not stand-ins (PyTorch's own then runs)."""
        torch = self.torch
        weights = module._flat_weights
        if len(weights) != len(module._flat_weights_names) or not all(isinstance(w, torch.Tensor) for w in weights):
            return False
        if not any(_meta(torch, w) for w in weights):
            return False
        dtype = weights[0].dtype
        if not all(_meta(torch, w) and w.dtype == dtype for w in weights):
            return True
        # torch.backends.cudnn.is_acceptable: enabled, and a dtype in CUDNN_TENSOR_DTYPES.
        if not torch.backends.cudnn.enabled or dtype not in (torch.float16, torch.float32, torch.float64):
            return True
        if len({(w.untyped_storage()._cdata, w.storage_offset()) for w in weights}) != len(weights):
            return True
        mode = MODE_OF.get(str(module.mode).lower())
        if mode is None:
            return True
        directions = 2 if module.bidirectional else 1
        count = num_weights(mode, module.input_size, module.hidden_size, module.proj_size, module.num_layers, directions)
        offsets = layout(mode, module.input_size, module.hidden_size, module.proj_size, module.num_layers, directions, bool(module.bias))
        if len(offsets) != len(weights):
            return True
        with torch.no_grad():
            buffer = torch.zeros(count, dtype=dtype, device="meta")
            for w, at in zip(weights, offsets):
                view = buffer[at : at + w.numel()].view_as(w)
                view.copy_(w)
            del view
            for w, at in zip(weights, offsets):
                w.set_(buffer.untyped_storage(), at, w.shape, w.stride())
        return True

    # The call -----------------------------------------------------------------------------------

    def call(self, mode: Any, func: Any, args: Any, kwargs: Any) -> Any:
        torch = self.torch
        if kwargs or not any(_meta(torch, a) for a in torch.utils._pytree.tree_leaves(args)):
            return PASS
        name = getattr(func, "__name__", "")
        cudnn_mode = MODE_OF[name]
        if cudnn_mode == LSTM:
            packed = isinstance(args[1], torch.Tensor)
        else:
            packed = isinstance(args[2], torch.Tensor)
        if packed:
            data, batch_sizes, hidden, params, has_biases, num_layers, dropout, train, bidirectional = args
            batch_first = False
        else:
            data, hidden, params, has_biases, num_layers, dropout, train, bidirectional, batch_first = args
            batch_sizes = None
        if not torch.backends.cudnn.enabled:
            raise UnfollowedError(
                f"{name} at {here()}: with cuDNN disabled (torch.backends.cudnn.enabled = False) recurrent layers run PyTorch's own CUDA kernels step by step, which vramlab.trace does not follow; the trace up to there is kept"
            )
        if data.numel() == 0:
            raise UnfollowedError(f"{name} at {here()}: an empty input runs PyTorch's own kernels, not cuDNN's, which vramlab.trace does not follow; the trace up to there is kept")
        if cudnn_mode == LSTM:
            hx, cx = hidden[0], hidden[1]
        else:
            hx, cx = hidden, None
        hidden_size, proj = hx.shape[2], 0
        if cx is not None and cx.shape[2] != hx.shape[2]:
            hidden_size, proj = cx.shape[2], hx.shape[2]
        directions = 2 if bidirectional else 1
        weight_buf = self.weight_buf(data, list(params), bool(has_biases), cudnn_mode, hidden_size, proj, num_layers, directions)
        state = None
        if train and dropout > 0:
            state = self.state(data)
        per_layer = (4 if has_biases else 2) + (1 if proj else 0)
        sizes = [] if batch_sizes is None else [int(b) for b in batch_sizes.tolist()]
        output, hy, cy, _, _ = torch.ops.aten._cudnn_rnn(
            data, list(params), per_layer, weight_buf, hx, cx, cudnn_mode, hidden_size, proj, num_layers,
            bool(batch_first), float(dropout), bool(train), bool(bidirectional), sizes, state,
        )
        if cudnn_mode == LSTM:
            return output, hy, cy
        return output, hy

    def weight_buf(self, data: Any, params: List[Any], has_biases: bool, mode: int, hidden: int, proj: int, layers: int, directions: int) -> Any:
        """RNN.cpp's try_get_weight_buf: the flat buffer the parameters are views of, or None."""
        torch = self.torch
        first = params[0]
        count = num_weights(mode, data.shape[-1], hidden, proj, layers, directions)
        storage = first.untyped_storage()
        if storage.nbytes() < count * first.element_size():
            return None
        offsets = layout(mode, data.shape[-1], hidden, proj, layers, directions, has_biases)
        if len(offsets) != len(params):
            return None
        for p, at in zip(params, offsets):
            if p.untyped_storage()._cdata != storage._cdata or p.storage_offset() != at:
                return None
        if not params[-1].is_contiguous():
            return None
        with torch.no_grad():
            return first.detach().as_strided((count,), (1,), 0)

    def state(self, data: Any) -> Any:
        """get_dropout_state: made once (on the first training call with dropout), with its seed."""
        torch = self.torch
        if self.dropout_state is None:
            with torch.no_grad():
                seed = torch.empty((), dtype=torch.long, device=data.device)
                del seed
                size = DROPOUT_STATE_PER_SM * int(self.session.gpu["multiprocessors"])
                self.dropout_state = torch.empty(size, dtype=torch.uint8, device=data.device)
            if not self.session.gpu["name"].startswith(MEASURED_ON):
                self.session.note(
                    "{count} cuDNN dropout states (nn.LSTM/GRU/RNN with dropout, training) are sized as on the H100 (48 KiB per multiprocessor: cudnnDropoutGetStatesSize, measured there)"
                )
        return self.dropout_state


@register
class CudnnRnn(Rule):
    """``_cudnn_rnn`` and ``_cudnn_rnn_backward`` as RNN.cpp allocates on CUDA; ``lstm`` and the
    others reaching the mode whole (TorchScript) are refused."""

    ops = {"_cudnn_rnn", "_cudnn_rnn_backward", "lstm", "gru", "rnn_tanh", "rnn_relu"}
    source = "aten/src/ATen/native/cudnn/RNN.cpp (_cudnn_rnn, _cudnn_rnn_backward_input, _cudnn_rnn_backward_weight)"
    order = 40

    def before(self, call: Call) -> Any:
        if call.op == "_cudnn_rnn":
            return self.forward(call)
        if call.op == "_cudnn_rnn_backward":
            return self.backward(call)
        raise UnfollowedError(
            f"{call.op} at {here()}: a recurrent layer called below Python (TorchScript), whose cuDNN path vramlab.trace follows only from nn.LSTM, nn.GRU and nn.RNN's Python; the trace up to there is kept"
        )

    # Sizes ---------------------------------------------------------------------------------------

    def shape(self, b: Dict[str, Any]) -> Shape:
        x = b["input"]
        sizes = list(b["batch_sizes"])
        if sizes:
            batch, seq = sizes[0], len(sizes)
        elif b["batch_first"]:
            batch, seq = x.shape[0], x.shape[1]
        else:
            batch, seq = x.shape[1], x.shape[0]
        dtype = str(x.dtype).replace("torch.", "")
        return Shape(b["mode"], x.element_size(), dtype, x.shape[-1], b["hidden_size"], b["proj_size"], b["num_layers"],
                     2 if b["bidirectional"] else 1, int(batch), int(seq), [int(v) for v in sizes], b["dropout"], b["train"])

    def algo(self, s: Shape, forward: bool) -> str:
        session = self.session
        return get_algo(s, forward, session.major, session.minor, int(session.gpu["multiprocessors"]))

    def sizes(self, s: Shape, forward: bool) -> Tuple[int, int]:
        """(workspace, reserve) of a call: cuDNN's, where derived; else the best estimate, noted."""
        session = self.session
        algo = self.algo(s, forward)
        training = s.train
        reserve = reserve_size(s) if training else 0
        estimate = workspace_estimate(s, algo, training)
        if estimate is None:
            raise UnfollowedError(
                f"{NAMES[s.mode]} at {here()}: cuDNN's {algo} RNN algorithm in {s.dtype}, whose workspace was not measured (reports/reference/h100/recurrent); the trace up to there is kept"
            )
        workspace, bound = estimate
        if s.packed:
            # The measurements have no packed sequences: the bound of the fit says nothing there
            # (ISSUE35G's packed BiLSTM: 74.8 MB on the H100 against the estimate's 98.8 MB).
            session.note(
                f"{{count}} cuDNN RNN calls ({NAMES[s.mode]} and the like) on packed sequences have a workspace estimated from measurements of unpacked ones (rules/cudnn_rnn.py; no packed input was measured): peak memory may differ by more than the estimate's bound, by up to the workspace itself"
            )
            return workspace, reserve
        self.largest = max(getattr(self, "largest", 0), bound)
        session.note(
            f"{{count}} cuDNN RNN calls ({NAMES[s.mode]} and the like) have an estimated workspace, freed within the call (not derived: fitted to the H100's measurements, rules/cudnn_rnn.py); peak memory may differ by up to {self.largest:,} bytes, the largest of their bounds"
        )
        if not session.gpu["name"].startswith(MEASURED_ON):
            session.note(
                "{count} cuDNN RNN calls have the reserve and workspace cuDNN 9.19 chose on the H100 and the H200, not measured on this GPU"
            )
        return workspace, reserve

    # _cudnn_rnn ----------------------------------------------------------------------------------

    def forward(self, call: Call) -> Any:
        torch = self.torch
        b = call.bound()
        record = call.record
        frame = user_frame()
        s = self.shape(b)
        x = b["input"]
        hx, cx = b["hx"], b["cx"]
        if b["batch_first"] and not s.packed:
            x = x.transpose(0, 1)
        copy = None
        if not x.is_contiguous():
            copy = torch.empty(x.shape, dtype=x.dtype, device="meta")
            record.track(copy, frame)
        out_width = s.out * s.directions
        output_shape = [x.shape[0], out_width] if s.packed else [s.seq, s.batch, out_width]
        output = torch.empty(output_shape, dtype=x.dtype, device="meta")
        record.track(output, frame)
        hy = torch.empty(s.layers * s.directions, s.batch, s.out, dtype=hx.dtype, device="meta")
        record.track(hy, frame)
        if cx is not None:
            cy = torch.empty(s.layers * s.directions, s.batch, s.hidden, dtype=cx.dtype, device="meta")
            record.track(cy, frame)
        else:
            cy = torch.empty(0, dtype=hx.dtype, device="meta")
        weight_buf = b["weight_buf"]
        if weight_buf is None:
            count = num_weights(s.mode, s.input_size, s.hidden, s.proj, s.layers, s.directions)
            weight_buf = torch.empty(count, dtype=x.dtype, device="meta")
            record.track(weight_buf, frame)
        workspace, reserve_bytes = self.sizes(s, True)
        ws = record.alloc(workspace, frame) if workspace else None
        reserve = torch.empty(reserve_bytes, dtype=torch.uint8, device="meta")
        record.track(reserve, frame)
        if ws is not None:
            record.free(ws, workspace)
        del copy
        if b["batch_first"] and not s.packed:
            output = output.transpose(0, 1)
        return output, hy, cy, reserve, weight_buf

    # _cudnn_rnn_backward -------------------------------------------------------------------------

    def backward(self, call: Call) -> Any:
        torch = self.torch
        b = call.bound()
        record = call.record
        frame = user_frame()
        s = self.shape(b)
        s.train = bool(b["train"])
        hx, cx, output = b["hx"], b["cx"], b["output"]
        grad_output, grad_hy, grad_cy = b["grad_output"], b["grad_hy"], b["grad_cy"]
        weights = list(b["weight"])
        if grad_output is None and grad_hy is None and grad_cy is None:
            return None, None, None, [None] * len(weights)

        def made(shape: Sequence[int], dtype: Any) -> Any:
            t = torch.empty(list(shape), dtype=dtype, device="meta")
            record.track(t, frame)
            return t

        def contiguous(t: Any) -> Any:
            return t if t.is_contiguous() else made(t.shape, t.dtype)

        if grad_output is None:
            grad_output = made(output.shape, output.dtype)
        if grad_hy is None:
            grad_hy = made(hx.shape, hx.dtype)
        if cx is not None and grad_cy is None:
            grad_cy = made(cx.shape, cx.dtype)
        workspace, _ = self.sizes(s, False)

        # _cudnn_rnn_backward_input
        x, dy = b["input"], grad_output
        if b["batch_first"] and not s.packed:
            x, dy = x.transpose(0, 1), dy.transpose(0, 1)
        xc = contiguous(x)
        dyc = contiguous(dy)
        dhy = contiguous(grad_hy)
        dcy = contiguous(grad_cy) if grad_cy is not None else None
        dx = made(x.shape, x.dtype)
        dhx = made([s.layers * s.directions, s.batch, s.out], hx.dtype)
        dcx = made([s.layers * s.directions, s.batch, s.hidden], cx.dtype) if cx is not None else None
        ws = record.alloc(workspace, frame) if workspace else None
        if ws is not None:
            record.free(ws, workspace)
        del dcy, dhy, dyc, xc
        if b["batch_first"] and not s.packed:
            dx = dx.transpose(0, 1)

        # _cudnn_rnn_backward_weight
        grads: List[Any] = [None] * len(weights)
        if b["output_mask"][3]:
            xc = contiguous(x)
            weight_buf = b["weight_buf"]
            dw = made(weight_buf.shape, weight_buf.dtype)
            ws = record.alloc(workspace, frame) if workspace else None
            stride0 = b["weight_stride0"]
            cudnn_stride0 = 4 + (1 if s.proj else 0)
            offsets = layout(s.mode, s.input_size, s.hidden, s.proj, s.layers, s.directions, stride0 == cudnn_stride0)
            if stride0 == cudnn_stride0:
                grads = [dw.as_strided(w.shape, w.stride(), at) for w, at in zip(weights, offsets)]
            else:
                grads = [made(w.shape, w.dtype) for w in weights]
            if ws is not None:
                record.free(ws, workspace)
            del dw, xc
        # _cudnn_rnn_backward's own zeros go as it returns, in reverse order of their making.
        del grad_cy, grad_hy, grad_output
        return dx, dhx, dcx, grads
