"""CUB's temporary storage in CUDA sorts (vramlab/_tracer/rules/cub.py): the sizes CCCL 3.0.1 asks
for on sm90, worked by hand from its sources, and the allocations PyTorch 2.11's sorts make around
them, checked against the H100 recordings (reports/reference/h100/trace-workloads)."""

import gzip
import pathlib
import pickle
import re

import pytest

torch = pytest.importorskip("torch", reason="vramlab.trace needs PyTorch (pip install torch)")

import vramlab  # noqa: E402
from vramlab._tracer import compat  # noqa: E402
from vramlab._tracer.rules import cub  # noqa: E402
from traced import allocations  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "reports" / "reference" / "h100" / "trace-workloads"
RELEASE = compat.release(torch)


def test_alias_temporaries_rounds_each_piece_to_256_and_adds_255():
    # util_temporary_storage.cuh: (a + 255) & ~255 per allocation, + ALIGN_BYTES - 1.
    assert cub.alias_temporaries([1, 256, 257, 0]) == 256 + 256 + 512 + 0 + 255


def test_onesweep_tiles_from_the_sm90_policies():
    # float keys, 8-byte values, 64-bit offsets: Key32 pairs with values >= 8 bytes: 384 x 29,
    # RegBoundScaling over 8 bytes: 29 * 4 / 8 = 14 items, 384 threads.
    assert cub.onesweep_tile(4, 8, True) == 384 * 14
    # int64 keys and values: Key64, 384 x 24 -> 12 items; 48 KiB / (8 x 12) = 512 threads > 384.
    assert cub.onesweep_tile(8, 8, False) == 384 * 12
    # int64 keys only: 384 x 30 -> 15 items.
    assert cub.onesweep_tile(8, 0, False) == 384 * 15
    # 2-byte keys with 8-byte values and 64-bit offsets: sm90_small_key_tuning<2, 8, 8> = 512 x 23,
    # 23 * 4 / 8 = 11 items; 48 KiB / 88 = 558 -> 576 threads, clamped to 512.
    assert cub.onesweep_tile(2, 8, False) == 512 * 11
    # The single tile: 256 x 19 over 8 bytes -> 9 items: 2304 items.
    assert cub.single_tile_items(8, 8) == 2304


def test_radix_sort_temp_storage_by_hand():
    # (48000 float keys, int2 values), 4 passes: bins 4 x 256 x 8, lookback ceil(48000 / 5376) = 9
    # blocks x 1 KiB, keys 192000 and values 384000 (not double-buffered), counters 16.
    assert cub.radix_sort_temp(48000, 4, 8, float_keys=True) == 8192 + 9216 + 192000 + 384000 + 256 + 255
    # Keys only on 3 bits: one pass, no extra buffers.
    assert cub.radix_sort_temp(48000, 8, 0, 0, 3) == 2048 + 9216 + 256 + 255
    # 8192 int64 pairs on 64 bits (embedding backward): 8 passes, 2 blocks.
    assert cub.radix_sort_temp(8192, 8, 8) == 16384 + 2048 + 65536 + 65536 + 256 + 255
    # One tile, no bits, nothing: 1 byte.
    assert cub.radix_sort_temp(2304, 8, 8) == 1
    assert cub.radix_sort_temp(10, 8, 8) == 1
    assert cub.radix_sort_temp(0, 4, 8) == 1
    assert cub.radix_sort_temp(5000, 8, 8, 3, 3) == 1
    # Segmented (DeviceSegmentedRadixSort): the extra key and value buffers.
    assert cub.segmented_radix_sort_temp(1_000_000, 2, 8) == 2000128 + 8000000 + 255


# The radix sorts recorded on the H100 under torch 2.11: (key bytes, value bytes, n, bits) and
# the temporary storage each asked for, n read from the allocations beside it (the sort's int2
# buffers, the embedding backward's sorted indices, index_put's).
RECORDED = [
    (4, 8, 48000, 32, 593919),  # hf_gpt_neox_sampling_generate: sort (6, 8000) float
    (8, 0, 48000, 3, 11775),  # ... its keys-only sort on the segment bits
    (8, 8, 8192, 64, 150015),  # embedding_adam: embedding_dense_backward
    (8, 8, 4096, 64, 83455),  # hf_bert_*, hf_gpt2_*, hf_roberta_mlm_padded, ...
    (8, 8, 12800, 64, 224767),  # retrieval_topk_sort
    (8, 8, 16384, 64, 283135),  # hf_t5_adafactor_bf16
    (8, 8, 262144, 64, 4269567),  # hf_t5_adafactor_bf16
    (8, 8, 65536, 64, 1080831),  # hf_t5_adamw
    (8, 8, 40960, 64, 681471),  # dlrm_embeddingbag_adagrad
    (8, 8, 81920, 64, 1346047),  # embeddingbag_recommender
    (8, 8, 10, 64, 1),  # dlrm_embeddingbag_adagrad: one tile
    (8, 8, 2401, 8, 3583),  # tv_swin_t_bf16: index_put_ with accumulate (at most 8 bits)
]


@pytest.mark.parametrize("key, value, n, bits, recorded", RECORDED)
def test_radix_sort_temp_storage_matches_the_h100(key, value, n, bits, recorded):
    assert cub.radix_sort_temp(n, key, value, 0, bits, float_keys=(key == 4)) == recorded


def test_stable_sort_allocates_as_sortstable_does():
    # segmented_sort_pairs_by_full_sort: two int2 buffers, keys_out, CUB's, the keys-only sort's.
    assert cub.stable_sort_allocations(48000, 8000, 4, True) == [
        ("alloc", 384000), ("alloc", 384000), ("alloc", 192000), ("alloc", 593919), ("free", 3), ("free", 2),
        ("alloc", 11775), ("free", 4), ("free", 1), ("free", 0),
    ]
    # 128 segments or more: the reverse indices and DeviceSegmentedRadixSort.
    events = cub.stable_sort_allocations(200 * 5000, 5000, 2, False)
    assert events == [("alloc", 8_000_000), ("alloc", 10000383), ("free", 1), ("free", 0)]
    # One segment: its initial indices, and one pair sort into the outputs.
    events = cub.stable_sort_allocations(10_000, 10_000, 4, True)
    assert events == [("alloc", 80_000), ("alloc", cub.radix_sort_temp(10_000, 4, 8, float_keys=True)), ("free", 1), ("free", 0)]


def test_a_traced_sort_allocates_as_the_h100_recorded():
    """torch.sort of a (6, 8000) float tensor, as hf_gpt_neox_sampling_generate's top-p sampling
    does, against the recording's first such sort."""
    if RELEASE != (2, 11):
        pytest.skip(f"the recording is torch 2.11's; this is {torch.__version__}")
    with vramlab.trace(gpu="h100") as t:
        x = torch.empty(6, 8000, device="cuda")
        torch.sort(x, descending=True)
    traced = allocations(t.snapshot())[1:]
    path = RECORDINGS / "hf_gpt_neox_sampling_generate-default.pickle.gz"
    if not path.exists():
        pytest.skip(f"{path} is not in this checkout")
    events = pickle.load(gzip.open(path))["device_traces"][0]
    start = next(i for i, e in enumerate(events) if e["action"] == "alloc" and any("structured_sort_stable" in f.get("name", "") for f in e["frames"]))
    recorded = [(e["action"], e["size"]) for e in events[start:] if e["action"] in ("alloc", "free_completed")][: len(traced)]
    # The recording frees the outputs later; compare the sort's own events.
    assert traced[:12] == recorded[:12]


def test_small_sorts_allocate_only_the_arange_of_their_indices():
    # Sort.h: a sorted dimension of at most 4096 is sorted in place, after Sort.cpp's
    # fillSliceWithIndex has copied an arange of it into the indices (8 bytes per element of the
    # dimension; the H100 made it under every argsort of ISSUE35E's masked autoencoder).
    with vramlab.trace(gpu="h100") as t:
        x = torch.empty(64, 4096, device="cuda")
        torch.sort(x)
    assert [size for action, size in allocations(t.snapshot()) if action == "alloc"] == [64 * 4096 * 4] * 2 + [64 * 4096 * 8, 4096 * 8]


def test_argsort_is_a_sort():
    with vramlab.trace(gpu="h100") as t:
        x = torch.empty(6, 8000, device="cuda")
        torch.argsort(x, dim=-1)
    sizes = [size for action, size in allocations(t.snapshot()) if action == "alloc"]
    assert 593919 in sizes and 11775 in sizes


# index_put_ with accumulate (Indexing.cu, index_put_with_sort_kernel) ---------------------------


def test_get_num_bits_as_cub_h():
    assert [cub.get_num_bits(k) for k in (0, 1, 2, 3, 168, 51199)] == [1, 1, 2, 2, 8, 16]


def test_index_put_with_sort_by_hand():
    # tv_swin_t: a (169, 3) float table's gradient at 2401 GPU indices into dim 0 (sliceSize 3),
    # the value a permuted (49, 49, 3) view: remainder and product, the remainder freed; the
    # value's copy; sorted, orig, range, CUB on get_num_bits(506 // 3) = 8 bits; freed in reverse.
    n = 2401 * 8
    assert cub.index_put_with_sort_allocations(0, [(True, 2401)], 28812, 0, 2401, 3, 8) == [
        ("alloc", n), ("alloc", n), ("free", 0), ("alloc", 28812), ("alloc", n), ("alloc", n), ("alloc", n),
        ("alloc", 3583), ("free", 6), ("free", 5), ("free", 4), ("free", 3), ("free", 2), ("free", 1),
    ]
    # dlrm: interactions[:, rows, cols] with 10 CPU indices each: each copied to the GPU (the second
    # added into the first and freed), one tile of CUB (1 byte).
    assert cub.index_put_with_sort_allocations(0, [(False, 10), (False, 10)], 81920, 0, 10, 1, 16) == [
        ("alloc", 80), ("alloc", 80), ("free", 1), ("alloc", 81920), ("alloc", 80), ("alloc", 80), ("alloc", 80),
        ("alloc", 1), ("free", 6), ("free", 5), ("free", 4), ("free", 3), ("free", 2), ("free", 0),
    ]


def recorded_index_put(name):
    path = RECORDINGS / f"{name}-default.pickle.gz"
    if not path.exists():
        pytest.skip(f"{path} is not in this checkout")
    events = [e for e in pickle.load(gzip.open(path))["device_traces"][0] if e["action"] in ("alloc", "free_completed")]
    start = next(i for i, e in enumerate(events) if e["action"] == "alloc" and any("index_put_with_sort_kernel" in f.get("name", "") for f in e["frames"]))
    out, live = [], set()
    for e in events[start:]:
        if e["action"] == "alloc":
            if not any("index_put_with_sort_kernel" in f.get("name", "") for f in e["frames"]):
                break
            live.add(e["addr"])
            out.append(("alloc", e["size"]))
        elif e["addr"] in live:
            out.append(("free_completed", e["size"]))
    return out


@pytest.mark.parametrize("name, build", [
    ("tv_swin_t_bf16", "swin"),
    ("dlrm_embeddingbag_adagrad", "dlrm"),
])
def test_indexing_backward_allocates_as_the_h100_recorded(name, build):
    """The backward of indexing puts into its zeros in place (no clone, as on the GPU) with
    index_put_with_sort_kernel's temporaries."""
    if RELEASE != (2, 11):
        pytest.skip(f"the recording is torch 2.11's; this is {torch.__version__}")
    with vramlab.trace(gpu="h100") as t:
        if build == "swin":
            # The last stage's relative position bias (24 heads) is the first backward.
            table = torch.zeros(169, 24, device="cuda", requires_grad=True)
            index = torch.randint(0, 169, (2401,), device="cuda")
            y = table[index].view(49, 49, -1).permute(2, 0, 1)
            grad = torch.ones(24, 49, 49, device="cuda")
        else:
            z = torch.zeros(2048, 5, 5, device="cuda", requires_grad=True)
            rows, cols = torch.triu_indices(5, 5, offset=1)
            y = z[:, rows, cols]
            grad = torch.ones(2048, 20, device="cuda")[:, 10:]
        before = len(allocations(t.snapshot()))
        y.backward(grad)
    traced = allocations(t.snapshot())[before + 1:]  # after the zeros
    recorded = recorded_index_put(name)
    assert traced[: len(recorded)] == recorded


def test_the_programs_index_put_with_accumulate_is_said():
    with vramlab.trace(gpu="h100") as t:
        x = torch.zeros(100, 8, device="cuda")
        x.index_put_((torch.randint(0, 100, (50,), device="cuda"),), torch.ones(50, 8, device="cuda"), accumulate=True)
    assert any("index_put_ with accumulate called by the program" in n for n in t.snapshot()["vramlab_notes"])
