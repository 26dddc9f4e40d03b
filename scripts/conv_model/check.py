# Check the shipped conv_model reproduces the measured rows (it is refitted on all: training accuracy) and timing.
import sys, time, pandas as pd, numpy as np
sys.path.insert(0,'deliver'); import conv_model as m
df=pd.read_pickle('df.pkl')
hits={'fw':0,'dg':0,'wg':0}; t=time.time(); dw=[0,0]
for row in df.itertuples():
    p=m.workspaces(row.gpu,row.dtype,row.n,row.c,row.h,row.w,row.k,row.r,row.s,(row.sh,row.sw),(row.ph,row.pw),(row.dh,row.dw),row.g)
    for i,col in enumerate(['fw','dg','wg']):
        hits[col]+= p is not None and p[i]==getattr(row,col)
    if row.backend=='CudaDepthwise2d':
        dw[0]+=1; dw[1]+= p==(0,0,0)
print({k:round(v/len(df),4) for k,v in hits.items()}, len(df), 'depthwise-native rows', dw, 'sec',round(time.time()-t,1))
