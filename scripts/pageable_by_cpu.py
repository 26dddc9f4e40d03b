"""Pageable copies, with the copying thread pinned to each CPU in turn (issue 13: pageable
copies of one machine differ between processes by more than within one).

A pageable copy is staged by the calling thread, so if the CPU it runs on (or where its memory
sits) matters, the bandwidth will differ by CPU within this one process. PyTorch times it: a
64 MiB copy between a pageable host slot and the device, rotating through 1 GiB of slots so no
copy reads what the last one left in a cache; median of 7 after one warm-up.
Usage: python3 pageable_by_cpu.py LABEL >> out.jsonl
"""
import json
import os
import sys
import time

import torch

SLOT = 64 << 20
SLOTS = 16
label = sys.argv[1] if len(sys.argv) > 1 else "run"
torch.set_num_threads(1)
host = torch.empty(SLOT * SLOTS, dtype=torch.uint8)
host.fill_(7)
device = torch.empty(SLOT * SLOTS, dtype=torch.uint8, device="cuda")
turn = [0]


def copy_seconds(direction):
    times = []
    for repeat in range(8):
        slot = turn[0] % SLOTS
        turn[0] += 1
        h, d = host[slot * SLOT:(slot + 1) * SLOT], device[slot * SLOT:(slot + 1) * SLOT]
        torch.cuda.synchronize()
        start = time.perf_counter()
        if direction == "h2d":
            d.copy_(h)
        else:
            h.copy_(d)
        torch.cuda.synchronize()
        if repeat:
            times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]


def host_copy_seconds():
    times = []
    for repeat in range(8):
        a, b = turn[0] % SLOTS, (turn[0] + 7) % SLOTS
        turn[0] += 1
        start = time.perf_counter()
        host[a * SLOT:(a + 1) * SLOT].copy_(host[b * SLOT:(b + 1) * SLOT])
        if repeat:
            times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]


everywhere = sorted(os.sched_getaffinity(0))
rows = []
for cpu in [None] + everywhere + [None]:
    os.sched_setaffinity(0, everywhere if cpu is None else {cpu})
    row = {"label": label, "cpu": "any" if cpu is None else cpu}
    for direction in ["h2d", "d2h"]:
        row[direction + "_gb_per_s"] = round(SLOT / copy_seconds(direction) / 1e9, 3)
    row["host_memcpy_gb_per_s"] = round(SLOT / host_copy_seconds() / 1e9, 3)
    print(json.dumps(row), flush=True)
