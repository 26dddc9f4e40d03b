import pandas as pd, numpy as np, itertools
d=pd.read_pickle('d.pkl')
d['NW4']=d.n*d.k*(d.c//d.g)*d.r*d.s*4
d['W4']=d.k*(d.c//d.g)*d.r*d.s*4
feats=['X','Y','W','I','NW4','W4']
coefs=[0,0.25,0.5,1,2,4]
combos=[c for c in itertools.product(coefs,repeat=len(feats)) if 0<sum(x!=0 for x in c)<=3]
combos.sort(key=lambda c:(sum(x!=0 for x in c),sum(c)))
F=d[feats].to_numpy(dtype=np.float64)
C=np.array(combos).T
for col in ['fw','dg','wg']:
    ws=d[col].to_numpy(dtype=np.float64)
    label=np.array(['?']*len(d),dtype=object); rem=np.zeros(len(d))
    label[ws==0]='zero'; label[(ws>0)&(ws<4096)]='const'; rem[ws<4096]=ws[ws<4096]
    for i in range(0,C.shape[1],200):
        R=ws[:,None]-F@C[:,i:i+200]
        ok=(R>=0)&(R<1024)
        for j in range(ok.shape[1]):
            m=(label=='?')&ok[:,j]
            if m.any(): label[m]=str(combos[i+j]); rem[m]=R[m,j]
    d[col+'_lab']=label; d[col+'_rem']=rem
    print(col,'unexplained',(label=='?').sum(),'of',len(d), pd.Series(label).value_counts().head(12).to_dict())
d.to_pickle('d2.pkl')
