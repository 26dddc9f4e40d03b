"""Operators whose CUDA path allocates otherwise than the path PyTorch takes on the trace's meta
stand-ins or under its dispatch mode: each test names the PyTorch source the rule follows and
checks the allocations, in order, of the smallest program that shows it."""

import pytest

torch = pytest.importorskip("torch", reason="vramlab.trace needs PyTorch (pip install torch)")

import vramlab  # noqa: E402
from vramlab._tracer.rules.cublas import batched_operand_copies  # noqa: E402


def events(t, start=0, stop=None):
    return [(e["action"], e["size"]) for e in t.snapshot()["device_traces"][0][start:stop] if e["action"] in ("alloc", "free_completed")]


def test_one_hot_makes_its_result_with_zeros_and_scatter_alone():
    """Onehot.cpp: on CUDA, zeros of the result's shape and a scatter_ into them; the meta path's
    arange, bool comparison and long copy are not made on the GPU."""
    with vramlab.trace(gpu="h100") as t:
        index = torch.zeros(64, 256, dtype=torch.long, device="cuda")
        start = len(t.snapshot()["device_traces"][0])
        hot = torch.nn.functional.one_hot(index, 10)
    assert hot.shape == (64, 256, 10) and hot.dtype == torch.long
    assert events(t, start) == [("alloc", 64 * 256 * 10 * 8)]


def test_bmm_copies_an_operand_cublas_cannot_take_and_frees_it_on_return():
    """Blas.cpp, baddbmm_out_cuda_impl and prepare_batch_matrix_for_cublas: an operand with
    neither of its matrix dimensions at unit stride is cloned contiguous after the output and
    freed when the multiply returns; a transposed operand is taken as it is."""
    with vramlab.trace(gpu="h100") as t:
        a = torch.randn(2, 3, 64, 32, device="cuda").permute(2, 0, 1, 3).reshape(64, 6, 32)  # strides (32, 2048, 1)
        c = torch.randn(64, 16, 32, device="cuda").transpose(1, 2)
        start = len(t.snapshot()["device_traces"][0])
        torch.bmm(a, c)
        middle = len(t.snapshot()["device_traces"][0])
        x = torch.randn(8, 6, 32, device="cuda").permute(2, 1, 0)  # [32, 6, 8], strides (1, 32, 192)
        y = torch.randn(32, 8, 4, device="cuda")
        kept = torch.bmm(x, y)
    # The output, then cuBLAS's workspace (the trace's first multiply): no copy.
    assert [size for action, size in events(t, start, middle) if action == "alloc"] == [64 * 6 * 16 * 4, 32 << 20]
    out, copy = 32 * 6 * 4 * 4, 32 * 6 * 8 * 4
    workspaces = {32 << 20, 1 << 20}  # 2.15 makes cuBLAS's per call (rules/cublas.py)
    assert [e for e in events(t, middle) if e[1] not in workspaces][-3:] == [("alloc", out), ("alloc", copy), ("free_completed", copy)]
    assert kept.shape == (32, 6, 4)


def test_the_copy_rule_reads_strides_as_blas_cpp_does():
    m = torch.empty(5, 7, 3, device="meta")
    assert batched_operand_copies(m, torch.empty(5, 7, 2, device="meta"), torch.empty(5, 2, 3, device="meta")) == []
    # A transposed operand (unit stride on the other matrix dimension) is taken transposed.
    assert batched_operand_copies(m, torch.empty(5, 2, 7, device="meta").transpose(1, 2), torch.empty(5, 2, 3, device="meta")) == []
    # A zero stride between matrices is taken; one inside a matrix is cloned whole.
    assert batched_operand_copies(m, torch.empty(1, 7, 2, device="meta").expand(5, 7, 2), torch.empty(5, 2, 3, device="meta")) == []
    assert batched_operand_copies(m, torch.empty(5, 1, 2, device="meta").expand(5, 7, 2), torch.empty(5, 2, 3, device="meta")) == [5 * 7 * 2 * 4]
    # A result whose matrices are neither row- nor column-major is made apart, first.
    strided = torch.empty(5, 7, 6, device="meta")[:, :, ::2]
    assert batched_operand_copies(strided, torch.empty(5, 7, 2, device="meta"), torch.empty(5, 2, 3, device="meta")) == [5 * 7 * 3 * 4]


def test_topk_backward_scatters_into_its_zero_gradient_in_place():
    """ReduceOps.cpp, value_selecting_reduction_backward_symint: zeros of the input's shape, then
    scatter_ in place (the out-of-place scatter is for tensor subclasses, which the GPU has none
    of)."""
    with vramlab.trace(gpu="h100") as t:
        x = torch.randn(1024, 64, device="cuda", requires_grad=True)
        values, _ = x.topk(2, dim=-1)
        loss = values.sum()
        start = len(t.snapshot()["device_traces"][0])
        loss.backward()
    made = [size for action, size in events(t, start) if action == "alloc"]
    assert made.count(1024 * 64 * 4) == 1, made


@pytest.mark.parametrize(
    "backward_of",
    [
        lambda x, i: torch.gather(x, 1, i),
        lambda x, i: torch.index_select(x, 0, i[:, 0]),
        lambda x, i: x.cummax(1).values,
    ],
    ids=["gather", "index_select", "cummax"],
)
def test_gather_index_select_and_cummax_backward_write_into_their_zero_gradient_in_place(backward_of):
    """TensorAdvancedIndexing.cpp (gather_backward: scatter_add_; index_select_backward_symint:
    index_add_) and ReduceOps.cpp (cummaxmin_backward: scatter_add_): one gradient of the input's
    size, written in place."""
    with vramlab.trace(gpu="h100") as t:
        x = torch.randn(1024, 64, device="cuda", requires_grad=True)
        index = torch.randint(0, 64, (1024, 16), device="cuda")
        loss = backward_of(x, index).sum()
        start = len(t.snapshot()["device_traces"][0])
        loss.backward()
    made = [size for action, size in events(t, start) if action == "alloc"]
    assert made.count(1024 * 64 * 4) == 1, made


def test_a_short_sort_copies_an_arange_into_its_indices_first():
    """Sort.cpp, sort_cuda_kernel: a sorted dimension of at most 4096 is sorted in place
    (sortKeyValueInplace) after fillSliceWithIndex has copied an arange of it into the indices,
    a temporary of 8 bytes per element of the dimension, freed at once."""
    with vramlab.trace(gpu="h100") as t:
        noise = torch.rand(16, 196, device="cuda")
        start = len(t.snapshot()["device_traces"][0])
        order = torch.argsort(noise, dim=1)
    assert order.shape == (16, 196)
    assert events(t, start) == [
        ("alloc", 16 * 196 * 4), ("alloc", 16 * 196 * 8), ("alloc", 196 * 8), ("free_completed", 196 * 8), ("free_completed", 16 * 196 * 4),
    ]


def test_cumsum_of_an_int_mask_copies_its_input_into_the_results_dtype():
    """ReduceOps.cpp, impl_func_cum_ops: the kernel runs on self.to(result dtype), an int64 copy of
    an int32 input made after the result and freed on return (RoBERTa's position ids)."""
    with vramlab.trace(gpu="h100") as t:
        mask = torch.ones(12, 384, dtype=torch.int32, device="cuda")
        start = len(t.snapshot()["device_traces"][0])
        total = torch.cumsum(mask, dim=1)
        same = torch.cumsum(total, dim=1)
    assert total.dtype == torch.int64 and same.dtype == torch.int64
    n = 12 * 384 * 8
    assert events(t, start) == [("alloc", n), ("alloc", n), ("free_completed", n), ("alloc", n)]


def test_a_parameter_moved_in_channels_last_goes_through_a_contiguous_temporary():
    """Copy.cu, copy_kernel_cuda: a host-to-GPU copy into a non-contiguous destination writes a
    contiguous temporary on the GPU, then copies it into place; a contiguous one is one memcpy."""
    weight = torch.randn(64, 32, 3, 3)
    with vramlab.trace(gpu="h100") as t:
        start = len(t.snapshot()["device_traces"][0])
        moved = weight.to("cuda", memory_format=torch.channels_last)
        plain = weight.to("cuda")
    n = 64 * 32 * 9 * 4
    assert moved.is_contiguous(memory_format=torch.channels_last) and plain.is_contiguous()
    assert events(t, start) == [("alloc", n), ("alloc", n), ("free_completed", n), ("alloc", n)]



def test_batch_norm_1d_backward_reduces_first_and_frees_its_sums_last():
    """Normalization.cu batch_norm_backward_cuda on a [N, C] input (channels innermost, so not the
    fused kernel): sum_dy, sum_dy_xmu and the weight's and bias's gradients, then the input's, then
    the two sums freed (the order the H100 showed for ISSUE35E's triplet embedder)."""
    with vramlab.trace(gpu="h100") as t:
        bn = torch.nn.BatchNorm1d(2048).to("cuda")
        x = torch.randn(512, 2048, device="cuda", requires_grad=True)
        y = bn(x).sum()
        start = len(t.snapshot()["device_traces"][0])
        y.backward()
    c, n = 2048 * 4, 512 * 2048 * 4
    allocs = [e for e in events(t, start) if e[1] in (c, n)]
    assert allocs[:7] == [("alloc", c)] * 4 + [("alloc", n), ("free_completed", c), ("free_completed", c)]


def test_channels_last_bfloat16_batch_norm_stages_its_statistics_across_blocks():
    """Normalization.cuh batch_norm_stats_channels_last_cuda_template: a reduction split over
    grid.y = 128 blocks stages 4 * C * 128 floats and C / 32 semaphores (65,536 and 4 bytes for 32
    channels, as on the H100), after the outputs and freed before the forward returns."""
    with vramlab.trace(gpu="h100") as t:
        bn = torch.nn.BatchNorm2d(32).to("cuda", torch.bfloat16)
        x = torch.randn(32, 32, 80, 80, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
        start = len(t.snapshot()["device_traces"][0])
        y = bn(x)
    assert y.is_contiguous(memory_format=torch.channels_last)
    out, stats = 32 * 32 * 80 * 80 * 2, 32 * 4
    assert events(t, start) == [
        ("alloc", out), ("alloc", stats), ("alloc", stats), ("alloc", 65536), ("alloc", 4), ("free_completed", 4), ("free_completed", 65536),
    ]


def test_channels_last_3d_batch_norm_statistics_take_the_general_path():
    """Normalization.cu batch_norm_choose_impl: a channels-last 3-d input is neither contiguous nor
    4-d channels-last, so batch_norm_mean_var runs var_mean_out, whose two-output make_reduction
    reads bfloat16 as a float32 copy (float16 and float32 as they are) and splits Welford's
    reduction over blocks: for S3D's first batch norm (16 clips of 64 x 8 x 112 x 112) a buffer of
    138,412,032 bytes and one semaphore, as the H200 recorded (ISSUE35T), after the outputs, freed
    before the forward returns."""
    shape = (16, 64, 8, 112, 112)
    numel = 16 * 64 * 8 * 112 * 112
    stats = 64 * 4
    # PyTorch's own kernels run bfloat16 always, float16 with float16 weights, float32 with cuDNN off.
    for dtype, weights, copied in ((torch.bfloat16, torch.float32, True), (torch.float16, torch.float16, False), (torch.float32, torch.float32, False)):
        with vramlab.trace(gpu="h200") as t, torch.backends.cudnn.flags(enabled=dtype != torch.float32):
            bn = torch.nn.BatchNorm3d(64).to("cuda", weights)
            x = torch.empty(shape, device="cuda", dtype=dtype, memory_format=torch.channels_last_3d)
            start = len(t.snapshot()["device_traces"][0])
            y = bn(x)
        assert y.is_contiguous(memory_format=torch.channels_last_3d)
        after = events(t, start)
        outputs = [("alloc", numel * x.element_size()), ("alloc", stats), ("alloc", stats)]
        assert after[:3] == outputs, dtype
        scratch = [size for action, size in after[3:] if action == "alloc"]
        if copied:
            assert scratch == [numel * 4, 138412032, 4]
        else:
            assert numel * 4 not in scratch and numel * 2 not in scratch
            assert len(scratch) == 2 and scratch[1] == 4
        assert [size for action, size in after[3:] if action == "free_completed"] == scratch[::-1]


def test_variances_allocate_the_buffers_of_welfords_split_reduction():
    """ReduceMomentKernel.cu std_var_kernel_impl: gpu_reduce_kernel with two values per load and a
    16-byte accumulator (WelfordData<float, int32_t>) for float32 and bfloat16 inputs, so a whole
    tensor's variance split over blocks stages one accumulator per block; the sum of the same
    tensor (a 4-byte float accumulator, four values per load) stages a quarter as much."""
    with vramlab.trace(gpu="h200") as t:
        x = torch.empty(64, 1 << 20, device="cuda")
        start = len(t.snapshot()["device_traces"][0])
        x.var()
        middle = len(t.snapshot()["device_traces"][0])
        x.sum()
        end = len(t.snapshot()["device_traces"][0])
        torch.std_mean(x)
    variance = [size for action, size in events(t, start, middle) if action == "alloc"]
    total = [size for action, size in events(t, middle, end) if action == "alloc"]
    both = [size for action, size in events(t, end) if action == "alloc"]
    assert variance[0] == 4 and total[0] == 4  # the results
    assert len(variance) == 3 and len(total) == 3
    assert both == [4, 4, variance[1], 4]
    assert variance[2] == total[2] == 4  # one semaphore
    assert variance[1] == 4 * total[1]


def test_convolutions_on_channels_last_3d_video_copy_their_weights_and_keep_the_layout():
    """ConvUtils.h cudnn_conv_suggest_memory_format: a 3-d convolution of a channels-last 3-d input
    (video clips permuted from [N, T, H, W, C], as S3D's) makes its output channels-last 3-d, and
    cudnn_convolution_forward_out copies the contiguous weight to that layout after the output,
    freed on return; the input is not copied. Its backward copies the weight again after the
    input's gradient, and the weight's gradient, made channels-last, is cloned into the
    parameter's layout by AccumulateGrad (grad_layout_contract.h)."""
    with vramlab.trace(gpu="h200") as t:
        conv = torch.nn.Conv3d(3, 16, (1, 7, 7), stride=(1, 2, 2), padding=(0, 3, 3), bias=False).to("cuda")
        clips = torch.empty(2, 4, 64, 64, 3, device="cuda").permute(0, 4, 1, 2, 3).requires_grad_()
        start = len(t.snapshot()["device_traces"][0])
        y = conv(clips)
        middle = len(t.snapshot()["device_traces"][0])
        y.sum().backward()
    assert y.is_contiguous(memory_format=torch.channels_last_3d)
    out, weight = 2 * 16 * 4 * 32 * 32 * 4, 16 * 3 * 7 * 7 * 4
    assert events(t, start, middle) == [("alloc", out), ("alloc", weight), ("free_completed", weight)]
    backward = [size for action, size in events(t, middle) if action == "alloc"]
    grad_input = clips.numel() * 4
    assert backward[backward.index(grad_input) + 1] == weight
    assert conv.weight.grad.is_contiguous()
    assert backward.count(weight) == 3  # the weight's copy, its gradient, and the clone into its layout


def test_embedding_copies_indices_it_cannot_view_flat():
    """Embedding.cpp, embedding_symint: index_select over indices.reshape(-1), a copy where the
    indices are expanded (Hugging Face's token_type_ids buffer), freed after the lookup."""
    with vramlab.trace(gpu="h100") as t:
        table = torch.nn.Embedding(2, 256).to("cuda")
        types = torch.zeros(1, 128, dtype=torch.long, device="cuda").expand(16, 128)
        plain = torch.zeros(16, 128, dtype=torch.long, device="cuda")
        start = len(t.snapshot()["device_traces"][0])
        a = table(types)
        b = table(plain)
    out, copy = 16 * 128 * 256 * 4, 16 * 128 * 8
    assert a.shape == b.shape == (16, 128, 256)
    assert events(t, start) == [("alloc", copy), ("alloc", out), ("free_completed", copy), ("alloc", out)]


@pytest.mark.parametrize("pos_weight", [False, True])
def test_bce_with_logits_makes_its_temporaries_forward_and_steps_in_place_backward(pos_weight):
    """Loss.cpp: log_sigmoid's output, (pos_weight - 1) * target, the unreduced loss, the mean,
    then the temporaries freed in reverse; FunctionsManual.cpp's backward: sigmoid (and
    pos_weight * target), every later step in place."""
    with vramlab.trace(gpu="h100") as t:
        x = torch.randn(16, 128, device="cuda", requires_grad=True)
        y = torch.ones(16, 128, device="cuda")
        weights = torch.ones(128, device="cuda") if pos_weight else None
        start = len(t.snapshot()["device_traces"][0])
        loss = torch.nn.functional.binary_cross_entropy_with_logits(x, y, pos_weight=weights)
        middle = len(t.snapshot()["device_traces"][0])
        loss.backward()
    n = 16 * 128 * 4
    if pos_weight:
        assert events(t, start, middle) == [
            ("alloc", n), ("alloc", 512), ("alloc", n), ("free_completed", 512), ("alloc", n), ("alloc", 4),
            ("free_completed", n), ("free_completed", n), ("free_completed", n),
        ]
    else:
        assert events(t, start, middle) == [("alloc", n), ("alloc", n), ("alloc", 4), ("free_completed", n), ("free_completed", n)]
    backward = [size for action, size in events(t, middle) if action == "alloc" and size == n]
    # The gradient of x (sigmoid's output, stepped in place), and pos_weight * target and the
    # t + 1 it starts from where there is a pos_weight.
    assert len(backward) == (3 if pos_weight else 1), backward


def test_a_bool_mask_summed_into_int64_is_copied_first_but_half_into_float_is_not():
    """ReduceOps.cpp, make_reduction_from_out_ty: the kernel reads self.to(the result's dtype), a
    copy made after the result and freed on return, except 16-bit floats into float32 on CUDA."""
    with vramlab.trace(gpu="h100") as t:
        mask = torch.ones(4, 48, dtype=torch.bool, device="cuda")
        half = torch.ones(4, 48, dtype=torch.float16, device="cuda")
        start = len(t.snapshot()["device_traces"][0])
        count = mask.sum()
        middle = len(t.snapshot()["device_traces"][0])
        total = half.sum(dtype=torch.float32)
    assert count.dtype == torch.int64 and total.dtype == torch.float32
    assert events(t, start, middle) == [("alloc", 8), ("alloc", 4 * 48 * 8), ("free_completed", 4 * 48 * 8)]
    assert events(t, middle) == [("alloc", 4)]


def test_isin_against_few_test_elements_compares_every_pair():
    """TensorCompare.cu, isin_default_kernel_gpu: eq over every (element, test) pair, any(-1), then
    the copy into the result; both temporaries freed in reverse."""
    with vramlab.trace(gpu="h100") as t:
        tokens = torch.zeros(4, 4000, dtype=torch.long, device="cuda")
        stop = torch.tensor([2, 7], device="cuda")
        start = len(t.snapshot()["device_traces"][0])
        hit = torch.isin(tokens, stop)
    n = 4 * 4000
    assert hit.dtype == torch.bool
    assert events(t, start) == [("alloc", n), ("alloc", n * 2), ("alloc", n), ("free_completed", n), ("free_completed", n * 2)]


def test_index_tensors_of_different_strides_are_copied_contiguous_before_the_result():
    """TensorAdvancedIndexing.cpp, AdvancedIndex: on CUDA two index tensors whose broadcast strides
    differ are each made contiguous before the result, freed after it; alike ones are not."""
    with vramlab.trace(gpu="h100") as t:
        padding = torch.ones(4, 48, dtype=torch.bool, device="cuda")
        batch = torch.arange(4, device="cuda")[:, None].expand(4, 48)
        keys = torch.arange(48, device="cuda")[None, :].expand(4, 48)
        start = len(t.snapshot()["device_traces"][0])
        picked = padding[batch, keys]
        middle = len(t.snapshot()["device_traces"][0])
        alike = padding[batch.contiguous(), keys.contiguous()]
    copy = 4 * 48 * 8
    assert picked.shape == alike.shape == (4, 48)
    assert events(t, start, middle) == [("alloc", copy), ("alloc", copy), ("alloc", 192), ("free_completed", copy), ("free_completed", copy)]
    assert [e for e in events(t, middle) if e[0] == "alloc"][-1] == ("alloc", 192)


def test_a_module_on_the_gpu_converted_to_half_frees_each_parameter_before_the_next():
    """module.py, Module._apply: on the GPU each parameter takes its converted data by
    param.data = ..., freeing the old before the next is made; tied parameters stay shared."""
    with vramlab.trace(gpu="h100") as t:
        model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Linear(32, 16)).to("cuda")
        start = len(t.snapshot()["device_traces"][0])
        model.half()
        tied = torch.nn.Linear(4, 4)
        other = torch.nn.Linear(4, 4)
        other.weight = tied.weight
        both = torch.nn.ModuleList([tied, other]).to("cuda")
    assert both[0].weight is both[1].weight
    assert events(t, start)[:8] == [
        ("alloc", 4096), ("free_completed", 8192), ("alloc", 64), ("free_completed", 128),
        ("alloc", 1024), ("free_completed", 2048), ("alloc", 32), ("free_completed", 64),
    ]


def test_cudnn_attention_for_a_single_query_takes_no_workspace():
    """Measured on the H100 (cuDNN 9.19, ISSUE35E's generate): a decoding step's cuDNN attention
    (one query) makes its seed, offset and output only; a prompt's (48 queries) also a 256-byte
    workspace, freed before it returns."""
    with vramlab.trace(gpu="h100") as t:
        k = torch.randn(4, 8, 48, 64, device="cuda", dtype=torch.bfloat16)
        mask = torch.ones(4, 1, 1, 48, dtype=torch.bool, device="cuda")
        with torch.no_grad():
            q = torch.randn(4, 8, 1, 64, device="cuda", dtype=torch.bfloat16)
            start = len(t.snapshot()["device_traces"][0])
            one = torch.nn.functional.scaled_dot_product_attention(q, k, k, attn_mask=mask)
            middle = len(t.snapshot()["device_traces"][0])
            prompt = torch.randn(4, 8, 48, 64, device="cuda", dtype=torch.bfloat16)
            full_mask = torch.ones(4, 1, 48, 48, dtype=torch.bool, device="cuda")
            between = len(t.snapshot()["device_traces"][0])
            many = torch.nn.functional.scaled_dot_product_attention(prompt, k, k, attn_mask=full_mask)
    assert one.shape == (4, 8, 1, 64) and many.shape == (4, 8, 48, 64)
    assert 256 not in [size for action, size in events(t, start, middle) if action == "alloc"]
    assert 256 in [size for action, size in events(t, between) if action == "alloc"]


def test_logsumexp_runs_its_explicit_composite_as_cuda_does():
    """ReduceOps.cpp, logsumexp_out_impl (CUDA has no kernel of its own: the CompositeExplicitAutograd
    one runs): the row maxima, the check of their absolute values against infinity (a bool
    temporary), the shifted exponentials and their sum into the result, in that order."""
    with vramlab.trace(gpu="h100") as t:
        x = torch.randn(512, 6, device="cuda", requires_grad=True)
        start = len(t.snapshot()["device_traces"][0])
        y = x.logsumexp(-1, keepdim=True)
    rows = 512 * 4
    assert y.shape == (512, 1)
    assert events(t, start) == [
        ("alloc", rows), ("alloc", rows), ("alloc", 512), ("free_completed", 512), ("free_completed", rows),
        ("alloc", 512 * 6 * 4), ("alloc", rows), ("free_completed", 512 * 6 * 4), ("free_completed", rows),
    ]


def test_affine_grid_makes_its_base_grid_and_linspaces_as_cuda_does():
    """AffineGridGenerator.cpp (a CompositeExplicitAutograd kernel on CUDA): an (N, H, W, 3) base
    grid, each side's linspace scaled (three temporaries of that side, freed after the copy into
    the grid), the bmm's result, then the base grid freed."""
    with vramlab.trace(gpu="h100") as t:
        theta = torch.randn(8, 2, 3, device="cuda")
        start = len(t.snapshot()["device_traces"][0])
        grid = torch.nn.functional.affine_grid(theta, [8, 3, 32, 48], align_corners=False)
    assert grid.shape == (8, 32, 48, 2)
    base, out = 8 * 32 * 48 * 3 * 4, 8 * 32 * 48 * 2 * 4
    side = lambda n: [("alloc", n * 4)] * 3 + [("free_completed", n * 4)] * 3  # noqa: E731
    workspaces = {32 << 20, 1 << 20}  # cuBLAS's, made at the trace's first multiply (rules/cublas.py)
    made = [e for e in events(t, start) if e[1] not in workspaces]
    assert made == [("alloc", base), *side(48), *side(32), ("alloc", out), ("free_completed", base)]


def test_a_distributions_argument_checks_pass_and_say_so():
    """torch.distributions validates its arguments and samples by default (distribution.py,
    torch._is_all_true); of values the trace does not have, the checks are answered as passed."""
    with vramlab.trace(gpu="h100") as t:
        logits = torch.randn(64, 6, device="cuda")
        dist = torch.distributions.Categorical(logits=logits)
        dist.log_prob(torch.zeros(64, dtype=torch.long, device="cuda"))
    assert any("torch._is_all_true" in note for note in t.snapshot()["vramlab_notes"])


def _channels_last_3d_rows():
    import gzip
    import json
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "reports/reference/h200/welford-and-channels-last-3d/channels-last-3d.jsonl.gz"
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


def _allocated(t, start, stop=None):
    return [size for action, size in events(t, start, stop) if action == "alloc"]


def _gpu_allocated(recorded):
    return [size for action, size, _ in recorded if action == "a"]


def _is_subsequence(part, whole):
    rest = iter(whole)
    return all(any(size == other for other in rest) for size in part)


@pytest.mark.parametrize("row", _channels_last_3d_rows(), ids=lambda r: f"{r['kind']}-{r['dtype']}-{r.get('weight_dtype', '')}-{'cudnn' if r.get('cudnn', True) else 'native'}-{'x'.join(map(str, r.get('shape') or r['spec'][:5]))}")
def test_channels_last_3d_video_allocates_as_the_h200_did(row):
    """Batch norm and 3-d convolutions on channels-last 3-d clips against the H200's allocations
    (reports/reference/h200/welford-and-channels-last-3d, measured after the rules were committed):
    PyTorch's own batch norm kernels byte for byte in the training forward, its backward and
    evaluation; cuDNN's batch norm (evaluation included: no statistics) and convolutions but for
    the one workspace cuDNN asks for in each call, which the trace does not size."""
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2] / "scripts"))
    import measure_channels_last_3d as measured
    import torch.nn.functional as F

    with vramlab.trace(gpu="h200") as t:
        if row["kind"] == "batch_norm":
            n, c, d, h, w = row["shape"]
            with torch.backends.cudnn.flags(enabled=row["cudnn"]):
                typed = dict(device="cuda", dtype=getattr(torch, row["weight_dtype"]))
                x = measured.clips(n, c, d, h, w, row["dtype"]).requires_grad_()
                weight, bias = torch.randn(c, **typed, requires_grad=True), torch.randn(c, **typed, requires_grad=True)
                mean, var = torch.zeros(c, **typed), torch.ones(c, **typed)
                marks = [len(t.snapshot()["device_traces"][0])]
                out = F.batch_norm(x, mean, var, weight, bias, training=True)
                marks.append(len(t.snapshot()["device_traces"][0]))
                grad = torch.randn_like(out)
                marks.append(len(t.snapshot()["device_traces"][0]))
                grads = torch.autograd.grad(out, (x, weight, bias), grad)
                marks.append(len(t.snapshot()["device_traces"][0]))
                with torch.no_grad():
                    kept = F.batch_norm(x, mean, var, weight, bias, training=False)
                phases = [("forward", marks[0], marks[1]), ("backward", marks[2], marks[3]), ("forward_eval", marks[3], None)]
        else:
            n, c, d, h, w, k, kernel, stride, padding = row["spec"]
            x = measured.clips(n, c, d, h, w, row["dtype"]).requires_grad_()
            weight = torch.randn(k, c, *kernel, device="cuda", dtype=getattr(torch, row["dtype"]), requires_grad=True)
            marks = [len(t.snapshot()["device_traces"][0])]
            out = F.conv3d(x, weight, None, stride, padding)
            marks.append(len(t.snapshot()["device_traces"][0]))
            grad = torch.randn_like(out)
            marks.append(len(t.snapshot()["device_traces"][0]))
            grads = torch.autograd.grad(out, (x, weight), grad)
            phases = [("forward", marks[0], marks[1]), ("backward", marks[2], None)]
            assert out.is_contiguous(memory_format=torch.channels_last_3d) == row["out_channels_last_3d"]
    for phase, start, stop in phases:
        ours, theirs = _allocated(t, start, stop), _gpu_allocated(row[phase])
        if row["kind"] == "batch_norm" and not row["cudnn"] or row["dtype"] == "bfloat16" and row["kind"] == "batch_norm" or row.get("weight_dtype") == "float16":
            assert ours == theirs, phase
        else:
            # One workspace per cuDNN call at most: the forward's, and each of the backward's two.
            calls = 2 if phase == "backward" and row["kind"] == "conv3d" else 1
            assert _is_subsequence(ours, theirs) and len(theirs) - len(ours) <= calls, (phase, ours, theirs)
    del grads


def test_device_properties_are_what_the_profile_measured_and_refuse_the_rest():
    """standin.Properties: timm's foreach optimizers chunk their parameters by
    get_device_properties().L2_cache_size, which the H200's profile has from the driver
    (cuDeviceGetAttribute at calibration), as it has the SM's limits; a datasheet GPU's profile
    has neither, and a field no profile has (the board's UUID) stops the trace at its line."""
    from vramlab.errors import UnfollowedError

    with vramlab.trace(gpu="h200"):
        props = torch.cuda.get_device_properties(0)
        assert (props.L2_cache_size, props.warp_size, props.max_threads_per_multi_processor) == (62914560, 32, 2048)
        assert (props.regs_per_multiprocessor, props.shared_memory_per_block_optin, props.is_integrated) == (65536, 232448, 0)
        with pytest.raises(UnfollowedError, match=r"get_device_properties\(\.\.\.\)\.uuid at .*test_trace_cuda_paths.py:\d+"):
            props.uuid
    with vramlab.trace(gpu="a100-80gb"):
        props = torch.cuda.get_device_properties(0)
        assert props.multi_processor_count == 108
        with pytest.raises(UnfollowedError, match="L2_cache_size .*does not say it"):
            props.L2_cache_size


def test_distribution_samplers_make_contiguous_results_and_dirichlet_its_sum():
    """cuda/Distributions.cpp: _s_gamma_cuda (StudentT, Gamma, Chi2, Beta) and _s_binomial_cuda
    make at::empty(input.sizes(), input.options()), contiguous for a transposed input, which
    PyTorch 2.11 has no meta kernel for; _s_dirichlet_cuda also sums the gammas over the last
    dimension into a temporary freed on return."""
    with vramlab.trace(gpu="h200") as t:
        alpha = torch.full((100, 64), 3.0, device="cuda").t()
        start = len(t.snapshot()["device_traces"][0])
        gammas = torch._standard_gamma(alpha)
        middle = len(t.snapshot()["device_traces"][0])
        concentration = torch.ones(8, 1000, device="cuda")
        before = len(t.snapshot()["device_traces"][0])
        torch._sample_dirichlet(concentration)
        counts = torch.distributions.Binomial(10, probs=torch.full((5, 7), 0.3, device="cuda")).sample()
    assert gammas.is_contiguous() and gammas.shape == (64, 100)
    assert events(t, start, middle) == [("alloc", 64 * 100 * 4)]
    assert events(t, before)[:4] == [("alloc", 8 * 1000 * 4), ("alloc", 8 * 4), ("free_completed", 8 * 4), ("free_completed", 8 * 1000 * 4)]
    assert counts.shape == (5, 7)
