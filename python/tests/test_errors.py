"""Each error class of vramlab.errors, raised where its kind of error happens, and caught by
the built-in exception it stands for."""

import os
import pathlib
import tempfile

import pytest

import vramlab
from vramlab.errors import DeviceError, FileError, InputError, SettingsError, TraceError, VramlabError

ROOT = pathlib.Path(__file__).resolve().parents[2]
TRACE = str(ROOT / "tests" / "traces" / "resnet18_default.pickle")


def one_line(err):
    assert "\n" not in str(err.value), str(err.value)
    return str(err.value)


def test_the_classes_stand_for_the_builtins():
    for cls, builtin in [
        (TraceError, ValueError),
        (SettingsError, ValueError),
        (InputError, ValueError),
        (FileError, OSError),
        (DeviceError, OSError),
    ]:
        assert issubclass(cls, VramlabError) and issubclass(cls, builtin)
        assert getattr(vramlab, cls.__name__) is cls


def test_a_bad_trace_is_a_trace_error_and_a_value_error():
    with pytest.raises(TraceError) as err:
        vramlab.replay(b"\x80\x04\x95garbage")
    one_line(err)
    with pytest.raises(ValueError):
        vramlab.replay({"device_traces": 5})
    with pytest.raises(TraceError) as err:
        vramlab.replay(TRACE, device=3)
    assert "device 3: the snapshot has devices 0..0" in one_line(err)


def test_bad_settings_are_settings_errors():
    with pytest.raises(SettingsError) as err:
        vramlab.replay(TRACE, alloc_conf="colour:blue")
    assert "colour" in one_line(err)
    with pytest.raises(SettingsError) as err:
        vramlab.replay(TRACE, policy="no-such-policy")
    assert "no-such-policy" in one_line(err)
    with pytest.raises(SettingsError):
        vramlab.tune(TRACE, capacity=0)
    with pytest.raises(ValueError):
        vramlab.tune(TRACE, grid=["max_split_size_mb:10"])


def test_other_bad_values_are_input_errors():
    with pytest.raises(InputError) as err:
        vramlab.explain("occupancy", threads="many")
    one_line(err)
    with pytest.raises(InputError):
        vramlab.run("no-such-experiment")
    with pytest.raises(InputError):
        vramlab.run("occupancy", backend="abacus")
    # An empty grid is a mistake, not a request for the default one.
    with pytest.raises(InputError) as err:
        vramlab.tune(TRACE, grid=[])
    assert "grid is empty" in one_line(err)
    with pytest.raises(TypeError):
        vramlab.replay(TRACE, alloc_conf=5)


def test_a_number_too_large_is_named_as_such():
    with pytest.raises(TraceError) as err:
        vramlab.replay({"device_traces": [[{"action": "alloc", "addr": 1, "size": 2**70, "stream": 0}]]})
    assert "larger than 2^64 - 1" in one_line(err)


def test_files_that_cannot_be_read_are_file_errors_and_os_errors():
    with pytest.raises(FileError) as err:
        vramlab.replay("/nonexistent/snapshot.pickle")
    assert "/nonexistent/snapshot.pickle" in one_line(err)
    with tempfile.TemporaryDirectory() as folder:
        # A folder given as a trace: the README promises OSError.
        with pytest.raises(OSError) as err:
            vramlab.replay(folder)
        assert isinstance(err.value, FileError) and "is a folder" in one_line(err)
        fifo = os.path.join(folder, "fifo")
        os.mkfifo(fifo)
        with pytest.raises(FileError):
            vramlab.replay(fifo)


def test_a_machine_without_a_gpu_gives_a_device_error():
    if os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl"):
        pytest.skip("this machine has an NVIDIA device: the hw backend may run")
    with pytest.raises(DeviceError) as err:
        vramlab.run("occupancy", backend="hw")
    assert "needs an NVIDIA GPU" in one_line(err) and "--backend" not in str(err.value)
    with pytest.raises(OSError):
        vramlab.run("occupancy", backend="hw")


def _snapshot(events):
    """A one-device snapshot dict of `events`, its segments empty."""
    return {"segments": [], "device_traces": [events]}


def _events(make=dict):
    return [
        make(action="alloc", addr=1 << 34, size=512, stream=0),
        make(action="free_requested", addr=1 << 34, size=512, stream=0),
        make(action="free_completed", addr=1 << 34, size=512, stream=0),
    ]


def test_ordered_dicts_are_read_as_dicts():
    """Issue 40: events given as OrderedDicts (or any dict subclass) were refused."""
    import collections

    plain = vramlab.replay(_snapshot(_events()))
    ordered = vramlab.replay(_snapshot(_events(collections.OrderedDict)))
    assert ordered["results"][0]["peak_allocated_bytes"] == plain["results"][0]["peak_allocated_bytes"] == 512
    # A subclass elsewhere (the root, a segment's blocks, a str subclass as an action) too.
    class Action(str):
        pass

    events = _events(collections.OrderedDict)
    events[0]["action"] = Action("alloc")
    events[0]["frames"] = collections.defaultdict(list)
    root = collections.OrderedDict(_snapshot(events))
    again = vramlab.replay(root)
    assert again["results"][0]["peak_allocated_bytes"] == 512


def _nested(depth):
    """A list `depth` lists deep."""
    outer = nest = []
    for _ in range(depth):
        inner = []
        nest.append(inner)
        nest = inner
    return outer


def test_deep_or_self_containing_dicts_are_refused_in_one_line():
    """Issue 40: a snapshot nested thousands deep, or containing itself, raised RecursionError."""
    deep = _snapshot(_events())
    deep["external_annotations"] = _nested(100_000)
    with pytest.raises(TraceError) as err:
        vramlab.replay(deep)
    assert "nests deeper than 64 levels" in one_line(err)
    assert "snapshot['external_annotations'][0][0][0]..." in str(err.value), str(err.value)
    # Deep inside an event that the fast path does not read, the same (the event is pickled).
    deep = _snapshot(_events())
    deep["device_traces"][0][0]["addr"] = 1.5
    deep["device_traces"][0][0]["frames"] = _nested(100_000)
    with pytest.raises(TraceError) as err:
        vramlab.replay(deep)
    assert "snapshot['device_traces'][0][0]['frames']" in one_line(err), str(err.value)
    cyclic = _snapshot(_events())
    cyclic["segments"] = [{"address": 1, "blocks": []}]
    cyclic["segments"][0]["blocks"].append(cyclic)
    with pytest.raises(TraceError) as err:
        vramlab.replay(cyclic)
    assert "contains itself" in one_line(err)


def test_control_characters_and_line_separators_are_escaped_in_messages():
    """Issue 40: a U+2028 in a value reached the message raw, and ended its line."""
    with pytest.raises(SettingsError) as err:
        vramlab.replay(TRACE, alloc_conf=["banana\u2028:1\r"])
    message = one_line(err)
    assert "\u2028" not in message and "\r" not in message, message
    assert "\\u{2028}" in message, message
