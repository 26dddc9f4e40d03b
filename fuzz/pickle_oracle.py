"""What Python's own unpickler makes of a snapshot pickle: the oracle of the `snapshot_differential`
fuzz target (fuzz/targets.rs), which starts this once per process and asks it about each input.

Each request on stdin is a 4-byte little-endian length and that many bytes; each answer is one
line: `devices 0=N 3=M` with N the `alloc` and `oom` events pickle.loads shows on each device
(devices with none left out), or `refused WHY`. Pickles that name code are
refused (find_class never imports), so nothing the fuzzer writes runs."""

import io
import pickle
import sys


class NoCode(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"names code: {module}.{name}")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("persistent id")


def answer(data):
    try:
        snapshot = NoCode(io.BytesIO(data)).load()
    except Exception as err:  # any refusal of Python's own reader is an answer
        return "refused " + f"{type(err).__name__}: {err}"[:200].replace("\n", " ")
    if not isinstance(snapshot, dict) or not isinstance(snapshot.get("device_traces"), list):
        return "refused not a snapshot: no device_traces list at the root"
    devices = []
    for index, trace in enumerate(snapshot["device_traces"]):
        if not isinstance(trace, list):
            return f"refused device_traces[{index}] is not a list"
        count = sum(isinstance(e, dict) and e.get("action") in ("alloc", "oom") for e in trace)
        if count:
            devices.append(f"{index}={count}")
    return " ".join(["devices"] + devices)


def main():
    source, sink = sys.stdin.buffer, sys.stdout
    while True:
        head = source.read(4)
        if len(head) < 4:
            return
        data = source.read(int.from_bytes(head, "little"))
        sink.write(answer(data) + "\n")
        sink.flush()


if __name__ == "__main__":
    main()
