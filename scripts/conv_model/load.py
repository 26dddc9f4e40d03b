"""How the conv workspace model (python/vramlab/_tracer/rules/conv_model.py) was built, step by step:
load -> search -> cover -> fit/fit2 -> export -> check (reports/reference/conv-model/FINDINGS.md)."""
import gzip, json, os, sys
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, 'scripts'))
from build_conv_table import scratch
import pandas as pd
def load():
    recs = []
    for gpu in ('h100','h200'):
        folder=os.path.join(ROOT, 'reports', 'reference', gpu, 'conv-workspaces')
        for name in sorted(os.listdir(folder)):
            # more-*: measured after the model, to check it (its 'random' group is held out).
            if not name.endswith('.jsonl.gz') or name.startswith('more-'): continue
            for line in gzip.open(os.path.join(folder,name),'rt'):
                row=json.loads(line)
                # conv1d-heldout: measured to check the model on 1-d convolutions, never fitted.
                if 'error' in row or row.get('group','').endswith('-heldout') or row.get('channels_last'): continue
                # 3-d rows are fitted apart (fit3d.py); channels-last ones are a table of their own.
                if len(row['shape']) != 10: continue
                c,h,w,k,r,s,st,pd_,dl,g=row['shape']
                f=scratch(row['forward']); b=scratch(row['backward'])
                fw=sum(x for _,x in f); dg=sum(x for n,x in b if n==1); wg=sum(x for n,x in b if n==2)
                # output sizes
                outs=[sz for a,sz,ad in row['forward'] if a=='a']
                recs.append(dict(gpu=gpu,file=name,group=row['group'],dtype=row['dtype'],n=row['n'],c=c,h=h,w=w,k=k,r=r,s=s,
                  sh=st[0],sw=st[1],ph=pd_[0],pw=pd_[1],dh=dl[0],dw=dl[1],g=g,backend=row['backend'].split('.')[-1],
                  fw=fw,dg=dg,wg=wg,fwd_out=row['forward'][0][1] if row['forward'] else 0))
    df=pd.DataFrame(recs)
    df=df.drop_duplicates(subset=[c for c in df.columns if c not in ('file','group')])
    return df
if __name__=='__main__':
    df=load(); df.to_pickle('df.pkl'); print(len(df)); print(df.groupby(['gpu','dtype','backend']).size())
    print(df.head())
