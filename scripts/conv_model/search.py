import pandas as pd, numpy as np, itertools, collections
df=pd.read_pickle('df.pkl'); d=df[df.backend=='Cudnn'].copy()
E={'float32':4,'bfloat16':2,'float16':2}
d['e']=d.dtype.map(E)
d['ho']=(d.h+2*d.ph-d.dh*(d.r-1)-1)//d.sh+1
d['wo']=(d.w+2*d.pw-d.dw*(d.s-1)-1)//d.sw+1
d['X']=d.n*d.c*d.h*d.w*d.e; d['Y']=d.n*d.k*d.ho*d.wo*d.e; d['W']=d.k*(d.c//d.g)*d.r*d.s*d.e
d['I']=d.n*d.c*d.r*d.s*d.ho*d.wo*d.e
d.to_pickle('d.pkl')
feats=['X','Y','W','I']
coefs=[0,0.5,1,2]
combos=[c for c in itertools.product(coefs,repeat=4) if any(c)]
combos.sort(key=lambda c:(sum(x!=0 for x in c),sum(c)))
F=d[feats].to_numpy(dtype=np.float64)
for col in ['fw','dg','wg']:
    ws=d[col].to_numpy(dtype=np.float64)
    label=np.array(['?']*len(d),dtype=object); rem=np.zeros(len(d))
    label[ws==0]='zero'; label[(ws>0)&(ws<4096)]='const'; rem[ws<4096]=ws[ws<4096]
    for cb in combos:
        r=ws-F@np.array(cb)
        m=(label=='?')&(r>=0)&(r<1024)
        label[m]=str(cb); rem[m]=r[m]
    d[col+'_lab']=label; d[col+'_rem']=rem
    print(col, pd.Series(label).value_counts().head(20).to_dict())
    print('  rem', pd.Series(rem[~np.isin(label,['zero','const','?'])]).value_counts().head(10).to_dict())
d.to_pickle('d1.pkl')
