"""Records a job that recovers from out-of-memory errors, as training scripts do (issue 37): under
set_per_process_memory_fraction, it catches torch.OutOfMemoryError, empties the cache and retries
at half the batch until two steps fit. Saves the snapshot (.pickle.gz) and memory_stats() with the
cap and the device. Run on a GPU machine, once per setting:
    PYTORCH_ALLOC_CONF=... python scripts/record_oom_recovery.py OUT_DIR"""

import gzip
import json
import os
import pickle
import sys

import torch
import torch.nn as nn

FRACTION = 0.05


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    torch.cuda.init()
    torch.cuda.set_per_process_memory_fraction(FRACTION)
    torch.cuda.memory._record_memory_history(max_entries=1_000_000)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4096, 8192), nn.ReLU(), nn.Linear(8192, 4096)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch, attempts = 65536, []
    while batch >= 64:
        try:
            for _ in range(2):
                x = torch.randn(batch, 4096, device="cuda")
                model(x).square().mean().backward()
                del x
                opt.step()
                opt.zero_grad(set_to_none=True)
            attempts.append({"batch": batch, "fitted": True})
            break
        except torch.OutOfMemoryError as e:
            attempts.append({"batch": batch, "fitted": False, "error": str(e).splitlines()[0][:200]})
            opt.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
            batch //= 2
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    props = torch.cuda.get_device_properties(0)
    setting = os.environ.get("PYTORCH_ALLOC_CONF", "")
    stem = os.path.join(out_dir, f"oom_recovery-{'expandable' if setting else 'default'}")
    with gzip.open(stem + ".pickle.gz", "wb") as f:
        pickle.dump(snapshot, f, protocol=4)
    meta = {
        "job": "oom_recovery",
        "alloc_conf": setting,
        "fraction": FRACTION,
        "cap_bytes": int(FRACTION * props.total_memory),
        "attempts": attempts,
        "torch": torch.__version__,
        "device": props.name,
        "total_memory": props.total_memory,
        "memory_stats": {k: v for k, v in torch.cuda.memory_stats().items() if isinstance(v, (int, float))},
    }
    with open(stem + ".json", "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
