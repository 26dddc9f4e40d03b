"""The `vramlab` command pip installs, and `python -m vramlab`: the Rust binary's command line,
from the wheel."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TRACE = str(ROOT / "tests" / "traces" / "resnet18_default.pickle")
COMMAND = pathlib.Path(sys.executable).parent / "vramlab"


def commands():
    yield [sys.executable, "-m", "vramlab"]
    if not COMMAND.exists():
        pytest.fail(f"pip installed no `vramlab` command beside {sys.executable}")
    yield [str(COMMAND)]


@pytest.mark.parametrize("command", list(commands()), ids=["python -m vramlab", "vramlab"])
def test_tune_runs_from_the_shell(command, tmp_path):
    done = subprocess.run(
        command + ["tune", TRACE, "--capacity", "2 GiB", "--out", str(tmp_path / "tune")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    first = lines[[line.split()[:1] for line in lines].index(["rank"]) + 1].split()
    assert first[:2] == ["1", "yes"], done.stdout
    # The last line answers (issue 38 item 5).
    assert lines[-1].startswith("answer: your current settings (PyTorch's defaults) already fit"), done.stdout
    assert (tmp_path / "tune" / "tune.json").exists()


@pytest.mark.parametrize("command", list(commands()), ids=["python -m vramlab", "vramlab"])
def test_failures_exit_as_the_binary_does(command, tmp_path):
    missing = subprocess.run(command + ["replay", "/nonexistent.pickle"], capture_output=True, text=True, cwd=tmp_path)
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1, missing.stderr
    assert "/nonexistent.pickle" in missing.stderr
    usage = subprocess.run(command + ["--bogus"], capture_output=True, text=True, cwd=tmp_path)
    assert usage.returncode == 2 and "--bogus" in usage.stderr
    # The usage names the command as typed (issue 38 item 9), never `__main__.py`.
    named = "python -m vramlab" if "-m" in command else "vramlab"
    assert f"Usage: {named} " in usage.stderr and "__main__" not in usage.stderr, usage.stderr
    version = subprocess.run(command + ["--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("vramlab ")
    assert not os.listdir(tmp_path), "a failed command wrote files"


def test_replay_html_shows_every_device(tmp_path):
    """A snapshot of two devices: replay.html has a section, a table and plots for each, as the
    terminal has a table for each (issue 24: the page showed the first device only)."""
    import pickle

    def events(base, sizes):
        out = []
        for i, size in enumerate(sizes):
            out.append({"action": "alloc", "addr": base + i * (2 << 20), "size": size, "stream": 0})
        for i, size in enumerate(sizes):
            out.append({"action": "free_completed", "addr": base + i * (2 << 20), "size": size, "stream": 0})
        return out

    snapshot = {"segments": [], "device_traces": [events(1 << 40, [1 << 20] * 3), events(2 << 40, [512, 4096])]}
    path = tmp_path / "two-devices.pickle"
    path.write_bytes(pickle.dumps(snapshot))
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "vramlab", "replay", str(path), "--out", str(out)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "device 0:" in done.stdout and "device 1:" in done.stdout, done.stdout
    html = (out / "replay.html").read_text()
    for device in (0, 1):
        assert f"two-devices.pickle (sim), device {device}" in html
        assert (out / "plots" / f"replay_peaks_sim_device{device}.png").exists()
