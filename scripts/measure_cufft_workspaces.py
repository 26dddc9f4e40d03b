"""Measures, on a GPU, what each torch.fft call allocates through the caching allocator, in order:
its output, the copies PyTorch's host code makes (aten/src/ATen/native/cuda/SpectralOps.cpp), and
cuFFT's work area, which ``_exec_fft`` allocates as ``at::empty({config->workspace_size()},
kByte)`` per call and frees when the transform returns (its size is cuFFT's choice per plan:
transform type, precision, signal sizes, batch and layout). Writes JSON lines, one per call:
every allocation and completed free the allocator saw during a second call of the same
transform (the first made its plan, kept in PyTorch's plan cache).

The grid: one-, two- and three-dimensional real-to-complex, complex-to-real and complex
transforms of contiguous batches, in float32, float64 and float16 (powers of two only, as cuFFT
requires), over sizes with small and large prime factors and batches from 1 to thousands; and
torch.stft / torch.istft as programs call them (frames as a strided view of the signal), over
n_fft, hop, batch and signal length. Run on a GPU machine:
    python scripts/measure_cufft_workspaces.py OUT.jsonl [--seconds S] [--seed N --random K]"""

import json
import random
import sys
import time

import torch

from allocator_events import events_during

SIZES_1D = [16, 32, 64, 100, 128, 160, 200, 256, 320, 384, 400, 480, 500, 512, 640, 768, 800, 1000, 1024, 1536,
            1792, 2000, 2048, 2187, 3072, 3125, 4096, 6000, 8192, 16384, 32768, 65536, 131072, 262144, 1048576,
            97, 101, 1021, 4099, 12289]
BATCHES = [1, 2, 3, 8, 16, 100, 128, 1000, 1024, 8016, 16384]
SIZES_2D = [(8, 8), (16, 16), (32, 32), (64, 64), (100, 100), (128, 128), (64, 128), (224, 224), (256, 256), (512, 512),
            (1024, 1024), (96, 160), (97, 101), (2048, 2048)]
BATCHES_2D = [1, 3, 16, 64, 256, 1024]
SIZES_3D = [(8, 8, 8), (16, 16, 16), (32, 32, 32), (64, 64, 64), (16, 32, 64), (128, 128, 128)]
BATCHES_3D = [1, 4, 32]
STFT = {"n_fft": [256, 400, 512, 1024, 2048], "hop": [64, 128, 160, 256], "batch": [1, 4, 16, 64], "samples": [16000, 64000, 160000]}
ELEMENTS_AT_MOST = 1 << 28


def transform(kind, dims):
    """The torch.fft function and the input's dtype given the real dtype."""
    name = {"r2c": "rfft", "c2r": "irfft", "c2c": "fft"}[kind] + {1: "", 2: "2", 3: "n"}[dims]
    return getattr(torch.fft, name)


def one_call(kind, dtype, signal, batch):
    """A transform of `batch` contiguous signals of sizes `signal` (the last dimensions)."""
    dims = len(signal)
    fn = transform(kind, dims)
    complex_dtype = {torch.float32: torch.complex64, torch.float64: torch.complex128, torch.float16: torch.complex32}[dtype]
    if kind == "r2c":
        x = torch.randn(batch, *signal, device="cuda", dtype=dtype)
        call = lambda: fn(x, dim=tuple(range(-dims, 0))) if dims > 1 else fn(x)
    elif kind == "c2r":
        half = list(signal[:-1]) + [signal[-1] // 2 + 1]
        x = torch.randn(batch, *half, device="cuda", dtype=dtype).to(complex_dtype) if dtype == torch.float16 else torch.randn(batch, *half, device="cuda", dtype=complex_dtype)
        call = (lambda: fn(x, s=tuple(signal), dim=tuple(range(-dims, 0)))) if dims > 1 else (lambda: fn(x, n=signal[0]))
    else:
        x = torch.randn(batch, *signal, device="cuda", dtype=dtype).to(complex_dtype) if dtype == torch.float16 else torch.randn(batch, *signal, device="cuda", dtype=complex_dtype)
        call = lambda: fn(x, dim=tuple(range(-dims, 0))) if dims > 1 else fn(x)
    call()
    out, events = events_during(call)
    return {"op": kind, "dims": dims, "dtype": str(dtype).replace("torch.", ""), "signal": list(signal), "batch": batch,
            "input_bytes": x.numel() * x.element_size(), "output_bytes": out.numel() * out.element_size(), "events": events}


def one_stft(n_fft, hop, batch, samples, inverse):
    window = torch.hann_window(n_fft, device="cuda")
    x = torch.randn(batch, samples, device="cuda")
    spec = torch.stft(x, n_fft, hop, window=window, return_complex=True)
    call = (lambda: torch.istft(spec, n_fft, hop, window=window, length=samples)) if inverse else (
        lambda: torch.stft(x, n_fft, hop, window=window, return_complex=True))
    call()
    out, events = events_during(call)
    return {"op": "istft" if inverse else "stft", "n_fft": n_fft, "hop": hop, "batch": batch, "samples": samples,
            "frames": spec.shape[-1], "output_bytes": out.numel() * out.element_size(), "events": events}


def jobs(seed=None, count=None):
    grid = []
    for kind in ("r2c", "c2r", "c2c"):
        for dtype in (torch.float32, torch.float64, torch.float16):
            for n in SIZES_1D:
                if dtype == torch.float16 and n & (n - 1):
                    continue
                for b in BATCHES:
                    if n * b <= ELEMENTS_AT_MOST:
                        grid.append(("fft", kind, dtype, (n,), b))
            for sizes, batches in ((SIZES_2D, BATCHES_2D), (SIZES_3D, BATCHES_3D)):
                for s in sizes:
                    if dtype == torch.float16 and any(v & (v - 1) for v in s):
                        continue
                    for b in batches:
                        if b * torch.Size(s).numel() <= ELEMENTS_AT_MOST:
                            grid.append(("fft", kind, dtype, tuple(s), b))
    for n_fft in STFT["n_fft"]:
        for hop in STFT["hop"]:
            for b in STFT["batch"]:
                for samples in STFT["samples"]:
                    for inverse in (False, True):
                        grid.append(("stft", n_fft, hop, b, samples, inverse))
    if seed is not None:
        # Held-out draws: sizes and batches the grid does not list.
        rng = random.Random(seed)
        drawn = []
        while len(drawn) < count:
            kind = rng.choice(["r2c", "c2r", "c2c"])
            dtype = rng.choice([torch.float32, torch.float32, torch.float64, torch.float16])
            dims = rng.choice([1, 1, 1, 2, 3])
            if dtype == torch.float16:
                signal = tuple(2 ** rng.randint(3, 12 if dims == 1 else 7) for _ in range(dims))
            else:
                signal = tuple(rng.randint(8, 20000 if dims == 1 else (600 if dims == 2 else 80)) for _ in range(dims))
            batch = rng.choice([1, rng.randint(2, 64), rng.randint(65, 5000)])
            if batch * torch.Size(signal).numel() <= ELEMENTS_AT_MOST:
                drawn.append(("fft", kind, dtype, signal, batch))
            if rng.random() < 0.15:
                drawn.append(("stft", rng.choice([128, 256, 320, 400, 512, 640, 800, 1024, 1536, 2048, 4096]), rng.choice([32, 80, 100, 128, 160, 200, 256, 512]),
                              rng.randint(1, 48), rng.randint(8000, 200000), rng.random() < 0.5))
        return drawn
    return grid


def main():
    sink = open(sys.argv[1], "w")
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 1e9
    seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else None
    count = int(sys.argv[sys.argv.index("--random") + 1]) if "--random" in sys.argv else None
    start = time.time()
    todo = jobs(seed, count)
    done = 0
    for job in todo:
        if time.time() - start > seconds:
            break
        try:
            row = one_call(*job[1:]) if job[0] == "fft" else one_stft(*job[1:])
        except (torch.OutOfMemoryError, RuntimeError) as e:
            row = {"job": [str(j) for j in job], "error": str(e).splitlines()[0][:200]}
        sink.write(json.dumps(row) + "\n")
        sink.flush()
        done += 1
        torch.cuda.empty_cache()
    print(f"{done} of {len(todo)} measured in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
