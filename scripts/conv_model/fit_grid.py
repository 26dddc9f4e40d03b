"""The refit's held-out figure on an image size and a batch size it never saw: trees trained on
every row but those at RESOLUTION pixels or batch BATCH, tested on the timm rows there, beside the
shipped trees (conv_model.py) on the same rows. Run in the folder of load -> search -> cover
(d4.pkl, cover4.pkl): python fit_grid.py 192 24"""
import pandas as pd, numpy as np, sys
from sklearn.tree import DecisionTreeClassifier
exec(open('fit.py').read().split("rng=np.random")[0])
import os
# The trees to compare with: the shipped ones, or (OLD_RULES=dir) a copy of rules/ from an earlier
# commit, e.g. 65647dc's, the trees before the timm rows were fitted.
sys.path.insert(0, os.environ.get('OLD_RULES') or os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'python', 'vramlab', '_tracer', 'rules'))
import conv_model as old
res, batch = int(sys.argv[1]), int(sys.argv[2])
test = ((d.file.str.startswith('conv-timm')) & ((d.h == res) | (d.n == batch))).to_numpy()
train = ~((d.h == res) | (d.n == batch)).to_numpy()   # nothing at that resolution or batch, from any file
print('train', train.sum(), 'test', test.sum())
idx = np.where(test)[0]
oldp = [old.workspaces(d.gpu[i], d.dtype[i], int(d.n[i]), int(d.c[i]), int(d.h[i]), int(d.w[i]), int(d.k[i]), int(d.r[i]), int(d.s[i]), (int(d.sh[i]), int(d.sw[i])), (int(d.ph[i]), int(d.pw[i])), (int(d.dh[i]), int(d.dw[i])), int(d.g[i])) for i in idx]
for j, col in enumerate(['fw','dg','wg']):
    y = d[col+'_lab'].fillna('other').to_numpy()
    clf = DecisionTreeClassifier(min_samples_leaf=1, random_state=0).fit(feat[train], y[train])
    pred = clf.predict(feat[test])
    act = d[col].to_numpy()[idx]
    hit = np.array([p != 'other' and value(p, i) == a for p, i, a in zip(pred, idx, act)])
    ohit = np.array([o is not None and o[j] == a for o, a in zip(oldp, act)])
    print(col, 'refit held out exact', hit.mean().round(4), 'shipped trees', ohit.mean().round(4), 'nodes', clf.tree_.node_count)
