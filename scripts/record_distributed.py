"""Records issue 36's distributed workloads (scripts/trace_workloads_36.py) on a multi-GPU host, per
rank: each rank's PyTorch memory snapshot (allocator history on from before the process group
starts), its memory_stats(), and the driver's view (torch.cuda.mem_get_info) after the CUDA
context alone and at the end, whose used memory minus PyTorch's reserved is the memory outside
the caching allocator (CUDA context, NCCL's communicators and buffers, cuBLAS's own).

    python scripts/record_distributed.py OUT [--nproc N] [--only NAME,...] [--budget SECONDS] [--workloads MODULE | --scripts DIR]

launches, for each workload and each allocator setting (default, expandable_segments:True), one
`python -m torch.distributed.run --nproc_per_node N` of this file, which writes
OUT/<workload>/rank{r}-{setting}.pickle.gz and .json, and prints one line per launch. A launch that
fails or passes its time limit is said and the next one runs; launches stop when --budget seconds
have passed, so that the caller's time limit is kept. With --scripts, each workload is a torchrun
script of that folder, run unchanged; its rank is recorded where it destroys its process group, or
at its end. NVLink multicast (NVLS) and symmetric
memory's multicast stay off (the machines require it)."""

import argparse
import gzip
import importlib
import json
import os
import pickle
import runpy
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SETTINGS = {"default": "", "expandable": "expandable_segments:True"}
QUIET_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}


def used(torch, device):
    free, total = torch.cuda.mem_get_info(device)
    return total - free, total


def worker(name, out_dir):
    """One rank, under torchrun."""
    import torch
    import torch.distributed as dist

    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    torch.cuda.init()
    after_context, total = used(torch, local)
    torch.cuda.memory._record_memory_history(max_entries=2_000_000, context="all", stacks="python")
    started = time.time()
    scripts = os.environ.get("VRAMLAB_SCRIPTS")
    if scripts:
        # A torchrun script as its user runs it. Its own destroy_process_group is where it ends:
        # the recording is taken just before, while NCCL's memory is still held.
        recorded = []
        destroy = dist.destroy_process_group

        def record_then_destroy(*args, **kwargs):
            if not recorded:
                recorded.append(record(torch, name, out_dir, rank, world_size, local, total, after_context, started))
            return destroy(*args, **kwargs)

        dist.destroy_process_group = record_then_destroy
        sys.argv = [os.path.join(scripts, name + ".py")]
        runpy.run_path(sys.argv[0], run_name="__main__")
        if not recorded:
            record(torch, name, out_dir, rank, world_size, local, total, after_context, started)
            if dist.is_initialized():
                destroy()
        return
    sys.path.insert(0, HERE)
    ALL = importlib.import_module(os.environ.get("VRAMLAB_WORKLOADS", "trace_workloads_36")).ALL
    ALL[name](rank, world_size)
    record(torch, name, out_dir, rank, world_size, local, total, after_context, started)
    dist.barrier()
    dist.destroy_process_group()


def record(torch, name, out_dir, rank, world_size, local, total, after_context, started):
    """Writes this rank's snapshot, memory_stats and the driver's used memory."""
    torch.cuda.synchronize()
    seconds = time.time() - started
    snapshot = torch.cuda.memory._snapshot()
    stats = torch.cuda.memory_stats(local)
    at_end, _ = used(torch, local)
    reserved = torch.cuda.memory_reserved(local)
    setting = os.environ.get("PYTORCH_ALLOC_CONF", "")
    label = "expandable" if setting else "default"
    folder = os.path.join(out_dir, name)
    os.makedirs(folder, exist_ok=True)
    stem = os.path.join(folder, f"rank{rank}-{label}")
    with gzip.open(stem + ".pickle.gz", "wb") as f:
        pickle.dump(snapshot, f, protocol=4)
    props = torch.cuda.get_device_properties(local)
    nccl = torch.cuda.nccl.version() if hasattr(torch.cuda, "nccl") else None
    meta = {
        "workload": name,
        "rank": rank,
        "world_size": world_size,
        "local_rank": local,
        "alloc_conf": setting,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": ".".join(str(x) for x in nccl) if isinstance(nccl, tuple) else nccl,
        "device": props.name,
        "compute_capability": f"{props.major}.{props.minor}",
        "total_memory": props.total_memory,
        "seconds": seconds,
        "memory_stats": {k: v for k, v in stats.items() if isinstance(v, (int, float))},
        "meminfo": {
            "total": total,
            "used_after_context": after_context,
            "used_at_end": at_end,
            "reserved_at_end": reserved,
            "outside_allocator_at_end": at_end - reserved,
        },
        "env": {k: os.environ.get(k) for k in list(QUIET_ENV) + ["NCCL_CUMEM_ENABLE", "NCCL_BUFFSIZE", "CUDA_MODULE_LOADING"]},
    }
    with open(stem + ".json", "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    return stem


def launcher(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--nproc", type=int, default=0, help="ranks (default: every GPU)")
    parser.add_argument("--only", default="", help="comma-separated workload names")
    parser.add_argument("--budget", type=float, default=450.0, help="seconds after which no launch starts")
    parser.add_argument("--limit", type=float, default=150.0, help="seconds one launch may take")
    parser.add_argument("--workloads", default="trace_workloads_36", help="the module of scripts/ holding ALL and WORLD_SIZES")
    parser.add_argument("--scripts", default="", help="a folder of torchrun scripts, each a workload named by its file (instead of --workloads)")
    options = parser.parse_args(argv)
    scripts = os.path.abspath(options.scripts) if options.scripts else ""
    if scripts:
        ALL = {p[:-3]: None for p in sorted(os.listdir(scripts)) if p.endswith(".py")}
        WORLD_SIZES = {name: (2, 4) for name in ALL}
    else:
        sys.path.insert(0, HERE)
        module = importlib.import_module(options.workloads)
        ALL, WORLD_SIZES = module.ALL, module.WORLD_SIZES

    nproc = options.nproc
    if not nproc:
        import torch

        nproc = torch.cuda.device_count()
    os.makedirs(options.out, exist_ok=True)
    names = [n for n in (options.only.split(",") if options.only else ALL) if n]
    began = time.time()
    log = []
    for name in names:
        if nproc not in WORLD_SIZES[name]:
            line = f"{name} ws={nproc}: skipped (for {WORLD_SIZES[name]} ranks)"
            print(line, flush=True)
            log.append(line)
            continue
        for label, setting in SETTINGS.items():
            if time.time() - began > options.budget:
                line = f"{name} {label}: not run (budget of {options.budget:.0f} s spent)"
                print(line, flush=True)
                log.append(line)
                continue
            env = dict(os.environ, PYTORCH_ALLOC_CONF=setting, VRAMLAB_WORKLOADS=options.workloads, VRAMLAB_SCRIPTS=scripts, **QUIET_ENV)
            env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
            command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", os.path.abspath(__file__), "--worker", name, options.out]
            t0 = time.time()
            # A session of its own, so that a launch past its limit is ended with all its ranks.
            child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
            try:
                _, err = child.communicate(timeout=options.limit)
                ok, tail = child.returncode == 0, (err or "")[-1500:]
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                _, err = child.communicate()
                ok, tail = False, f"timed out after {options.limit:.0f} s\n" + (err or "")[-1500:]
            if not ok:
                # The whole of a failed launch's output, every rank's exception with it (the log
                # keeps only its tail, which is the launcher's own).
                os.makedirs(os.path.join(options.out, name), exist_ok=True)
                with open(os.path.join(options.out, name, f"stderr-{label}.txt"), "w") as f:
                    f.write((err or "")[-200_000:])
            line = f"{name} ws={nproc} {label}: {'ok' if ok else 'FAILED'} in {time.time() - t0:.0f} s"
            print(line if ok else line + "\n" + tail, flush=True)
            log.append(line if ok else line + "\n" + tail)
    with open(os.path.join(options.out, "log.txt"), "w") as f:
        f.write("\n".join(log) + "\n")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        launcher(sys.argv[1:])
