"""The rules ISSUE35K's recordings led to (reports/reference/h200/trace-workloads-35k), each checked
against the sequence PyTorch's CUDA source makes, on the CPU."""

import pytest

torch = pytest.importorskip("torch")

import vramlab  # noqa: E402


def events(t, start=0):
    return [(e["action"][0], e["size"]) for e in t.snapshot()["device_traces"][0] if e["action"] in ("alloc", "free_requested")][start:]


def mark(t):
    return len(events(t))


def test_a_roll_over_two_dimensions_makes_a_temporary_and_a_strided_input_a_copy():
    """roll_cuda rolls one dimension and copies a non-contiguous input first; roll_common rolls
    the first of several dimensions into a temporary, freed once the output is made
    (TensorTransformations.cu, TensorTransformations.h)."""
    size = 4 * 8 * 8 * 16 * 4
    with vramlab.trace(gpu="h100") as t:
        x = torch.randn(4, 8, 8, 16, device="cuda")
        start = mark(t)
        two = torch.roll(x, shifts=(-3, -3), dims=(1, 2))
        rolled_two = events(t, start)
        start = mark(t)
        three = torch.roll(x.transpose(1, 2), shifts=(1, 2, 3), dims=(0, 1, 2))
        rolled_strided = events(t, start)
        start = mark(t)
        flat = torch.roll(x, 5)
        one = torch.roll(x, 2, 1)
        rolled_plain = events(t, start)
        del two, three, flat, one
    assert rolled_two == [("a", size), ("a", size), ("f", size)], rolled_two
    # The copy of the strided input goes once the first dimension is rolled; the two
    # temporaries after the output, newest first.
    assert rolled_strided == [("a", size), ("a", size), ("f", size), ("a", size), ("a", size), ("f", size), ("f", size)], rolled_strided
    assert rolled_plain == [("a", size), ("a", size)], rolled_plain


def test_a_shifted_window_block_asks_for_its_roll_temporaries_forward_and_backward():
    """A Swin-like shifted window: the feature map rolled over height and width before the
    block and back after it, and the gradient rolled both ways again in the backward."""
    size = 2 * 8 * 8 * 16 * 4
    with vramlab.trace(gpu="h100") as t:
        x = torch.randn(2, 8, 8, 16, device="cuda", requires_grad=True)
        y = torch.roll(torch.roll(x, (-2, -2), (1, 2)) * 3.0, (2, 2), (1, 2))
        start = mark(t)
        y.sum().backward()
        backward = events(t, start)
    # Each roll of the gradient: a temporary, the output, the temporary freed.
    rolls = [i for i in range(len(backward) - 2) if backward[i : i + 3] == [("a", size), ("a", size), ("f", size)]]
    assert len(rolls) >= 2, backward


def test_the_input_gradient_of_layer_norm_is_contiguous_whatever_the_incoming_gradient():
    """layer_norm_backward_cuda makes dX with empty_like(X, LEGACY_CONTIGUOUS_MEMORY_FORMAT): a
    norm before another whose output is permuted gets a contiguous gradient, which it takes as
    it is (no copy); the meta kernel would lay it out like the permuted gradient."""
    with vramlab.trace(gpu="h100") as t:
        first, second = torch.nn.LayerNorm(32).cuda(), torch.nn.LayerNorm(32).cuda()
        x = torch.randn(4, 6, 6, 32, device="cuda", requires_grad=True)
        y = second(first(x)).permute(0, 3, 1, 2)
        start = mark(t)
        y.backward(torch.ones(4, 32, 6, 6, device="cuda"))
        backward = events(t, start)
    size = 4 * 6 * 6 * 32 * 4
    # The incoming gradient (made by the program), the permuted gradient's copy around the second
    # norm's backward, that norm's dX, the first norm's dX: no copy of a gradient for the first.
    assert [e for e in backward if e == ("a", size)] == [("a", size)] * 4, backward


def test_leaving_autocast_with_several_cached_casts_says_their_free_order_is_not_known():
    with vramlab.trace(gpu="h100") as t:
        layers = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)).cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            layers(torch.randn(4, 16, device="cuda"))
    notes = t.snapshot()["vramlab_notes"]
    assert any("std::unordered_map" in n and "autocast's cache" in n for n in notes), notes
