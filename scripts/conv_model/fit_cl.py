"""The channels-last model of cuDNN's 2-D convolution workspaces (conv_model.py's channels_last
trees): the same families as the NCHW model (a size linear in the tensors' bytes plus a constant
tail, picked by a decision tree), found and fitted on the channels-last rows the H200 measured
(reports/reference/h200/conv-workspaces/*channels-last*, *cl224*; torch 2.11.0+cu130, cuDNN 9.19).

    python scripts/conv_model/fit_cl.py            held-out figures only
    python scripts/conv_model/fit_cl.py --export   also writes the shipped trees, fitted on every row
    FIT_CL_CACHE=/tmp/cl.pkl python ...             keeps the rows and their families (the cover takes minutes)

Held out, each apart: (1) batch sizes never fitted: trees trained on the other files, tested on
conv-batches-cl224 (batches 256, 96 and 12, which no other file has; shapes they share); (2) kinds of convolution never fitted: 30% of the distinct
(C, K, R, S, stride, groups) drawn, all their sizes held out. Beside each, what the tracer gave
channels-last convolutions outside the table before (no workspace: a hit where cuDNN took none)."""

import argparse
import collections
import gzip
import itertools
import json
import os
import sys

import numpy as np
import pandas as pd
from sklearn.tree import DecisionTreeClassifier

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from build_conv_table import frees_what_it_never_allocated, scratch  # noqa: E402

FOLDER = os.path.join(ROOT, "reports", "reference", "h200", "conv-workspaces")
FILES = ["conv-timm-channels-last-2026-11-29.jsonl.gz", "conv-timm-channels-last-2-2026-11-29.jsonl.gz",
         "conv-timm-channels-last-3-2026-11-29.jsonl.gz",
         # Measured after the first fit (bae8545), the held-out models' rows once their figures were taken.
         "conv-cl-heldout-2026-11-30.jsonl.gz", "conv-cl-more-2026-11-30.jsonl.gz",
         # Last: held out by batch size in (1).
         "conv-batches-cl224-2026-11-30.jsonl.gz"]
ELEMENT = {"float32": 4, "bfloat16": 2, "float16": 2}
DTYPE_CODE = {"float32": 0, "bfloat16": 1, "float16": 2}
# The terms a family's size is made of, in conv_model.py's order (its _plain computes them).
TERMS = ["X", "Y", "Wrs", "W", "I", "NW4", "Xp", "Yp", "Wps"]
COEFFICIENTS = [0, 0.25, 0.5, 1, 2, 4]
# A family must explain this many rows to be kept (conv_model's NCHW cover used the same).
MIN_ROWS = 10


def load():
    rows = []
    for name in FILES:
        for line in gzip.open(os.path.join(FOLDER, name), "rt"):
            row = json.loads(line)
            if "error" in row or not row.get("channels_last") or len(row["shape"]) != 10:
                continue
            if not row["backend"].endswith("Cudnn") or frees_what_it_never_allocated(row):
                continue
            c, h, w, k, r, s, stride, padding, dilation, g = row["shape"]
            if list(dilation) != [1, 1]:
                continue
            backward = scratch(row["backward"])
            rows.append(dict(file=name, dtype=row["dtype"], n=row["n"], c=c, h=h, w=w, k=k, r=r, s=s,
                             sh=stride[0], sw=stride[1], ph=padding[0], pw=padding[1], g=g,
                             fw=sum(x for _, x in scratch(row["forward"])),
                             dg=sum(x for m, x in backward if m == 1), wg=sum(x for m, x in backward if m == 2)))
    d = pd.DataFrame(rows)
    d = d.drop_duplicates(subset=[c for c in d.columns if c != "file"]).reset_index(drop=True)
    e = d.dtype.map(ELEMENT)
    d["ho"] = (d.h + 2 * d.ph - (d.r - 1) - 1) // d.sh + 1
    d["wo"] = (d.w + 2 * d.pw - (d.s - 1) - 1) // d.sw + 1
    d["X"] = d.n * d.c * d.h * d.w * e
    d["Y"] = d.n * d.k * d.ho * d.wo * e
    d["W"] = d.k * (d.c // d.g) * d.r * d.s * e
    d["Wrs"] = d.W * ((d.r * d.s) > 1)
    d["I"] = d.n * d.c * d.r * d.s * d.ho * d.wo * e
    d["NW4"] = d.n * d.k * (d.c // d.g) * d.r * d.s * 4
    align = np.where(d.dtype == "float32", 4, 8)
    cp, kp = -(-d.c // align) * align, -(-d.k // align) * align
    d["Xp"] = d.n * cp * d.h * d.w * e
    d["Yp"] = d.n * kp * d.ho * d.wo * e
    d["Wps"] = kp * (cp // d.g) * d.r * d.s * e * ((d.r * d.s) > 1)
    return d


def features(d):
    """conv_model.py's features, by the same names, so one _predict reads both models."""
    f = pd.DataFrame({"gpu": 1, "dt": d.dtype.map(DTYPE_CODE), "n": d.n, "c": d.c, "h": d.h, "w": d.w, "k": d.k,
                      "r": d.r, "s": d.s, "st": d.sh, "pad": d.ph, "g": d.g, "cg": d.c // d.g, "kg": d.k // d.g,
                      "ho": d.ho, "wo": d.wo, "stw": d.sw, "padw": d.pw})
    f["rs"] = f.r * f.s
    f["npix"] = f.n * f.ho * f.wo
    f["crs"] = f.cg * f.rs
    f["X"], f["Y"], f["W"] = d.X, d.Y, d.W
    f["hw"] = f.h * f.w
    f["nw4"] = d.NW4
    return f


def cover(d, column):
    """Each row's family: the (coefficients, tail) that explains the most rows not yet explained,
    greedily, as conv_model's NCHW cover (scripts/conv_model/cover.py)."""
    combos = [c for c in itertools.product(COEFFICIENTS, repeat=len(TERMS)) if 0 < sum(x != 0 for x in c) <= 3]
    terms = d[TERMS].to_numpy(dtype=np.float64)
    combo_matrix = np.array(combos, dtype=np.float64).T
    size = d[column].to_numpy(dtype=np.float64)
    matches = collections.defaultdict(list)
    for i in np.where(size < 4096)[0]:
        matches[("const", int(size[i]))].append(i)
    big = size >= 4096
    for start in range(0, combo_matrix.shape[1], 100):
        rest = size[:, None] - terms @ combo_matrix[:, start:start + 100]
        rows, cols = np.nonzero((rest >= 0) & (rest < 1024) & big[:, None])
        for r, c in zip(rows, cols):
            matches[(combos[start + c], int(rest[r, c]))].append(r)
    matches = {k: np.array(v) for k, v in matches.items()}
    covered = np.zeros(len(d), bool)
    label = np.array(["other"] * len(d), dtype=object)
    families = 0
    while matches:
        best = max(matches, key=lambda k: (~covered[matches[k]]).sum())
        new = matches[best][~covered[matches[best]]]
        if len(new) < MIN_ROWS:
            break
        label[new] = str(best)
        covered[new] = True
        families += 1
    return label, covered.mean(), families


def value(label, terms):
    if label == "other":
        return np.nan
    if label.startswith("('const'"):
        return float(label.split(",")[1].strip(" )"))
    coefficients, tail = label.rsplit(",", 1)
    coefficients = [float(v) for v in coefficients.strip("( )").split(",") if v.strip()]
    return float(np.dot(coefficients, terms)) + int(tail.strip(" )"))


def held_out(d, feats, labels, train, test, what):
    print(f"{what}: {train.sum()} rows fitted, {test.sum()} held out")
    terms = d[TERMS].to_numpy(dtype=np.float64)
    for column in ("fw", "dg", "wg"):
        tree = DecisionTreeClassifier(min_samples_leaf=1, random_state=0).fit(feats[train], labels[column][train])
        predicted = tree.predict(feats[test])
        actual = d[column].to_numpy()[test]
        guess = np.array([value(p, t) for p, t in zip(predicted, terms[test])])
        # As the tracer uses it: a row the model does not know (family "other") gets no workspace.
        used = np.nan_to_num(guess, nan=0.0)
        exact = (used == actual).mean()
        within = (np.abs(used - actual) < (1 << 20)).mean()
        print(f"  {column}: byte-exact {exact:.1%}, within 1 MiB {within:.1%} (unknown: {np.isnan(guess).mean():.1%}, "
              f"traced as none); no workspace (the tracer before): byte-exact {(actual == 0).mean():.1%}, "
              f"within 1 MiB {(actual < (1 << 20)).mean():.1%}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--export", action="store_true")
    args = parser.parse_args()
    cache = os.environ.get("FIT_CL_CACHE")
    if cache and os.path.exists(cache):
        d = pd.read_pickle(cache)
    else:
        d = load()
    print(f"{len(d)} channels-last rows reaching cuDNN ({d.dtype.value_counts().to_dict()})")
    feats = features(d)
    labels = {}
    for column in ("fw", "dg", "wg"):
        if column + "_family" not in d:
            d[column + "_family"], share, families = cover(d, column)
            print(f"  {column}: {families} families explain {share:.1%} of rows")
        labels[column] = d[column + "_family"].to_numpy()
    if cache:
        d.to_pickle(cache)
    batches = (d.file == FILES[-1]).to_numpy()
    held_out(d, feats, labels, ~batches, batches, "(1) batch sizes never fitted (conv-batches-cl224)")
    kind = d[["c", "k", "r", "s", "sh", "g"]].astype(str).agg("|".join, axis=1)
    kinds = kind.unique()
    drawn = set(kinds[np.random.default_rng(1).random(len(kinds)) < 0.3])
    test = kind.isin(drawn).to_numpy()
    held_out(d, feats, labels, ~test, test, "(2) kinds of convolution never fitted (30% drawn)")
    if args.export:
        trees = {}
        for column, name in (("fw", "forward"), ("dg", "input_grad"), ("wg", "weight_grad")):
            fitted = DecisionTreeClassifier(min_samples_leaf=1, random_state=0).fit(feats, labels[column])
            t = fitted.tree_
            leaf = [int(np.argmax(v)) if t.children_left[i] == -1 else -1 for i, v in enumerate(t.value)]
            trees[name] = {"classes": [str(c) for c in fitted.classes_], "feature": t.feature.tolist(),
                           "threshold": [round(float(x), 6) for x in t.threshold], "left": t.children_left.tolist(),
                           "right": t.children_right.tolist(), "leaf": leaf}
            print(f"  shipped {name}: {t.node_count} nodes, {len(fitted.classes_)} families")
        out = os.path.join(ROOT, "python", "vramlab", "_tracer", "rules", "conv_model_cl_trees.json.gz")
        with gzip.open(out, "wt") as f:
            json.dump({"features": list(feats.columns), "terms": TERMS, "fitted_on": FILES, "trees": trees}, f,
                      separators=(",", ":"))
        print("wrote", os.path.relpath(out, ROOT))


if __name__ == "__main__":
    main()
