"""printed.py: int(t) and float(t) of a GPU value the trace does not have are answered 0 only where
the program's source shows the number reaches nothing but output; everything else still stops
the trace. Six of ISSUE35W's sixteen programs (reports/reference/h200/trace-workloads-35w) stopped
at such a read in an evaluation loop or a print after training."""

import pytest

torch = pytest.importorskip("torch")

import vramlab  # noqa: E402
from vramlab.errors import UnfollowedError  # noqa: E402


def _batch():
    model = torch.nn.Linear(8, 3).cuda()
    x = torch.randn(4, 8, device="cuda")
    y = torch.randint(0, 3, (4,), device="cuda")
    return model, x, y


def _accuracy(model, x, y):
    correct = 0
    for _ in range(2):
        correct += int((model(x).argmax(-1) == y).sum())
    return correct / 8


def test_counts_and_losses_only_printed_are_answered_zero_and_said(capsys):
    with vramlab.trace(gpu="h100") as t:
        model, x, y = _batch()
        loss = model(x).float().pow(2).mean()
        history = []
        history.append(float(loss))
        total = 0.0
        total += float(loss) * 4
        # Printed, not compared here: a comparison in this function would be a decision on them.
        print(f"loss {float(loss):.3f} mean {total / 4:.3f} acc {_accuracy(model, x, y):.2f} {history}")
    assert capsys.readouterr().out.strip() == "loss 0.000 mean 0.000 acc 0.00 [0.0]"
    notes = [n for n in t.snapshot()["vramlab_notes"] if "int() or float()" in n]
    assert notes and notes[0].startswith("5 numbers")


def test_a_number_that_could_decide_still_stops_the_trace():
    with vramlab.trace(gpu="h100"):
        model, x, y = _batch()
        loss = model(x).sum()
        with pytest.raises(UnfollowedError):
            if float(loss) < 1.0:
                pass
        with pytest.raises(UnfollowedError):
            best = 0.0
            best = max(best, float(loss))
            stop = best > 3
            print(stop)
        with pytest.raises(UnfollowedError):
            torch.zeros(int((y > 0).sum()), device="cuda")
        with pytest.raises(UnfollowedError):
            # A tensor made of it (torch.tensor, then torch.log) could decide.
            print(torch.log(torch.tensor(float(loss))) > 0)


def test_a_returned_number_its_caller_compares_stops_the_trace():
    with vramlab.trace(gpu="h100"):
        model, x, y = _batch()
        with pytest.raises(UnfollowedError):
            if _accuracy(model, x, y) > 0.5:
                pass


def test_a_number_a_nested_function_reads_or_a_history_indexed_stops_the_trace():
    with vramlab.trace(gpu="h100"):
        model, x, y = _batch()
        loss = model(x).sum()
        with pytest.raises(UnfollowedError):
            seen = float(loss)

            def later():
                return seen

            print(later())
        with pytest.raises(UnfollowedError):
            history = []
            history.append(float(loss))
            print(history[-1] < 2)


def test_a_list_copied_only_to_be_printed_is_placeholders(capsys):
    """ISSUE35X's GIT captioning printed `generated[0, :8].tolist()` after generate and stopped
    there. A list only printed is placeholders, as .item()'s are; one the program goes on to use
    still stops the trace, and a list whose values are known is the values."""
    with vramlab.trace(gpu="h100"):
        ids = torch.randint(0, 100, (2, 6), device="cuda")
        print("first ids", ids[0, :3].tolist(), ids[0, 0].tolist())
        known = torch.arange(3, device="cuda")
        print(known.tolist())
        with pytest.raises(UnfollowedError):
            first = ids[0].tolist()
            print(sorted(first))
    assert capsys.readouterr().out.splitlines()[:2] == ["first ids [?, ?, ?] ?", "[0, 1, 2]"]


def test_a_roll_shift_read_from_the_gpu_is_answered_and_what_it_rolls_is_not_known():
    """Autoformer's training-mode autocorrelation rolls its values by the top-k delays it reads
    back: ``value_states.roll(shifts=-int(top_k_delays_index[i]), dims=1)`` (ISSUE35X refused
    there). A roll allocates the same whatever its shift, so a number that only becomes a roll's
    shift is answered 0 and said; a rolled tensor of known values is then unknown, and a shift the
    program also compares still stops the trace."""
    with vramlab.trace(gpu="h100") as t:
        model, x, _ = _batch()
        delays = torch.topk(model(x).mean(0), 2).indices
        values = torch.arange(24.0, device="cuda").view(2, 12)
        rolled = values.roll(shifts=-int(delays[0]), dims=1)
        again = torch.roll(values, int(delays[1]), 1)
        assert rolled.shape == again.shape == values.shape
        with pytest.raises(UnfollowedError):
            bool(rolled[0, 0] == 0)
        assert bool(values[0, 0] == 0)
        with pytest.raises(UnfollowedError):
            shift = int(delays[0])
            values.roll(shift, 1)
            print(shift > 1)
    notes = [n for n in t.snapshot()["vramlab_notes"] if "roll shifts" in n]
    assert notes and notes[0].startswith("2 roll shifts")


def test_unpacked_lists_integers_of_placeholders_and_equal_only_printed_are_answered():
    """Issue 36's tenth group (reports/reference/h200x2/distributed-x2j) stopped three rank 0s at
    their log lines: ``w, g, lg = stats.tolist()`` then printed (WGAN-GP), ``int(counts[1].item())``
    in an f-string (R(2+1)D), and ``same = all(torch.equal(a, b) for ...)`` printed (TP Mistral).
    Each is answered and said; the same values compared or branched on still stop the trace, and
    round() or math.floor of a placeholder is a placeholder."""
    import math

    with vramlab.trace(gpu="h100") as t:
        model, x, y = _batch()
        stats = torch.stack([model(x).sum(), model(x).mean()])
        w, g = stats.tolist()
        print(f"w {w:.3f} g {g:.3f}")
        counts = torch.stack([(model(x).argmax(-1) == y).sum(), torch.tensor(4, device="cuda")]).float()
        print(f"acc over {int(counts[0].item())} and {round(counts[0].item())} {math.floor(counts[0].item())}")
        out = model(x).argmax(-1)
        same = all(torch.equal(out, other) for other in (y, y))
        print(f"agree {same}")
        with pytest.raises(UnfollowedError):
            if torch.equal(out, y):
                pass
        with pytest.raises(UnfollowedError):
            a, b = stats.tolist()
            print(a > b)
    notes = t.snapshot()["vramlab_notes"]
    assert any(n.startswith("2 torch.equal results") for n in notes)
    assert any(n.startswith("1 numbers the program made with int() or float()") for n in notes)
    with pytest.raises(UnfollowedError, match="used as a size"):
        with vramlab.trace(gpu="h100"):
            model, x, _ = _batch()
            torch.zeros(round(model(x).sum().item()), device="cuda")


def test_a_selection_only_printed_is_answered_as_selecting_everything_and_said(capsys):
    """ISSUE35AA's CenterNet (refused when held out) logs ``classes[keep].unique().numel()``, a
    count whose shape comes from the scores' values: only printed, the selection is answered as
    the most it could be (every element), the unique as that many, and the note says the printed
    counts are not the GPU's. The same selection made into a size still stops the trace."""
    from vramlab._tracer.printed import SHAPE_PRINTED_NOTE

    with vramlab.trace(gpu="h200") as t:
        scores = torch.rand(4, 100, device="cuda")
        classes = torch.randint(0, 80, (4, 100), device="cuda")
        keep = scores > 0.3
        print(f"classes seen {classes[keep].unique().numel()} of {len(torch.unique(classes[keep]))}")
        with pytest.raises(UnfollowedError):
            torch.zeros(classes[keep].numel(), device="cuda")
    assert capsys.readouterr().out.strip() == "classes seen 400 of 400"
    notes = [n for n in t.snapshot()["vramlab_notes"] if SHAPE_PRINTED_NOTE.split("{count} ")[1][:40] in n]
    assert notes and notes[0].startswith("PEAK AT MOST: 4 selections")
