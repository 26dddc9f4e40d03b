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
    first = done.stdout.splitlines()[1].split()
    assert first[:2] == ["1", "yes"], done.stdout
    assert (tmp_path / "tune" / "tune.json").exists()


@pytest.mark.parametrize("command", list(commands()), ids=["python -m vramlab", "vramlab"])
def test_failures_exit_as_the_binary_does(command, tmp_path):
    missing = subprocess.run(command + ["replay", "/nonexistent.pickle"], capture_output=True, text=True, cwd=tmp_path)
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1, missing.stderr
    assert "/nonexistent.pickle" in missing.stderr
    usage = subprocess.run(command + ["--bogus"], capture_output=True, text=True, cwd=tmp_path)
    assert usage.returncode == 2 and "--bogus" in usage.stderr
    version = subprocess.run(command + ["--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("vramlab ")
    assert not os.listdir(tmp_path), "a failed command wrote files"
