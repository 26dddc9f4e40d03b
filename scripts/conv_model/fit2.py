import pandas as pd, numpy as np, ast
from sklearn.tree import DecisionTreeClassifier
exec(open('fit.py').read().split("rng=np.random")[0])
d5=pd.read_pickle('d5.pkl')
# shape-grouped split: hold out 30% of (c,h,w,k,r,s,stride,g) shapes entirely
shape=d[['c','h','w','k','r','s','sh','g']].astype(str).agg('|'.join,axis=1)
u=shape.unique(); rng=np.random.default_rng(1); ho=set(u[rng.random(len(u))<0.3])
test=shape.isin(ho).to_numpy()
for col in ['fw','dg','wg']:
    y=d[col+'_lab'].fillna('other').to_numpy()
    clf=DecisionTreeClassifier(min_samples_leaf=1,random_state=0).fit(feat[~test],y[~test])
    pred=clf.predict(feat[test]); idx=np.where(test)[0]
    pv=np.array([np.nan if p=='other' else value(p,i) for p,i in zip(pred,idx)]); act=d[col].to_numpy()[idx]
    hit=pv==act
    zero=(act==0).mean()
    rel=np.abs(pv-act)/np.maximum(act,1)
    big=act>=1<<20
    print(col,'shape-held-out exact',hit.mean().round(4),'(predict-0 baseline',zero.round(4),') unknown',np.isnan(pv).mean().round(4),
          'within 1MiB',(np.abs(pv-act)<(1<<20)).mean().round(4),'rows>=1MiB exact',hit[big].mean().round(4))
    # random split misses: byte error
    rt=d5.test.to_numpy(); h=d5[col+'_hit1'].to_numpy()
    print('   random-split test rows',rt.sum(),'exact',h[rt].mean().round(4),'predict-0 baseline',(d[col][rt]==0).mean().round(4))
