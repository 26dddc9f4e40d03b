#!/usr/bin/env python3
"""Per-family error of each profile's predictions on one machine (issue 13, must-show 3).

Reads MACHINE/<label>/analysis.json for each label (scripts/profiles_on_machine.sh writes them)
and prints a Markdown table: per family, validation points (those the profile was not fitted
at), median and worst |(predicted - measured) / measured|. Medians of even counts are the mean
of the two middle values.
Usage: scripts/profile_errors.py MACHINE_DIR LABEL...
"""
import json
import statistics
import sys
from collections import defaultdict


def errors_by_family(path):
    families = defaultdict(list)
    for experiment in json.load(open(path))["experiments"]:
        name = experiment["family"]
        if experiment["experiment"].startswith(("h2d_", "d2h_")):
            name = experiment["experiment"]
        for point in experiment["points"]:
            error = point.get("relative_error")
            if point.get("calibration") or error is None:
                continue
            families[name].append(abs(error))
    return families


def main():
    machine, labels = sys.argv[1], sys.argv[2:]
    tables = {label: errors_by_family(f"{machine}/{label}/analysis.json") for label in labels}
    names = sorted(set().union(*tables.values()))
    print("| family | " + " | ".join(f"{label}: points, median (worst)" for label in labels) + " |")
    print("|---|" + "---|" * len(labels))
    for name in names:
        cells = []
        for label in labels:
            errors = tables[label].get(name, [])
            if errors:
                cells.append(f"{len(errors)}, {100 * statistics.median(errors):.1f}% ({100 * max(errors):.1f}%)")
            else:
                cells.append("-")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
