"""The 3-d convolution workspace model (python/vramlab/_tracer/rules/conv_model.py, workspaces_3d),
in one step: the conv3d-design rows of reports/reference/h100/conv-workspaces/conv3d-*.jsonl.gz
(scripts/measure_conv3d.py), the greedy cover of cover.py over the 3-d terms, a decision tree per
direction, and the held-out figures on the conv3d-heldout rows, which are never fitted.
Writes python/vramlab/_tracer/rules/conv_model_3d_trees.json.gz; needs pandas and scikit-learn.

    python scripts/conv_model/fit3d.py"""
import collections, gzip, itertools, json, os, sys
import numpy as np, pandas as pd
from sklearn.tree import DecisionTreeClassifier

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, 'scripts'))
sys.path.insert(0, os.path.join(ROOT, 'python', 'vramlab', '_tracer', 'rules'))
from build_conv_table import scratch  # noqa: E402

FOLDER = os.path.join(ROOT, 'reports', 'reference', 'h100', 'conv-workspaces')
OUT = os.path.join(ROOT, 'python', 'vramlab', '_tracer', 'rules', 'conv_model_3d_trees.json.gz')
E = {'float32': 4, 'bfloat16': 2, 'float16': 2}
DT = {'float32': 0, 'bfloat16': 1, 'float16': 2}
TERMS = ['X', 'Y', 'Wrs', 'W', 'I', 'NW4', 'Xp', 'Yp', 'Wps']


def load():
    recs = []
    for name in sorted(os.listdir(FOLDER)):
        if not (name.startswith('conv3d-') and name.endswith('.jsonl.gz')):
            continue
        for line in gzip.open(os.path.join(FOLDER, name), 'rt'):
            row = json.loads(line)
            if 'error' in row:
                continue
            c, d_, h, w, k, t, r, s, st, pd_, dl, g = row['shape']
            f = scratch(row['forward']); b = scratch(row['backward'])
            recs.append(dict(group=row['group'], dtype=row['dtype'], n=row['n'], c=c, d=d_, h=h, w=w, k=k, t=t, r=r, s=s,
                             sd=st[0], sh=st[1], sw=st[2], pdd=pd_[0], ph=pd_[1], pw=pd_[2], g=g, backend=row['backend'].split('.')[-1],
                             fw=sum(x for _, x in f), dg=sum(x for n_, x in b if n_ == 1), wg=sum(x for n_, x in b if n_ == 2)))
    return pd.DataFrame(recs)


def terms(d):
    d = d.copy()
    d['e'] = d.dtype.map(E)
    d['do'] = (d.d + 2 * d.pdd - (d.t - 1) - 1) // d.sd + 1
    d['ho'] = (d.h + 2 * d.ph - (d.r - 1) - 1) // d.sh + 1
    d['wo'] = (d.w + 2 * d.pw - (d.s - 1) - 1) // d.sw + 1
    trs = d.t * d.r * d.s
    d['X'] = d.n * d.c * d.d * d.h * d.w * d.e
    d['Y'] = d.n * d.k * d.do * d.ho * d.wo * d.e
    d['W'] = d.k * (d.c // d.g) * trs * d.e
    d['Wrs'] = d.W * (trs > 1)
    d['I'] = d.n * d.c * trs * d.do * d.ho * d.wo * d.e
    d['NW4'] = d.n * d.k * (d.c // d.g) * trs * 4
    al = np.where(d.dtype == 'float32', 4, 8)
    cp = -(-d.c // al) * al; kp = -(-d.k // al) * al
    d['Xp'] = d.n * cp * d.d * d.h * d.w * d.e
    d['Yp'] = d.n * kp * d.do * d.ho * d.wo * d.e
    d['Wps'] = kp * (cp // d.g) * trs * d.e * (trs > 1)
    return d


def featurize(d):
    f = pd.DataFrame({'dt': d.dtype.map(DT), 'n': d.n, 'c': d.c, 'd': d.d, 'h': d.h, 'w': d.w, 'k': d.k, 't': d.t, 'r': d.r,
                      's': d.s, 'sd': d.sd, 'sh': d.sh, 'sw': d.sw, 'pdd': d.pdd, 'ph': d.ph, 'pw': d.pw, 'g': d.g,
                      'cg': d.c // d.g, 'kg': d.k // d.g, 'do': d.do, 'ho': d.ho, 'wo': d.wo})
    f['trs'] = d.t * d.r * d.s; f['npix'] = d.n * d.do * d.ho * d.wo; f['crs'] = f.cg * f.trs
    f['X'] = d.X; f['Y'] = d.Y; f['W'] = d.W; f['vol'] = d.d * d.h * d.w; f['nw4'] = d.NW4
    return f


def cover(d):
    F = d[TERMS].to_numpy(dtype=np.float64)
    coefs = [0, 0.25, 0.5, 1, 2, 4]
    combos = [c for c in itertools.product(coefs, repeat=len(TERMS)) if 0 < sum(x != 0 for x in c) <= 3]
    C = np.array(combos, dtype=np.float64).T
    labels = {}
    for col in ['fw', 'dg', 'wg']:
        ws = d[col].to_numpy(dtype=np.float64)
        matches = collections.defaultdict(list)
        for i in np.where(ws < 4096)[0]:
            matches[('const', int(ws[i]))].append(i)
        big = ws >= 4096
        for i in range(0, C.shape[1], 100):
            R = ws[:, None] - F @ C[:, i:i + 100]
            rr, cc = np.nonzero((R >= 0) & (R < 1024) & big[:, None])
            for r_, c_ in zip(rr, cc):
                matches[(combos[i + c_], int(R[r_, c_]))].append(r_)
        matches = {k: np.array(v) for k, v in matches.items()}
        covered = np.zeros(len(d), bool)
        lab = np.array([None] * len(d), dtype=object)
        while True:
            best = max(matches, key=lambda k: (~covered[matches[k]]).sum())
            if (~covered[matches[best]]).sum() < 10:
                break
            new = matches[best][~covered[matches[best]]]
            lab[new] = str(best); covered[new] = True
        print(col, 'covered', covered.mean().round(4))
        labels[col] = lab
    return labels


def main():
    df = load()
    design = terms(df[(df.group == 'conv3d-design') & (df.backend == 'Cudnn')].drop_duplicates(
        subset=['dtype', 'n', 'c', 'd', 'h', 'w', 'k', 't', 'r', 's', 'sd', 'sh', 'sw', 'pdd', 'ph', 'pw', 'g']).reset_index(drop=True))
    print('design rows (cuDNN)', len(design))
    labels = cover(design)
    feat = featurize(design)
    trees = {}
    for col, name in [('fw', 'forward'), ('dg', 'input_grad'), ('wg', 'weight_grad')]:
        y = pd.Series(labels[col]).fillna('other').to_numpy()
        clf = DecisionTreeClassifier(min_samples_leaf=1, random_state=0).fit(feat, y)
        t = clf.tree_
        leaf = [int(np.argmax(v)) if t.children_left[i] == -1 else -1 for i, v in enumerate(t.value)]
        trees[name] = {'classes': [str(c) for c in clf.classes_], 'feature': t.feature.tolist(),
                       'threshold': [round(float(x), 6) for x in t.threshold], 'left': t.children_left.tolist(),
                       'right': t.children_right.tolist(), 'leaf': leaf}
        print(name, t.node_count, 'nodes', len(clf.classes_), 'labels')
    json.dump({'features': list(feat.columns), 'terms': TERMS, 'trees': trees}, gzip.open(OUT, 'wt'), separators=(',', ':'))
    # Held out: the conv3d-heldout rows (every backend), through the shipped predictor.
    import conv_model
    conv_model._MODELS.pop("conv_model_3d_trees.json.gz", None)
    held = df[df.group == 'conv3d-heldout'].reset_index(drop=True)
    tally = collections.Counter()
    for row in held.itertuples():
        got = conv_model.workspaces_3d('h100', row.dtype, row.n, row.c, row.d, row.h, row.w, row.k, row.t, row.r, row.s,
                                       (row.sd, row.sh, row.sw), (row.pdd, row.ph, row.pw), (1, 1, 1), row.g)
        for i, col in enumerate(['fw', 'dg', 'wg']):
            want = getattr(row, col)
            v = None if got is None else got[i]
            tally[(col, 'exact')] += v == want
            tally[(col, 'mib')] += v is not None and abs(v - want) < (1 << 20)
            tally[(col, 'zero')] += want == 0
            tally[(col, 'unknown')] += v is None
    print('held out', len(held), {k: round(v / len(held), 3) for k, v in sorted(tally.items())})


if __name__ == '__main__':
    main()
