"""cuDNN's convolution workspaces, as measured: which plan cuDNN's heuristics take for a
convolution, and so how much workspace PyTorch allocates around it (Conv_v8.cpp's run_conv_plan:
the plan's getWorkspaceSize(), allocated from the caching allocator and freed when the plan has
run), is cuDNN's own choice, made on the GPU and not derivable from a rule. Measured one
convolution at a time on a GPU (scripts/measure_conv_workspaces.py; the table is built by
scripts/build_conv_table.py from reports/reference/<gpu>/conv-workspaces), for torchvision's
models' convolutions at common batch and image sizes. A convolution outside the table takes the
workspaces of the model fitted to it (conv_model.py; byte-exact only on some shapes, of the right
order on most), and one outside both is traced without a workspace; the snapshot says which."""

import gzip
import json
import os
from typing import Any, Dict, List, Optional, Tuple

from ..recorder import UNKNOWN_PEAK
from . import Call, Rule, conv_model, register, relaid

_HERE = os.path.dirname(os.path.abspath(__file__))
_TABLES: Dict[str, Optional[Dict[str, Any]]] = {}


def table(device: str) -> Optional[Dict[str, Any]]:
    """The measured table for a GPU (by the name its profile gives, as the driver names it), or
    None where none was measured."""
    if not _TABLES:
        for name in sorted(os.listdir(_HERE)):
            if name.startswith("_conv_") and name.endswith(".json.gz"):
                with gzip.open(os.path.join(_HERE, name), "rt") as f:
                    measured = json.load(f)
                _TABLES[measured["device"]] = measured
    return _TABLES.get(device)


# GPUs whose cuDNN chooses the same plans: a convolution one GPU's table lacks takes the other's
# measured workspaces before the fitted model. Measured, not assumed: with torch 2.11 and cuDNN 9.19
# the H100's and the H200's workspaces are byte-identical for 25,810 of the 26,120 convolutions both
# tables hold (98.8%), and differ by more than 1 MiB for 114 (0.4%); the fitted model is byte-exact
# on 71-85% of held-out shapes (scripts/conv_model/timm_heldout.py prints both).
SAME_CHOICES = {"h100": "h200", "h200": "h100"}
SAME_CHOICES_NOTE = (
    "{count} convolutions (forward or backward) outside the {gpu}'s measured table have the workspaces cuDNN chose for "
    "the same shapes on the {other}, as measured there (reports/reference/{other_profile}/conv-workspaces): the two GPUs' "
    "choices are byte-identical for 98.8% of the 26,120 convolutions both were measured on and differ by more than 1 MiB for 0.4%"
)


def by_profile(profile: str) -> Optional[Dict[str, Any]]:
    """The measured table of a GPU profile ("h100"), or None."""
    table("")
    return next((t for t in _TABLES.values() if t is not None and t["profile"] == profile), None)


def key(dtype: Any, x_shape: List[int], w_shape: List[int], stride: Any, padding: Any, dilation: Any, groups: int) -> str:
    def pair(v: Any) -> str:
        v = list(v) if isinstance(v, (list, tuple)) else [v]
        return f"{v[0]},{v[-1]}"

    name = str(dtype).replace("torch.", "")
    return f"{name}|{','.join(map(str, x_shape))}|{','.join(map(str, w_shape))}|{pair(stride)}|{pair(padding)}|{pair(dilation)}|{groups}"


def outside_defaults(torch: Any, x: Any, weight: Any, transposed: bool) -> Optional[str]:
    """Why the measured table cannot answer for this convolution, or None where it may."""
    cudnn = torch.backends.cudnn
    if cudnn.enabled and cudnn.benchmark:
        return BENCHMARK
    if transposed:
        return "transposed convolutions"
    if x.dim() not in (3, 4, 5):
        return f"{x.dim() - 2}-d convolutions"
    # A 1-d convolution's input is made contiguous first (Convolution.cpp, before view4d): a copy
    # _contiguous_copies traces. A 2-d one's tensors are copied to the layout cuDNN is given
    # (_convolution and convolution_backward: input.contiguous(determine_backend_memory_format),
    # cudnn_conv_suggest_memory_format from each tensor's suggest_memory_format), so a strided
    # tensor's workspaces are those of its copy's layout.
    layout = conv_layout(torch, x, weight)
    laid_out = layout == torch.channels_last
    if layout == torch.channels_last_3d:
        return CHANNELS_LAST_3D
    if x.dim() == 5 and not (x.is_contiguous() and weight.is_contiguous()):
        return "strided tensors (neither contiguous nor channels-last)"
    if not cudnn.enabled or cudnn.deterministic:
        return "cuDNN settings other than the defaults (deterministic on, or cuDNN off)"
    if x.dtype == torch.float32 and not cudnn.allow_tf32:
        return "float32 without TF32"
    if laid_out:
        return CHANNELS_LAST
    return None


BENCHMARK = "cudnn.benchmark on"
# cuDNN runs a channels-last convolution (either tensor in channels-last: ConvUtils.h's
# cudnn_conv_suggest_memory_format) with plans of its own, measured in a table of their own.
CHANNELS_LAST = "channels-last tensors"
CHANNELS_LAST_NOTE = "{count} channels-last convolutions (forward or backward) outside the measured table have the workspaces of the channels-last model (conv_model.py's CHANNELS_LAST_MODEL, fitted to the H200's channels-last rows; its held-out figures are there): weight gradients' workspaces are the least known, and peak memory may differ by up to the largest workspace"
# Their outputs are laid out as cuDNN lays them, their workspaces neither measured nor modelled.
CHANNELS_LAST_3D = "channels-last 3-d tensors (no workspaces of theirs were measured)"
BENCHMARK_NOTE = (
    f"{UNKNOWN_PEAK} torch.backends.cudnn.benchmark is on, so the first call of each convolution shape "
    "(forward and each backward; {count} convolution calls here) times every candidate plan in one workspace as large as the largest "
    "candidate's, up to the GPU's free memory (aten/src/ATen/native/cudnn/Conv_v8.cpp, generate_and_filter_plans), "
    "then keeps the fastest plan with its own workspace: cuDNN's candidates and timings are not known without the GPU, "
    "so peak allocated and reserved here are lower bounds and the GPU's can be several times higher "
    "(ResNet-18 at batch 64 of 128x128 on an H200: 5.1x, reports/reference/h200/trace-workloads-35h); "
    "trace with benchmark off for a figure to trust"
)


# The square kernels, strides and dilations the workspace measurements cover
# (reports/reference/<gpu>/conv-workspaces): the fitted model is used only within them.
MEASURED_KERNELS = {1, 2, 3, 4, 5, 7}
MEASURED_STRIDES = {1, 2, 4}


ONE_D_NOTE = "{count} 1-d convolutions (forward or backward) have the fitted model's workspaces, as the 2-D convolutions of height 1 cuDNN runs for them: on 300 1-d convolutions measured on the H100 and kept out of the fit, byte-exact for 73% of forwards, 76% of input gradients and 55% of weight gradients (reports/reference/conv-model/FINDINGS.md)"


def measured_kind_1d(width: int, stride: Any, dilation: Any) -> bool:
    """Whether a 1-d convolution's kernel width, stride and dilation are of the kinds measured."""
    return width in MEASURED_KERNELS_1D and int(stride[-1]) in MEASURED_STRIDES_1D and int(dilation[-1]) == 1


THREE_D_NOTE = "{count} 3-d convolutions (forward or backward) have the workspaces of a model fitted to 46,060 3-d convolutions measured on the H100 (rules/conv_model.py, workspaces_3d): on 300 kept out of its fit, byte-exact for 78% of forwards, 85% of input gradients and 25% of weight gradients (most of the rest unknown, traced as none): peak memory may differ by up to the largest workspace"
THREE_D_TRANSPOSED_NOTE = "{count} transposed 3-d convolutions have workspaces extrapolated from the 3-d model (as the convolution cuDNN runs for them, not measured): peak memory may differ by up to the largest workspace"
# The kernel sizes and strides (per dimension) scripts/measure_conv3d.py drew, dilation 1.
MEASURED_KERNELS_3D = {1, 2, 3, 5, 7}
MEASURED_STRIDES_3D = {1, 2}


def measured_kind_3d(kernel: Any) -> bool:
    return all(int(v) in MEASURED_KERNELS_3D for v in kernel)


def measured_kind(r: int, s: int, stride: Any, dilation: Any) -> bool:
    """Whether a convolution's kernel, stride and dilation are of the kinds the table measured."""

    def pair(v: Any) -> List[int]:
        v = list(v) if isinstance(v, (list, tuple)) else [v]
        return [int(v[0]), int(v[-1])]

    (sh, sw), (dh, dw) = pair(stride), pair(dilation)
    return r == s and r in MEASURED_KERNELS and sh == sw and sh in MEASURED_STRIDES and dh == dw == 1


# The 1-d kernels and strides scripts/measure_conv1d.py drew (reports/reference/h100/conv-workspaces/
# conv1d-2026-11-28.jsonl.gz), dilation 1: the fitted model answers for 1-d convolutions only
# within them.
MEASURED_KERNELS_1D = {1, 2, 3, 4, 5, 7, 9, 10, 11, 15, 31}
MEASURED_STRIDES_1D = {1, 2, 3, 4, 5}


def as_2d(bound: Dict[str, Any], x: Any, weight: Any) -> Tuple[List[int], List[int], Any, Any, Any]:
    """A 1-d convolution as the 2-D one of height 1 cuDNN runs (Convolution.cpp: view1d_as_2d,
    view4d): input, weight, stride, padding and dilation; a 2-D one as it is."""

    def one(v: Any) -> int:
        return int(v[0] if isinstance(v, (list, tuple)) else v)

    if x.dim() != 3:
        return list(x.shape), list(weight.shape), bound["stride"], bound["padding"], bound["dilation"]
    n, c, length = x.shape
    k, cg, width = weight.shape
    return [n, c, 1, length], [k, cg, 1, width], [1, one(bound["stride"])], [0, one(bound["padding"])], [1, one(bound["dilation"])]


def channels_last(torch: Any, t: Any) -> bool:
    """suggest_memory_format() == channels_last, as TensorBase::suggest_memory_format reads a 4-d
    tensor's strides (c10's is_channels_last_strides_2d; torch._prims_common's
    suggest_memory_format): an ambiguous tensor, contiguous in both layouts, is channels-last where
    its strides are ordered so. ``.to(memory_format=torch.channels_last)`` gives a 1x1 kernel's
    weight (K, C, 1, 1) strides (C, 1, C, C), contiguous too, which cuDNN is given as channels-last
    (timm's ResNeSt-50d on an H200: its 1x1 convolutions copy a contiguous input to channels-last
    first, ISSUE35AA)."""
    if not isinstance(t, torch.Tensor) or t.dim() != 4:
        return False
    from torch._prims_common import suggest_memory_format

    return suggest_memory_format(t) == torch.channels_last


def conv_layout(torch: Any, x: Any, weight: Any) -> Any:
    """cudnn_conv_suggest_memory_format (ATen/native/ConvUtils.h), the layout cuDNN's tensors are
    copied to and its outputs made in: channels-last where the input or the weight suggests it
    (channels-last 3-d for 5-d weights), contiguous otherwise and for float64."""
    if not (isinstance(x, torch.Tensor) and isinstance(weight, torch.Tensor)) or torch.float64 in (x.dtype, weight.dtype):
        return torch.contiguous_format
    if weight.dim() == 4 and (channels_last(torch, x) or channels_last(torch, weight)):
        return torch.channels_last
    if weight.dim() == 5 and (channels_last_3d(torch, x) or channels_last_3d(torch, weight)):
        return torch.channels_last_3d
    return torch.contiguous_format


def channels_last_3d(torch: Any, t: Any) -> bool:
    """suggest_memory_format() == channels_last_3d, as channels_last reads it for 4-d tensors."""
    if not isinstance(t, torch.Tensor) or t.dim() != 5:
        return False
    from torch._prims_common import suggest_memory_format

    return suggest_memory_format(t) == torch.channels_last_3d


def workspaces(entry: Optional[List[Any]]) -> Tuple[int, int, int]:
    """(forward, input gradient, weight gradient) workspace bytes of a table entry."""
    if entry is None:
        return (0, 0, 0)
    return (int(entry[1]), int(entry[2]), int(entry[3]))


@register
class Convolutions(Rule):
    """A convolution's outputs, each with the workspace cuDNN allocates and frees after it
    (Convolution.cpp: cudnn_convolution makes its output, then runs its plan; the backward makes
    the input's gradient and runs its plan, then the weight's), sized by the GPU's measured table.
    The bias gradient comes after both (kernels.py)."""

    ops = {"convolution", "convolution_backward", "_convolution", "cudnn_convolution"}
    source = "ATen/native/Convolution.cpp, cudnn/Conv_v8.cpp (run_conv_plan); workspaces measured per GPU"
    order = 60

    def result(self, call: Call, out: Any) -> Any:
        """cuDNN's outputs in the memory format cudnn_conv_suggest_memory_format picks
        (aten/src/ATen/native/ConvUtils.h): channels-last where the input or the weight is, for
        4-d tensors, else contiguous; the meta kernels lay them out otherwise. The same bytes, other strides, which
        the next convolution's workspace depends on."""
        torch = self.torch
        if call.op not in ("convolution", "convolution_backward"):
            return out
        bound = call.bound()
        x, weight = bound["input"], bound["weight"]
        if not isinstance(x, torch.Tensor):
            return out
        # Otherwise contiguous (determine_backend_memory_format, Convolution.cpp): the meta
        # kernel of convolution_backward lays grad_input out like a strided grad_output (a
        # permuted activation's gradient, ISSUE35H's FNO), which the GPU copies to contiguous.
        layout = conv_layout(torch, x, weight)

        def laid(t: Any) -> Any:
            return t if isinstance(t, torch.Tensor) and t.dim() != x.dim() else relaid(torch, t, layout)

        if call.op == "convolution":
            return laid(out)
        return tuple(laid(t) for t in out)

    def track(self, call: Call, out: Any, made: List[Any]) -> bool:
        if call.op not in ("convolution", "convolution_backward") or not made:
            return False
        torch, session = self.torch, self.session
        bound = call.bound()
        x, weight = bound["input"], bound["weight"]
        backward = call.op == "convolution_backward"
        outputs = list(out) if backward else [out]
        entry, borrowed = None, False
        why = outside_defaults(torch, x, weight, bool(bound["transposed"]))
        measured = table(session.gpu["name"])
        if why is None and measured is not None and x.dim() == 5:
            entry = self._three_d(bound, x, weight, measured["profile"])
            why = None if entry is not None else "3-d convolutions outside the fitted model (a GPU other than the H100, kernels, strides or dilations of kinds not measured)"
        elif why == "transposed convolutions" and measured is not None and x.dim() == 5:
            entry = self._three_d(bound, x, weight, measured["profile"], transposed=True)
            why = None if entry is not None else "transposed 3-d convolutions outside the fitted model (output padding, kinds not measured, a GPU other than the H100)"
        elif why == "transposed convolutions" and measured is not None:
            entry = self._transposed(bound, x, weight, measured["profile"])
            why = None if entry is not None else "transposed convolutions outside the fitted model (output padding, strided or channels-last tensors, cuDNN settings other than the defaults)"
        elif why in (None, CHANNELS_LAST) and measured is not None:
            (n, c, h, w), (k, cg, r, s), stride, padding, dilation = as_2d(bound, x, weight)
            one_d = x.dim() == 3
            measured_key = ("channels_last|" if why == CHANNELS_LAST else "") + key(x.dtype, [n, c, h, w], [k, cg, r, s], stride, padding, dilation, bound["groups"])
            entry = None if one_d else measured["entries"].get(measured_key)
            other = by_profile(SAME_CHOICES.get(measured["profile"], ""))
            if entry is None and not one_d and other is not None and measured_key in other["entries"]:
                entry, borrowed = list(other["entries"][measured_key]), True
                session.note(SAME_CHOICES_NOTE.replace("{gpu}", measured["device"]).replace("{other}", other["device"]).replace("{other_profile}", other["profile"]))
            laid_out = why == CHANNELS_LAST
            if entry is not None:
                why = None
            else:
                # Outside the table, the fitted model (conv_model.py). Byte-exact it is rarely
                # better than a workspace of 0 on shapes drawn at random (scripts/conv_model/heldout.py),
                # but its sizes are of the right order where 0 is far off: on ISSUE35D's held-out
                # convolutional programs (RESULTS.md) it took peak allocated from -20% to -3% (ESPCN),
                # -25% to -0.1% (an upsampling autoencoder) and -2.7% to -0.3% (SimCLR), and left
                # ConvNeXt, EfficientNet and RegNet as they were; it is said in the notes.
                # Only within the measured kinds of convolution: outside them (ViT's 16x16 patch
                # convolution, dilated ones) its trees extrapolate, and on ViT-B/16's patch
                # convolution it gave 21 MB where the H100 took none.
                fitted = None
                if measured_kind_1d(s, stride, dilation) if one_d else measured_kind(r, s, stride, dilation):
                    fitted = conv_model.workspaces(measured["profile"], str(x.dtype).replace("torch.", ""), n, c, h, w, k, r, s, stride, padding, dilation, int(bound["groups"]), channels_last=laid_out)
                if fitted is not None and any(size is not None for size in fitted):
                    entry = ["fitted", *(size or 0 for size in fitted)]
                    why = None
                    if one_d:
                        session.note(ONE_D_NOTE)
                    if laid_out:
                        session.note(CHANNELS_LAST_NOTE)
                else:
                    why = ("channels-last shapes" if laid_out else "shapes or dtypes") + " outside the measured table and the fitted model"
        if why == CHANNELS_LAST and measured is None:
            why = None
        if why == BENCHMARK:
            session.note(BENCHMARK_NOTE)
        elif entry is None or measured is None:
            session.note(
                "{count} convolutions (forward or backward) are traced without cuDNN's workspaces: "
                + (why or f"no convolution workspaces were measured on the {session.gpu['name']}")
                + " (vramlab/_tracer/rules/convolution.py); peak reserved may be higher, by up to the largest workspace"
            )
        elif entry[0] == "fitted":
            session.note(
                "{count} convolutions (forward or backward) outside the measured table have the workspaces of the model fitted to it (vramlab/_tracer/rules/convolution.py, reports/reference/conv-model/FINDINGS.md), not measured: peak memory may differ by up to the largest workspace"
            )
        elif entry[0] != "model" and not borrowed:
            session.note(
                "{count} convolutions (forward or backward) have the workspaces cuDNN "
                + f"{measured['cudnn'] // 10000}.{measured['cudnn'] // 100 % 100} chose for the same shapes on the {session.gpu['name']} with torch {measured['torch']}, "
                + "as measured (reports/reference/"
                + f"{measured['profile']}/conv-workspaces), not derived by a rule"
                + ("" if torch.__version__.split("+")[0] == measured["torch"].split("+")[0] else f"; this torch is {torch.__version__}")
            )
        forward_ws, data_ws, weight_ws = workspaces(entry)
        sizes = [data_ws, weight_ws, 0] if backward else [forward_ws]
        native_depthwise = backward and self._native_depthwise(bound, x, weight, entry)
        if native_depthwise:
            # DepthwiseConv2d.cu, conv_depthwise2d_backward_cuda_out: the weight's gradient is
            # sized and computed before the input's (no workspaces).
            outputs = [outputs[1], outputs[0], *outputs[2:]]
        copies = self._contiguous_copies(call, bound, x, weight, backward)
        for index, (t, workspace) in enumerate(zip(outputs, sizes)):
            if isinstance(t, torch.Tensor) and t.device.type == "meta":
                call.record.track(t, call.frame)
                # ConvShared.cpp: the forward (cudnn_convolution_forward_out) and the input's
                # gradient (cudnn_convolution_backward_input) copy the weight to the output's
                # layout after making the output, and free the copy on return (a channels-last
                # input before contiguous weights: S3D's permuted video clips).
                weight_copy = None
                if index == 0 and not native_depthwise and isinstance(weight, torch.Tensor) and weight.dim() == x.dim():
                    weight_copy = self._copy_to(call, weight, conv_layout(torch, x, weight))
                if workspace:
                    call.record.scratch([workspace], call.frame)
                if weight_copy is not None:
                    call.record.free(*weight_copy)
        # The copies go when the backend returns; the bias gradient, the output not paired with a
        # workspace above, is made after it (Convolution.cpp: grad_output.sum).
        for addr, size in reversed(copies):
            call.record.free(addr, size)
        for t in made:
            call.record.track(t, call.frame)
        return True

    def _native_depthwise(self, bound: Dict[str, Any], x: Any, weight: Any, entry: Optional[List[Any]]) -> bool:
        """Whether PyTorch runs a 2-D convolution with its own CudaDepthwise2d kernels, as
        Convolution.cpp's select_conv_backend does: a depthwise convolution (is_depthwise: groups
        equal to the input's channels, a multiple of them out, not transposed) that cuDNN does not
        take (use_cudnn_depthwise: channels-last tensors, or float16 where cuDNN's own workload
        check passes, which only the measured table answers)."""
        torch = self.torch
        groups = int(bound["groups"])
        if bound["transposed"] or x.dim() != 4 or groups <= 1 or x.shape[1] != groups or weight.shape[0] % groups:
            return False
        cudnn = torch.backends.cudnn
        if cudnn.enabled and (channels_last(torch, x) or channels_last(torch, weight)):
            return False
        if entry is not None and entry[0] in ("CudaDepthwise2d", "Cudnn"):
            return bool(entry[0] == "CudaDepthwise2d")
        if x.dtype == torch.float16 and cudnn.enabled:
            dilation = bound["dilation"]
            stride = list(bound["stride"]) if isinstance(bound["stride"], (list, tuple)) else [bound["stride"]] * 2
            dilated = any(int(d) != 1 for d in (dilation if isinstance(dilation, (list, tuple)) else [dilation]))
            # use_cudnn_depthwise's kernel_cond; past it, check_cudnn_depthwise_workload_with_filter
            # decides by shape, which is not followed here (the cuDNN order is kept).
            return dilated or x.shape[1] < 32 or (stride[0] != stride[-1] and x.shape[2] != 1)
        return True

    def _contiguous_copies(self, call: Call, bound: Dict[str, Any], x: Any, weight: Any, backward: bool) -> List[Tuple[int, int]]:
        """The copies a convolution makes of tensors not laid out as its backend wants, before its
        outputs, freed once it has run: Convolution.cpp passes ``input.contiguous(backend_memory_format)``
        to the backend, and cuDNN's backward (ConvShared.cpp, cudnn_convolution_backward) takes
        ``grad_output.to(input.suggest_memory_format())`` first (a gradient that comes back through
        a permute, as Whisper's after its 1-d convolutions)."""
        layout = conv_layout(self.torch, x, weight)
        tensors = [x, bound["grad_output"]] if backward else [x]
        return [copy for copy in (self._copy_to(call, t, layout) for t in tensors) if copy is not None]

    def _copy_to(self, call: Call, t: Any, layout: Any) -> Optional[Tuple[int, int]]:
        """The copy ``t.contiguous(layout)`` makes, allocated now, or None where it is so laid out."""
        torch = self.torch
        if not (isinstance(t, torch.Tensor) and t.device.type == "meta") or t.is_contiguous(memory_format=layout):
            return None
        size = t.numel() * t.element_size()
        return (call.record.alloc(size, call.frame), size)

    def _three_d(self, bound: Dict[str, Any], x: Any, weight: Any, profile: str, transposed: bool = False) -> Optional[List[Any]]:
        """A 3-d convolution's workspaces from the 3-d model (conv_model.workspaces_3d), within
        the measured kinds; a transposed one as the convolution cuDNN runs for it (its forward is
        that convolution's input gradient, and the reverse), extrapolated as for 2-D."""
        session = self.session
        if any(bound.get("output_padding") or [0]) or not measured_kind_3d(weight.shape[2:]):
            return None
        stride, padding, dilation = (list(v) if isinstance(v, (list, tuple)) else [v] * 3 for v in (bound["stride"], bound["padding"], bound["dilation"]))
        if any(int(v) not in MEASURED_STRIDES_3D for v in stride) or any(int(v) != 1 for v in dilation):
            return None
        n, c, d, h, w = x.shape
        groups = int(bound["groups"])
        t, r, s = weight.shape[2:]
        dtype = str(x.dtype).replace("torch.", "")
        if transposed:
            k = weight.shape[1] * groups
            do, ho, wo = ((size - 1) * int(st) - 2 * int(p) + kernel for size, st, p, kernel in zip((d, h, w), stride, padding, (t, r, s)))
            fitted = conv_model.workspaces_3d(profile, dtype, n, k, do, ho, wo, c, t, r, s, stride, padding, dilation, groups)
            fitted = None if fitted is None else (fitted[1], fitted[0], fitted[2])
        else:
            fitted = conv_model.workspaces_3d(profile, dtype, n, c, d, h, w, weight.shape[0], t, r, s, stride, padding, dilation, groups)
        if fitted is None or all(size is None for size in fitted):
            return None
        session.note(THREE_D_TRANSPOSED_NOTE if transposed else THREE_D_NOTE)
        return ["model", *(size or 0 for size in fitted)]

    def _transposed(self, bound: Dict[str, Any], x: Any, weight: Any, profile: str) -> Optional[List[Any]]:
        """A transposed convolution's workspaces as those of the convolution cuDNN runs for it
        (its forward is that convolution's input gradient, and the reverse; conv_model's
        extrapolation). Measured after the model was committed, on 384 DCGAN, VAE and U-Net
        decoder shapes (reports/reference/h100/conv-workspaces/more-2026-11-27.jsonl.gz;
        scripts/conv_model/heldout.py): byte-exact on 186 forward, 186 input-gradient and 79
        weight-gradient rows where a workspace of 0 is right on 62, 117 and 53, so it is used, as
        seen while designing, with a note."""
        torch, session = self.torch, self.session
        cudnn = torch.backends.cudnn
        if x.dim() != 4 or not (x.is_contiguous() and weight.is_contiguous()) or any(bound.get("output_padding") or [0]):
            return None
        if not cudnn.enabled or cudnn.benchmark or cudnn.deterministic or (x.dtype == torch.float32 and not cudnn.allow_tf32):
            return None
        n, c, h, w = x.shape
        groups = int(bound["groups"])
        k, r, s = weight.shape[1] * groups, weight.shape[2], weight.shape[3]
        fitted = conv_model.workspaces(
            profile, str(x.dtype).replace("torch.", ""), n, c, h, w, k, r, s, bound["stride"], bound["padding"], bound["dilation"], groups,
            transposed=True, extrapolate=True,
        )
        if fitted is None or all(size is None for size in fitted):
            return None
        session.note(
            "{count} transposed convolutions have workspaces extrapolated from the model of ordinary ones (as the convolution cuDNN runs for them; byte-exact on about half of 384 measured decoder shapes, where 0 was right on a sixth to a third): peak reserved may differ where it is wrong"
        )
        return ["model", *(size or 0 for size in fitted)]

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        if call.op in ("_convolution", "cudnn_convolution") and made:
            self.session.note(
                "{count} cuDNN convolutions (forward and backward) are in the trace without their workspaces, which cuDNN chooses at run time on the GPU: peak reserved may be higher, by up to the largest workspace"
            )
