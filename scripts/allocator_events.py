"""What the caching allocator saw while a function ran on the GPU, for the measurement scripts
(scripts/measure_*.py): every allocation and completed free, in order."""

import torch


def events_during(fn, max_entries=10_000):
    """Runs fn with the allocator's history on; returns what fn returned and the allocations and
    completed frees, in order, as [action ("a" or "f"), bytes asked for, address]."""
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=max_entries, stacks="python")
    kept = fn()
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    return kept, [[e["action"][0], e["size"], e["addr"]] for e in snap["device_traces"][0] if e["action"] in ("alloc", "free_completed")]
