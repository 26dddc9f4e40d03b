import pandas as pd, numpy as np, itertools, collections, pickle
d=pd.read_pickle('d.pkl').reset_index(drop=True)
d['NW4']=d.n*d.k*(d.c//d.g)*d.r*d.s*4; d['Wrs']=d.W*((d.r*d.s)>1)
# The same transforms with the channels padded for the tensor cores (multiples of 8 in 16 bits,
# 4 in float32): found in the 1-d rows (C = 406 in bf16: X + Y + W' + 16 with C 408, K 8).
al=np.where(d.dtype=='float32',4,8); cp=-(-d.c//al)*al; kp=-(-d.k//al)*al
d['Xp']=d.n*cp*d.h*d.w*d.e; d['Yp']=d.n*kp*d.ho*d.wo*d.e; d['Wps']=kp*(cp//d.g)*d.r*d.s*d.e*((d.r*d.s)>1)
feats=['X','Y','Wrs','W','I','NW4','Xp','Yp','Wps']
coefs=[0,0.25,0.5,1,2,4]
combos=[c for c in itertools.product(coefs,repeat=len(feats)) if 0<sum(x!=0 for x in c)<=3]
F=d[feats].to_numpy(dtype=np.float64); C=np.array(combos,dtype=np.float64).T
result={}
for col in ['fw','dg','wg']:
    ws=d[col].to_numpy(dtype=np.float64)
    matches=collections.defaultdict(list)  # label -> rows
    # constants (incl zero) as labels
    for i in np.where(ws<4096)[0]: matches[('const',int(ws[i]))].append(i)
    big=ws>=4096
    for i in range(0,C.shape[1],100):
        R=ws[:,None]-F@C[:,i:i+100]
        ok=(R>=0)&(R<1024)&big[:,None]
        rr,cc=np.nonzero(ok)
        for r_,c_ in zip(rr,cc):
            matches[(combos[i+c_],int(R[r_,c_]))].append(r_)
    matches={k:np.array(v) for k,v in matches.items()}
    covered=np.zeros(len(d),bool); order=[]
    lab=np.array([None]*len(d),dtype=object)
    while True:
        best=max(matches,key=lambda k:(~covered[matches[k]]).sum())
        cnt=(~covered[matches[best]]).sum()
        if cnt<10: break
        order.append((best,int(cnt)))
        new=matches[best][~covered[matches[best]]]
        lab[new]=str(best); covered[new]=True
    print(col,'covered',covered.mean().round(4),'labels',len(order))
    for k,c in order[:40]: print('   ',k,c)
    d[col+'_lab']=lab
    result[col]=(order,{str(k):v for k,v in matches.items() if len(v)>=10})
d.to_pickle('d4.pkl'); pickle.dump(result,open('cover4.pkl','wb'))
