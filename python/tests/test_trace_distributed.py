"""vramlab.trace of one rank of a distributed program (issue 36), on a CPU-only machine: DDP, FSDP2
and tensor parallelism traced per rank (scripts/trace_workloads_36.py, held out: committed before
any GPU recording), deterministic per rank; streams and collectives' own allocations; one-line
refusals. The GPU recordings (scripts/record_distributed.py on four H100s:
reports/reference/h100/distributed-x4/<workload>/rank{r}-{setting}.json) are compared with rank 0's
trace under both settings, within the tracer's limits (0.5% peak allocated, 2% peak reserved)."""

import json
import os
import pathlib
import pickle
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="vramlab.trace needs PyTorch (pip install torch)")
dist = pytest.importorskip("torch.distributed")

import vramlab  # noqa: E402
from vramlab import UnfollowedError  # noqa: E402
from vramlab._tracer.compat import release  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "trace_workloads_36.py"
RECORDINGS = ROOT / "reports" / "reference" / "h100" / "distributed-x4"
sys.path.insert(0, str(ROOT / "scripts"))
from trace_workloads_36 import ALL, WORLD_SIZES  # noqa: E402
from trace_workloads_36b import ALL as ALL_B  # noqa: E402
from trace_workloads_36b import WORLD_SIZES as WORLD_SIZES_B  # noqa: E402
from trace_workloads_36c import ALL as ALL_C  # noqa: E402
from trace_workloads_36c import WORLD_SIZES as WORLD_SIZES_C  # noqa: E402
from trace_workloads_36d import ALL as ALL_D  # noqa: E402
from sampling import sampled  # noqa: E402

# The fourth group's workloads are traced against their recordings (the largest rank's test
# below), not each rank: CI's time.
ALL = {**ALL, **ALL_B, **ALL_C, **ALL_D}
WORLD_SIZES = {**WORLD_SIZES, **WORLD_SIZES_B, **WORLD_SIZES_C}

# The recordings are torch 2.11's: under a later torch, its settings that make 2.11's rules.
pytestmark = pytest.mark.usefixtures("as_2_11")

NEEDS = {
    "lora_ddp": ("peft", "transformers"),
    "fsdp2_hf_llama": ("transformers",),
    "ddp_hf_gpt2": ("transformers",),
    "tp_hf_llama_mlp": ("transformers",),
    "fsdp2_hf_gpt2_checkpointing": ("transformers",),
    "fsdp1_mixed_gpt2": ("transformers",),
    "fsdp2_lora_llama": ("peft", "transformers"),
    "fsdp2_llama_accumulate": ("transformers",),
    "fsdp_tp_2d_llama": ("transformers",),
}


def blocks(snapshot):
    """(peak allocated in 512-byte blocks, events) of a traced snapshot."""
    events = [e for trace in snapshot["device_traces"] for e in trace]
    live, now, peak = {}, 0, 0
    for e in events:
        if e["action"] == "alloc":
            live[e["addr"]] = (e["size"] + 511) // 512 * 512
            now += live[e["addr"]]
            peak = max(peak, now)
        elif e["action"] == "free_requested" and e["addr"] in live:
            now -= live.pop(e["addr"])
    return peak, events


def traced(name, world_size, rank):
    for module in NEEDS.get(name, ()):
        pytest.importorskip(module)
    with vramlab.trace(gpu="h100", world_size=world_size, rank=rank) as t:
        ALL[name](rank, world_size)
    assert not dist.is_initialized(), "the trace's process group goes with the trace"
    return t


# Each (workload, world size, rank) traced once per process for the tests that look at it (a
# trace is seconds of CPU; conftest.py keeps a workload's tests in one xdist worker).
TRACED: dict = {}


def traced_once(name, world_size, rank):
    key = (name, world_size, rank)
    if key not in TRACED:
        TRACED[key] = traced(name, world_size, rank)
    return TRACED[key]


# At the world size each was recorded at (the largest it names), the first and the last rank:
# every workload's ranks are alike but for uneven shards, which put the short one last (FSDP2's
# padding, TP's chunks, HSDP's shard index). The two-GPU scripts below take world size 2.
# VRAMLAB_TRACE_SAMPLE=N[:K] takes a share of the workloads (sampling.py; CI's time), the same
# ones here and against the four-GPU recordings below, which share their traces.
IN_THIS_RUN = set(sampled(ALL))
CASES = [(name, sizes[-1], rank) for name, sizes in WORLD_SIZES.items() if name in IN_THIS_RUN for rank in sorted({0, sizes[-1] - 1})]


@pytest.mark.parametrize("name, world_size, rank", CASES, ids=[f"{n}-ws{w}-rank{r}" for n, w, r in CASES])
def test_each_workload_traces_on_its_first_and_last_rank(name, world_size, rank):
    t = traced_once(name, world_size, rank)
    snapshot = t.snapshot()
    # A torchrun rank's own snapshot: one list per visible GPU, events on its own only.
    assert len(snapshot["device_traces"]) == world_size
    assert [bool(trace) for trace in snapshot["device_traces"]] == [d == rank for d in range(world_size)]
    assert t.stopped is None
    assert any("process group stood in for" in n for n in snapshot["vramlab_notes"])
    peak, events = blocks(snapshot)
    assert peak == t.peak_allocated > 0
    # Each free names its block's stream.
    stream_of = {}
    for e in events:
        if e["action"] == "alloc":
            stream_of[e["addr"]] = e["stream"]
        elif e["action"] in ("free_requested", "free_completed"):
            assert e["stream"] == stream_of[e["addr"]]
    replayed = vramlab.replay(snapshot, alloc_conf="")["results"][0]["pytorch_stats"]
    assert replayed["allocated_bytes.all.peak"] >= peak
    if name.startswith(("fsdp", "hsdp")):
        # FSDP2's all-gather buffers on its copy-in stream, reduce-scatter outputs on its own.
        assert len({e["stream"] for e in events if e["action"] == "alloc"}) >= 3
    else:
        assert {e["stream"] for e in events} == {0}


@pytest.mark.parametrize("name", ["ddp_bf16_autocast", "fsdp2_mp_reshard", "tp_colwise_rowwise"])
def test_a_rank_traces_the_same_twice(name):
    def shape(t):
        return [(e["action"], e["size"], e["stream"], tuple((f["filename"], f["line"]) for f in e["frames"])) for e in t.snapshot()["device_traces"][1]]

    assert shape(traced(name, 2, 1)) == shape(traced(name, 2, 1))


def test_ranks_differ_where_their_shards_do():
    # tp_colwise_rowwise's head (1000 rows) over 4 ranks gives each 250; over 2, 500: the traces
    # of rank 0 and 1 of one world are the same size, and of different worlds differ.
    a = traced("tp_colwise_rowwise", 2, 0).peak_allocated
    b = traced("tp_colwise_rowwise", 2, 1).peak_allocated
    c = traced("tp_colwise_rowwise", 4, 0).peak_allocated
    assert a == b and c < a


def events_of(program, world_size=2, rank=0):
    with vramlab.trace(world_size=world_size, rank=rank) as t:
        program()
    return t, t.snapshot()["device_traces"][rank]


def test_streams_tag_allocations_and_frees_with_the_blocks_stream():
    def program():
        side = torch.cuda.Stream()
        high = torch.cuda.Stream(priority=-1)
        a = torch.empty(1 << 20, device="cuda")
        with torch.cuda.stream(side):
            assert torch.cuda.current_stream() == side
            b = torch.empty(1 << 20, device="cuda")
        assert torch.cuda.current_stream() == torch.cuda.default_stream()
        with torch.cuda.stream(high):
            c = torch.empty(1 << 20, device="cuda")
        side.wait_stream(torch.cuda.current_stream())
        del b  # freed on the default stream's watch, returned to side's pool
        del a, c

    t, events = events_of(program)
    allocs = [e for e in events if e["action"] == "alloc"]
    assert [e["stream"] for e in allocs] == [0, 1, 33]
    by_addr = {e["addr"]: e["stream"] for e in allocs}
    assert all(e["stream"] == by_addr[e["addr"]] for e in events if e["action"].startswith("free"))


def test_record_stream_defers_the_free_to_the_next_synchronisation():
    def program():
        side = torch.cuda.Stream()
        x = torch.empty(1 << 20, device="cuda")
        x.record_stream(side)
        del x
        torch.empty(1 << 20, device="cuda")  # allocated while x's block still waits
        torch.cuda.synchronize()

    t, events = events_of(program)
    actions = [e["action"] for e in events]
    assert actions == ["alloc", "free_requested", "alloc", "free_requested", "free_completed", "free_completed"]
    assert events[-1]["addr"] == events[0]["addr"]
    assert any("record_stream" in n for n in t.snapshot()["vramlab_notes"])


def test_a_stream_wait_leaves_record_stream_frees_pending_to_a_host_synchronisation():
    # wait_stream orders the GPU's streams without the host waiting: the allocator completes the
    # free only once it finds the event it recorded passed, which a trace cannot time; a host
    # synchronisation (here torch.cuda.synchronize) is where the trace completes it.
    def program():
        side = torch.cuda.Stream()
        x = torch.empty(1 << 20, device="cuda")
        x.record_stream(side)
        del x
        torch.cuda.current_stream().wait_stream(side)
        torch.empty(1 << 20, device="cuda")  # x's block still pending: a new one
        torch.cuda.synchronize()

    t, events = events_of(program)
    actions = [e["action"] for e in events]
    assert actions == ["alloc", "free_requested", "alloc", "free_requested", "free_completed", "free_completed"]
    assert events[2]["addr"] != events[0]["addr"]
    assert events[-1]["addr"] == events[0]["addr"]
    assert any("stream waits" in n for n in t.snapshot()["vramlab_notes"])


def test_a_backward_runs_on_the_stream_its_forward_ran_on():
    # The autograd engine guards each node's evaluation with the stream of its forward operator
    # (engine.cpp): FSDP1 makes its parameters' views of the unsharded flat parameter on its
    # unshard stream, and their backward allocates the flat gradient there.
    def program():
        side = torch.cuda.Stream()
        w = torch.empty(1000, device="cuda", requires_grad=True)
        with torch.cuda.stream(side):
            v = w * 2  # MulBackward0 made on the side stream
        (v * v).sum().backward()  # the second MulBackward0 on the default one
        return side

    with vramlab.trace(world_size=2, rank=0) as t:
        side = program()
    events = t.snapshot()["device_traces"][0]
    grads = [e for e in events if e["action"] == "alloc" and e["size"] == 4000]
    # w, v (side), v * v (default); in backward: v * v's two grads (default) and w's (side).
    streams = [e["stream"] for e in grads]
    assert streams[0] == 0 and streams[1] == side.cuda_stream and streams[-1] == side.cuda_stream
    assert 0 in streams[3:-1]


def test_torch_distributed_optim_imports_inside_a_trace():
    # Its functional optimizers are TorchScript classes compiled at import, down to the optimizers'
    # device checks, which a trace stands in for: imported first inside a trace (a fresh process),
    # ZeroRedundancyOptimizer under DDP traces to its end.
    program = (
        "import vramlab, torch, torch.distributed as dist\n"
        "with vramlab.trace(world_size=2, rank=1) as t:\n"
        "    from torch.distributed.optim import ZeroRedundancyOptimizer\n"
        "    from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "    dist.init_process_group('nccl')\n"
        "    torch.cuda.set_device(1)\n"
        "    model = DDP(torch.nn.Linear(64, 64).cuda(), device_ids=[1])\n"
        "    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW)\n"
        "    model(torch.randn(8, 64, device='cuda')).sum().backward()\n"
        "    opt.step()\n"
        "print('stopped', t.stopped, t.peak_allocated > 0)\n"
    )
    # The vramlab under test (CI's installed wheel; the checkout's sources lack the extension).
    installed = os.path.dirname(os.path.dirname(os.path.abspath(vramlab.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([installed, os.environ.get("PYTHONPATH", "")]), PYTHONWARNINGS="ignore")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "stopped None True" in done.stdout


def test_collectives_allocate_what_process_group_nccl_does():
    def program():
        dist.init_process_group("nccl")
        x = torch.empty(1000, device="cuda")
        outs = [torch.empty(1000, device="cuda") for _ in range(4)]
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            dist.all_gather(outs, x)  # a flat 4 x 4000 B temporary, on the current stream
        dist.all_reduce(x)  # in place: nothing
        dist.barrier()  # one float
        y = torch.empty(4000, device="cuda")
        dist.all_gather_into_tensor(y, x)  # into y: nothing

    t, events = events_of(program, world_size=4, rank=2)
    allocs = [(e["size"], e["stream"]) for e in events if e["action"] == "alloc"]
    assert allocs == [(4000, 0)] * 5 + [(16000, 1), (4, 0), (16000, 0)]


def test_functional_collectives_wait_returns_its_input():
    from torch.distributed._functional_collectives import all_reduce, wait_tensor

    def program():
        dist.init_process_group("nccl")
        x = torch.empty(1 << 18, device="cuda")
        y = all_reduce(x, "sum", dist.group.WORLD)
        wait_tensor(y)

    t, events = events_of(program)
    assert [e["size"] for e in events if e["action"] == "alloc"] == [1 << 20, 1 << 20]


def test_functional_collectives_out_variants_write_into_out():
    def program():
        dist.init_process_group("nccl")
        name = dist.group.WORLD.group_name
        x = torch.empty(1 << 18, device="cuda")
        out = torch.empty(1 << 19, device="cuda")
        got = torch.ops._c10d_functional.all_gather_into_tensor_out(x, 2, name, out=out)
        torch.ops._c10d_functional.wait_tensor(got)
        assert got is out

    t, events = events_of(program)
    assert [e["size"] for e in events if e["action"] == "alloc"] == [1 << 20, 1 << 21]


def test_a_rank_sees_its_own_gpu():
    def program():
        assert os.environ["RANK"] == "1" and os.environ["WORLD_SIZE"] == "2" and os.environ["LOCAL_RANK"] == "1"
        assert torch.cuda.device_count() == 2
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        assert torch.cuda.current_device() == 1
        dist.init_process_group("nccl", device_id=torch.device("cuda", 1))
        assert dist.get_rank() == 1 and dist.get_world_size() == 2
        x = torch.ones(4, device="cuda:1")
        assert x.device == torch.device("cuda", 1) and x.is_cuda
        with torch.cuda.device(1):
            pass

    names = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    before = {name: os.environ.get(name) for name in names}
    events_of(program, rank=1)
    assert {name: os.environ.get(name) for name in names} == before


@pytest.mark.parametrize(
    "program, needle",
    [
        (lambda: torch.ones(2, device="cuda:0"), "device cuda:0"),
        (lambda: torch.cuda.set_device(0), "device cuda:0"),
        (lambda: torch.cuda.device(0).__enter__(), "device cuda:0"),
        (lambda: dist.init_process_group("mpi"), "init_process_group('mpi')"),
        (lambda: torch.multiprocessing.spawn(print, nprocs=2), "torch.multiprocessing.spawn"),
        (lambda: dist.init_process_group("nccl", world_size=8, rank=1), "rank 1 of 2"),
        (lambda: (dist.init_process_group("nccl"), dist.send(torch.ones(2, device="cuda"), 0)), "send"),
        (lambda: (dist.init_process_group("nccl"), dist.recv(torch.empty(2, device="cuda"), 0)), "recv"),
        (
            # A collective whose sizes come from another collective's values, unknown to the trace
            # (a known value would be all-reduced as if every rank held it).
            lambda: (dist.init_process_group("nccl"), (lambda n: (dist.all_reduce(n), torch.empty(int(n.item()), device="cuda")))(torch.randint(1, 9, (1,), device="cuda"))),
            "the program decides on a value it read back",
        ),
        # Objects the root rank sends: a placeholder on a receiving rank cannot be filled.
        (lambda: (dist.init_process_group("nccl"), dist.broadcast_object_list([None], src=0)), "broadcast_object_list"),
        (lambda: (dist.init_process_group("nccl"), dist.scatter_object_list([None], None, src=0)), "scatter_object_list"),
    ],
)
def test_unfollowed_distributed_cases_stop_in_one_line(program, needle):
    with pytest.raises(UnfollowedError) as err:
        with vramlab.trace(world_size=2, rank=1):
            program()
    assert needle in str(err.value) and "\n" not in str(err.value)
    assert not dist.is_initialized()


def test_command_traces_a_torchrun_script_once_per_rank(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import os, torch, torch.distributed as dist\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "rank = int(os.environ['LOCAL_RANK'])\n"
        "torch.cuda.set_device(rank)\n"
        "dist.init_process_group('nccl')\n"
        "model = DDP(torch.nn.Linear(256, 256 + 64 * dist.get_rank()).cuda(), device_ids=[rank])\n"
        "model(torch.randn(8, 256, device='cuda')).sum().backward()\n"
        "dist.destroy_process_group()\n"
    )
    out = tmp_path / "out"
    env = dict(os.environ)
    done = subprocess.run([sys.executable, "-m", "vramlab.trace", "--gpu", "h100", "--nproc", "2", "--out", str(out), str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    peaks = []
    for rank in range(2):
        with open(out / f"rank{rank}.pickle", "rb") as f:
            peak, _ = blocks(pickle.load(f))
        peaks.append(peak)
        assert f"{peak / 2**20:,.1f} MiB" in done.stderr
    assert peaks[1] > peaks[0]


def uneven(rank_bytes):
    """Snapshots of two ranks, rank r holding rank_bytes[r] at its peak."""
    snapshots = []
    for rank, size in enumerate(rank_bytes):
        with vramlab.trace(world_size=len(rank_bytes), rank=rank) as t:
            x = torch.empty(size // 4, device=f"cuda:{rank}")
            del x
        snapshots.append(t.snapshot())
    return snapshots


def test_the_setting_that_fits_every_rank_and_the_rank_that_binds():
    from vramlab._tracer.sweep import ranked_ranks, ranks_answer

    snapshots = uneven([100 << 20, 300 << 20])
    point = ranked_ranks(snapshots, 1 << 30)
    assert point["fits"] and point["binding_rank"] == 1 and point["rank_needs"][1] > point["rank_needs"][0]
    assert "rank 1 needs the most" in ranks_answer(point, 1 << 30)
    # Under a cap between the two ranks' needs, rank 0 fits alone and the job does not.
    cap = 200 << 20
    point = ranked_ranks(snapshots, cap)
    assert not point["fits"] and "nothing fits every rank" in ranks_answer(point, cap)


def test_command_answers_per_rank_and_sweeps_on_n_gpus(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import os, torch, torch.distributed as dist\n"
        "torch.cuda.set_device(int(os.environ['LOCAL_RANK']))\n"
        "dist.init_process_group('nccl')\n"
        "mib = int(os.environ.get('MIB', '64')) * (1 + dist.get_rank())\n"
        "x = torch.empty(mib << 18, device='cuda')\n"
    )
    run = lambda *args: subprocess.run([sys.executable, "-m", "vramlab.trace", "--nproc", "2", *args, str(script)], capture_output=True, text=True, timeout=600)
    done = run("--capacity", "1 GiB", "--out", str(tmp_path / "ranks"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("every rank fits under 1,024 MiB") and "rank 1 needs the most" in done.stdout
    done = run("--sweep", "MIB=400,800", "--capacity", "1 GiB", "--out", str(tmp_path / "sweep"))
    assert done.returncode == 0, done.stderr[-3000:]
    # Rank 1 holds twice MIB: 800 MiB fits there at MIB=400, 1,600 MiB does not at MIB=800.
    assert "MIB=400" in done.stdout and "MIB=800 does not fit" in done.stdout and "on every rank (rank 1 needs the most)" in done.stdout
    assert (tmp_path / "sweep" / "MIB=400" / "rank1.pickle").is_file()


def test_ranks_that_diverge_do_not_hang(tmp_path):
    script = tmp_path / "diverge.py"
    script.write_text(
        "import os, torch, torch.distributed as dist\n"
        "dist.init_process_group('nccl')\n"
        "if dist.get_rank() == 0:\n"
        "    dist.barrier()\n"
        "    dist.barrier()\n"
        "dist.all_reduce(torch.ones(4, device='cuda'))\n"
    )
    env = dict(os.environ)
    done = subprocess.run([sys.executable, "-m", "vramlab.trace", "--nproc", "2", "--out", str(tmp_path / "o"), str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


# Both groups of four-H100 recordings: (folder, setting) per workload, each rank's figures.
RECORDED = sorted(
    {
        (p.parent, p.stem.split("-", 1)[1])
        for folder in ("distributed-x4", "distributed-x4b", "distributed-x4c", "distributed-x4d")
        for p in (RECORDINGS.parent / folder).glob("*/rank*-*.json")
        if p.parent.name in IN_THIS_RUN
    }
)
SETTINGS = {"default": "", "expandable": "expandable_segments:True"}
# Where the driver placed the ranks' segments around NCCL's own cudaMalloc'd buffers, which a fresh
# process's placement (alloc/src/placement.rs) does not have: the trace asks for the GPU's blocks in
# the GPU's order, so the largest rank's recording without its addresses replays to the trace's
# peak reserved (COMPARE.md).
PLACED_AROUND_NCCL = {("tp_colwise_rowwise", "default"), ("ddp_find_unused", "default")}
# Runs in which no rank kept DDP's replaced buckets to the end, which the trace does (the largest
# rank kept them in the other runs: distributed.py, rebuild_buckets).
NO_RANK_KEPT_THE_OLD_BUCKETS = {("ddp_bf16_autocast", "expandable"), ("ddp_hf_gpt2", "default"), ("ddp_fp16_scaler", "expandable")}
# Timing the trace cannot know (distributed-x4d/COMPARE.md): FSDP1's record_stream frees complete
# when the GPU's work passes them, which moved each rank's peak reserved by up to 5.4% around the
# trace's (allocated exact on every rank); the bf16 compress hook's rank 1 reserved 3.7% more than
# the trace in one run; ZeRO's ranks own different parameters, and the trace keeps DDP's replaced
# buckets on every rank, where in this run only rank 1 (not the one with the largest partition)
# did: +0.9% allocated on the largest.
TIMING = {
    ("fsdp1_full_shard", "expandable"): "FSDP1's record_stream frees, -4.8% reserved",
    ("fsdp1_mixed_gpt2", "default"): "FSDP1's record_stream frees, -2.5% reserved",
    ("ddp_bf16_compress_hook", "default"): "the compress hook's rank 1, -3.7% reserved",
    ("zero_ddp", "default"): "DDP's replaced buckets kept on the rank with ZeRO's largest partition, +0.9% allocated",
    ("zero_ddp", "expandable"): "DDP's replaced buckets kept on the rank with ZeRO's largest partition, +0.8% allocated",
}


def without_placement(snapshot):
    traces = [[e for e in trace if not e["action"].startswith("segment")] for trace in snapshot["device_traces"]]
    return {**snapshot, "segments": [], "device_traces": traces}

# Where a later release's FSDP2 asks for memory in another order than 2.11's, whose run the
# recordings are of; the trace follows the installed release's Python.
LATER_RELEASE = {
    ("fsdp2_llama_accumulate", "default"): (
        (2, 15),
        "torch 2.15's FSDPParamGroup.post_backward without reduce_grads (gradient accumulation) casts the gradients to the "
        "reduce dtype before resharding (fsdp/_fully_shard/_fsdp_param_group.py, lines 714-716: _set_unsharded_grad_dtypes, "
        "then reshard), where 2.11 resharded first (lines 507-510), so each float32 cast is made while the unsharded bf16 "
        "parameters are still held: +64 MiB reserved (+6.0%) against 2.11's recording, allocated within 0.1%",
    ),
}


@pytest.mark.parametrize("folder, setting", RECORDED, ids=[f"{f.name}-{s}" for f, s in RECORDED])
def test_the_largest_rank_against_its_four_gpu_recording(folder, setting):
    """Each rank is traced and replayed under the recording's setting; the ranks are compared as
    a set, the largest against the largest (which rank holds a little more can change from run to
    run on the GPU, and the largest decides whether the job fits)."""
    metas = [json.loads(p.read_text()) for p in sorted(folder.glob(f"rank*-{setting}.json"))]
    name, world_size = metas[0]["workload"], metas[0]["world_size"]
    if (name, setting) in NO_RANK_KEPT_THE_OLD_BUCKETS:
        pytest.xfail("no rank of this run kept DDP's replaced buckets, which the trace keeps (+8.6% to +14%)")
    if (name, setting) in TIMING:
        pytest.xfail(TIMING[(name, setting)])
    if (name, setting) in LATER_RELEASE:
        since, why = LATER_RELEASE[(name, setting)]
        if release(torch) >= since:
            pytest.xfail(why)
    ours = []
    # The first and the last rank, as above.
    for rank in sorted({0, world_size - 1}):
        snapshot = traced_once(name, world_size, rank).snapshot()
        ours.append(vramlab.replay(snapshot, alloc_conf=SETTINGS[setting])["results"][0]["pytorch_stats"])
    allocated = max(m["memory_stats"]["allocated_bytes.all.peak"] for m in metas)
    reserved = max(m["memory_stats"]["reserved_bytes.all.peak"] for m in metas)
    traced_allocated = max(o["allocated_bytes.all.peak"] for o in ours)
    traced_reserved = max(o["reserved_bytes.all.peak"] for o in ours)
    assert abs(traced_allocated - allocated) <= 0.005 * allocated, f"{name} {setting}: {traced_allocated} against {allocated}"
    if (name, setting) in PLACED_AROUND_NCCL:
        import gzip

        recordings = [pickle.load(gzip.open(p)) for p in sorted(folder.glob(f"rank*-{setting}.pickle.gz"))]
        reserved = max(vramlab.replay(without_placement(r), alloc_conf=SETTINGS[setting])["results"][0]["pytorch_stats"]["reserved_bytes.all.peak"] for r in recordings)
    assert abs(traced_reserved - reserved) <= 0.02 * reserved, f"{name} {setting}: {traced_reserved} against {reserved}"


def test_an_all_reduce_of_known_values_is_known_as_if_every_rank_held_them():
    """DDP(find_unused_parameters=True) all-reduces its map of used parameters and reads it back:
    values the trace knew are reduced as if every rank held this rank's (a sum is world_size
    times them); values it did not know stay unknown."""
    def program():
        dist.init_process_group("nccl")
        counts = torch.tensor([1, 0, 2], device="cuda")
        dist.all_reduce(counts)
        assert counts.tolist() == [4, 0, 8]
        largest = torch.tensor([3, 1], device="cuda")
        dist.all_reduce(largest, op=dist.ReduceOp.MAX)
        assert largest.tolist() == [3, 1]
        product = torch.tensor([2], device="cuda")
        dist.all_reduce(product, op=dist.ReduceOp.PRODUCT)
        with pytest.raises(UnfollowedError):
            # Decided on: a list only printed would be placeholders (printed.py).
            if product.tolist()[0] > 0:
                pass

    t, _ = events_of(program, world_size=4, rank=1)
    assert any("as if every rank held" in note for note in t.snapshot()["vramlab_notes"])


def test_a_dtensor_holds_its_local_shard_not_the_global_tensor():
    """An operator on a DTensor runs on the rank's local shard; the wrapper's global shape is
    not memory (and a full_tensor() all-gathers the global size)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard

    def program():
        dist.init_process_group("nccl")
        mesh = init_device_mesh("cuda", (4,))
        x = DTensor.from_local(torch.empty(1024, 1024, device="cuda"), mesh, [Shard(0)])
        y = x * 2
        assert y.shape == (4096, 1024) and y.to_local().shape == (1024, 1024)
        return y.full_tensor()

    t, events = events_of(program, world_size=4, rank=0)
    sizes = [e["size"] for e in events if e["action"] == "alloc"]
    local, full = 1024 * 1024 * 4, 4096 * 1024 * 4
    assert sizes[:2] == [local, local], sizes
    assert full in sizes[2:] and t.peak_allocated < 2 * local + 2 * full


def test_sync_batch_norm_allocates_what_normalization_cu_does():
    """SyncBatchNorm's operators have no meta kernels: the trace's give Normalization.cu's outputs
    (statistics in the accumulation type, the gathered ones, the normalized output; in backward
    the two sums, the weight's and bias's gradients, the input's), and the mask of ranks with a
    non-empty input is answered as every rank's, which the snapshot says."""
    channels, shape = 64, (8, 64, 16, 16)

    def program():
        dist.init_process_group("nccl")
        bn = torch.nn.SyncBatchNorm(channels).cuda()
        x = torch.randn(*shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = bn(x)
        assert y.dtype == torch.bfloat16 and y.shape == shape
        y.sum().backward()
        assert x.grad.shape == shape and bn.weight.grad.shape == (channels,)

    t, events = events_of(program, world_size=2, rank=1)
    sizes = [e["size"] for e in events if e["action"] == "alloc"]
    activation, stat = 8 * 64 * 16 * 16 * 2, channels * 4
    start = sizes.index(activation)
    output = sizes.index(activation, start + 1)
    forward = sizes[start + 1:output + 1]
    # batch_norm_stats' mean and invstd (float32 for a bf16 input), the count, their cat, the
    # gathered [2, 2C + 1] ...
    assert forward[:5] == [stat, stat, 4, 2 * channels * 4 + 4, 2 * (2 * channels * 4 + 4)], forward
    # ... then the global mean and invstd, the counts kept for backward (int32), the output.
    assert forward[-4:] == [stat, stat, 2 * 4, activation], forward
    # backward_reduce's sum_dy and sum_dy_xmu, the weight's and bias's gradients, their cat for
    # the all-reduce, then the input's gradient.
    after = sizes[output + 1:]
    reduce_at = after.index(stat)
    assert after[reduce_at:reduce_at + 6] == [stat] * 4 + [2 * stat, activation], after
    assert any("SyncBatchNorm" in n for n in t.snapshot()["vramlab_notes"])


def test_init_device_mesh_starts_the_trace_s_group_itself():
    """init_device_mesh without init_process_group starts the default group itself, through
    device_mesh's own reference: the trace's stand-in group, not ProcessGroupNCCL."""
    from torch.distributed.device_mesh import init_device_mesh

    def program():
        mesh = init_device_mesh("cuda", (2,))
        assert dist.is_initialized() and mesh.size() == 2 and dist.get_rank() == 1
        x = torch.empty(1024, device="cuda")
        dist.all_reduce(x)

    t, events = events_of(program, world_size=2, rank=1)
    assert [e["size"] for e in events if e["action"] == "alloc"] == [4096]


def test_a_model_built_on_meta_and_sharded_takes_only_its_shards():
    """torchtitan's way: a model built on the meta device, sharded with fully_shard, then
    to_empty(device="cuda") and initialised by DTensor's random operators. The meta model is not
    GPU memory; each rank holds its shards; DTensor's RNG tracker, which broadcasts rank 0's
    generator state and reads it back, is followed on a rank other than 0."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    def program():
        mesh = init_device_mesh("cuda", (2,))
        with torch.device("meta"):
            model = torch.nn.Sequential(torch.nn.Linear(1024, 1024, bias=False), torch.nn.Linear(1024, 1024, bias=False))
        for layer in model:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        model.to_empty(device="cuda")
        for p in model.parameters():
            torch.nn.init.normal_(p, std=0.02)
        assert all(p.to_local().shape == (512, 1024) for p in model.parameters())

    t, events = events_of(program, world_size=2, rank=1)
    shard = 512 * 1024 * 4
    sizes = [e["size"] for e in events if e["action"] == "alloc"]
    assert 1024 * 1024 * 4 not in sizes, sizes
    assert sizes.count(shard) == 2, sizes
    assert any("random generators' states broadcast" in n for n in t.snapshot()["vramlab_notes"])


def test_a_full_state_dict_to_the_host_is_made_without_values():
    """get_model_state_dict(full_state_dict=True, cpu_offload=True), as a checkpoint is saved:
    every parameter gathered whole and copied to the host (rank 0 keeps them), copies nothing on
    the GPU depends on, made without values instead of stopping the trace."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    from torch.distributed.fsdp import fully_shard

    def program():
        dist.init_process_group("nccl")
        model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.Linear(256, 8)).cuda()
        fully_shard(model)
        state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        assert state["0.weight"].device.type == "cpu" and state["0.weight"].shape == (256, 256)

    t, events = events_of(program, world_size=2, rank=0)
    # Each parameter gathered whole on the GPU (the all-gather's output) on its way to the host.
    assert 256 * 256 * 4 in [e["size"] for e in events if e["action"] == "alloc"]


def test_accelerate_s_sampler_state_sync_is_followed_on_every_rank():
    """accelerate's prepared DataLoader broadcasts rank 0's generator state at each epoch and
    reads it back on the host (synchronize_rng_state): on a rank other than 0 the trace keeps the
    rank's own state (a trace draws no numbers) instead of stopping."""
    accelerate = pytest.importorskip("accelerate", reason="accelerate is not installed")
    from torch.utils.data import DataLoader, TensorDataset

    def program():
        accelerator = accelerate.Accelerator()
        model = accelerator.prepare(torch.nn.Linear(64, 8))
        loader = accelerator.prepare(DataLoader(TensorDataset(torch.randn(32, 64)), batch_size=4, shuffle=True))
        for (x,) in loader:
            model(x).sum().backward()
            break

    # accelerate keeps its state in process-wide singletons: another test's (not distributed)
    # would be this one's.
    from accelerate.state import AcceleratorState, GradientState, PartialState

    def reset():
        AcceleratorState._reset_state(True)
        PartialState._reset_state()
        GradientState._reset_state()

    reset()
    try:
        t, events = events_of(program, world_size=2, rank=1)
    finally:
        reset()
    assert any("random generators' states broadcast" in n for n in t.snapshot()["vramlab_notes"])
    assert any(e["action"] == "alloc" and e["size"] == 4 * 64 * 4 for e in events)


# Issue 36's fifth and sixth groups (scripts/workloads_36e and _36f, recorded on two H200s):
# torchrun scripts traced by the command line, as their users would, each rank against its
# recording (a script that failed on the GPU has none).
GROUPS_2GPU = {
    "36e": (ROOT / "scripts" / "workloads_36e", ROOT / "reports" / "reference" / "h200x2" / "distributed-x2e"),
    "36f": (ROOT / "scripts" / "workloads_36f", ROOT / "reports" / "reference" / "h200x2" / "distributed-x2f"),
}
SCRIPT_NEEDS = {
    "ddp_resnet_syncbn": ("torchvision",),
    "ddp_syncbn_channels_last_fp16": ("torchvision",),
    "ddp_vit_timm_ema": ("timm",),
    "ddp_bert_fp16_scaler": ("transformers",),
    "fsdp2_eval_full_state_dict": ("transformers",),
    "fsdp2_offload_bf16_llama": ("transformers",),
    "accelerate_ddp_bf16": ("transformers", "accelerate"),
    "accelerate_accumulate_bert": ("transformers", "accelerate"),
    "trainer_ddp_bert_mlm": ("transformers", "accelerate"),
    "trainer_ddp_gpt2_eval_fp16": ("transformers", "accelerate"),
}
# Runs whose ranks all freed DDP's replaced buckets before their peaks (the ViT's rank 1 from
# NCCL's watchdog thread before its reserved peak), where the trace keeps them (distributed.py:
# rebuild_buckets; the groups' COMPARE.md).
BUCKETS_FREED_2GPU = {
    ("accelerate_ddp_bf16", "default"), ("accelerate_ddp_bf16", "expandable"),
    ("ddp_bert_fp16_scaler", "default"), ("ddp_bert_fp16_scaler", "expandable"),
    ("ddp_vit_timm_ema", "default"), ("accelerate_accumulate_bert", "expandable"),
}
# CI's time: under torch 2.11 one script (SyncBatchNorm in channels-last fp16 under DDP); under
# torch 2.15 the one .ci/run names instead (FSDP2 with prefetching, in bf16); accelerate's
# generator sync and DTensor's operators have tests of their own. The others (RMSNorm,
# checkpointing and a full state dict on a model built on meta; sequence parallelism; Trainer's
# reads under DDP; 35-50 s of CI's CPU each, on the 2.11 run, CI's critical path) are left to
# scripts/full_trace_checks.sh, whose last result is in python/tests/FULL_CHECKS.md.
# VRAMLAB_ALL_SCRIPTS=1 takes every recorded script.
SCRIPTS_IN_CI = {"ddp_syncbn_channels_last_fp16"} if release(torch) < (2, 15) else {"fsdp2_prefetch_bf16"}
CASES_2GPU = [
    (group, folder.name, setting)
    for group, (_, recordings) in GROUPS_2GPU.items()
    for folder in sorted(recordings.glob("*"))
    for setting in SETTINGS
    if (folder / f"rank0-{setting}.json").is_file() and (folder.name in SCRIPTS_IN_CI or os.environ.get("VRAMLAB_ALL_SCRIPTS"))
]
SNAPSHOTS_2GPU: dict = {}


@pytest.mark.parametrize("group, name, setting", CASES_2GPU, ids=[f"{n}-{s}" for _, n, s in CASES_2GPU])
def test_a_torchrun_script_against_its_two_gpu_recording(group, name, setting, tmp_path):
    """Each rank traced by `python -m vramlab.trace --gpu h200 --nproc 2`, replayed under the
    recorded setting; the ranks compared as a set, the largest against the largest, within the
    tracer's limits (0.5% allocated, 2% reserved)."""
    scripts, recordings = GROUPS_2GPU[group]
    for module in SCRIPT_NEEDS.get(name, ()):
        pytest.importorskip(module)
    if (name, setting) in BUCKETS_FREED_2GPU:
        pytest.xfail("every rank of this run freed DDP's replaced buckets before its peak, which the trace keeps")
    if name not in SNAPSHOTS_2GPU:
        out = tmp_path / name
        run = subprocess.run(
            [sys.executable, "-m", "vramlab.trace", "--gpu", "h200", "--nproc", "2", "--out", str(out), str(scripts / f"{name}.py")],
            capture_output=True, text=True, timeout=600, cwd=tmp_path,
        )
        assert run.returncode == 0, run.stderr[-2000:]
        SNAPSHOTS_2GPU[name] = [pickle.loads((out / f"rank{r}.pickle").read_bytes()) for r in range(2)]
    metas = [json.loads((recordings / name / f"rank{r}-{setting}.json").read_text()) for r in range(2)]
    ours = [vramlab.replay(s, alloc_conf=SETTINGS[setting])["results"][0]["pytorch_stats"] for s in SNAPSHOTS_2GPU[name]]
    for key, limit in (("allocated_bytes.all.peak", 0.005), ("reserved_bytes.all.peak", 0.02)):
        gpu = max(m["memory_stats"][key] for m in metas)
        traced_peak = max(o[key] for o in ours)
        assert abs(traced_peak - gpu) <= limit * gpu, f"{name} {setting} {key}: {traced_peak} against {gpu}"


def test_object_collectives_keep_what_this_rank_has():
    """all_gather_object gives every slot this rank's object (each rank is traced alone); the root
    of broadcast_object_list keeps its objects, and a receiving rank whose placeholders are objects
    keeps them, as if the root's were the same, which the snapshot says."""

    def program():
        dist.init_process_group("nccl")
        gathered = [None, None]
        dist.all_gather_object(gathered, {"rank": dist.get_rank()})
        assert gathered == [{"rank": 1}, {"rank": 1}]
        settings = [{"lr": 0.1}]
        dist.broadcast_object_list(settings, src=0)
        assert settings == [{"lr": 0.1}]

    t, _ = events_of(program, world_size=2, rank=1)
    assert any("broadcast_object_list on a receiving rank" in n for n in t.snapshot()["vramlab_notes"])


def test_the_peak_if_ddp_frees_its_replaced_buckets_is_said_beside_the_envelope():
    """The trace keeps the buckets DDP's rebuild replaces (the upper envelope); where a run frees
    them at the rebuild, the peak is lower by up to what they hold: the summary gives that figure
    too, computed from where they died."""

    def program():
        dist.init_process_group("nccl")
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(1024, 1024).cuda())
        for _ in range(2):
            model(torch.randn(64, 1024, device="cuda")).sum().backward()

    t, _ = events_of(program, world_size=2, rank=0)
    released = t.record.peak_releasing_held()
    buckets = 1024 * 1024 * 4 + 1024 * 4
    assert t.peak_allocated - buckets <= released < t.peak_allocated
    assert "if DDP's replaced buckets are freed at the rebuild" in t.summary()
