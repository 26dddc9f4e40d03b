"""The rules ISSUE35H's and ISSUE35J's recordings led to (reports/reference/h200/trace-workloads-35h,
-35j), each checked against the sequence PyTorch's CUDA source makes, on the CPU."""

import pytest

torch = pytest.importorskip("torch")

import vramlab  # noqa: E402
from traced import events  # noqa: E402


def cublas_workspace():
    from vramlab._tracer import compat
    from vramlab._tracer.rules import cublas

    return cublas.workspace_size(compat.release(torch), 9, 0)


def mark(t):
    return len(events(t))


def test_cdist_past_25_rows_takes_the_matmul_path_with_its_temporaries():
    """Distance.cpp, _euclidean_dist: squared norms (each from a temporary square), ones, both
    sides' cat with them, then the matmul into the result; 25 rows or fewer stay on _cdist_forward."""
    with vramlab.trace(gpu="h100") as t:
        a = torch.randn(100, 8, device="cuda")
        b = torch.randn(50, 8, device="cuda")
        start = mark(t)
        kept = torch.cdist(a, b)
        mm = events(t, start)
        start = mark(t)
        kept_small = torch.cdist(a[:20], b[:20])
        small = events(t, start)
        del kept, kept_small
    f = 4
    assert mm[:13] == [
        ("a", 100 * 8 * f), ("a", 100 * f), ("f", 100 * 8 * f), ("a", 100 * f),
        ("a", 50 * 8 * f), ("a", 50 * f), ("f", 50 * 8 * f), ("a", 50 * f),
        ("a", 100 * 8 * f), ("a", 100 * 10 * f), ("f", 100 * f), ("f", 100 * f), ("f", 100 * 8 * f),
    ], mm
    # x2's cat (its ones and norms freed), the result by cuBLAS, then both cats freed.
    assert mm[13:16] == [("a", 50 * 10 * f), ("f", 50 * f), ("f", 50 * f)], mm
    assert [e for e in mm[16:] if e[1] != cublas_workspace()] == [("a", 100 * 50 * f), ("f", 50 * 10 * f), ("f", 100 * 10 * f)], mm
    assert small == [("a", 20 * 20 * f)], small


def test_a_backward_formulas_own_add_is_out_of_place_and_the_engines_in_place():
    """cholesky_backward's gA + gA.tril(-1).mH() makes a new tensor before 0.5 * (...), as on the
    GPU; a gradient the engine accumulates (x used twice) is still added in place. Its first
    matmul takes sum's gradient expanded (strides 0, 0), which prepare_matrix_for_cublas clones
    before the GEMM and frees after (cublas.py)."""
    n = 30 * 30 * 8
    with vramlab.trace(gpu="h100") as t:
        a = torch.randn(30, 30, device="cuda", dtype=torch.float64, requires_grad=True)
        low = torch.linalg.cholesky(a)
        start = mark(t)
        low.sum().backward()
    backward = events(t, start)
    mm = backward.index(("a", n))
    sequence = [e for e in backward[mm:] if e[1] == n][:12]
    clone = [("a", n), ("f", n)]
    assert sequence == [("a", n)] + clone + [("a", n), ("f", n), ("a", n), ("a", n), ("a", n), ("f", n), ("f", n), ("f", n), ("a", n)], sequence
    with vramlab.trace(gpu="h100") as t:
        x = torch.randn(1000, device="cuda", requires_grad=True)
        start = mark(t)
        (x.exp() + x.sin()).sum().backward()
    # Forward: exp, sin, their sum. Backward: exp's gradient (grad * result), sin's (cos, then
    # grad * cos), one added into the other in place: six, where out of place would make seven.
    assert sum(1 for e in events(t, start) if e == ("a", 4000)) == 6, events(t, start)


def test_cholesky_solve_copies_the_factor_beside_an_info_and_check_errors_reduces_the_infos():
    """_cholesky_solve_helper_cuda_cusolver: info (zeros({1}), int), the right side's copy (the
    result), the factor's copy, freed on return with the info; _linalg_check_errors: infos.any()
    of a bool copy of the infos."""
    with vramlab.trace(gpu="h100") as t:
        low = torch.randn(40, 40, device="cuda")
        rhs = torch.randn(40, 3, device="cuda")
        start = mark(t)
        torch.cholesky_solve(rhs, low)
        solve = events(t, start)
        start = mark(t)
        torch.linalg.cholesky(torch.randn(40, 40, device="cuda"))
        check = events(t, start)
    # (the result, not kept here, is freed last)
    assert solve[:5] == [("a", 4), ("a", 40 * 3 * 4), ("a", 40 * 40 * 4), ("f", 40 * 40 * 4), ("f", 4)], solve
    # randn's matrix, the factor, its info, then the check's two bytes, then the info freed.
    assert check[2:8] == [("a", 4), ("a", 1), ("a", 1), ("f", 1), ("f", 1), ("f", 4)], check


def test_cudnn_benchmark_leaves_the_peak_unknown_and_says_so():
    """Conv_v8.cpp's trial workspaces are cuDNN's choice: a plain note first, the CLI's peak 'at least'."""
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True
    try:
        with vramlab.trace(gpu="h100") as t:
            conv = torch.nn.Conv2d(3, 8, 3).cuda()
            conv(torch.randn(2, 3, 16, 16, device="cuda"))
    finally:
        torch.backends.cudnn.benchmark = before
    notes = t.snapshot()["vramlab_notes"]
    assert any(n.startswith("UNKNOWN PEAK: torch.backends.cudnn.benchmark is on") for n in notes), notes
    listed = [line.strip() for line in t.summary().splitlines() if line.startswith("    - ")]
    assert listed[0].startswith("- UNKNOWN PEAK:"), listed


def test_cudnn_benchmark_makes_the_cli_say_at_least(tmp_path):
    script = tmp_path / "bench.py"
    script.write_text(
        "import torch\ntorch.backends.cudnn.benchmark = True\n"
        "torch.nn.Conv2d(3, 8, 3).cuda()(torch.randn(2, 3, 16, 16, device='cuda'))\n"
    )
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "vramlab.trace", "--gpu", "h100", "--out", str(tmp_path / "out"), str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "peak allocated at least " in done.stderr and "note: UNKNOWN PEAK:" in done.stderr, done.stderr


def test_log_softmax_copies_a_channels_last_input_after_its_output():
    """SoftMax.cu host_softmax: input_.contiguous() (cross entropy on channels-last logits)."""
    with vramlab.trace(gpu="h100") as t:
        logits = torch.randn(2, 19, 32, 32, device="cuda").to(memory_format=torch.channels_last)
        start = mark(t)
        torch.log_softmax(logits, dim=1)
        copied = events(t, start)
        start = mark(t)
        torch.log_softmax(logits.contiguous(), dim=1)
        plain = events(t, start)
    size = 2 * 19 * 32 * 32 * 4
    assert copied[:3] == [("a", size), ("a", size), ("f", size)], copied
    assert plain.count(("a", size)) == 2, plain


def test_bilinear_upsampling_backward_copies_a_gradient_in_neither_layout():
    """UpSampleBilinear2d.cu: grad_output_.contiguous(suggest_memory_format()); a channel slice of
    a channels-last concatenation's gradient is in neither layout. Same sizes: a plain copy."""
    size = 2 * 8 * 32 * 32 * 4

    def run(scale):
        with vramlab.trace(gpu="h100") as t:
            x = torch.randn(2, 8, 16 * scale, 16 * scale, device="cuda", requires_grad=True)
            x_cl = x.to(memory_format=torch.channels_last)
            other = torch.randn(2, 8, 32, 32, device="cuda").to(memory_format=torch.channels_last)
            up = torch.nn.functional.interpolate(x_cl, size=(32, 32), mode="bilinear", align_corners=False)
            joined = torch.cat([up, other], dim=1)
            start = mark(t)
            joined.sum().backward()
        return events(t, start)

    upsampled, same = run(1), run(2)
    grad_input = 2 * 8 * 16 * 16 * 4
    copy = upsampled.index(("a", grad_input)) + 1
    assert upsampled[copy : copy + 2] == [("a", size), ("f", size)], upsampled
    # The same size: the gradient copied into grad_input alone.
    assert same.count(("a", size)) == 1, same


def test_group_norm_folds_its_affine_into_two_accumulation_tensors():
    """group_norm_kernel.cu: a and b, [N, C] in float32 for half inputs, after the outputs."""
    with vramlab.trace(gpu="h100") as t:
        norm = torch.nn.GroupNorm(4, 64).cuda().half()
        x = torch.randn(16, 64, 8, 8, device="cuda", dtype=torch.half)
        start = mark(t)
        with torch.no_grad():
            norm(x)
        affine = events(t, start)
        bare = torch.nn.GroupNorm(4, 64, affine=False).cuda().half()
        start = mark(t)
        with torch.no_grad():
            bare(x)
        plain = events(t, start)
    full = 16 * 64 * 8 * 8 * 2
    # (the outputs, not kept here, are freed after)
    assert affine[:7] == [("a", full), ("a", 16 * 4 * 2), ("a", 16 * 4 * 2), ("a", 16 * 64 * 4), ("a", 16 * 64 * 4), ("f", 16 * 64 * 4), ("f", 16 * 64 * 4)], affine
    assert plain[:4] == [("a", full), ("a", 16 * 4 * 2), ("a", 16 * 4 * 2), ("f", 16 * 4 * 2)], plain


def test_abs_of_a_complex_tensor_computes_into_a_complex_temporary():
    """UnaryOps.cpp unary_op_impl_with_complex_to_float: the real result, then the complex
    absolute value into a temporary of the input's size, freed on return."""
    with vramlab.trace(gpu="h100") as t:
        z = torch.randn(1000, dtype=torch.cfloat, device="cuda")
        start = mark(t)
        kept = z.abs()
        complex_abs = events(t, start)
        start = mark(t)
        kept_real = z.real.abs()
        real_abs = events(t, start)
        del kept, kept_real
    assert complex_abs == [("a", 4000), ("a", 8000), ("f", 8000)], complex_abs
    assert real_abs == [("a", 4000)], real_abs


ISSUE35H_IN_CI = ["gaussian_process_cholesky", "fno_fft_darcy"]


def test_random_integers_have_bounds_that_decide_comparisons_and_nothing_more():
    """ISSUE35J's Wav2Vec2 for CTC (refused when held out): its labels drawn by randint(1, 32)
    are checked by labels.max() >= vocab_size and selected by labels.masked_select(labels >= 0).
    The draws' bounds decide both; a comparison they do not decide, or labels written since, are
    still unknown, and a read of them still stops the trace."""
    from vramlab import UnfollowedError

    with vramlab.trace(gpu="h200") as t:
        labels = torch.randint(1, 32, (4, 40), device="cuda")
        assert not bool(labels.max() >= 32)
        mask = labels >= 0
        assert mask.sum(-1).tolist() == [40] * 4
        before = mark(t)
        picked = labels.masked_select(mask)
        assert picked.shape == (160,)
        # CUDA's masked_select is index with the mask: nonzero's indices, then the 160 picked.
        assert ("a", 160 * 8) in events(t, before), events(t, before)
        drawn = torch.empty(8, dtype=torch.long, device="cuda").random_(0, 10)
        assert bool((drawn.amax() < 10) & (drawn.amin() >= 0))
        with pytest.raises(UnfollowedError):
            bool((labels >= 5).all())
        labels[0, 0] = 100
        with pytest.raises(UnfollowedError):
            bool(labels.max() >= 32)


def test_known_writes_into_random_integers_keep_each_elements_bounds():
    """Issue 36's twelfth group (refused when held out): a T5's labels drawn with randint, their
    tail set to -100, give a decoder mask ``labels != -100`` that transformers' masking code reads;
    a segmentation target drawn, its border set to 255, is kept by ``(t >= 0) & (t < C)`` for a
    confusion matrix. Each element is either written (known) or drawn (bounded), so both are known
    element by element, and the kept labels' bounds are the drawn ones. A write of unknown values
    afterwards leaves them unknown again."""
    from vramlab import UnfollowedError

    with vramlab.trace(gpu="h200") as t:
        generator = torch.Generator(device="cuda")
        labels = torch.randint(2, 32000, (8, 114), generator=generator, device="cuda")
        labels[:, 103] = 1
        labels[:, 104:] = -100
        mask = (labels != -100).long()
        assert mask.sum(1).tolist() == [104] * 8
        target = torch.randint(0, 21, (2, 64, 64), device="cuda")
        for border in ((slice(None), slice(0, 4)), (slice(None), slice(-4, None))):
            target[border] = 255
            target[border[0], :, border[1]] = 255
        true = target.flatten()
        keep = (true >= 0) & (true < 21)
        assert true[keep].shape == (2 * 56 * 56,)
        pred = torch.randn(2, 21, 64, 64, device="cuda").argmax(1).flatten()
        before = mark(t)
        torch.bincount(21 * true[keep] + pred[keep], minlength=21 * 21)
        # The bins: as many as minlength, since the kept labels lie in [0, 21).
        assert ("a", 21 * 21 * 8) in events(t, before)
        with pytest.raises(UnfollowedError):
            bool((true == 3).any())
        labels[:, :4] = torch.randint(0, 9, (8, 4), device="cuda")
        with pytest.raises(UnfollowedError):
            bool((labels != -100).all())


def test_a_foreach_write_of_unknown_values_leaves_its_list_unknown():
    """A foreach operation writes each tensor of its list (``Tensor(a!)[] self``): AdamW's
    moments, zeros when made (known), are unknown once a gradient is folded in, and a read of
    them stops the trace; written from known values they stay known, and read as the CPU
    computes them."""
    from vramlab import UnfollowedError

    with vramlab.trace(gpu="h100") as t:
        moments = [torch.zeros(4, device="cuda") for _ in range(2)]
        torch._foreach_add_(moments, [torch.ones(4, device="cuda")] * 2)
        assert moments[1].sum().item() == 4.0
        grads = [torch.randn(4, device="cuda") for _ in range(2)]
        torch._foreach_addcmul_(moments, grads, grads, value=0.5)
        # Only printed, the value is a placeholder (unknown.py); compared, it stops the trace.
        assert str(moments[1].sum().item()) == "?"
        with pytest.raises(UnfollowedError):
            moments[1].sum().item() == 4.0
    assert t.snapshot()


def test_a_matrix_exponential_keeps_its_result_and_leaves_the_peak_unknown():
    """ISSUE35J's orthogonal parametrization (reports/reference/h200/trace-workloads-35j): mexp_impl
    picks its approximant from the norm read on the host, so its temporaries are not known; the
    result is traced, forward and backward (one of the 2n x 2n block matrix), and the note comes first, as 'UNKNOWN PEAK'."""
    with vramlab.trace(gpu="h200") as t:
        a = torch.randn(256, 256, device="cuda", requires_grad=True)
        before = mark(t)
        e = torch.linalg.matrix_exp(a - a.T)
        made = events(t, before)
        e.sum().backward()
    assert ("a", 256 * 256 * 4) in made, made
    notes = t.snapshot()["vramlab_notes"]
    said = [n for n in notes if "matrix exponentials" in n]
    assert len(said) == 1 and said[0].startswith("UNKNOWN PEAK: 2 matrix exponentials"), said
    listed = [line.strip() for line in t.summary().splitlines() if line.startswith("    - ")]
    assert listed[0].startswith("- UNKNOWN PEAK:"), listed


@pytest.mark.parametrize("name", ISSUE35H_IN_CI)
def test_issue35h_programs_the_mends_made_exact_give_the_h200s_peaks(name):
    """Traced for the H200 and replayed under both settings: PyTorch's recorded peaks to the byte
    (reports/reference/h200/trace-workloads-35h; torch 2.11's recordings, so the other release's
    rules may differ)."""
    import json
    import pathlib
    import sys

    if not torch.__version__.startswith("2.11."):
        pytest.skip(f"recorded under torch 2.11; this is {torch.__version__}")
    root = pathlib.Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "scripts"))
    from trace_workloads_35h import ISSUE35H

    with vramlab.trace(gpu="h200") as t:
        ISSUE35H[name]("cuda")
    for label, setting in [("default", ""), ("expandable", "expandable_segments:True")]:
        theirs = json.loads((root / "reports/reference/h200/trace-workloads-35h" / f"{name}-{label}.json").read_text())["memory_stats"]
        ours = vramlab.replay(t.snapshot(), alloc_conf=setting)["results"][0]["pytorch_stats"]
        for key in ["allocated_bytes.all.peak", "reserved_bytes.all.peak"]:
            assert ours[key] == theirs[key], (label, key, ours[key], theirs[key])
