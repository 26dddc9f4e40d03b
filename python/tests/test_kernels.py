"""The scratch memory CUDA kernels allocate for themselves (vramlab/_tracer/rules/kernels.py), against the
allocations an H100 made for the same reductions under torch 2.11 (the recordings in
reports/reference/h100/trace-workloads, whose C++ frames name gpu_reduce_kernel). The rules were
checked against these recordings while they were written: seen while designing, not held out."""

import pytest

from vramlab._tracer.rules.kernels import reduce_buffers, reduced_dims, threads_per_sm

H100_SMS = 132


def contiguous(shape):
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return list(reversed(strides))


# (input shape, reduced dims, element size, mean?, the recorded global buffer and semaphores)
RECORDED = [
    ([2048, 1536], [0], 2, False, [25_165_824, 48]),  # gpt_autocast_adamw: qkv bias gradient (bf16)
    ([2048, 512], [0], 2, False, [8_388_608, 16]),
    ([2048, 2048], [0], 2, False, [33_554_432, 64]),
    ([2048, 1536], [0], 4, False, [25_165_824, 48]),  # hf_gpt2: Conv1D bias (fp32)
    ([2048, 256], [0], 4, False, [4_194_304, 8]),  # hf_bert_adamw
    ([2048, 1024], [0], 4, False, [16_777_216, 32]),
    ([4, 256, 512], [0, 1], 4, False, [4_194_304, 16]),  # hf_llama_adamw: RMSNorm weight
    ([32, 64, 256], [0, 1], 4, False, [4_194_304, 8]),  # lstm: head bias
    ([8192, 1000], [0], 4, False, [65_536_000, 32]),  # embedding_adam: head bias
    ([64, 64, 64, 64], [0, 2, 3], 4, False, [2_304, 256]),  # cnn_sgd: conv bias
    ([256, 1024], [0, 1], 4, True, [128, 4]),  # mlp_adamw: mse_loss's mean
    ([32, 64, 256], [0, 1, 2], 4, True, [256, 4]),  # lstm: mean
    ([512, 2048], [0, 1], 4, True, [512, 4]),  # accumulate_empty_cache: mean
    # Reductions the same recordings made without a global buffer.
    ([256, 4096], [0], 4, False, []),
    ([512, 2048], [0], 4, False, []),
    ([512, 8192], [0], 2, False, []),
    ([64, 128, 32, 32], [0, 2, 3], 4, False, []),
    ([64, 10], [0], 4, False, []),
]


@pytest.mark.parametrize("shape, dims, elsize, mean, recorded", RECORDED)
def test_reduction_buffers_are_what_the_h100_allocated(shape, dims, elsize, mean, recorded):
    vector = 8 if elsize == 2 and not mean else 4
    predicted = reduce_buffers(
        shape, contiguous(shape), 0, elsize, reduced_dims(len(shape), dims), elsize, 4, vector, H100_SMS, threads_per_sm(9, 0)
    )
    assert predicted == recorded


def test_a_view_at_an_odd_offset_loads_narrower_vectors():
    """get_output_vec_size reads the input's address: a column reduction of a view starting one
    element in cannot load four outputs at once, so its blocks and buffer differ."""
    shape = [4096, 1024]
    aligned = reduce_buffers(shape, contiguous(shape), 0, 4, [0], 4, 4, 4, H100_SMS, 2048)
    shifted = reduce_buffers(shape, contiguous(shape), 1, 4, [0], 4, 4, 4, H100_SMS, 2048)
    assert aligned and shifted and aligned != shifted
