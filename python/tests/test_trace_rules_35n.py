"""The convolution rules ISSUE35N's recordings led to (reports/reference/h200/trace-workloads-35n),
each checked on the CPU against PyTorch's CUDA source or the committed measurements."""

import gzip
import json
import pathlib

import pytest

torch = pytest.importorskip("torch")

import vramlab  # noqa: E402
from traced import events  # noqa: E402
from vramlab._tracer.rules import convolution  # noqa: E402

MEASURED = pathlib.Path(__file__).resolve().parents[2] / "reports" / "reference" / "h200" / "conv-workspaces"


def _depthwise_backward(layout):
    """The allocations of a bfloat16 depthwise convolution's backward that are its two gradients,
    in order, and those gradients' sizes (input's, weight's)."""
    n, c, size, kernel = 8, 64, 32, 5
    input_grad, weight_grad = n * c * size * size * 2, c * kernel * kernel * 2
    with vramlab.trace(gpu="h200") as t:
        conv = torch.nn.Conv2d(c, c, kernel, padding=2, groups=c, bias=False, device="cuda", dtype=torch.bfloat16).to(memory_format=layout)
        x = torch.randn(n, c, size, size, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=layout).requires_grad_()
        y = conv(x)
        grad = torch.ones_like(y)
        start = len(events(t))
        y.backward(grad)
        backward = [e for e in events(t, start) if e[0] == "a" and e[1] in (input_grad, weight_grad)]
    return backward[:2], input_grad, weight_grad


def test_pytorchs_own_depthwise_backward_makes_the_weights_gradient_first():
    """conv_depthwise2d_backward_cuda_out (DepthwiseConv2d.cu) sizes and computes grad_weight
    before grad_input; select_conv_backend sends a bfloat16 NCHW depthwise convolution there."""
    order, input_grad, weight_grad = _depthwise_backward(torch.contiguous_format)
    assert order == [("a", weight_grad), ("a", input_grad)], order


def test_a_channels_last_depthwise_convolution_keeps_cudnns_order():
    """In channels-last, use_cudnn_depthwise sends the same convolution to cuDNN, whose backward
    makes the input's gradient first (ConvShared.cpp)."""
    order, input_grad, weight_grad = _depthwise_backward(torch.channels_last)
    assert order == [("a", input_grad), ("a", weight_grad)], order


def _measured(name, pick):
    """The first committed measurement row pick() accepts, or a skip where the measurements are absent."""
    path = MEASURED / name
    if not path.exists():
        pytest.skip(f"{path} is not here")
    with gzip.open(path, "rt") as f:
        for line in f:
            row = json.loads(line)
            if "error" not in row and pick(row):
                return row
    pytest.fail(f"no row of {name} is of the kind asked for")


def _workspaces(row):
    """(forward, input gradient, weight gradient) of a measurement row, as build_conv_table reads it."""
    import sys

    sys.path.insert(0, str(MEASURED.parents[3] / "scripts"))
    import build_conv_table

    return build_conv_table.entries([row])


def _traced(gpu, row, channels_last):
    c, h, w, k, r, s, stride, padding, dilation, groups = row["shape"]
    dtype = getattr(torch, row["dtype"])
    layout = torch.channels_last if channels_last else torch.contiguous_format
    with vramlab.trace(gpu=gpu) as t:
        x = torch.randn(row["n"], c, h, w, device="cuda", dtype=dtype).contiguous(memory_format=layout).requires_grad_()
        weight = torch.randn(k, c // groups, r, s, device="cuda", dtype=dtype).contiguous(memory_format=layout).requires_grad_()
        out = torch.nn.functional.conv2d(x, weight, None, stride, padding, dilation, groups)
        out.backward(torch.ones_like(out))
    return t.snapshot()


def _scratch(snapshot, sizes):
    freed = {e["size"] for e in snapshot["device_traces"][0] if e["action"] == "free_requested"}
    return [size for size in sizes if size and size in freed]


def test_a_channels_last_convolution_takes_its_measured_workspaces():
    """cuDNN's plans for channels-last tensors are measured in a table of their own
    (conv-timm-channels-last-*.jsonl.gz, scripts/measure_conv_timm.py --channels-last): a traced
    channels-last convolution of a measured shape frees the workspaces measured for it."""
    row = _measured("conv-timm-channels-last-2026-11-29.jsonl.gz", lambda r: r["backend"].endswith("Cudnn") and all(
        size > (1 << 20) for _, size in [x[1:] for x in r["forward"]][1:2]))
    (entry,) = _workspaces(row).values()
    snapshot = _traced("h200", row, channels_last=True)
    assert _scratch(snapshot, entry[1:]) == [v for v in entry[1:] if v], (entry, row["shape"])
    assert not any("traced without cuDNN's workspaces" in str(note) for note in snapshot.get("vramlab_notes", []))


def test_the_h100_takes_a_shape_only_the_h200_measured_from_the_h200_with_a_note():
    """A convolution the H100's table lacks and the H200's holds takes the H200's measured
    workspaces (convolution.SAME_CHOICES), and the snapshot says so."""
    h100 = convolution.by_profile("h100")
    h200 = convolution.by_profile("h200")
    row = _measured("conv-timm-more-2026-11-29.jsonl.gz", lambda r: r["dtype"] == "bfloat16" and r["n"] <= 16)
    (key, entry), = _workspaces(row).items()
    assert key not in h100["entries"] and h200["entries"][key] == entry
    snapshot = _traced("h100", row, channels_last=False)
    assert _scratch(snapshot, entry[1:]) == [v for v in entry[1:] if v]
    assert any("as measured there" in str(note) and "NVIDIA H200" in str(note) for note in snapshot["vramlab_notes"])


def test_trunc_normal_resampling_rounds_are_answered_by_their_expected_count():
    """torch 2.15's nn.init.trunc_normal_ reads mask.any() back each round (init.py,
    _no_grad_trunc_normal_): each read is answered while the expected number of values left,
    n * q^k, is at least 1/2, q from the normal's CDF; 2.11 reads nothing and is traced as before."""
    from vramlab._tracer.rules import trunc_normal

    # Bounds of two standard deviations: 4.55% of draws fall outside.
    assert abs(trunc_normal.chance_drawn_again(0.0, 1.0, -2.0, 2.0) - 0.0455) < 1e-4
    assert trunc_normal.expected_rounds(1_000_000, 0.0455) == 4
    assert trunc_normal.expected_rounds(1000, 1e-12) == 0
    with vramlab.trace(gpu="h200") as t:
        wide = torch.empty(1000, 1000, device="cuda")
        torch.nn.init.trunc_normal_(wide)
        narrow = torch.empty(256, 256, device="cuda")
        torch.nn.init.trunc_normal_(narrow, std=0.02)
    notes = [n for n in t.snapshot()["vramlab_notes"] if "trunc_normal_" in str(n)]
    import inspect

    if "while True" in inspect.getsource(torch.nn.init._no_grad_trunc_normal_):
        # Four rounds answered True and the fifth False for the wide tensor; one False for the narrow.
        assert notes and str(notes[0]).startswith("6 reads"), notes
    else:
        assert not notes
