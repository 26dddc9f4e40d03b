"""What the compiler does with kernels/spills.cu under each register cap, read off its SASS.

No GPU needed. NVRTC compiles the kernel to PTX exactly as vramlab's hw backend does (same
source, -DLIVE and -DREGISTER_CAP, NVRTC's default architecture), ptxas turns the PTX into
sm_90 SASS, and nvdisasm (through cuobjdump) lists it. For each (live, cap) this records the
registers and the stack frame ptxas reports, and the spilled loads (LDL), stores (STL) and
instructions in the iteration loop (the backward branch whose body holds the FMAs).
The spill model's compiler rule (sim's fit.rs, SPILL_SASS_SOURCE) comes from this output.

Fetch the tools once from PyPI (NVIDIA's wheels), then run from the repository root:
    pip download --no-deps -d /tmp/cudatools nvidia-cuda-nvrtc nvidia-cuda-nvcc \
        nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm
    (cd /tmp/cudatools && for f in *.whl; do unzip -q -o $f -d x; done)
    python3 scripts/spill_sass.py /tmp/cudatools/x OUT.json
"""
import ctypes
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

TOOLS = sys.argv[1]
OUT = sys.argv[2]
BIN = glob.glob(os.path.join(TOOLS, '**/bin/ptxas'), recursive=True)[0].rsplit('/', 1)[0]
os.environ['PATH'] = BIN + ':' + os.environ['PATH']
NVRTC = ctypes.CDLL(sorted(glob.glob(os.path.join(TOOLS, '**/libnvrtc.so*'), recursive=True))[0])
SOURCE = open('kernels/spills.cu').read().encode()


def ptx(options):
    prog = ctypes.c_void_p()
    if NVRTC.nvrtcCreateProgram(ctypes.byref(prog), SOURCE, b'spills.cu', 0, None, None) != 0:
        raise SystemExit('nvrtcCreateProgram failed')
    opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
    if NVRTC.nvrtcCompileProgram(prog, len(options), opts) != 0:
        raise SystemExit(f'NVRTC could not compile spills.cu with {options}')
    size = ctypes.c_size_t()
    NVRTC.nvrtcGetPTXSize(prog, ctypes.byref(size))
    text = ctypes.create_string_buffer(size.value)
    NVRTC.nvrtcGetPTX(prog, text)
    return text.value


def loop_body(sass):
    """The instructions of the backward branch's loop that holds the most FMAs."""
    lines = []
    for line in sass.splitlines():
        m = re.match(r'\s+/\*([0-9a-f]{4,})\*/\s+(.*?);', line)
        if m:
            lines.append((int(m.group(1), 16), m.group(2)))
    best = []
    for address, text in lines:
        m = re.search(r'BRA .*?(0x[0-9a-f]+)', text)
        if m and int(m.group(1), 16) < address:
            body = [t for a, t in lines if int(m.group(1), 16) <= a <= address]
            if sum('FFMA' in t for t in body) > sum('FFMA' in t for t in best):
                best = body
    return best


def measure(case):
    live, cap = case
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, 'k.ptx')
        cubin = os.path.join(tmp, 'k.cubin')
        open(src, 'wb').write(ptx([f'-DLIVE={live}', f'-DREGISTER_CAP={cap}']))
        info = subprocess.run(['ptxas', '-arch=sm_90', '-v', src, '-o', cubin],
                              capture_output=True, text=True, check=True).stderr
        sass = subprocess.run(['cuobjdump', '-sass', cubin], capture_output=True, text=True, check=True).stdout
    body = loop_body(sass)
    count = lambda op: sum(1 for t in body if re.match(r'(@!?P\d+\s+)?' + op + r'\b', t))
    return {
        'live': live,
        'cap': cap,
        'registers': int(re.search(r'Used (\d+) registers', info).group(1)),
        'frame_bytes': int(re.search(r'(\d+) bytes stack frame', info).group(1)),
        'loop_ffma': count('FFMA'),
        'loop_ldl': count('LDL'),
        'loop_stl': count('STL'),
        'loop_instructions': len(body),
    }


cases = [(live, cap) for live in range(16, 129, 8) for cap in list(range(24, 129, 8)) + [255]]
cases += [(40, cap) for cap in range(24, 56)] + [(96, cap) for cap in range(60, 112)]
cases = sorted(set(cases))
with ThreadPoolExecutor(os.cpu_count()) as pool:
    rows = list(pool.map(measure, cases))
for r in rows:
    if r['loop_ffma'] != r['live']:
        raise SystemExit(f"live {r['live']} cap {r['cap']}: the loop holds {r['loop_ffma']} FMAs, not one iteration")
    g = r['live'] - r['cap']
    r['rule_loads'] = max(0, min(10 + 2 * g, 23 + g))
tool_versions = subprocess.run(['ptxas', '--version'], capture_output=True, text=True).stdout.strip().splitlines()[-1]
tmp = OUT + '.tmp'
json.dump({'ptxas': tool_versions, 'arch': 'sm_90', 'cases': rows}, open(tmp, 'w'), indent=1)
os.replace(tmp, OUT)
exact = sum(r['rule_loads'] == r['loop_ldl'] for r in rows if r['live'] - r['cap'] >= -1)
total = sum(1 for r in rows if r['live'] - r['cap'] >= -1)
print(f'{len(rows)} cases; loads = min(10 + 2g, 23 + g) exact at {exact} of {total} with g >= -1; -> {OUT}')
