#!/usr/bin/env python3
"""How much one machine's calibration samples differ between two runs of the same calibration
(issue 13): for each sample list both files hold, the median and 90th percentile over the
cases of |a - b| / mean(a, b). It bounds what any model fitted on one run can do on the other:
a model exact for run A is off on run B by about this much.
Usage: scripts/calibration_repeatability.py A.samples.json B.samples.json
"""
import json
import statistics
import sys

TIMES = {"time_us", "grow_us", "cycles", "gb_per_s"}


def cases(samples):
    """(case key, measured value) of each sample: the value is its one timed field."""
    out = {}
    for sample in samples:
        value = [v for k, v in sample.items() if k in TIMES]
        if len(value) != 1:
            continue
        key = tuple(sorted((k, str(v)) for k, v in sample.items() if k not in TIMES))
        out[key] = value[0]
    return out


def main():
    a, b = (json.load(open(path)) for path in sys.argv[1:3])
    print("| samples | cases | median | 90th percentile | worst |")
    print("|---|---|---|---|---|")
    for name in a:
        if not (isinstance(a[name], list) and isinstance(b.get(name), list) and a[name] and isinstance(a[name][0], dict)):
            continue
        x, y = cases(a[name]), cases(b[name])
        diffs = sorted(abs(x[k] - y[k]) / ((x[k] + y[k]) / 2) for k in x if k in y and x[k] + y[k] > 0)
        if not diffs:
            continue
        p90 = diffs[min(len(diffs) - 1, int(0.9 * len(diffs)))]
        print(f"| {name} | {len(diffs)} | {100 * statistics.median(diffs):.1f}% | {100 * p90:.1f}% | {100 * diffs[-1]:.1f}% |")


if __name__ == "__main__":
    main()
