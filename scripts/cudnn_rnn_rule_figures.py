"""Figures of the cuDNN RNN rule (python/vramlab/_tracer/rules/cudnn_rnn.py) against the H100
measurements, per file and per group (mode, dtype): the reserve exact, the workspace exact and
within the bound the trace notes (no tracing: the rule's size functions on every row), and, tracing
every Nth row (--every N), the rows whose every event but the workspaces' sizes matches.
    PYTHONPATH=python python scripts/cudnn_rnn_rule_figures.py FILE... [--every N]"""

import collections
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python" / "tests"))
sys.path.insert(0, str(ROOT / "scripts"))

from fit_cudnn_rnn_workspace import freed_right_after, shape, training_workspace  # noqa: E402
from vramlab._tracer.rules.cudnn_rnn import get_algo, reserve_size, workspace_estimate  # noqa: E402


def main():
    every = int(sys.argv[sys.argv.index("--every") + 1]) if "--every" in sys.argv else 0
    files = [a for a in sys.argv[1:] if a.endswith(".gz")]
    import test_trace_cudnn_rnn as t

    for name in files:
        stats = collections.defaultdict(collections.Counter)
        for i, row in enumerate(t._layer_rows(name)):
            cfg = row["config"]
            group = (cfg["mode"], cfg["dtype"])
            c = stats[group]
            c["rows"] += 1
            train, infer = shape(cfg, True), shape(cfg, False)
            reserve = next(row["forward"][k + 1][1] for k in range(len(row["forward"]) - 2)
                           if row["forward"][k][0] == "a" and row["forward"][k + 1][0] == "a" and row["forward"][k + 2][0] == "f" and row["forward"][k + 2][2] == row["forward"][k][2])
            c["reserve exact"] += reserve_size(train) == reserve
            measured = [(get_algo(train, True, 9, 0, 132), True, training_workspace(row["forward"]), train),
                        (get_algo(train, True, 9, 0, 132), False, freed_right_after(row["forward_eval"])[0], infer),
                        (get_algo(train, False, 9, 0, 132), True, [w for w in freed_right_after(row["backward"]) if w > 8][0], train)]
            refused = False
            for algo, training, size, s in measured:
                got = workspace_estimate(s, algo, training)
                if got is None:
                    refused = True
                    continue
                c["workspaces"] += 1
                c["workspace exact"] += got[0] == size
                c["workspace within bound"] += abs(got[0] - size) <= got[1]
                c["workspace abs error sum"] += abs(got[0] - size)
                c["workspace measured sum"] += size
            c["refused"] += refused
            if every and i % every == 0 and not refused:
                c["traced"] += 1
                c["all but workspaces exact"] += t._matches(row)
        total = collections.Counter()
        print(f"## {name}")
        print("| mode | dtype | rows | reserve exact | workspaces exact | within bound | mean abs error | refused | traced | all but workspaces exact |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for group in sorted(stats):
            c = stats[group]
            total.update(c)
            print(_line(group, c))
        print(_line(("all", ""), total))


def _line(group, c):
    mean = c["workspace abs error sum"] / max(1, c["workspace measured sum"])
    return (f"| {group[0]} | {group[1]} | {c['rows']} | {c['reserve exact']} | {c['workspace exact']} of {c['workspaces']} | "
            f"{c['workspace within bound']} | {mean:.1%} | {c['refused']} | {c['traced']} | {c['all but workspaces exact']} |")


if __name__ == "__main__":
    main()
