#!/usr/bin/env python3
"""How much measurements of the same point differ between runs and machines of one GPU kind.

Usage: scripts/measurement_spread.py GPU [--toml]   (GPU: h100 or h200)

Every committed hw record of that GPU kind (reports/reference/**/hw.json whose device name names
it) is grouped by experiment and point; for each point measured by two or more runs, the relative
difference of the family's primary metric between every pair of runs, |a - b| / mean(a, b), is
one sample of the spread. Per family: how many points and pairs, the median and the 90th
percentile. The runs differ by day, by machine and sometimes by a refinement of the measurement,
so this is an upper bound on the noise of one method on one machine. With --toml, prints the
[uncertainty] section a profile stores (the 90th percentile per family).
"""
import itertools
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

PRIMARY = {"transfer": "time_us", "overlap": "time_us", "occupancy": "blocks_per_sm", "banks": "cycles",
           "coalescing": "time_us", "latency": "cycles", "constant": "cycles", "growth": "grow_us",
           "spills": "ns_per_iteration", "migration": "time_us", "peer": "time_us"}
NAMES = {"h100": "H100", "h200": "H200"}


def main(gpu, as_toml):
    root = Path(__file__).resolve().parent.parent / "reports" / "reference"
    values = defaultdict(list)  # (family, experiment, params) -> [(run, value)]
    for path in sorted(root.rglob("hw.json")):
        record = json.loads(path.read_text())
        if NAMES[gpu] not in record["device"]["name"] or "x2" in str(path):
            continue
        family = record["family"]
        metric = PRIMARY[family]
        run = str(path.parent.parent.relative_to(root))
        for point in record["points"]:
            value = point["metrics"].get(metric)
            if value:
                key = (family, record["experiment"], json.dumps(point["params"], sort_keys=True))
                values[key].append((run, value))
    spread = defaultdict(list)
    points = defaultdict(int)
    runs = defaultdict(set)
    for (family, experiment, _), measured in values.items():
        if len(measured) < 2:
            continue
        points[family] += 1
        for (ra, a), (rb, b) in itertools.combinations(measured, 2):
            spread[family].append(abs(a - b) / ((a + b) / 2))
            runs[family].update([ra, rb])
    rows = []
    for family in sorted(spread):
        s = sorted(spread[family])
        p90 = s[min(len(s) - 1, int(0.9 * len(s)))]
        rows.append((family, points[family], len(s), statistics.median(s), p90, sorted(runs[family])))
    if as_toml:
        print("[uncertainty]")
        print(f'source = "scripts/measurement_spread.py {gpu}: 90th percentile of |a - b| / mean between every pair of committed {NAMES[gpu]} measurements of the same point (runs on different days and machines)"')
        print("\n[uncertainty.spread]")
        for family, _, _, _, p90, _ in rows:
            print(f"{family} = {p90:.4f}")
        return
    print("| family | points measured twice or more | pairs | median spread | 90th percentile |")
    print("|---|---|---|---|---|")
    for family, n, pairs, med, p90, _ in rows:
        print(f"| {family} | {n} | {pairs} | {100 * med:.1f}% | {100 * p90:.1f}% |")
    for family, *_, used in rows:
        print(f"{family}: {', '.join(used)}")


if __name__ == "__main__":
    main(sys.argv[1], "--toml" in sys.argv)
