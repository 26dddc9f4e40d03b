"""Compile vramlab's kernels with NVRTC on a machine without a GPU, before spending GPU time.

NVRTC is a plain library: fetch it once from PyPI, then run from the repository root:
    pip download --no-deps -d /tmp/nvrtc nvidia-cuda-nvrtc && (cd /tmp/nvrtc && unzip -q -o *.whl -d x)
    python3 scripts/check_kernels.py
"""
import ctypes, glob, sys
lib = ctypes.CDLL(sorted(glob.glob('/tmp/nvrtc/x/**/libnvrtc.so*', recursive=True))[0])
def compile(path, opts):
    src = open(path).read().encode()
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), src, path.encode(), 0, None, None) == 0
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    res = lib.nvrtcCompileProgram(prog, len(opts), arr)
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    print(path, opts, 'OK' if res == 0 else 'FAILED', log.value.decode()[:2000])
    return res == 0
ok = all(compile(p, o) for p, o in [(a, b) for a, b in (
    ('kernels/spin.cu', []), ('kernels/banks.cu', []), ('kernels/coalescing.cu', []), ('kernels/latency.cu', []), ('kernels/constant.cu', []), ('kernels/replay.cu', []), ('kernels/spills.cu', ['-DLIVE=96', '-DREGISTER_CAP=40']),
    ('kernels/occupancy.cu', ['-DREGISTER_CAP=64', '-DSTATIC_SHARED_BYTES=12288']))])
sys.exit(0 if ok else 1)
