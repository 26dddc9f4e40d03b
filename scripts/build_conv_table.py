"""Builds the table of cuDNN convolution workspaces vramlab.trace ships for a GPU profile, from
that GPU's measurements (scripts/measure_conv_workspaces.py): for each convolution measured, the
backend PyTorch chose and the bytes its forward, its backward for the input and its backward for
the weight allocated beyond their outputs (0: nothing). The package's copy is checked against a
rebuild from the committed measurements (python/tests/test_trace.py).
    python scripts/build_conv_table.py h100 | gzip -n > python/vramlab/_tracer/rules/_conv_h100.json.gz"""

import gzip
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def scratch(sequence):
    """The sizes of what was allocated and freed within the call, each with the number of lasting
    allocations made before it (so a backward's workspaces fall to the input's or the weight's)."""
    made, live = [], {}
    for action, size, addr in sequence:
        if action == "a":
            live[addr] = len(made)
            made.append([size, False])
        elif addr in live:
            made[live.pop(addr)][1] = True
    found, lasting = [], 0
    for size, freed in made:
        if freed:
            found.append((lasting, size))
        else:
            lasting += 1
    return found


def frees_what_it_never_allocated(row):
    """Whether a row's events free memory the convolution did not allocate: the first row after an
    out-of-memory error in the same process (conv-batches-nchw224-2026-11-30: five), whose window
    caught the failed job's tensors being freed; its sizes are not the convolution's own."""
    for sequence in (row["forward"], row["backward"]):
        allocated = set()
        for action, _, addr in sequence:
            if action == "a":
                allocated.add(addr)
            elif addr not in allocated:
                return True
    return False


def entries(rows):
    table = {}
    for row in rows:
        if "error" in row or row["group"] != "table" and row["group"] != "sweep-n" and row["group"] != "sweep-hw":
            continue
        if frees_what_it_never_allocated(row):
            continue
        c, h, w, k, r, s, stride, padding, dilation, groups = row["shape"]
        # Channels-last input and weight (scripts/measure_conv_timm.py --channels-last) are a
        # table of their own: cuDNN takes other plans for them.
        layout = "channels_last|" if row.get("channels_last") else ""
        if layout and row["shape"][1] == row["shape"][2] == 1:
            # A 1x1 image is contiguous in both layouts, so the tracer never looks it up as
            # channels-last (and its measured backward copied the gradient first).
            continue
        key = f"{layout}{row['dtype']}|{row['n']},{c},{h},{w}|{k},{c // groups},{r},{s}|{stride[0]},{stride[1]}|{padding[0]},{padding[1]}|{dilation[0]},{dilation[1]}|{groups}"
        forward = scratch(row["forward"])
        backward = scratch(row["backward"])
        # A forward lasts in its output; a backward for both makes the input's gradient, then the
        # weight's: a workspace after the first is the input's, after the second the weight's.
        if len(forward) > 1 or any(n != 1 for n, _ in forward) or len(backward) > 2 or any(n not in (1, 2) for n, _ in backward):
            raise SystemExit(f"unexpected allocations for {key}: {row['forward']} {row['backward']}")
        data = sum(size for n, size in backward if n == 1)
        weight = sum(size for n, size in backward if n == 2)
        value = [row["backend"].split(".")[-1], sum(size for _, size in forward), data, weight]
        if table.setdefault(key, value) != value:
            raise SystemExit(f"{key} measured twice with different results: {table[key]} and {value}")
    return table


def build(profile):
    folder = os.path.join(ROOT, "reports", "reference", profile, "conv-workspaces")
    rows = []
    # conv.jsonl.gz, then the runs that extended it (conv-*.jsonl.gz), in name order.
    for name in sorted(n for n in os.listdir(folder) if n.startswith("conv") and n.endswith(".jsonl.gz")):
        with gzip.open(os.path.join(folder, name), "rt") as f:
            rows += [json.loads(line) for line in f]
    machine = open(os.path.join(folder, "machine.txt")).read()
    versions = machine.split("\n")[-2].split()
    device = next(line.split(":", 1)[1].strip() for line in machine.splitlines() if "Product Name" in line)
    return {
        "profile": profile,
        "device": device,
        "torch": versions[0],
        "cudnn": int(versions[2]),
        "source": f"reports/reference/{profile}/conv-workspaces: scripts/measure_conv_workspaces.py on the GPU",
        "key": "[channels_last|]dtype|input N,C,H,W|weight K,C/groups,R,S|stride|padding|dilation|groups (contiguous tensors, or channels-last ones where the key starts so; cuDNN's defaults: benchmark and deterministic off, TF32 allowed)",
        "value": "backend, forward workspace, input-gradient workspace, weight-gradient workspace (bytes)",
        "entries": dict(sorted(entries(rows).items())),
    }


if __name__ == "__main__":
    json.dump(build(sys.argv[1]), sys.stdout, separators=(",", ":"))
