#!/usr/bin/env python3
"""A snapshot that never repeats itself, for timing `tune` and `replay` where issue 26's shortcut
(a probe stops where its state repeats, alloc/src/period.rs) cannot help (issue 39,
alloc/benches/FIGURES.md).

    python3 scripts/nonrepeating_snapshot.py OUT.pickle 1500000 [SEED]

Passes follow each other until the trace has as many events as asked; each pass, picked by a
seeded generator, is either
- a step of a synthetic transformer training loop (persistent weights, gradients and Adam
  state made once at the start) at a sequence length and batch drawn anew each step
  (dynamic padding, curriculum): activations kept for the backward, attention scores of
  batch x heads x length^2, temporaries freed at once, gradients freed after the step; or
- one of the committed recordings (reports/reference/h100/alloc-traces/*/default.pickle.gz),
  its `alloc`/`free_requested`/`free_completed` events with what it leaves live closed.
Every pass's blocks get addresses never used before, so no address recurs, and the order of
passes and their lengths never repeat, so the trace has no period. The same arguments give the
same file. The file is large: write it outside the repository (it is not committed)."""
import gzip
import pickle
import random
import sys

RECORDINGS = ['gpt', 'resnet18', 'serve', 'random']


def recording(name):
    return pickle.load(gzip.open(f'reports/reference/h100/alloc-traces/{name}/default.pickle.gz'))


def recording_events(src):
    events = [e for e in src['device_traces'][0] if e['action'] in ('alloc', 'free_requested', 'free_completed')]
    # Close what the recording leaves live (or freed and not yet completed), so that each pass
    # pairs on its own.
    live = {}
    for e in events:
        if e['action'] == 'alloc':
            live[e['addr']] = (e, False)
        elif e['action'] == 'free_requested' and e['addr'] in live:
            live[e['addr']] = (live[e['addr']][0], True)
        elif e['action'] == 'free_completed':
            live.pop(e['addr'], None)
    for e, requested in live.values():
        if not requested:
            events.append(dict(e, action='free_requested'))
        events.append(dict(e, action='free_completed'))
    return [(e['action'], e['addr'], e['size'], e['stream']) for e in events]


class Builder:
    def __init__(self):
        self.out = []
        self.next_addr = 1 << 44

    def event(self, action, addr, size, stream=0):
        self.out.append({'action': action, 'addr': addr, 'size': size, 'stream': stream,
                         'time_us': len(self.out), 'compile_context': 'N/A', 'frames': []})

    def alloc(self, size, stream=0):
        addr = self.next_addr
        # Fresh addresses for every block, 512-aligned as the allocator's are.
        self.next_addr += (size + 1023) // 512 * 512
        self.event('alloc', addr, size, stream)
        return (addr, size, stream)

    def free(self, block):
        addr, size, stream = block
        self.event('free_requested', addr, size, stream)
        self.event('free_completed', addr, size, stream)

    def recording(self, events):
        # The recording's addresses moved past every one handed out so far.
        base = self.next_addr
        top = 0
        for action, addr, size, stream in events:
            self.event(action, base + addr, size, stream)
            top = max(top, addr + size)
        self.next_addr = base + top + (1 << 30)


def training_step(b, rng, layers, d, heads, vocab):
    seq = rng.randrange(64, 2049, 64)
    batch = rng.choice([1, 2, 4, 8])
    tokens = batch * seq
    act = 2  # bf16 activations
    saved = []
    x = b.alloc(tokens * 8)  # token ids
    h = b.alloc(tokens * d * act)
    saved.append(h)
    for _ in range(layers):
        ln = b.alloc(tokens * d * act)
        qkv = b.alloc(tokens * 3 * d * act)
        scores = b.alloc(batch * heads * seq * seq * act)
        probs = b.alloc(batch * heads * seq * seq * act)
        b.free(scores)
        attn = b.alloc(tokens * d * act)
        proj = b.alloc(tokens * d * act)
        hidden = b.alloc(tokens * 4 * d * act)
        gelu = b.alloc(tokens * 4 * d * act)
        out = b.alloc(tokens * d * act)
        saved += [ln, qkv, probs, attn, proj, hidden, gelu, out]
    logits = b.alloc(tokens * vocab * 4)
    loss = b.alloc(4)
    grad_logits = b.alloc(tokens * vocab * 4)
    b.free(logits)
    grads = []
    grad_h = b.alloc(tokens * d * act)
    b.free(grad_logits)
    for _ in range(layers):
        # Backward of one layer: weight gradients made once each step, activations freed.
        for _ in range(4):
            grads.append(b.alloc(d * d * 4))
        tmp = b.alloc(tokens * 4 * d * act)
        grad_scores = b.alloc(batch * heads * seq * seq * act)
        b.free(grad_scores)
        b.free(tmp)
        new_grad = b.alloc(tokens * d * act)
        b.free(grad_h)
        grad_h = new_grad
        for block in saved[-8:]:
            b.free(block)
        del saved[-8:]
    for block in saved:
        b.free(block)
    b.free(grad_h)
    b.free(loss)
    b.free(x)
    # The optimizer's foreach temporaries, then the gradients go.
    tmp = [b.alloc(d * d * 4) for _ in range(8)]
    for block in tmp:
        b.free(block)
    for block in grads:
        b.free(block)


def main():
    path, target = sys.argv[1], int(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 39
    rng = random.Random(seed)
    sources = {name: recording(name) for name in RECORDINGS}
    recordings = {name: recording_events(src) for name, src in sources.items()}
    layers, d, heads, vocab = 12, 1024, 8, 32000
    b = Builder()
    # Weights and Adam's two moments, held throughout.
    persistent = [b.alloc(d * d * 4) for _ in range(layers * 4 * 3)]
    persistent.append(b.alloc(vocab * d * 4))
    passes = {'step': 0, **{name: 0 for name in RECORDINGS}}
    while len(b.out) < target:
        if rng.random() < 0.5:
            training_step(b, rng, layers, d, heads, vocab)
            passes['step'] += 1
        else:
            name = rng.choice(RECORDINGS)
            b.recording(recordings[name])
            passes[name] += 1
    del b.out[target:]
    snap = {'segments': [], 'device_traces': [b.out], 'allocator_settings': sources['gpt'].get('allocator_settings')}
    with open(path, 'wb') as f:
        pickle.dump(snap, f, protocol=4)
    print(len(b.out), passes)


if __name__ == '__main__':
    main()
