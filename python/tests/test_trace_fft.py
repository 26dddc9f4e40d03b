"""torch.fft, torch.stft and torch.istft inside vramlab.trace against what they allocated on an
H200 (reports/reference/h200/cufft, scripts/measure_cufft_workspaces.py): PyTorch's own
allocations around cuFFT are followed event for event, and cuFFT's per-call work area, which the
trace leaves out and notes, is the only one missing."""

import gzip
import json
import pathlib
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")
import vramlab  # noqa: E402
from traced import place_mark, sizes_after_mark  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
MEASURED = ROOT / "reports/reference/h200/cufft/cufft-grid.jsonl.gz"
sys.path.insert(0, str(ROOT / "scripts"))
from measure_cufft_workspaces import transform  # noqa: E402

COMPLEX = {"float32": torch.complex64, "float64": torch.complex128, "float16": torch.complex32}


def _rows():
    with gzip.open(MEASURED, "rt") as f:
        return [json.loads(line) for line in f if '"error"' not in line]


ROWS = _rows()
STFT_ROWS = [r for r in ROWS if r["op"] in ("stft", "istft")]
FFT_ROWS = [r for r in ROWS if r["op"] not in ("stft", "istft")]


def _call(r):
    """The row's call on stand-ins, as the measurement made it."""
    if r["op"] in ("stft", "istft"):
        window = torch.hann_window(r["n_fft"], device="cuda")
        x = torch.randn(r["batch"], r["samples"], device="cuda")
        spec = torch.stft(x, r["n_fft"], r["hop"], window=window, return_complex=True)
        if r["op"] == "istft":
            return lambda: torch.istft(spec, r["n_fft"], r["hop"], window=window, length=r["samples"])
        return lambda: torch.stft(x, r["n_fft"], r["hop"], window=window, return_complex=True)
    dtype, signal, batch = getattr(torch, r["dtype"]), r["signal"], r["batch"]
    dims, fn, complex_dtype = len(signal), transform(r["op"], len(signal)), COMPLEX[r["dtype"]]
    over = tuple(range(-dims, 0))
    shape = list(signal[:-1]) + [signal[-1] // 2 + 1] if r["op"] == "c2r" else list(signal)
    if r["op"] == "r2c":
        x = torch.randn(batch, *shape, device="cuda", dtype=dtype)
    elif dtype == torch.float16:
        x = torch.randn(batch, *shape, device="cuda", dtype=dtype).to(complex_dtype)
    else:
        x = torch.randn(batch, *shape, device="cuda", dtype=complex_dtype)
    if r["op"] == "c2r":
        return (lambda: fn(x, s=tuple(signal), dim=over)) if dims > 1 else (lambda: fn(x, n=signal[0]))
    return (lambda: fn(x, dim=over)) if dims > 1 else (lambda: fn(x))


def _traced(r):
    """The sizes the trace allocates in the row's second call."""
    warnings.filterwarnings("ignore", "ComplexHalf support is experimental")
    with vramlab.trace(gpu="h200") as t:
        call = _call(r)
        first = call()
        del first
        place_mark(torch)
        call()
    return sizes_after_mark(t.snapshot())


def _measured(r):
    return [e[1] for e in r["events"] if e[0] == "a"]


@pytest.mark.parametrize("r", STFT_ROWS[::12], ids=lambda r: f"{r['op']}-{r['n_fft']}-{r['hop']}-{r['batch']}-{r['samples']}")
def test_stft_and_istft_allocate_as_on_the_h200(r):
    """Every allocation in order: stft's padded and framed copies; istft's overlap-add, whose two
    unfold_backward calls each make an int64 index (rules/unfold_backward.py), and its window check,
    torch.equal's two temporaries (rules/reads.py)."""
    assert _traced(r) == _measured(r)


@pytest.mark.parametrize("r", FFT_ROWS[::40], ids=lambda r: f"{r['op']}-{r['dtype']}-{'x'.join(map(str, r['signal']))}-{r['batch']}")
def test_transforms_allocate_as_on_the_h200_but_for_cuffts_work_area(r):
    """PyTorch's allocations (the output; complex-to-real's copy of its input) as measured; what
    the trace leaves out is at most one allocation after them, cuFFT's work area."""
    traced, measured = _traced(r), _measured(r)
    assert measured[: len(traced)] == traced
    assert len(measured) - len(traced) <= 1


def test_the_work_area_is_noted_with_how_large_it_can_be():
    with vramlab.trace(gpu="h200") as t:
        torch.fft.rfft(torch.randn(4, 65536, device="cuda"))
    notes = " ".join(str(n) for n in t.snapshot().get("vramlab_notes", []))
    assert "cuFFT's work areas" in notes and "ten times" in notes


def test_the_h200s_recurrent_layers_allocate_as_the_h100s():
    """rules/cudnn_rnn.py gives the H200 the H100's cuDNN RNN sizes (MEASURED_ON): the same 1,500
    seeded configurations, measured on both, allocated event for event alike."""
    def events(path):
        with gzip.open(ROOT / path, "rt") as f:
            rows = [json.loads(line) for line in f]
        # Each phase's events as (action, bytes): addresses and timings differ by machine.
        return [(row["config"], {k: [e[:2] for e in v] for k, v in row.items() if isinstance(v, list)}) for row in rows if "config" in row]

    h100 = events("reports/reference/h100/recurrent/random.jsonl.gz")
    h200 = events("reports/reference/h200/recurrent/random.jsonl.gz")
    assert len(h100) == len(h200) == 1500
    assert h100 == h200
