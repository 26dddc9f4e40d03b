"""Records the tracer's workloads (scripts/trace_workloads.py) on a GPU: for each workload and
setting, a fresh process runs it with PyTorch's allocator history on, and saves the snapshot
(.pickle.gz) and torch.cuda.memory_stats() (JSON) with the device's metadata. Run on a GPU
machine: python scripts/record_trace_workloads.py OUT_DIR."""

import gzip
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time

SETTINGS = {"default": "", "expandable": "expandable_segments:True"}


def record_one(name, out_dir):
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from trace_workloads import ALL
    torch.cuda.init()
    torch.cuda.memory._record_memory_history(max_entries=1_000_000)
    ALL[name]("cuda")
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    stats = torch.cuda.memory_stats()
    props = torch.cuda.get_device_properties(0)
    setting = os.environ.get("PYTORCH_ALLOC_CONF", "")
    stem = os.path.join(out_dir, f"{name}-{'expandable' if setting else 'default'}")
    with gzip.open(stem + ".pickle.gz", "wb") as f:
        pickle.dump(snapshot, f, protocol=4)
    meta = {
        "workload": name,
        "alloc_conf": setting,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "device": props.name,
        "compute_capability": f"{props.major}.{props.minor}",
        "total_memory": props.total_memory,
        "memory_stats": {k: v for k, v in stats.items() if isinstance(v, (int, float))},
    }
    with open(stem + ".json", "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    if len(sys.argv) > 2:
        record_one(sys.argv[2], out_dir)
        return
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from trace_workloads import GROUPS

    # VRAMLAB_HOLDOUT=1: the held-out workloads; =autocast: the mixed-precision ones; =sdpa: those
    # using PyTorch's fused attention; =sdpa_fp32: fused attention in float32; =scaler: float16
    # autocast with GradScaler; =conv: torchvision models for cuDNN convolution workspaces; =hf_masks: Hugging Face models with attention masks; =unseen: programs from the
    # sweep of unseen programs (issue 25); =cells: loops over recurrent cells; =fastpath_general:
    # attention's general and cuDNN fast-path branches, linear on transposed inputs, a resumed run.
    group = os.environ.get("VRAMLAB_HOLDOUT", "")
    names = list(GROUPS.get(group, GROUPS["holdout"]))
    # VRAMLAB_GPUS=N: the workloads spread over N GPUs of the host, one process per GPU at a time
    # (each recording is its own fresh process on its own device, as with one GPU).
    gpus = int(os.environ.get("VRAMLAB_GPUS", "1"))
    runs = [(name, label, setting) for name in names for label, setting in SETTINGS.items()]
    running = {}
    while runs or running:
        for gpu in range(gpus):
            if gpu not in running and runs:
                name, label, setting = runs.pop(0)
                env = dict(os.environ, PYTORCH_ALLOC_CONF=setting)
                if gpus > 1:
                    env["CUDA_VISIBLE_DEVICES"] = str(gpu)
                # A file, not a pipe: a chatty child must not block on a full pipe.
                err = tempfile.TemporaryFile("w+")
                child = subprocess.Popen([sys.executable, __file__, out_dir, name], env=env, stdout=subprocess.DEVNULL, stderr=err, text=True)
                running[gpu] = (name, label, child, err)
        for gpu, (name, label, child, err) in list(running.items()):
            if child.poll() is not None:
                err.seek(0)
                print(name, label, "ok" if child.returncode == 0 else "FAILED\n" + err.read()[-2000:], flush=True)
                del running[gpu]
        time.sleep(0.2)


if __name__ == "__main__":
    main()
