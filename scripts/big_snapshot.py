#!/usr/bin/env python3
"""A 10 M-event snapshot for end-to-end timings (alloc/benches/FIGURES.md): the gpt recording's
events repeated at addresses shifted by 2^40. python3 scripts/big_snapshot.py OUT.pickle 10000000"""
import gzip, pickle, sys
src = pickle.load(gzip.open('reports/reference/h100/alloc-traces/gpt/default.pickle.gz'))
events = [e for e in src['device_traces'][0] if e['action'] in ('alloc', 'free_requested', 'free_completed')]
# Close what the recording leaves live, so each repetition pairs on its own.
live = {}
for e in events:
    if e['action'] == 'alloc': live[e['addr']] = e
    elif e['action'] == 'free_completed': live.pop(e['addr'], None)
tail = []
for addr, e in live.items():
    tail.append(dict(e, action='free_requested')); tail.append(dict(e, action='free_completed'))
events += tail
target = int(sys.argv[2])
out = []
r = 0
while len(out) < target:
    shift = r << 40
    for e in events:
        out.append({'action': e['action'], 'addr': e['addr'] + shift, 'size': e['size'], 'stream': e['stream'],
                    'time_us': len(out), 'compile_context': 'N/A', 'frames': []})
        if len(out) >= target: break
    r += 1
snap = {'segments': [], 'device_traces': [out], 'allocator_settings': src.get('allocator_settings')}
with open(sys.argv[1], 'wb') as f:
    pickle.dump(snap, f, protocol=4)
print(len(out), r)
