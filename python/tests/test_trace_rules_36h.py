"""The rules issue 36's eighth group (reports/reference/h200x4/distributed-x4h) led to, each checked
on the CPU against PyTorch's own code or that group's recordings."""

import gzip
import os
import pathlib
import pickle

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

import vramlab  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
RECORDED = ROOT / "reports" / "reference" / "h200x4" / "distributed-x4h"
# Hopper's cuBLAS workspace (CublasHandlePool.cpp, getChosenWorkspaceSize for major 9).
CUBLAS_WORKSPACE = 32 * 1024 * 1024


def _allocations(events):
    return [e for e in events if e["action"] == "alloc"]


def test_a_multiply_on_another_stream_gets_a_cublas_workspace_of_its_own(as_2_11):
    """CublasHandlePool.cpp keys workspaces by handle and current stream: the first multiply on a
    side stream allocates one there, a second on the same stream none."""
    with vramlab.trace(gpu="h200") as t:
        x = torch.empty(64, 64, device="cuda")
        x @ x
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            x @ x
            x @ x
        x @ x
    workspaces = [e for e in _allocations(t.snapshot()["device_traces"][0]) if e["size"] == CUBLAS_WORKSPACE]
    assert [e["stream"] for e in workspaces] == [0, side.cuda_stream]


def test_a_collective_future_runs_each_callback_on_a_stream_from_the_pool(as_2_11):
    """A CUDA work's future runs each `then` callback on a low-priority pool stream taken for it
    (ivalue_inl.h: invokeCallback, getStreamFromGlobalPool), and so does the future `then` returns:
    allocations inside land in those streams' pools, each with its cuBLAS workspace."""

    def program():
        dist.init_process_group("nccl")
        grad = torch.empty(256, 256, device="cuda")
        fut = dist.all_reduce(grad, async_op=True).get_future()
        chained = fut.then(lambda f: f.value()[0] @ f.value()[0]).then(lambda f: f.value() * 2)
        return chained.wait()

    with vramlab.trace(gpu="h200", world_size=2, rank=0) as t:
        program()
    allocations = _allocations(t.snapshot()["device_traces"][0])
    # cuBLAS gives a handle its workspace right after the first output on that stream.
    grad, product, product_workspace, doubled = allocations[:4]
    assert grad["stream"] == 0
    assert product_workspace["size"] == CUBLAS_WORKSPACE
    assert product["stream"] == product_workspace["stream"] != 0
    assert doubled["stream"] not in (0, product["stream"])
    assert any("ran on streams from the low-priority pool" in n for n in t.snapshot()["vramlab_notes"])


def test_the_powersgd_rank_asks_for_every_allocation_the_h200_gave_it(as_2_11):
    """DDP's PowerSGD hook on four H200s: its callbacks' matrices and their cuBLAS workspaces, one
    per pool stream, make the trace's allocations those of the recording, size for size (they were
    2 workspaces against the GPU's 29 before the futures' pool streams)."""
    pytest.importorskip("torchvision")
    recording = RECORDED / "ddp_powersgd_resnet50" / "rank0-default.pickle.gz"
    if not recording.exists():
        pytest.skip(f"{recording} is not here")
    import collections
    import runpy

    with gzip.open(recording) as f:
        recorded = pickle.load(f)
    script = ROOT / "scripts" / "workloads_36h" / "ddp_powersgd_resnet50.py"
    environ = dict(os.environ)
    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="4")
    try:
        with vramlab.trace(gpu="h200", world_size=4, rank=0) as t:
            runpy.run_path(str(script), run_name="__main__")
    finally:
        os.environ.clear()
        os.environ.update(environ)
    ours = collections.Counter(e["size"] for e in _allocations(t.snapshot()["device_traces"][0]))
    theirs = collections.Counter(e["size"] for e in _allocations(recorded["device_traces"][0]))
    assert ours == theirs
    assert ours[CUBLAS_WORKSPACE] == 29


def test_transformers_adafactor_scales_by_parameter_rms_without_stopping():
    """transformers' Adafactor (scale_parameter=True) compares each parameter's RMS with eps[1];
    the comparison is answered 'above' and said, and the step's allocations are those of a
    learning rate made as a 0-d tensor."""
    transformers = pytest.importorskip("transformers")
    from transformers.optimization import Adafactor

    with vramlab.trace(gpu="h200") as t:
        torch.manual_seed(0)
        config = transformers.T5Config(vocab_size=512, d_model=64, d_kv=16, d_ff=128, num_layers=1, num_decoder_layers=1, num_heads=4, decoder_start_token_id=0, pad_token_id=0)
        model = transformers.T5ForConditionalGeneration(config).cuda()
        optimizer = Adafactor(model.parameters(), lr=None, scale_parameter=True, relative_step=True, warmup_init=True)
        ids = torch.randint(1, 512, (2, 8), device="cuda")
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
    notes = t.snapshot()["vramlab_notes"]
    count = sum(1 for p in model.parameters())
    assert any(n.startswith(f"{count} comparisons of a parameter's RMS with eps[1]") for n in notes), notes


def test_the_same_comparison_in_a_program_still_stops_the_trace():
    """Only Adafactor's own read is answered: a program deciding on a norm it read stops."""
    with pytest.raises(vramlab.UnfollowedError):
        with vramlab.trace(gpu="h200"):
            w = torch.empty(64, 64, device="cuda")
            max(1e-3, w.norm(2) / 64)
