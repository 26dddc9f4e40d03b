"""The rules ISSUE35P's recordings led to (reports/reference/h200/trace-workloads-35p), each
checked on the CPU against PyTorch's own code or a recording."""

import gzip
import pathlib
import pickle
import sys

import pytest

torch = pytest.importorskip("torch")

import vramlab  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
RECORDED = ROOT / "reports" / "reference" / "h200" / "trace-workloads-35p"


def _allocations(snapshot):
    return [e["size"] for e in snapshot["device_traces"][0] if e["action"] == "alloc"]


def test_adafactor_asks_for_what_the_h200_gave_it_read_for_read(as_2_11):
    """T5 trained with torch.optim.Adafactor: its reads of each parameter's and update's norm are
    answered (they only scale updates in place, _adafactor.py), and every allocation, the norms'
    split-reduction buffers among them (ReduceNormKernel.cu through gpu_reduce_kernel), is the
    H200's, in order."""
    pytest.importorskip("transformers")
    recording = RECORDED / "t5_torch_native_adafactor-default.pickle.gz"
    if not recording.exists():
        pytest.skip(f"{recording} is not here")
    with gzip.open(recording) as f:
        recorded = pickle.load(f)
    sys.path.insert(0, str(ROOT / "scripts"))
    from trace_workloads_35p import t5_torch_native_adafactor

    with vramlab.trace(gpu="h200") as t:
        t5_torch_native_adafactor("cuda")
    snapshot = t.snapshot()
    assert any("norms read back by torch.optim.Adafactor" in n for n in snapshot["vramlab_notes"])
    assert _allocations(snapshot) == _allocations(recorded)


def test_a_norm_read_back_anywhere_else_is_still_refused():
    """Only the reads Adafactor's own functions make are answered: the same read in a program's
    code may decide a branch or a shape."""
    with pytest.raises(vramlab.UnfollowedError, match="decides on a value it read back at"):
        with vramlab.trace(gpu="h200"):
            x = torch.randn(1024, 1024, device="cuda")
            if x.norm(2).item() > 1.0:
                torch.empty(10, device="cuda")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_norm_over_many_rows_stages_partial_results_as_a_sum_of_the_same_shape_does(dtype):
    """linalg_vector_norm runs gpu_reduce_kernel with four values per load (ReduceNormKernel.cu),
    as mean does: a norm down 32,128 rows of 384 columns splits across blocks and allocates the same
    global buffer and semaphores a mean of that shape does, after its output, freed before it
    returns."""

    def scratch(reduce):
        with vramlab.trace(gpu="h200") as t:
            x = torch.empty(32128, 384, device="cuda", dtype=dtype)
            start = len(t.snapshot()["device_traces"][0])
            reduce(x)
        return [e["size"] for e in t.snapshot()["device_traces"][0][start:] if e["action"] == "alloc"]

    norm = scratch(lambda x: torch.linalg.vector_norm(x, 2, dim=-2, keepdim=True))
    mean = scratch(lambda x: x.mean(dim=-2, keepdim=True))
    assert len(norm) == 3 and norm == mean, (norm, mean)
