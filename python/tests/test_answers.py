"""Issue 38: the line tune offers survives a shell and reads back as PyTorch parses it; tune's
one-line answer; the cap as a share of a named GPU; the GPUs known from their datasheets, traced."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import vramlab
from vramlab.errors import InputError, SettingsError

ROOT = Path(__file__).resolve().parents[2]
RESNET = ROOT / "tests" / "traces" / "resnet18_default.pickle"
AWKWARD = "roundup_power2_divisions:[64:8,256:4,1024:2,>:1]"


def pasted(line, cwd):
    """What a job started after `line` reads as PYTORCH_ALLOC_CONF, through bash."""
    done = subprocess.run(["bash", "-c", f"{line} printenv PYTORCH_ALLOC_CONF"], cwd=cwd, capture_output=True, text=True)
    return done.stdout[:-1] if done.returncode == 0 else None


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash to paste the line into")
def test_every_line_tune_offers_reads_back_as_pytorch_parses_it(tmp_path):
    ranked = vramlab.tune(str(RESNET), capacity="2 GiB")
    settings = [r["policy"].removeprefix("PYTORCH_ALLOC_CONF=") for r in ranked["results"]]
    assert AWKWARD in settings, "the default grid holds the setting a shell would cut"
    read = {}
    for result, setting in zip(ranked["results"], settings):
        read[setting] = pasted(result["paste"], tmp_path)
        assert read[setting] == setting, result["paste"]
    # What the test guards against: the same line unquoted is cut at '>' and makes a file.
    assert pasted(f"PYTORCH_ALLOC_CONF={AWKWARD}", tmp_path) != AWKWARD
    assert (tmp_path / ":1]").exists()
    # Read back as PyTorch parses it: its own parser (c10/core/AllocatorConfig.cpp) accepts
    # each, in a process of its own (the setting is global); it refuses the truncated one.
    torch_python = os.environ.get("VRAMLAB_TORCH_PYTHON", sys.executable)
    probe = (
        "import sys, torch\n"
        "for s in sys.stdin.read().split('\\0'):\n"
        "    try:\n"
        "        torch._C._accelerator_setAllocatorSettings(s); print('ok')\n"
        "    except RuntimeError as e:\n"
        "        print('refused')\n"
    )
    lines = [s for s in settings if s] + [AWKWARD.split(">")[0].rstrip()]
    done = subprocess.run([torch_python, "-c", probe], input="\0".join(lines), capture_output=True, text=True)
    if "No module named 'torch'" in done.stderr:
        pytest.skip("no torch here to parse the settings as PyTorch does")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok"] * (len(lines) - 1) + ["refused"], done.stdout


def test_tune_answers_in_one_line():
    fits = vramlab.tune(str(RESNET), capacity="2 GiB", grid=["", "expandable_segments:True"])
    assert fits["answer"].startswith("answer: your current settings (PyTorch's defaults) already fit under the cap of 2,048 MiB, with ")
    use = vramlab.tune(str(RESNET), capacity="1600 MiB", grid=["", "expandable_segments:True"])
    assert use["answer"].startswith("answer: PYTORCH_ALLOC_CONF='expandable_segments:True' fits under the cap of 1,600 MiB")
    none = vramlab.tune(str(RESNET), capacity="1000 MiB", grid=["", "expandable_segments:True"])
    assert none["answer"].startswith("answer: nothing fits under the cap of 1,000 MiB: the smallest cap is 1,588 MiB")


def test_a_cap_is_a_share_of_a_named_gpu_or_a_size_in_gpu_units():
    bytes_, said = vramlab._vramlab.capacity("90%", "a100-80gb")
    assert bytes_ == int(0.9 * (80 << 30))
    assert "NVIDIA A100-SXM4-80GB" in said and "GB" in said and "MiB" in said and "CUDA context" in said
    assert vramlab._vramlab.capacity("0.9", "a100-80gb")[0] == bytes_
    assert vramlab._vramlab.capacity("80GB")[0] == 80 << 30
    with pytest.raises(SettingsError, match="--gpu"):
        vramlab._vramlab.capacity("0.9")
    with pytest.raises(InputError, match="did you mean 'a100-80gb'"):
        vramlab._vramlab.capacity("90%", "a100")
    ranked = vramlab.tune(str(RESNET), capacity="2%", gpu="a100-80gb", grid=[""])
    assert ranked["capacity_bytes"] == int(0.02 * (80 << 30))


def test_an_unknown_gpu_is_one_line_with_the_nearest_names(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("pass\n")
    done = subprocess.run([sys.executable, "-m", "vramlab.trace", "--gpu", "a100", "--out", str(tmp_path / "x.pickle"), str(script)], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert "unknown GPU 'a100' (did you mean 'a100-80gb'?)" in done.stderr and "rtx-4090" in done.stderr


# cuBLAS's default workspace per handle (aten/src/ATen/cuda/CublasHandlePool.cpp): 4096 KiB x 8
# on compute capability 9.0 in 2.11 (majors 9-12 in 2.15), else 4096 KiB x 2 + 16 KiB x 8.
LARGE, SMALL = 4096 * 1024 * 8, 4096 * 1024 * 2 + 16 * 1024 * 8
GPUS = {
    "a100-80gb": ("NVIDIA A100-SXM4-80GB", (8, 0), 80 << 30, SMALL, SMALL),
    "a100-40gb": ("NVIDIA A100-SXM4-40GB", (8, 0), 40 << 30, SMALL, SMALL),
    "l4": ("NVIDIA L4", (8, 9), 24 << 30, SMALL, SMALL),
    "l40s": ("NVIDIA L40S", (8, 9), 48 << 30, SMALL, SMALL),
    "rtx-4090": ("NVIDIA GeForce RTX 4090", (8, 9), 24 << 30, SMALL, SMALL),
    "rtx-3090": ("NVIDIA GeForce RTX 3090", (8, 6), 24 << 30, SMALL, SMALL),
    "a10g": ("NVIDIA A10G", (8, 6), 24 << 30, SMALL, SMALL),
    "h100-pcie": ("NVIDIA H100 PCIe", (9, 0), 80 << 30, LARGE, LARGE),
    "b200": ("NVIDIA B200", (10, 0), 180 << 30, SMALL, LARGE),
}


@pytest.mark.parametrize("name", sorted(GPUS))
def test_each_gpu_from_its_datasheet_traces_with_the_rules_its_capability_implies(name):
    torch = pytest.importorskip("torch", reason="vramlab.trace needs PyTorch")
    device, capability, memory, cublas_211, cublas_215 = GPUS[name]
    with vramlab.trace(gpu=name) as t:
        props = torch.cuda.get_device_properties(0)
        assert (props.name, (props.major, props.minor), props.total_memory) == (device, capability, memory)
        assert torch.cuda.is_bf16_supported()
        a = torch.randn(256, 256, device="cuda")
        (a @ a).sum()
    release = tuple(int(x) for x in torch.__version__.split(".")[:2])
    cublas = cublas_215 if release >= (2, 15) else cublas_211
    sizes = [e["size"] for e in t.snapshot()["device_traces"][0] if e["action"] == "alloc"]
    assert cublas in sizes, (name, sizes)
    notes = " ".join(t.snapshot()["vramlab_notes"])
    assert f"the {device} is known to vramlab from its datasheets, not measured" in notes
    assert f"cuBLAS's workspace {cublas:,} B" in notes
    assert "convolution workspaces were measured on the H100 and H200 only" in notes


def test_a_measured_gpu_says_no_such_thing():
    pytest.importorskip("torch", reason="vramlab.trace needs PyTorch")
    with vramlab.trace(gpu="h100") as t:
        pass
    assert not any("datasheets" in n for n in t.snapshot()["vramlab_notes"])


def test_a_sweep_takes_a_share_of_a_named_gpu():
    torch = pytest.importorskip("torch", reason="vramlab.trace needs PyTorch")

    def step(n):
        torch.empty(n, device="cuda")

    answered = vramlab.sweep(step, [1 << 20], gpu="a100-80gb", capacity="1%", name="n")
    assert answered["capacity_bytes"] == int(0.01 * (80 << 30))
    assert answered["answer"].startswith("the largest n that fits under 819 MiB"), answered["answer"]


def _framed_snapshot():
    """A snapshot of a program whose third 1 MiB tensor is made at train.py:12: each allocation's
    frames hold PyTorch's own frames and a C++ frame around the program's line, as a snapshot
    recorded with stacks does (innermost first)."""
    def frames(line):
        return [
            {"filename": "??", "line": 0, "name": "c10::cuda::CUDACachingAllocator::malloc"},
            {"filename": "/usr/lib/python3/site-packages/torch/nn/modules/linear.py", "line": 125, "name": "forward"},
            {"filename": "/home/me/train.py", "line": line, "name": "step"},
            {"filename": "/home/me/train.py", "line": 40, "name": "<module>"},
        ]

    events = [{"action": "alloc", "addr": (1 << 34) + k * (2 << 20), "size": 1 << 20, "stream": 0, "frames": frames(10 + k)} for k in range(3)]
    return {"segments": [], "device_traces": [events]}


def test_a_first_failure_names_the_programs_line(tmp_path):
    """Issue 38 item 15: the snapshot's frames name the program's line that asked for the
    request that failed first: from a snapshot dict, and from its pickle."""
    import pickle

    path = tmp_path / "framed.pickle"
    path.write_bytes(pickle.dumps(_framed_snapshot()))
    for given in [_framed_snapshot(), str(path)]:
        ranked = vramlab.tune(given, capacity="3 MiB", grid=[""])
        (result,) = ranked["results"]
        assert result["failed_allocs"] > 0, result
        assert "(/home/me/train.py:12 in step)" in result["first_failure"], result["first_failure"]
        assert "linear.py" not in result["first_failure"]
    # Without frames, nothing is made up.
    bare = _framed_snapshot()
    for event in bare["device_traces"][0]:
        event["frames"] = []
    (result,) = vramlab.tune(bare, capacity="3 MiB", grid=[""])["results"]
    assert "train.py" not in result["first_failure"]


# The walk's findings (docs/WALK.md): the sweep's cap, the sweep against tune, tune's wording. ----

GIB, MIB = 1 << 30, 1 << 20


def _snapshot_of(ops):
    """A snapshot of allocations ("a", id, bytes) and frees ("f", id, 0), in order."""
    events, live, addr = [], {}, 1 << 34
    for action, key, size in ops:
        if action == "a":
            live[key] = (addr, size)
            events.append({"action": "alloc", "addr": addr, "size": size, "stream": 0, "frames": []})
            addr += size + (2 << 20)
        else:
            at, size = live.pop(key)
            events += [{"action": kind, "addr": at, "size": size, "stream": 0, "frames": []} for kind in ("free_requested", "free_completed")]
    return {"segments": [], "device_traces": [events]}


# Found by a search over random programs: under expandable_segments:True its address range (the
# device's memory and 1/8 more) is outgrown on a 24 GiB card and not on the H100's 80 GiB, so what
# the setting needs depends on the GPU replayed (20,040 MiB on an RTX 4090's device, 22,124 MiB
# on the H100's). The walk's RTX 4090 batch-16 GPT-2 differed so by 40 MiB between the sweep,
# which replayed on the H100's device, and tune --gpu rtx-4090.
OUTGROWS_A_24_GIB_RANGE = [
    ("a", 0, 2151677952), ("f", 0, 0), ("a", 1, 6485442560), ("a", 2, 5550112768), ("a", 3, 2316304384),
    ("a", 4, 5489295360), ("f", 1, 0), ("f", 4, 0), ("a", 5, 6611271680), ("a", 6, 6522142720), ("f", 3, 0),
]


def test_the_sweep_ranks_a_point_as_tune_gpu_does(tmp_path):
    """The sweep's figures are tune's for the GPU swept (--gpu), not the H100's: the device's
    size decides where expandable segments' address ranges end."""
    import json
    import pickle

    from vramlab._tracer.sweep import ranked

    snapshot = _snapshot_of(OUTGROWS_A_24_GIB_RANGE)
    path = tmp_path / "point.pickle"
    path.write_bytes(pickle.dumps(snapshot))
    cap = 24 * GIB
    setting = "expandable_segments:True"
    done = subprocess.run(
        [sys.executable, "-m", "vramlab", "tune", str(path), "--gpu", "rtx-4090", "--capacity", "24 GiB", "--json", "--out", str(tmp_path / "tune")],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["results"]
    (cli,) = [r for r in rows if r["policy"].endswith(setting)]
    on_4090 = vramlab.tune(snapshot, capacity=cap, grid=[setting], gpu="rtx-4090")
    (python,) = on_4090["results"]
    assert on_4090["device_bytes"] == 24 * GIB
    assert (python["always_fits_bytes"], python["min_capacity_bytes"]) == (cli["always_fits_bytes"], cli["min_capacity_bytes"])
    # The device matters here: on the H100's it needs more.
    (on_h100,) = vramlab.tune(snapshot, capacity=cap, grid=[setting])["results"]
    assert on_h100["always_fits_bytes"] != cli["always_fits_bytes"]
    # The sweep's point for the 4090 is tune --gpu rtx-4090's best row, setting and figure.
    point = ranked(snapshot, cap, "rtx-4090")
    assert point["paste"] == rows[0]["paste"] and point["needs"] == rows[0]["always_fits_bytes"]


def test_the_sweeps_default_cap_is_what_the_allocator_can_use_and_says_so():
    """Without --capacity a sweep compared against the whole datasheet memory, the CUDA context
    inside it (the walk's RTX 4090 "fits with 318 MiB to spare" no longer fit without it). The
    default is now the GPU's memory less the context, the cap tune offers, and the answer says
    what the cap holds."""
    torch = pytest.importorskip("torch", reason="vramlab.trace needs PyTorch")
    import json

    def step(mib):
        torch.empty(mib * MIB, dtype=torch.uint8, device="cuda")

    gpu = json.loads(vramlab._vramlab.gpu("rtx-4090"))
    answered = vramlab.sweep(step, [64], gpu="rtx-4090", name="MIB")
    context = gpu["context_bytes"]
    assert answered["capacity_bytes"] == 24 * GIB - context
    # The cap tune offers as "the whole GPU less the context" (--capacity "24047 MiB").
    assert f'--capacity "{answered["capacity_bytes"] >> 20} MiB"' in vramlab._vramlab.capacity("100%", "rtx-4090")[1]
    line = answered["answer"]
    assert line.startswith(f"the largest MIB that fits under {(24 * GIB - context) / MIB:,.0f} MiB"), line
    assert "the NVIDIA GeForce RTX 4090's 24,576 MiB less 529 MiB for the CUDA context (as measured on an H100; not measured on this GPU): what the caching allocator can use" in line
    # A cap given is said to hold what the allocator may hold, the context outside it.
    given = vramlab.sweep(step, [64], gpu="rtx-4090", capacity="20 GiB", name="MIB")
    assert "(21.5 GB; as given: what the caching allocator may hold; the CUDA context and other processes are outside it)" in given["answer"]


def test_tune_says_what_no_cap_reaches_and_whose_memory_it_prints(tmp_path):
    """The walk read "(defaults): does not fit under the cap of 81,920 MiB nor with unlimited
    memory" as a contradiction: no replay holds more than the device has, so "unlimited" was
    the device's whole memory. And the first line, "this process's peak memory", read as the
    job's: it is vramlab's own host memory."""
    import pickle

    # 25 GiB at once: more than an RTX 4090 has.
    path = tmp_path / "big.pickle"
    path.write_bytes(pickle.dumps(_snapshot_of([("a", 0, 25 * GIB), ("f", 0, 0)])))
    done = subprocess.run(
        [sys.executable, "-m", "vramlab", "tune", str(path), "--gpu", "rtx-4090", "--capacity", "100%", "--grid", "", "--out", str(tmp_path / "tune")],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "unlimited" not in out + done.stderr
    assert "(defaults): does not fit under the cap of 24,576 MiB, nor under any other cap: even all of the device's 24,576 MiB is too little for it." in out, out
    assert "answer: nothing fits under the cap of 24,576 MiB, nor under any other cap: every setting fails even with all of the device's 24,576 MiB" in out
    assert "vramlab's own host memory at its peak (resident set)" in done.stderr and "not a figure of the job or the GPU" in done.stderr
    assert "this process's peak memory" not in done.stderr
    # The path comes first, then vramlab's own cost, then the table, the answer last.
    assert out.splitlines()[0].startswith("tune: ") and out.rstrip().splitlines()[-1].startswith("answer: ")
    # Without a cap, a setting that fails on the device says so in the same words.
    (verdict,) = vramlab.tune(str(path), grid=[""], gpu="rtx-4090")["verdicts"]
    assert verdict["text"] == "(defaults): does not fit even with all of the device's 24,576 MiB.", verdict["text"]
