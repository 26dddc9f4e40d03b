"""The CUDA embedding backwards' temporaries (vramlab/_tracer/rules/embedding.py) and the CUB
sizes they use (rules/cub.py: DeviceSelect::UniqueByKey, DeviceScan::ExclusiveScan), worked by
hand from PyTorch 2.11's and CCCL 3.0.1's sources, and checked against the H100 recordings
(reports/reference/h100/trace-workloads)."""

import gzip
import pathlib
import pickle

import pytest

torch = pytest.importorskip("torch", reason="vramlab.trace needs PyTorch (pip install torch)")
import torch.nn as nn  # noqa: E402

import vramlab  # noqa: E402
from vramlab._tracer import compat  # noqa: E402
from vramlab._tracer.rules import cub, embedding  # noqa: E402
from traced import allocations  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "reports" / "reference" / "h100" / "trace-workloads"
RELEASE = compat.release(torch)


def test_tile_state_is_aligned_twice():
    # single_pass_scan_operators.cuh: (32 + tiles) TxnWords (16 bytes for an 8-byte T) through
    # AliasTemporaries ([736, 0, 0] -> 768 + 255 = 1023), and the dispatch aligns that once more.
    assert cub.tile_state_bytes(14, 8) == 768 + 255
    assert cub.alias_temporaries([cub.tile_state_bytes(14, 8)]) == 1024 + 255
    # uint2 words for a 4-byte T.
    assert cub.tile_state_bytes(0, 4) == 256 + 255


def test_exclusive_sum_tiles_by_hand():
    # PyTorch's SumOp is not a primitive operator: DefaultPolicy 128 x 15, MemBoundScaling over
    # int64 -> 7 items, 128 threads: 896 items a tile. 81920 items: 92 tiles, 124 states x 16 =
    # 1984 -> 2048 + 255 = 2303 -> 2304 + 255.
    assert cub.mem_bound_scaling(128, 15, 8) == (128, 7)
    assert cub.exclusive_sum_temp(81920, 8) == 2304 + 255
    assert cub.exclusive_sum_temp(1, 8) == 1024 + 255


def test_unique_by_key_tiles_by_hand():
    # sm90_tuning<8-byte key, 4-byte value>: 640 x 7 = 4480 items a tile, unsigned long long
    # offsets (16-byte words). 81920 items: 19 tiles, 51 states x 16 = 816 -> 1024 + 255 -> 1280 + 255.
    assert cub.unique_by_key_temp(81920, 8) == 1280 + 255
    assert cub.unique_by_key_temp(81920, 2) is None


# Every distinct (n, temp_storage_bytes) of the H100 recordings under torch 2.11: n read from the
# allocation before each (unique_by_key's keys_out, exclusive_sum's partials_per_segment_offset).
UNIQUE_BY_KEY_RECORDED = [(4096, 1279), (8192, 1279), (12800, 1279), (16384, 1279), (40960, 1279), (65536, 1279),
                          (81920, 1535), (262144, 2047)]
EXCLUSIVE_SUM_RECORDED = [(2, 1279), (32, 1279), (512, 1279), (1000, 1279), (4096, 1279), (8192, 1279), (10000, 1279),
                          (12800, 1279), (40960, 1791), (81920, 2559)]


@pytest.mark.parametrize("n, recorded", UNIQUE_BY_KEY_RECORDED)
def test_unique_by_key_matches_the_h100(n, recorded):
    assert cub.unique_by_key_temp(n, 8) == recorded


@pytest.mark.parametrize("n, recorded", EXCLUSIVE_SUM_RECORDED)
def test_exclusive_sum_matches_the_h100(n, recorded):
    assert cub.exclusive_sum_temp(n, 8) == recorded


def sizes(events):
    return [(action, value[1] if action == "alloc" else value) for action, value in events]


def test_dense_backward_plan_by_hand():
    # embedding_adam: 8192 int64 indices into a (100000, 256) float table.
    events = embedding.embedding_dense_backward_plan(8192, 100_000, 256, 8, 4, False, 0, 0, True)
    n = 8192 * 8
    partial = 8192 // 10 + 8192
    assert sizes(events) == [
        ("alloc", n), ("alloc", n), ("alloc", n), ("alloc", 150015), ("free", "radix_sort"), ("free", "range"),
        ("output", None),
        ("alloc", n), ("alloc", 8), ("alloc", n), ("alloc", 1279), ("free", "unique_by_key"), ("free", "keys_out"),
        ("alloc", n), ("alloc", n), ("alloc", 1279), ("free", "exclusive_sum"), ("alloc", 8),
        ("alloc", partial * 8), ("alloc", partial * 256 * 4),
        ("free", "grad_weight_per_segment"), ("free", "partial_segment_offset"), ("free", "num_of_partial_segments"),
        ("free", "partials_per_segment_offset"), ("free", "partials_per_segment"), ("free", "num_of_segments"),
        ("free", "segment_offsets"), ("free", "orig_indices"), ("free", "sorted_indices"),
    ]
    assert partial * 8 == 72088


def test_few_indices_take_the_feature_kernel():
    # Embedding.cu: at most 3072 indices and no scale_grad_by_freq: the zeroed output only.
    assert embedding.embedding_dense_backward_plan(3072, 1000, 64, 8, 4, False, 0, 0, True) == [("output", None)]
    assert embedding.embedding_dense_backward_plan(3073, 1000, 64, 8, 4, False, 0, 0, True) != [("output", None)]


def test_max_mode_bags_zero_the_output_only():
    assert embedding.embedding_bag_dense_backward_plan(4096, 1000, 64, 8, 4, False, 2, 0, True) == [("output", None)]


def test_half_gradients_accumulate_per_segment_in_float():
    events = embedding.embedding_dense_backward_plan(8192, 1000, 64, 8, 4, False, 0, 0, True)
    partial = 8192 // 10 + 1000
    assert ("alloc", ("grad_weight_per_segment", partial * 64 * 4)) in events


def recorded_op(name, marker, index=0):
    """The allocations and frees of the `index`th call of a C++ function in a recording, up to the
    next allocation outside it."""
    path = RECORDINGS / f"{name}-default.pickle.gz"
    if not path.exists():
        pytest.skip(f"{path} is not in this checkout")
    events = [e for e in pickle.load(gzip.open(path))["device_traces"][0] if e["action"] in ("alloc", "free_completed")]
    calls, current, live = [], None, set()
    for e in events:
        if e["action"] == "alloc":
            if any(marker in f.get("name", "") for f in e["frames"]):
                if current is None:
                    current, live = [], set()
                current.append(("alloc", e["size"]))
                live.add(e["addr"])
            elif current is not None:
                calls.append(current)
                current = None
        elif current is not None and e["addr"] in live:
            current.append(("free_completed", e["size"]))
            live.discard(e["addr"])
    return calls[index]


def test_a_traced_embedding_backward_allocates_as_the_h100_recorded():
    """embedding_adam's nn.Embedding(100000, 256) over (64, 128) ids, against the recording."""
    if RELEASE != (2, 11):
        pytest.skip(f"the recording is torch 2.11's; this is {torch.__version__}")
    with vramlab.trace(gpu="h100") as t:
        embed = nn.Embedding(100_000, 256).cuda()
        ids = torch.randint(0, 100_000, (64, 128), device="cuda")
        out = embed(ids)
        before = len(allocations(t.snapshot()))
        out.backward(torch.ones_like(out))
    traced = allocations(t.snapshot())[before + 1:]
    recorded = recorded_op("embedding_adam", "embedding_dense_backward_cuda")
    # The traced output is freed after the op; the recording's later.
    assert [e for e in traced if e != ("free_completed", 102_400_000)][: len(recorded)] == recorded


def test_a_traced_embedding_bag_backward_allocates_as_the_h100_recorded():
    """embeddingbag_recommender's EmbeddingBag(200000, 64, mode="sum") over 4096 bags of 20,
    its gradient a column slice of a cat (not contiguous: copied first)."""
    if RELEASE != (2, 11):
        pytest.skip(f"the recording is torch 2.11's; this is {torch.__version__}")
    with vramlab.trace(gpu="h100") as t:
        bag = nn.EmbeddingBag(200_000, 64, mode="sum").cuda()
        items = torch.randint(0, 200_000, (4096 * 20,), device="cuda")
        offsets = torch.arange(0, 4096 * 20, 20, device="cuda")
        pooled = bag(items, offsets)
        grad = torch.ones(4096, 128, device="cuda")[:, 64:]
        before = len(allocations(t.snapshot()))
        pooled.backward(grad)
    traced = [e for e in allocations(t.snapshot())[before:] if e != ("free_completed", 51_200_000)]
    recorded = recorded_op("embeddingbag_recommender", "_embedding_bag_dense_backward_cuda")
    assert recorded[0] == ("alloc", 4096 * 64 * 4)  # grad.contiguous()
    assert traced[: len(recorded)] == recorded


def test_embedding_bag_forward_allocates_bag_size_offset2bag_then_output():
    with vramlab.trace(gpu="h100") as t:
        bag = nn.EmbeddingBag(1000, 64, mode="sum").cuda()
        items = torch.randint(0, 1000, (2048 * 20,), device="cuda")
        offsets = torch.arange(0, 2048 * 20, 20, device="cuda")
        before = len(allocations(t.snapshot()))
        bag(items, offsets)
    assert allocations(t.snapshot())[before:before + 3] == [("alloc", 2048 * 8), ("alloc", 2048 * 20 * 8), ("alloc", 2048 * 64 * 4)]


def test_scale_grad_by_freq_is_said():
    with vramlab.trace(gpu="h100") as t:
        embed = nn.Embedding(1000, 64, scale_grad_by_freq=True).cuda()
        embed(torch.randint(0, 1000, (8192,), device="cuda")).sum().backward()
    assert any("scale_grad_by_freq" in n for n in t.snapshot()["vramlab_notes"])


def test_few_rows_take_the_fused_kernel():
    # BERT's token types: 4096 ids into a (2, 384) table. max_segments 2, sum_and_scatter's grid
    # ceil(2 x 384 / 384) = 2 < 132 SMs x 4, and max_partial_segment 409 + 2 = 411 > 2 x 4: the
    # one-pass kernel, its partial_to_segment_idx of 411 int64 (3288 B, as the H100 recorded in
    # hf_bert_*), no grad_weight_per_segment.
    assert embedding.use_fused_kernel(4096, 2, 384, False, 132, False)
    assert not embedding.use_fused_kernel(4096, 2, 384, True, 132, False)  # bags
    assert not embedding.use_fused_kernel(4096, 2, 384, False, 132, True)  # deterministic
    assert not embedding.use_fused_kernel(8192, 100_000, 256, False, 132, False)  # 8192 blocks
    events = embedding.embedding_dense_backward_plan(4096, 2, 384, 8, 4, False, 0, 0, True)
    allocs = [value for action, value in events if action == "alloc"]
    assert ("partial_to_segment_idx", 3288) in allocs and not any(name == "grad_weight_per_segment" for name, _ in allocs)
    # bfloat16: a float accumulator of the output's shape as well.
    events = embedding.embedding_dense_backward_plan(4096, 2, 384, 8, 4, False, 0, 0, True, grad_size=2)
    assert ("alloc", ("grad_weight_acc", 2 * 384 * 4)) in events


def test_bert_token_types_allocate_as_the_h100_recorded():
    if RELEASE != (2, 11):
        pytest.skip(f"the recording is torch 2.11's; this is {torch.__version__}")
    with vramlab.trace(gpu="h100") as t:
        embed = nn.Embedding(2, 384).cuda()
        ids = torch.zeros(1, 128, dtype=torch.long, device="cuda").expand(32, 128)
        out = embed(ids)
        grad = torch.ones_like(out)
        before = len(allocations(t.snapshot()))
        out.backward(grad)
    traced = [e for e in allocations(t.snapshot())[before:] if e != ("free_completed", 3072)]
    recorded = recorded_op("hf_bert_all_ones_mask", "embedding_dense_backward_cuda")
    # The recording's run of embedding backwards starts with the position embeddings' output
    # (786432 B) and goes on to the word embeddings' after the token types'.
    assert recorded[0] == ("alloc", 786432)
    assert len(traced) == 31 and traced == recorded[1:32]
    assert ("alloc", 3288) in traced
