#!/usr/bin/env python3
"""Recomputes, from committed records only, the figures behind the fidelity claims that issue 13
asked to correct: which points were seen before a model was (re)built, and each group's error.

    python3 scripts/recompute_claims.py

A point is compared by its parameters; parameters a newer family added with their default
value (dynamic_shared = 0) are left out when matching older records.
"""
import glob
import json
import statistics

NEW_DEFAULTS = {"dynamic_shared": 0}


def load(path):
    with open(path) as f:
        return json.load(f)


def key(params):
    kept = {k: v for k, v in params.items() if NEW_DEFAULTS.get(k, object()) != v}
    return json.dumps(kept, sort_keys=True)


def errors(analysis, only=None, skip=("constant",)):
    """(experiment, params, |error|) of every validation point (of the experiments `only` names)."""
    for e in load(analysis)["experiments"]:
        if e["experiment"].startswith(skip) or (only and e["experiment"] not in only):
            continue
        for p in e["points"]:
            if p.get("calibration") or p.get("relative_error") is None:
                continue
            yield e["experiment"], p["params"], abs(p["relative_error"])


def median(xs):
    return 100 * statistics.median(xs) if xs else float("nan")


def split(title, analysis, seen_keys, only=None):
    seen, new = [], []
    for _, params, err in errors(analysis, only):
        (seen if key(params) in seen_keys else new).append(err)
    print(
        f"{title}: {len(seen) + len(new)} validation points; {len(seen)} measured before "
        f"(median {median(seen):.1f}%), {len(new)} never measured before (median {median(new):.1f}%); "
        f"all {median(seen + new):.1f}%"
    )


def measured(pattern):
    keys = set()
    for f in glob.glob(pattern):
        for p in load(f)["points"]:
            keys.add(key(p["params"]))
    return keys


# H200 coalescing: the rebuilt model against points the H200 had measured before (commit 007db98).
split(
    "H200 global reads (coalescing, l2, mask, occupancy_bandwidth)",
    "reports/reference/h200/global/run/analysis.json",
    measured("reports/reference/h200/coalescing/run/*/hw.json"),
)
# H100 spills v2: the suite's points inside the exploration grid that shaped the model.
split(
    "H100 spills v2 (suite 'spills')",
    "reports/reference/h100/spills-v2/run/analysis.json",
    measured("reports/reference/h100/spills-v2/explore/run/*/hw.json"),
    only=("spills",),
)
split(
    "H100 spills v2 (suite 'spills_holdout', written before any ran)",
    "reports/reference/h100/spills-v2/run/analysis.json",
    measured("reports/reference/h100/spills-v2/explore/run/*/hw.json"),
    only=("spills_holdout",),
)

# Latency v3 on the H200: footprints measured in v1 or v2, and the 128 MiB hold-out footprint.
earlier = measured("reports/reference/h200/latency/run/*/hw.json") | measured(
    "reports/reference/h200/latency-v2/run/*/hw.json"
)
v3 = "reports/reference/h200/latency-v3/run/analysis.json"
split("H200 latency v3 (all three suites)", v3, earlier, only=("latency", "latency_fresh", "latency_holdout"))
split("H200 latency v3 (latency_holdout only)", v3, earlier, only=("latency_holdout",))
footprints = {}
for experiment, params, err in errors(v3, ("latency", "latency_fresh", "latency_holdout")):
    footprints.setdefault(params.get("bytes"), []).append(experiment)
twice = {b: e for b, e in footprints.items() if len(e) > 1}
print(f"H200 latency v3: {len(footprints)} distinct footprints over the suites; in more than one suite: "
      + ", ".join(f"{b >> 20} MiB ({', '.join(e)})" for b, e in sorted(twice.items())))

# Growth: per-strategy medians, the true median (the READMEs had the upper middle for even counts).
for gpu in ("h100", "h200"):
    groups = {}
    for _, params, err in errors(f"reports/reference/{gpu}/growth/run/analysis.json"):
        groups.setdefault((params["strategy"], params.get("reserve")), []).append(err)
    cells = [f"{s}{'+reserve' if r == 'yes' else ''} {median(v):.1f}% ({len(v)})" for (s, r), v in sorted(groups.items())]
    print(f"{gpu.upper()} growth, median |error| per strategy: " + ", ".join(cells))
