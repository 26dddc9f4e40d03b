"""Issue 40: the tracer under bad input and misbehaving programs. Each case says, in one line naming
the file, line or value, what is wrong, exits non-zero, and keeps the trace up to any stop; the
tracer's own frames never reach the terminal."""

from __future__ import annotations

import os
import pickle
import re
import signal
import subprocess
import sys
import threading

import pytest

torch = pytest.importorskip("torch")
import vramlab  # noqa: E402
from vramlab.trace import program_traceback, shown  # noqa: E402

# The folder the vramlab under test is imported from (CI's installed wheel, not the checkout's
# sources, which lack the built extension), for the subprocesses to import the same.
HERE = os.path.dirname(os.path.dirname(os.path.abspath(vramlab.__file__)))
PACKAGE = os.path.join(HERE, "vramlab") + os.sep
SMALL = "import torch\nx = torch.zeros(1000, device='cuda')\n"


def _default_dispositions():
    # A test run under nohup (or any parent ignoring these) would hand the ignoring on to the
    # program, which then outlives the signal as it should: the tests want the default.
    for name in ("SIGTERM", "SIGHUP", "SIGALRM", "SIGINT"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)


def trace_cli(tmp_path, script, *extra, out="snap.pickle", timeout=300):
    program = tmp_path / "program.py"
    if isinstance(script, bytes):
        program.write_bytes(script)
    else:
        program.write_text(script)
    command = [sys.executable, "-m", "vramlab.trace", *extra] + (["--out", out] if out is not None else []) + [str(program)]
    env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        command, capture_output=True, text=True, cwd=tmp_path, timeout=timeout, env=env, stdin=subprocess.DEVNULL,
        preexec_fn=_default_dispositions if os.name == "posix" else None,
    )


def no_tracer_frames(stderr):
    assert PACKAGE not in stderr, stderr
    assert "<frozen runpy>" not in stderr, stderr


def allocated(path):
    with open(path, "rb") as f:
        snapshot = pickle.load(f)
    return [e["size"] for e in snapshot["device_traces"][0] if e["action"] == "alloc"], snapshot


# Bad command lines: refused before the program runs ------------------------------------------


@pytest.mark.parametrize(
    "script, said",
    [
        ("x = (\n", "program.py:1: SyntaxError: '(' was never closed"),
        ("x = 1\x00\n", "source code string cannot contain null bytes"),
        (b"x = '\xff'\n", "program.py:1: SyntaxError"),
    ],
)
def test_a_script_that_does_not_compile_is_one_line(tmp_path, script, said):
    done = trace_cli(tmp_path, script)
    assert done.returncode == 1
    assert said in done.stderr and "nothing was traced" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "snap.pickle").exists()


def test_out_naming_the_script_itself_is_refused_and_the_script_kept(tmp_path):
    done = trace_cli(tmp_path, SMALL, out="program.py")
    assert done.returncode == 2 and "is the script itself" in done.stderr
    assert (tmp_path / "program.py").read_text() == SMALL


@pytest.mark.parametrize(
    "out, said",
    [
        ("", "--out is empty"),
        ("a" * 300 + ".pickle", "file name too long"),
    ],
)
def test_an_out_that_cannot_be_written_is_refused_before_the_program_runs(tmp_path, out, said):
    done = trace_cli(tmp_path, SMALL + "print('ran')\n", out=out)
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert "ran" not in done.stdout


def test_an_out_where_no_file_can_be_made_is_refused_before_the_program_runs(tmp_path):
    # /proc takes no new files, for root too (os.access says it is writable).
    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc on this host")
    done = trace_cli(tmp_path, SMALL + "print('ran')\n", out="/proc/snap.pickle")
    assert done.returncode == 2 and "--out cannot be written there" in done.stderr, done.stderr
    assert "ran" not in done.stdout


def test_control_characters_in_out_are_escaped_in_the_tracers_lines(tmp_path):
    done = trace_cli(tmp_path, SMALL, out="a\nb\x1b[31m.pickle")
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stderr and "a\\u{a}b\\u{1b}[31m.pickle" in done.stderr
    assert (tmp_path / "a\nb\x1b[31m.pickle").exists()


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400"])
def test_answer_reads_takes_finite_numbers_only(tmp_path, value):
    done = trace_cli(tmp_path, SMALL, f"--answer-reads={value}")
    assert done.returncode == 2 and "give a finite number" in done.stderr
    with pytest.raises(ValueError, match="finite"):
        vramlab.trace(answer_reads=float(value))


@pytest.mark.parametrize("nproc", ["0", "-1", "100000"])
def test_nproc_out_of_range_is_refused_at_once(tmp_path, nproc):
    done = trace_cli(tmp_path, SMALL, "--nproc", nproc, out="ranks", timeout=60)
    assert done.returncode == 2 and f"--nproc {nproc}: give 1 to 128 ranks" in done.stderr
    assert not (tmp_path / "ranks").exists()


def test_a_world_size_past_one_hosts_devices_is_refused():
    with pytest.raises(ValueError, match="at most 128 ranks"):
        vramlab.trace(world_size=2**40, rank=0)


def test_capacity_is_checked_before_the_ranks_run_and_refused_without_nproc_or_sweep(tmp_path):
    done = trace_cli(tmp_path, SMALL, "--nproc", "1", "--capacity", "lots", out="ranks", timeout=60)
    assert done.returncode == 2 and "--capacity 'lots'" in done.stderr
    assert not (tmp_path / "ranks").exists()
    done = trace_cli(tmp_path, SMALL, "--capacity", "1 GiB", timeout=60)
    assert done.returncode == 2 and "read with --sweep or --nproc only" in done.stderr


def test_a_snapshot_is_written_with_the_usual_permissions(tmp_path):
    done = trace_cli(tmp_path, SMALL)
    assert done.returncode == 0, done.stderr
    mask = os.umask(0)
    os.umask(mask)
    assert os.stat(tmp_path / "snap.pickle").st_mode & 0o777 == 0o666 & ~mask


# Programs that end in odd ways --------------------------------------------------------------


@pytest.mark.parametrize(
    "ending, kind",
    [
        ("class Boom(BaseException): pass\nraise Boom('boom')", "Boom"),
        ("raise GeneratorExit", "GeneratorExit"),
        ("def f(n): return f(n + 1)\nf(0)", "RecursionError"),
        ("print(input())", "EOFError"),
    ],
)
def test_any_exception_of_the_program_keeps_the_trace_and_shows_only_its_own_frames(tmp_path, ending, kind):
    done = trace_cli(tmp_path, SMALL + ending + "\n")
    assert done.returncode == 1
    assert f"error: the script raised {kind}" in done.stderr
    assert 'File "' + str(tmp_path / "program.py") in done.stderr
    no_tracer_frames(done.stderr)
    sizes, _ = allocated(tmp_path / "snap.pickle")
    assert 4000 in sizes


def test_an_out_of_memory_error_raised_for_the_gpu_shows_the_programs_line_not_the_tracers(tmp_path):
    done = trace_cli(tmp_path, SMALL + "y = torch.empty(2**62, dtype=torch.uint8, device='cuda')\n")
    assert done.returncode == 1 and "OutOfMemoryError" in done.stderr
    no_tracer_frames(done.stderr)
    assert (tmp_path / "snap.pickle").exists()


@pytest.mark.parametrize(
    "ending, stopped",
    [
        ("class S:\n    def __str__(self): raise RuntimeError('no str')\nimport sys; sys.exit(S())", "str() failed"),
        ("class E(Exception):\n    def __str__(self): raise RuntimeError('no str')\nraise E()", "the script raised E"),
    ],
)
def test_an_exception_whose_str_fails_is_said_without_a_tracer_traceback(tmp_path, ending, stopped):
    done = trace_cli(tmp_path, SMALL + ending + "\n")
    assert done.returncode == 1 and stopped in done.stderr, done.stderr
    no_tracer_frames(done.stderr)
    assert (tmp_path / "snap.pickle").exists()


@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP", "SIGALRM"])
def test_a_signal_that_ends_the_program_keeps_the_trace_and_ends_the_process_by_it(tmp_path, name):
    if not hasattr(signal, name):
        pytest.skip(f"no {name} on this host")
    script = SMALL + f"import os, signal, time\nos.kill(os.getpid(), signal.{name})\ntime.sleep(30)\n"
    done = trace_cli(tmp_path, script, timeout=120)
    signum = getattr(signal, name)
    assert done.returncode == -signum, done.stderr
    assert f"ended by {name}" in done.stderr
    sizes, snapshot = allocated(tmp_path / "snap.pickle")
    assert 4000 in sizes and any(name in note for note in snapshot["vramlab_notes"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["program.py", "snap.pickle"]


def test_os_exit_leaves_no_lock_file_behind(tmp_path):
    done = trace_cli(tmp_path, SMALL + "import os; os._exit(7)\n")
    assert done.returncode == 7
    assert sorted(p.name for p in tmp_path.iterdir()) == ["program.py", "snap.pickle"]
    assert "os._exit(7)" in done.stderr


def test_a_pool_of_forked_workers_leaves_no_part_written_files(tmp_path):
    script = SMALL + (
        "import multiprocessing as mp\n"
        "def f(i):\n    return i * 2\n"
        "if __name__ == '__main__':\n"
        "    with mp.get_context('fork').Pool(2) as p:\n        print(p.map(f, range(4)))\n"
    )
    done = trace_cli(tmp_path, script)
    assert done.returncode == 0, done.stderr
    assert "[0, 2, 4, 6]" in done.stdout
    # Workers that recorded nothing write nothing; none is left part-written.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["program.py", "snap.pickle"]
    no_tracer_frames(done.stderr)


SPAWNED = (
    "import multiprocessing as mp\nimport torch\nx = torch.zeros(1000, device='cuda')\n{extra}"
    "def f(i):\n    return i * 2\n"
    "if __name__ == '__main__':\n"
    "    with mp.get_context('{method}').Pool(2) as p:\n        print(p.map(f, range(4)))\n"
)


def test_a_spawn_pool_whose_script_uses_the_gpu_at_its_top_level_runs_its_children_traced(tmp_path):
    # Each child re-runs the script; outside the trace its top-level GPU use failed and the pool
    # restarted dying workers for ever.
    done = trace_cli(tmp_path, SPAWNED.format(extra="", method="spawn"), timeout=120)
    assert done.returncode == 0, done.stderr
    assert "[0, 2, 4, 6]" in done.stdout
    sizes, _ = allocated(tmp_path / "snap.pickle")
    assert sizes == [4000]
    # A worker the pool's terminate ends in its task loop writes nothing; one that left the loop
    # first (the pool's stop sentinel, a race) writes its own snapshot, whole, or none if the
    # terminate comes while it writes: none is ever left part-written.
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names[:2] == ["program.py", "snap.pickle"], names
    for name in names[2:]:
        assert re.fullmatch(r"snap\.pickle\.\d+", name), names
        assert allocated(tmp_path / name)[0] == [4000]
    no_tracer_frames(done.stderr)


TERMINATED_WHILE_WRITING = """
import os, signal, sys
from vramlab._tracer.recorder import write_atomically
from vramlab._tracer.spawned import _save_unless_terminated

class Terminating:
    def __reduce__(self):
        os.kill(os.getpid(), signal.SIGTERM)  # the pool's terminate, halfway through the pickle
        return (int, ())

class Tracer:
    def save(self, path):
        write_atomically(path, {"segments": [], "big": b"x" * 100000, "then": Terminating()})

_save_unless_terminated(Tracer(), sys.argv[1])
print("not reached")
"""


def test_a_spawned_child_terminated_while_it_writes_its_snapshot_leaves_no_part_and_dies_by_the_signal(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run([sys.executable, "-c", TERMINATED_WHILE_WRITING, str(out / "snap.pickle.7")], capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGTERM, (done.returncode, done.stderr)
    assert "not reached" not in done.stdout
    assert list(out.iterdir()) == []


def test_a_spawned_child_that_cannot_start_stops_the_trace_in_one_line(tmp_path):
    extra = "if __name__ != '__main__':\n    raise RuntimeError('only in children')\n"
    done = trace_cli(tmp_path, SPAWNED.format(extra=extra, method="spawn"), timeout=120)
    assert done.returncode == 1, done.stderr
    line = [l for l in done.stderr.splitlines() if l.startswith("error:")]
    assert len(line) == 1, done.stderr
    assert "'spawn' method" in line[0] and "program.py:5: RuntimeError: only in children" in line[0], line
    assert "the trace up to there is kept" in line[0] and "program.py:9" in line[0], line
    sizes, _ = allocated(tmp_path / "snap.pickle")
    assert sizes == [4000]


def test_a_forkserver_pool_is_refused_in_one_line(tmp_path):
    done = trace_cli(tmp_path, SPAWNED.format(extra="", method="forkserver"), timeout=120)
    assert done.returncode == 1, done.stderr
    assert "'forkserver' start method" in done.stderr and "program.py:7" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    sizes, _ = allocated(tmp_path / "snap.pickle")
    assert sizes == [4000]


FOREVER = "import torch\nwhile True:\n    x = torch.zeros(1000, device='cuda')\n    del x\n"


@pytest.mark.parametrize("how", ["option", "variable"])
def test_a_program_that_never_ends_stops_at_the_event_bound_with_its_trace_kept(tmp_path, how, monkeypatch):
    if how == "variable":
        monkeypatch.setenv("VRAMLAB_TRACE_MAX_EVENTS", "1000")
        done = trace_cli(tmp_path, FOREVER, timeout=120)
    else:
        done = trace_cli(tmp_path, FOREVER, "--max-events", "1000", timeout=120)
    assert done.returncode == 1, done.stderr
    errors = [l for l in done.stderr.splitlines() if l.startswith("error:")]
    assert len(errors) == 1 and "bound of 1,000 events at" in errors[0] and "program.py:3" in errors[0], done.stderr
    assert "the trace up to there is kept" in errors[0] and "Traceback" not in done.stderr
    sizes, snapshot = allocated(tmp_path / "snap.pickle")
    # The last tensor's free, as the stop unwinds the program, follows the bound.
    assert 1000 <= len(snapshot["device_traces"][0]) <= 1002 and len(sizes) == 334


@pytest.mark.parametrize("value", ["0", "-5", "many"])
def test_a_bad_event_bound_is_refused_before_the_program_runs(tmp_path, value, monkeypatch):
    monkeypatch.setenv("VRAMLAB_TRACE_MAX_EVENTS", value)
    done = trace_cli(tmp_path, SMALL)
    assert done.returncode == 2 and "VRAMLAB_TRACE_MAX_EVENTS" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "snap.pickle").exists()
    assert trace_cli(tmp_path, SMALL, "--max-events", "0").returncode == 2


def test_the_event_bound_of_the_api_stops_inside_the_trace_and_keeps_it():
    with pytest.raises(vramlab.UnfollowedError, match="bound of 30 events"):
        with vramlab.trace(max_events=30) as t:
            while True:
                torch.zeros(10, device="cuda")
    assert len(t.snapshot()["device_traces"][0]) == 30
    with pytest.raises(ValueError, match="max_events"):
        vramlab.trace(max_events=0)


def test_the_gpu_used_from_another_thread_is_said_once_without_the_tracers_frames(tmp_path):
    script = SMALL + "import threading\nth = threading.Thread(target=lambda: torch.empty(10, device='cuda'))\nth.start(); th.join()\n"
    done = trace_cli(tmp_path, script)
    assert done.returncode == 1
    assert done.stderr.count("from a thread the trace does not follow") == 1, done.stderr
    no_tracer_frames(done.stderr)


# Tensors the tracer must not choke on ---------------------------------------------------------


def test_tensors_of_odd_kinds_are_followed_or_refused_in_one_line():
    with vramlab.trace() as t:
        x = torch.randn(4, device="cuda")
        # int4 has no CPU kernels: its values are not kept, and the trace goes on.
        if hasattr(torch, "int4"):
            torch.zeros(7, dtype=torch.int4, device="cuda")
        torch.empty(10, pin_memory=True)  # pinned host memory is the host's
        with pytest.raises(TypeError, match="cuda:0 device type tensor to numpy"):
            x.numpy()
        with pytest.raises(vramlab.UnfollowedError, match="DLPack"):
            torch.utils.dlpack.to_dlpack(x)
        with pytest.raises(RuntimeError, match="cannot be negative"):
            x.untyped_storage().resize_(-5)
    sizes = [e["size"] for e in t.snapshot()["device_traces"][0] if e["action"] == "alloc"]
    assert sizes and all(size > 0 for size in sizes)


# The Python API -------------------------------------------------------------------------------


def test_save_to_bad_paths_names_the_path_asked_for(tmp_path):
    with vramlab.trace() as t:
        x = torch.zeros(10, device="cuda")  # noqa: F841
    with pytest.raises(ValueError, match="empty"):
        t.save("")
    with pytest.raises(IsADirectoryError):
        t.save(str(tmp_path))
    with pytest.raises(FileNotFoundError) as missing:
        t.save(str(tmp_path / "no" / "such" / "x.pickle"))
    assert str(tmp_path / "no" / "such" / "x.pickle") in str(missing.value) and ".partial" not in str(missing.value)
    with pytest.raises(TypeError, match="not int"):
        t.save(123)
    assert list(tmp_path.iterdir()) == []


def test_two_threads_entering_traces_at_once_are_told_one_is_running():
    errors = []
    barrier = threading.Barrier(2)

    def run():
        barrier.wait()
        try:
            with vramlab.trace():
                torch.empty(10, device="cuda")
        except vramlab.UnfollowedError as e:
            errors.append(str(e))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(errors) <= 1 and all("already running" in e or "thread" in e for e in errors), errors
    assert torch.empty(3).device.type == "cpu"


def test_shown_escapes_and_bounds():
    assert shown("a\nb\u2028c\x1b") == "a\\u{a}b\\u{2028}c\\u{1b}"
    assert shown("x" * 1000, 10).startswith("xxxxxxxxxx... (1,000 characters)")


def test_program_traceback_leaves_out_the_tracers_frames():
    try:
        exec(compile("def f():\n    raise ValueError('v')\nf()\n", "prog.py", "exec"), {})
    except ValueError as e:
        text = program_traceback(e)
    assert "prog.py" in text and "ValueError: v" in text and PACKAGE not in text
