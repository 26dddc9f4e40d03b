"""The CTC loss rule (vramlab/_tracer/rules/ctc.py), from ATen/native/cuda/LossCTC.cu and
LossCTC.cpp, and transformers' padding check answered without data (vramlab/_tracer/libraries.py)."""

import warnings

import pytest

torch = pytest.importorskip("torch", reason="vramlab.trace needs PyTorch (pip install torch)")
F = torch.nn.functional

import vramlab  # noqa: E402
from vramlab import UnfollowedError  # noqa: E402
from traced import allocations  # noqa: E402


def ctc_events(steps, batch, labels, target_length, lengths_as="tensor"):
    with vramlab.trace(gpu="h100") as t:
        log_probs = torch.randn(steps, batch, labels, device="cuda", requires_grad=True)
        targets = torch.randint(1, labels, (batch, target_length), device="cuda")
        if lengths_as == "tensor":
            input_lengths = torch.full((batch,), steps, dtype=torch.long)
            target_lengths = torch.full((batch,), target_length, dtype=torch.long)
        else:
            input_lengths, target_lengths = [steps] * batch, [target_length] * batch
        start = len(allocations(t.snapshot()))
        loss = F.ctc_loss(log_probs, targets, input_lengths, target_lengths)
        loss.backward()
    return allocations(t.snapshot())[start:]


def test_the_forward_copies_three_vectors_then_makes_log_alpha_and_the_loss():
    steps, batch, labels, target = 400, 8, 40, 60
    events = ctc_events(steps, batch, labels, target)
    log_alpha = batch * steps * (2 * target + 1) * 4
    # LossCTC.cu, ctc_loss_gpu_template: target and input lengths (at::tensor), the batch
    # offsets (.cuda()), log_alpha, the negative log likelihood; the three vectors freed on return.
    assert events[:8] == [("alloc", 64)] * 3 + [("alloc", log_alpha), ("alloc", batch * 4)] + [("free_completed", 64)] * 3
    # LossCTC.cpp's mean: the target lengths copied to the device as the loss's dtype.
    assert events[8] == ("alloc", batch * 4)


def test_a_large_backward_sums_the_blanks_with_logsumexp_as_cuda_runs_it():
    steps, batch, labels, target = 400, 8, 40, 60
    assert 2 * steps + 24 * batch // 10 + 2 * labels // 10 > 450
    events = ctc_events(steps, batch, labels, target)
    log_alpha, grad = batch * steps * (2 * target + 1) * 4, steps * batch * labels * 4
    blanks, rows = batch * steps * (target + 1) * 4, batch * steps * 4
    start = events.index(("alloc", 64), 8)
    backward = events[start : start + 19]
    assert backward == [
        ("alloc", 64), ("alloc", 64), ("alloc", 64),
        ("alloc", log_alpha), ("alloc", grad),
        ("alloc", blanks),  # log_alpha + log_beta at the blank positions
        ("alloc", rows), ("alloc", rows), ("alloc", batch * steps),  # amax, abs, == inf
        ("free_completed", batch * steps), ("free_completed", rows),
        ("alloc", blanks), ("alloc", rows), ("free_completed", blanks),  # exp(x - max), its sum
        ("free_completed", rows),  # the maxima
        ("free_completed", rows), ("free_completed", blanks),  # the expression's temporaries
        ("free_completed", log_alpha),  # log_beta
        ("free_completed", 64),
    ]


def test_a_small_backward_allocates_only_log_beta_and_the_gradient():
    steps, batch, labels, target = 50, 2, 10, 5
    assert 2 * steps + 24 * batch // 10 + 2 * labels // 10 <= 450
    events = ctc_events(steps, batch, labels, target)
    start = events.index(("alloc", batch * 8), 8)
    log_alpha, grad = batch * steps * (2 * target + 1) * 4, steps * batch * labels * 4
    assert events[start : start + 9] == [("alloc", batch * 8)] * 3 + [("alloc", log_alpha), ("alloc", grad), ("free_completed", log_alpha)] + [("free_completed", batch * 8)] * 3


def test_lengths_as_tensors_run_the_list_overload_as_the_gpu_does():
    assert ctc_events(120, 4, 30, 20, "tensor") == ctc_events(120, 4, 30, 20, "list")


def test_lengths_on_the_gpu_are_read_where_known_and_refused_where_not():
    with vramlab.trace(gpu="h100"):
        log_probs = torch.randn(50, 2, 10, device="cuda").log_softmax(-1)
        targets = torch.randint(1, 10, (2, 5), device="cuda")
        F.ctc_loss(log_probs, targets, torch.full((2,), 50, device="cuda"), torch.full((2,), 5, device="cuda"))
    with pytest.raises(UnfollowedError) as stopped:
        with vramlab.trace(gpu="h100"):
            log_probs = torch.randn(50, 2, 10, device="cuda").log_softmax(-1)
            targets = torch.randint(1, 10, (2, 5), device="cuda")
            F.ctc_loss(log_probs, targets, torch.randint(40, 50, (2,), device="cuda"), torch.full((2,), 5, device="cuda"))
    assert "\n" not in str(stopped.value) and "test_trace_ctc.py" in str(stopped.value)


def test_a_model_called_without_an_attention_mask_traces_its_padding_check():
    transformers = pytest.importorskip("transformers")
    # DeBERTa-v2 checks (modeling_deberta_v2.py); BERT no longer does in transformers 5.
    config = transformers.DebertaV2Config(hidden_size=64, num_hidden_layers=1, num_attention_heads=2, intermediate_size=128, vocab_size=100, pad_token_id=0)
    warnings.simplefilter("ignore")
    with vramlab.trace(gpu="h100") as t:
        model = transformers.DebertaV2Model(config).to("cuda")
        model(input_ids=torch.randint(0, 100, (2, 16), device="cuda"))
    notes = t.snapshot()["vramlab_notes"]
    assert any("warn_if_padding_and_no_attention_mask" in n for n in notes), notes
