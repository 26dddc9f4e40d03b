import pandas as pd, numpy as np, json, gzip
from sklearn.tree import DecisionTreeClassifier
exec(open('fit.py').read().split("rng=np.random")[0])
trees={}
for col,name in [('fw','forward'),('dg','input_grad'),('wg','weight_grad')]:
    y=d[col+'_lab'].fillna('other').to_numpy()
    clf=DecisionTreeClassifier(min_samples_leaf=1,random_state=0).fit(feat,y)
    t=clf.tree_
    classes=[str(c) for c in clf.classes_]
    leaf=[int(np.argmax(v)) if t.children_left[i]==-1 else -1 for i,v in enumerate(t.value)]
    trees[name]={'classes':classes,'feature':t.feature.tolist(),'threshold':[round(float(x),6) for x in t.threshold],
                 'left':t.children_left.tolist(),'right':t.children_right.tolist(),'leaf':leaf}
    print(name,t.node_count,len(classes))
json.dump({'features':FEATS,'terms':['X','Y','W_if_RS>1','W','I','NW4','Xp','Yp','Wp_if_RS>1'],'trees':trees},
          gzip.open('deliver/conv_model_trees.json.gz','wt'),separators=(',',':'))
