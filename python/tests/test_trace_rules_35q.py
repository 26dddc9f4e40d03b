"""The rules ISSUE35Q's recordings led to (reports/reference/h200/trace-workloads-35q), each
checked on the CPU against PyTorch's own code or a recording."""

import gzip
import pathlib
import pickle
import sys

import pytest

torch = pytest.importorskip("torch")

import vramlab  # noqa: E402
from vramlab.errors import UnfollowedError  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
RECORDED = ROOT / "reports" / "reference" / "h200" / "trace-workloads-35q"


def _recorded(name):
    recording = RECORDED / f"{name}.pickle.gz"
    if not recording.exists():
        pytest.skip(f"{recording} is not here")
    with gzip.open(recording) as f:
        return pickle.load(f)


def _predictions_on_the_host():
    model = torch.nn.Linear(64, 10).cuda()
    kept = []
    for _ in range(3):
        with torch.no_grad():
            kept.append(model(torch.randn(32, 64, device="cuda")).softmax(-1).cpu())
    return torch.cat(kept)


def test_predictions_copied_to_the_host_and_only_kept_do_not_stop_the_trace():
    """A copy to the host is made without values; what the CPU computes from it (cat, topk) has
    the shapes the program expects, and the snapshot says the copies were made without values."""
    with vramlab.trace(gpu="h200") as t:
        probs = _predictions_on_the_host()
        top = probs.topk(5, dim=1).indices
    assert probs.shape == (96, 10) and probs.device.type == "cpu" and top.shape == (96, 5)
    assert any("copies of GPU tensors to the host" in n and "without their values" in n for n in t.snapshot()["vramlab_notes"])


@pytest.mark.parametrize(
    "read",
    [
        lambda p: p.tolist(),
        lambda p: p.numpy(),
        lambda p: repr(p),
        lambda p: bool(p[0, 0] > 0.5),
        lambda p: p.argmax(1).nonzero(),
        lambda p: p.max().item() > 0.5,
    ],
    ids=["tolist", "numpy", "print", "bool", "nonzero", "item-compared"],
)
def test_a_read_of_values_copied_to_the_host_stops_the_trace_naming_both_lines(read):
    """Any read of those values (or of what was computed from them) that could steer the program
    stops the trace, naming the read's line and the copy's: a trace that went on would take a
    branch on made-up values."""
    with pytest.raises(UnfollowedError) as raised:
        with vramlab.trace(gpu="h200"):
            read(_predictions_on_the_host())
    message = str(raised.value)
    assert "copied from the GPU to the host at" in message
    assert message.count("test_trace_rules_35q.py:") >= 2, message


def test_one_value_copied_to_the_host_and_only_printed_is_a_placeholder():
    """A single value of those printed or logged (a metric's .item(), a format) changes nothing the
    GPU allocates: it is handed over as a placeholder that prints as '?' (unknown.py), and said."""
    with vramlab.trace(gpu="h200") as t:
        predictions = _predictions_on_the_host()
        line = f"max {predictions.max().item():.3f} sum {predictions.sum():.3f}"
    assert line == "max ? sum ?"
    assert any("placeholders" in n for n in t.snapshot()["vramlab_notes"])


def test_values_copied_to_the_host_and_back_are_not_known_on_the_gpu():
    """A mask computed on the host from values the trace has not, moved back to the GPU, has no
    values there either: indexing with it is refused, not answered from the host copy's zeros."""
    with pytest.raises(UnfollowedError, match="boolean mask"):
        with vramlab.trace(gpu="h200"):
            probs = _predictions_on_the_host()
            torch.randn(96, device="cuda")[(probs[:, 0] > 0.1).cuda()]


def test_answer_reads_still_answers_copies_to_the_host():
    """With answer_reads, the copy holds the answer as before (and nothing is said unknown)."""
    with vramlab.trace(gpu="h200", answer_reads=0.0):
        assert _predictions_on_the_host().sum().item() == 0.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("shapes", [((96, 64), (8, 64, 40)), ((96, 64), (8, 42, 64)), ((64, 96), (96, 40))], ids=["2d3d", "2d3d-padded", "2d2d"])
def test_a_grouped_matmul_outside_bfloat16_allocates_pytorchs_padded_output(dtype, shapes):
    """torch._grouped_mm in float32 or float16 takes GroupedBlas.cpp's fallback: the output of
    create_grouped_gemm_output_tensor (its last stride padded to 16 bytes) and per-group matmuls
    into it. The traced output's storage is the one PyTorch's own CPU kernel (the same function)
    makes, and nothing else is allocated but cuBLAS's workspace."""
    (sa, sb) = shapes
    offsets = torch.tensor([0, 10, 30, 30, 50, 70, 90, 96][: (sb[0] if len(sb) == 3 else 8)], dtype=torch.int32)
    if len(sb) == 2:
        offsets = torch.tensor([8, 20, 20, 40, 60, 70, 90, 96], dtype=torch.int32)
        a, b = torch.randn(sa[0], sa[1], dtype=dtype).t().contiguous().t(), torch.randn(*sb, dtype=dtype)
    elif sb[1] != sa[1]:
        # Weights stored (experts, out, in) and passed transposed, as Hugging Face's are: an
        # output width of 42 is padded to 16 bytes.
        a, b = torch.randn(*sa, dtype=dtype), torch.randn(*sb, dtype=dtype).transpose(1, 2)
    else:
        a, b = torch.randn(*sa, dtype=dtype), torch.randn(*sb, dtype=dtype)
    try:
        expected = torch._grouped_mm(a, b, offs=offsets)
    except (RuntimeError, NotImplementedError) as error:
        pytest.skip(f"this torch's CPU _grouped_mm refuses it: {error}")
    with vramlab.trace(gpu="h200") as t:
        ga, gb, go = a.cuda(), b.cuda(), offsets.cuda()
        out = torch._grouped_mm(ga, gb, offs=go)
    assert out.shape == expected.shape and out.stride() == expected.stride()
    sizes = [e["size"] for e in t.snapshot()["device_traces"][0] if e["action"] == "alloc"]
    inputs = sorted(x.untyped_storage().nbytes() for x in (a, b, offsets))
    assert sorted(sizes[:3]) == inputs and expected.untyped_storage().nbytes() in sizes[3:]


def test_a_routers_bincount_over_its_topk_choices_has_minlength_bins():
    """bincount of topk indices over E experts with minlength=E has E bins whatever the choices
    are (what PyTorch's own kernel gives them on the CPU); the trace answers it without values."""
    logits = torch.randn(64, 8)
    counted = torch.bincount(logits.topk(2, dim=-1).indices.reshape(-1), minlength=8)
    with vramlab.trace(gpu="h200") as t:
        chosen = torch.randn(64, 8, device="cuda").topk(2, dim=-1).indices
        traced = torch.bincount(chosen.reshape(-1), minlength=8)
    assert traced.shape == counted.shape and traced.dtype == counted.dtype
    assert any("bincounts of indices known to lie below their minlength" in n for n in t.snapshot()["vramlab_notes"])
    with pytest.raises(UnfollowedError, match="bincount"):
        with vramlab.trace(gpu="h200"):
            torch.bincount(torch.randn(64, 8, device="cuda").topk(2, dim=-1).indices.reshape(-1), minlength=4)


def test_a_confusion_matrix_bincount_has_its_bins_from_the_bounds_of_its_index():
    """values.py: integer add, sub and mul carry their operands' bounds (interval arithmetic), a
    boolean selection keeps its input's, and known labels bound themselves: so the confusion
    matrix's index ``gold * C + pred[keep]`` (ISSUE35Z's ConvBERT and Data2Vec evaluations) lies in
    [0, C * C) and ``bincount(..., minlength=C * C)`` has C * C bins, as on the GPU. Without
    minlength, or with one too small, the bins depend on the values, and the trace stops."""
    classes = 9
    with vramlab.trace(gpu="h200") as t:
        logits = torch.randn(4, 32, classes, device="cuda")
        labels = torch.randint(0, classes, (4, 32))
        labels[:, :3] = -100
        labels = labels.to("cuda")
        keep = labels != -100
        index = labels[keep] * classes + logits.argmax(-1)[keep]
        confusion = torch.bincount(index, minlength=classes * classes).view(classes, classes)
        assert confusion.shape == (classes, classes)
        shifted = torch.bincount((index + classes) - classes, minlength=classes * classes)
        assert shifted.shape == (classes * classes,)
    assert any("bincounts of indices known to lie below their minlength" in n for n in t.snapshot()["vramlab_notes"])
    with pytest.raises(UnfollowedError, match="bincount"):
        with vramlab.trace(gpu="h200"):
            pred = torch.randn(64, classes, device="cuda").argmax(-1)
            torch.bincount(pred * classes + pred, minlength=classes)


def test_qwen2_moe_traces_to_the_h200s_peaks_under_expandable_segments(as_2_11):
    """Hugging Face's Qwen2-MoE under bf16 autocast: the router's bincount and the float32
    grouped matmuls of its experts, which stopped the trace before; replayed under the recorded
    setting, the H200's peaks to the byte."""
    pytest.importorskip("transformers")
    recorded = _recorded("hf_qwen2_moe_shared_expert_bf16-expandable")
    sys.path.insert(0, str(ROOT / "scripts"))
    from trace_workloads_35q import hf_qwen2_moe_shared_expert_bf16

    with vramlab.trace(gpu="h200") as t:
        hf_qwen2_moe_shared_expert_bf16("cuda")
    ours = vramlab.replay(t.snapshot(), alloc_conf="expandable_segments:True")["results"][0]["pytorch_stats"]
    theirs = vramlab.replay(recorded)["results"][0]["pytorch_stats"]
    for key in ("allocated_bytes.all.peak", "reserved_bytes.all.peak"):
        assert ours[key] == theirs[key], key


def test_a_step_gradscaler_may_skip_makes_the_peak_an_upper_bound():
    """A float16 step under GradScaler is traced as taken; the GPU skips it where the gradients
    overflow (ConvNeXt-T's two steps on the H200 both did), so the peak printed is "at most", and
    the recording's peak is indeed no higher than the trace's."""
    pytest.importorskip("torchvision")
    from vramlab._tracer.recorder import unknown_peak

    recorded = _recorded("tv_convnext_tiny_nonsquare_accumulate_fp16-default")
    sys.path.insert(0, str(ROOT / "scripts"))
    from trace_workloads_35q import tv_convnext_tiny_nonsquare_accumulate_fp16

    with vramlab.trace(gpu="h200") as t:
        tv_convnext_tiny_nonsquare_accumulate_fp16("cuda")
    notes = t.snapshot()["vramlab_notes"]
    assert unknown_peak(notes) == "upper bound"
    assert "at most" in t.summary()
    ours = vramlab.replay(t.snapshot(), alloc_conf="")["results"][0]["pytorch_stats"]
    theirs = vramlab.replay(recorded)["results"][0]["pytorch_stats"]
    assert theirs["allocated_bytes.all.peak"] <= ours["allocated_bytes.all.peak"]


def test_lengths_copied_to_the_host_without_values_stop_what_reads_them():
    """pack_padded_sequence reads its (host) lengths to make the packed shape, and the CTC loss
    reads its lengths on the host: lengths copied from the GPU without values stop the trace
    there, naming the copy, instead of being read as the copy's placeholder zeros."""
    with pytest.raises(UnfollowedError, match="copied from the GPU to the host at"):
        with vramlab.trace(gpu="h200"):
            x = torch.randn(4, 10, 8, device="cuda")
            lengths = torch.randint(1, 11, (4,), device="cuda").cpu()
            torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    with pytest.raises(UnfollowedError, match="copied from the GPU to the host at"):
        with vramlab.trace(gpu="h200"):
            log_probs = torch.randn(50, 2, 10, device="cuda").log_softmax(-1)
            targets = torch.randint(1, 10, (2, 5), device="cuda")
            lengths = torch.randint(40, 50, (2,), device="cuda").cpu()
            torch.nn.functional.ctc_loss(log_probs, targets, lengths, torch.full((2,), 5))
