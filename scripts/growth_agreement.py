#!/usr/bin/env python3
"""The growth model against growth records whose peaks the driver measured (issue 12).

Usage: scripts/growth_agreement.py RUN_DIR   (a `vramlab run growth --backend both` output)

For every point the hw record measured: whether the model says the grow succeeds where the
driver let it, the error of the model's peak against the peak cuMemGetInfo saw, and the error
of its grow time. Points hw did not try (vramlab's managed-memory safety limit) are counted
apart and compared with nothing. Medians of an even count are the mean of the middle two.
"""
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def relative(predicted, measured):
    """|predicted - measured| / measured; a measured zero predicted as anything else is 100%."""
    if measured == 0:
        return 0.0 if predicted == 0 else 1.0
    return abs(predicted - measured) / measured


def points(path):
    record = json.loads(Path(path).read_text())
    key = lambda p: (p["params"]["strategy"], p["params"]["reserve"], int(p["params"]["bytes"]))
    return record, {key(p): p["metrics"] for p in record["points"]}


def main(run):
    sim_record, sim = points(Path(run) / "growth" / "sim.json")
    hw_record, hw = points(Path(run) / "growth" / "hw.json")
    print(f"sim commit {sim_record.get('commit')}, hw commit {hw_record.get('commit')}, device {hw_record['device']['name']}")
    groups = defaultdict(lambda: {"n": 0, "not_measured": 0, "ok_agree": 0, "peak": [], "time": [], "disagree": []})
    for key, measured in sorted(hw.items()):
        predicted = sim.get(key)
        g = groups[key[:2]]
        g["n"] += 1
        if measured.get("not_measured"):
            g["not_measured"] += 1
            continue
        if predicted is None:
            continue
        if predicted["ok"] == measured["ok"]:
            g["ok_agree"] += 1
        else:
            g["disagree"].append(f"{key[2] >> 20} MiB: model {'grows' if predicted['ok'] else 'refuses'}, driver {'grew' if measured['ok'] else 'refused'}")
        if measured["ok"] and predicted["ok"]:
            g["peak"].append(relative(predicted["peak_bytes"], measured["peak_bytes"]))
            if "grow_us" in measured and "grow_us" in predicted:
                g["time"].append(relative(predicted["grow_us"], measured["grow_us"]))
    total = defaultdict(int)
    all_peak, all_time = [], []
    print("| strategy | reserve | points | not measured | grow/refuse agrees | peak error median (worst) | time error median |")
    print("|---|---|---|---|---|---|---|")
    for (strategy, reserve), g in sorted(groups.items()):
        measured = g["n"] - g["not_measured"]
        peak = f"{100 * statistics.median(g['peak']):.2f}% ({100 * max(g['peak']):.2f}%)" if g["peak"] else "-"
        time = f"{100 * statistics.median(g['time']):.1f}%" if g["time"] else "-"
        print(f"| {strategy} | {reserve} | {g['n']} | {g['not_measured']} | {g['ok_agree']} of {measured} | {peak} | {time} |")
        for k in ("n", "not_measured", "ok_agree"):
            total[k] += g[k]
        all_peak += g["peak"]
        all_time += g["time"]
    print(f"| all | | {total['n']} | {total['not_measured']} | {total['ok_agree']} of {total['n'] - total['not_measured']} | "
          f"{100 * statistics.median(all_peak):.2f}% ({100 * max(all_peak):.2f}%) | {100 * statistics.median(all_time):.1f}% |")
    for (strategy, reserve), g in sorted(groups.items()):
        for d in g["disagree"]:
            print(f"disagree: {strategy} reserve={reserve} {d}")


if __name__ == "__main__":
    main(sys.argv[1])
