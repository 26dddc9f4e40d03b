"""vramlab reads a snapshot as Python's own `pickle.loads` does (issue 22): over the fuzz corpus,
the committed recordings and mutations of them made by Python itself (other protocols, the memo
shared, keys given twice, a `device_traces` nested elsewhere, devices filled through the memo),
the allocations vramlab replays per device are those `pickle.loads` shows."""

import gzip
import pickle
import random
from pathlib import Path

import pytest

import vramlab

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "fuzz" / "corpus" / "pickle").iterdir()) + [
    ROOT / "reports" / "reference" / "h100" / "real-jobs" / name
    for name in ("two-streams.pickle.gz", "graph-keep.pickle.gz", "mempool-keep.pickle.gz")
]


def load(path):
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if raw[:1] != b"\x80":
        raw = b"\x80" + raw  # the fuzz corpus keeps pickles without their PROTO opcode's first byte
    return pickle.loads(raw)


def python_allocations(snapshot):
    """Per device: the requests pickle.loads shows (`alloc` and the failed `oom`)."""
    return [sum(e.get("action") in ("alloc", "oom") for e in trace) for trace in snapshot["device_traces"]]


def vramlab_allocations(data):
    try:
        record = vramlab.replay(data, policy="caching")
    except ValueError as err:
        return str(err)
    devices = record.get("devices") or [record]
    return {d["device_index"]: d["allocations"] for d in devices if d["results"]}


def twice_bytes(snapshot):
    decoy = [[{"action": "alloc", "addr": 1 << 40, "size": 512, "stream": 0}] for _ in snapshot["device_traces"]]
    body = pickle.dumps(snapshot, protocol=4)
    # Opcodes: PROTO 4, FRAME..., EMPTY_DICT, MEMOIZE, then the items. Prepend a SETITEM of the
    # decoy right after the root dict is made, so the real key (written later) wins.
    decoy_items = pickle.dumps(decoy, protocol=2)[2:-1]  # the list's opcodes, no PROTO or STOP
    head = b"\x80\x02}" + b"X" + len("device_traces").to_bytes(4, "little") + b"device_traces" + decoy_items + b"s"
    # The rest: the real dict's items as SETITEMS onto the same root.
    items = pickle.dumps(snapshot, protocol=2)[3:-1]  # drop PROTO 2 and EMPTY_DICT, and STOP
    return head + items + b"."


def mutations(snapshot, seed):
    rng = random.Random(seed)
    yield "protocol 2", pickle.dumps(snapshot, protocol=2)
    yield "protocol 5", pickle.dumps(snapshot, protocol=5)
    shared = dict(snapshot)
    frame = {"filename": "x.py", "line": 1, "name": "f"}
    shared["device_traces"] = [[dict(e, frames=[frame, frame]) for e in trace] for trace in snapshot["device_traces"]]
    yield "the memo shared across events", pickle.dumps(shared, protocol=4)
    nested = dict(snapshot)
    nested["external_annotations"] = [{"device_traces": [[{"action": "alloc", "addr": 4096, "size": 512, "stream": 0}]]}]
    yield "device_traces nested in an annotation", pickle.dumps(nested, protocol=4)
    yield "device_traces given twice", twice_bytes(snapshot)
    dropped = dict(snapshot)
    traces = [list(t) for t in snapshot["device_traces"]]
    for trace in traces:
        if trace:
            del trace[rng.randrange(len(trace))]
    dropped["device_traces"] = traces
    yield "an event dropped", pickle.dumps(dropped, protocol=4)


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_allocations_read_as_pickle_loads_reads_them(source):
    snapshot = load(source)
    for what, data in mutations(snapshot, seed=len(source.name)):
        seen = pickle.loads(data)
        expected = {d: n for d, n in enumerate(python_allocations(seen)) if n}
        ours = vramlab_allocations(data)
        if isinstance(ours, str):
            # A refusal must be about the snapshot, not a disagreement about what it holds.
            assert "not a PyTorch memory snapshot" in ours or "device" in ours, (what, ours)
            continue
        assert {d: n for d, n in ours.items() if n} == expected, what
