import pandas as pd, numpy as np, pickle, ast, json
from sklearn.tree import DecisionTreeClassifier
d=pd.read_pickle('d4.pkl').reset_index(drop=True)
cov=pickle.load(open('cover4.pkl','rb'))
DT={'float32':0,'bfloat16':1,'float16':2}
def featurize(d):
    f=pd.DataFrame({'gpu':(d.gpu=='h200').astype(int),'dt':d.dtype.map(DT),'n':d.n,'c':d.c,'h':d.h,'w':d.w,'k':d.k,'r':d.r,'s':d.s,
       'st':d.sh,'pad':d.ph,'g':d.g,'cg':d.c//d.g,'kg':d.k//d.g,'ho':d.ho,'wo':d.wo,
       # the width's own stride and padding: a 1-d convolution is cuDNN's 2-D one of height 1
       'stw':d.sw,'padw':d.pw})
    f['rs']=f.r*f.s; f['npix']=f.n*f.ho*f.wo; f['crs']=f.cg*f.rs; f['X']=d.X; f['Y']=d.Y; f['W']=d.W; f['hw']=f.h*f.w
    f['nw4']=d.NW4
    return f
FEATS=None
feat=featurize(d); FEATS=list(feat.columns)
V=d[['X','Y','Wrs','W','I','NW4','Xp','Yp','Wps']].to_numpy(float)
def value(label, i):
    k=ast.literal_eval(label)
    if k[0]=='const': return k[1]
    return float(V[i]@np.array(k[0]))+k[1]
rng=np.random.default_rng(0); test=rng.random(len(d))<0.3
# group key so that test rows are not same-row; random rows split (as asked)
out={}
for col in ['fw','dg','wg']:
    y=d[col+'_lab'].fillna('other').to_numpy()
    for leaf in [1,3]:
        clf=DecisionTreeClassifier(min_samples_leaf=leaf,random_state=0).fit(feat[~test],y[~test])
        pred=clf.predict(feat)
        hit=np.array([p!='other' and value(p,i)==d[col][i] for i,p in enumerate(pred)])
        d[col+'_hit%d'%leaf]=hit
        print(col,'leaf',leaf,'nodes',clf.tree_.node_count,'train exact',hit[~test].mean().round(4),'test exact',hit[test].mean().round(4),
              'label-ceiling test',(y[test]!='other').mean().round(4))
    out[col]=clf
d['test']=test
d.to_pickle('d5.pkl')
g=d[d.test].groupby(['gpu','dtype'])[['fw_hit1','dg_hit1','wg_hit1']].mean().round(3); print(g)
print(d[d.test].groupby(['gpu','dtype']).size())
