"""The rules ISSUE35O's recordings led to (reports/reference/h200/trace-workloads-35o), each
checked on the CPU against PyTorch's own code, the committed measurements or a recording."""

import gzip
import pathlib
import pickle
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import vramlab  # noqa: E402
from vramlab._tracer import paths  # noqa: E402
from vramlab._tracer.recorder import UNKNOWN_EITHER_WAY, UNKNOWN_PEAK, peak_bound  # noqa: E402
from vramlab._tracer.sweep import answer  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
RECORDED = ROOT / "reports" / "reference" / "h200" / "trace-workloads-35o"

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from test_trace_rules_35n import _measured, _scratch, _workspaces  # noqa: E402


@pytest.mark.parametrize(
    "arguments, graphs",
    [
        ({}, False),
        ({"mode": "default"}, False),
        ({"mode": "reduce-overhead"}, True),
        ({"mode": "max-autotune"}, True),
        ({"mode": "max-autotune-no-cudagraphs"}, False),
        ({"options": {"triton.cudagraphs": True}}, True),
        ({"backend": "cudagraphs"}, True),
        ({"backend": "eager", "mode": None}, False),
    ],
)
def test_cuda_graphs_are_known_from_torch_compiles_own_mode_table(arguments, graphs):
    """Which torch.compile calls run CUDA graphs is torch._inductor's list_mode_options, read at
    trace time, plus the options and the backend given."""
    assert paths.compiles_cuda_graphs(torch, arguments) is graphs


def _compiled_trace(**arguments):
    with vramlab.trace(gpu="h200") as t:
        layer = torch.nn.Linear(256, 256, device="cuda")
        step = torch.compile(layer, **arguments)
        step(torch.randn(32, 256, device="cuda"))
    return t


def test_a_program_compiled_with_cuda_graphs_says_its_peak_is_not_known_either_way():
    """The eager trace of a compiled program is no bound of a CUDA-graphed one's peak (graphs
    hold their pool between calls; Inductor plans its own buffers): the note comes first, the
    summary says "not known", and a compile without graphs keeps the plainer note."""
    graphed = _compiled_trace(mode="reduce-overhead")
    notes = graphed.snapshot()["vramlab_notes"]
    said = [n for n in notes if n.startswith(("UNKNOWN", "1 torch.compile"))]
    assert said and said[0].startswith(UNKNOWN_EITHER_WAY), notes
    assert peak_bound(said).startswith("not known")
    assert "peak allocated not known" in graphed.summary()
    plain = _compiled_trace()
    notes = plain.snapshot()["vramlab_notes"]
    assert not any(n.startswith(UNKNOWN_EITHER_WAY) for n in notes)
    assert any("torch.compile calls were traced as eager PyTorch" in n for n in notes), notes


def test_a_lower_bound_note_and_an_either_way_note_are_said_apart():
    assert peak_bound([f"{UNKNOWN_PEAK} x"]) == "at least "
    assert peak_bound([f"{UNKNOWN_PEAK} x", f"{UNKNOWN_EITHER_WAY} y"]).startswith("not known")
    assert peak_bound(["a plain note"]) == ""


def test_a_sweep_says_when_its_needs_are_not_known():
    point = {"fits": True, "stopped": False, "value": 8, "defaults_fit": True, "defaults_need": 1 << 30, "needs": 1 << 30, "paste": "", "bound": "not known"}
    line = answer("BATCH", [point], 1 << 34, [])
    assert line.startswith("the largest BATCH that fits") and line.endswith("the needs at BATCH=8 are not known (see the trace's first note)"), line
    assert "bound" not in answer("BATCH", [{**point, "bound": ""}], 1 << 34, [])


def test_transformers_static_cache_generate_was_cuda_graphed_on_the_gpu_and_is_said_unknown():
    """Llama's greedy generate with cache_implementation="static": transformers compiles its
    decoding step with mode "reduce-overhead" (generation/utils.py, _valid_auto_compile_criteria,
    CompileConfig). The H200's recording holds a private pool (the graphs'), and the trace says
    its peak is not known instead of giving the eager one (62% below the GPU's)."""
    pytest.importorskip("transformers")
    recording = RECORDED / "hf_llama_static_cache_greedy_generate-default.pickle.gz"
    if not recording.exists():
        pytest.skip(f"{recording} is not here")
    with gzip.open(recording) as f:
        segments = pickle.load(f)["segments"]
    assert any(tuple(s["segment_pool_id"]) != (0, 0) for s in segments)
    sys.path.insert(0, str(ROOT / "scripts"))
    from trace_workloads_35o import hf_llama_static_cache_greedy_generate

    with vramlab.trace(gpu="h200") as t:
        hf_llama_static_cache_greedy_generate("cuda")
    notes = t.snapshot()["vramlab_notes"]
    # The header lines first (the GPU, and under a later release what was read from its sources),
    # then the notes that leave the peak unknown.
    said = [n for n in notes if n.startswith(("UNKNOWN", "1 generate", "1 sorts"))]
    assert said[0].startswith(UNKNOWN_EITHER_WAY), notes[:4]
    assert "peak allocated not known" in t.summary()


def test_moving_a_gpu_module_to_meta_frees_its_parameters_there():
    """On the GPU, .to("meta") makes new tensors without memory and the CUDA ones die there (a
    deepcopy moved to meta, as torch.func ensembles do); the trace's stand-ins are on meta
    already, where .to would hand back the tensor itself."""
    with vramlab.trace(gpu="h200") as t:
        layer = torch.nn.Linear(1024, 1024, device="cuda")
        before = t.record.allocated
        layer.to("meta")
        moved = t.record.allocated
        kept = torch.nn.Linear(1024, 1024, device="cuda")
        copy = kept.weight.to(torch.device("meta"))
        after = t.record.allocated
        devices = (copy.device.type, kept.weight.device.type, layer.weight.device.type)
    assert before - moved == 1024 * 1024 * 4 + 1024 * 4
    assert after - moved == 1024 * 1024 * 4 + 1024 * 4
    assert devices == ("meta", "cuda", "meta")


def test_a_strided_convolution_takes_the_workspaces_of_the_layout_cudnn_is_given():
    """ATen copies a strided input to the layout it hands cuDNN (Convolution.cpp:
    input.contiguous(determine_backend_memory_format)), so a transposed NCHW input's convolution
    frees the workspaces measured for the contiguous one (the spectrogram of torch.stft)."""
    row = _measured("conv-timm-2026-11-29.jsonl.gz", lambda r: r["backend"].endswith("Cudnn") and r["shape"][1] == r["shape"][2] and r["shape"][9] == 1
                    and _workspaces(r) and next(iter(_workspaces(r).values()))[1] > (1 << 20))
    (entry,) = _workspaces(row).values()
    c, h, w, k, r, s, stride, padding, dilation, groups = row["shape"]
    dtype = getattr(torch, row["dtype"])
    with vramlab.trace(gpu="h200") as t:
        x = torch.randn(row["n"], c, w, h, device="cuda", dtype=dtype).transpose(2, 3).requires_grad_()
        assert not x.is_contiguous() and not x.is_contiguous(memory_format=torch.channels_last)
        weight = torch.randn(k, c, r, s, device="cuda", dtype=dtype, requires_grad=True)
        out = torch.nn.functional.conv2d(x, weight, None, stride, padding, dilation, groups)
        out.backward(torch.ones_like(out))
    snapshot = t.snapshot()
    assert _scratch(snapshot, entry[1:]) == [v for v in entry[1:] if v], (entry, row["shape"])
    assert not any("strided tensors" in str(note) for note in snapshot["vramlab_notes"])


def test_the_cli_says_a_cuda_graphed_peak_is_not_known(tmp_path):
    script = tmp_path / "graphed.py"
    script.write_text(
        "import torch\n"
        "layer = torch.nn.Linear(64, 64, device='cuda')\n"
        "torch.compile(layer, mode='reduce-overhead')(torch.randn(8, 64, device='cuda'))\n"
    )
    done = subprocess.run([sys.executable, "-m", "vramlab.trace", "--gpu", "h200", "--out", str(tmp_path / "o.pickle"), str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "peak allocated not known (see the first note); the eager trace gives " in done.stderr, done.stderr
    assert f"note: {UNKNOWN_EITHER_WAY}" in done.stderr


def test_a_module_with_a_tied_weight_moved_to_the_gpu_keeps_it():
    """Module.to(device="cuda") is read as meta by the trace's redirect; a weight tied to one
    already moved is met again there, and is not taken for the program's own move to meta."""
    with vramlab.trace(gpu="h200") as t:
        embed = torch.nn.Embedding(1000, 64)
        head = torch.nn.Linear(64, 1000, bias=False)
        head.weight = embed.weight
        model = torch.nn.Sequential(embed, head).to(device="cuda", dtype=torch.bfloat16)
        tied = model[0].weight is model[1].weight and model[1].weight.device.type == "cuda"
    assert tied and t.record.allocated == 1000 * 64 * 2
