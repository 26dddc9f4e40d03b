"""The README's and docs/GUIDE.md's examples, run as written.

Every fenced block of those files carries an info string saying what it is, and this test knows
each one, so no block is silently skipped:

- ``sh``: run with bash (``set -e``), from a scratch folder that looks like the root of a clone
  (links to the repository's ``tests/``, ``reports/``, ``experiments/``, ...), so the commands'
  repo-relative paths work as in the docs while what they write (``vramlab-out/``, files named
  in the block) lands in the scratch folder;
- ``python``: run with this interpreter, from the same folder;
- ``sh-gpu``: needs an NVIDIA GPU. Without one (no ``/dev/nvidia0``) it is run all the same and
  must fail cleanly: exit status 1 and one line saying it "needs an NVIDIA GPU";
- ``toml file=NAME``: written to NAME in the scratch folder before the blocks after it run (the
  docs say "save this as NAME");
- ``python-cpu-torch``: needs PyTorch, no GPU (the tracer): run where torch imports, and each
  ``print(...)  # shown`` line's comment must match a line of its output (``...`` standing for
  anything); every ``print`` must print something;
- ``sh-build`` (builds or installs from source), ``sh-ray`` (needs Ray;
  ``test_ray_example.py`` runs that example), ``python-torch`` (needs PyTorch on a GPU) and
  ``text`` (output, not commands): shown, not run.

The blocks of one file run in order, in one scratch folder, as a reader pasting them would.
The ``vramlab`` command is the one beside this interpreter (the venv pip installed into), or, with
``VRAMLAB_BIN`` set, that binary. Relative links between the docs are checked too.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN_DOCS = ["README.md", "docs/GUIDE.md"]
LINKED_DOCS = ["README.md"] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))

RUN = {"sh", "python"}
TORCH = {"python-cpu-torch"}
GPU = {"sh-gpu"}
FILE = {"toml"}
SHOWN = {"sh-build", "sh-ray", "python-torch", "text"}
KNOWN = RUN | TORCH | GPU | FILE | SHOWN

# What the scratch folder does not link: outputs and the repository's own machinery.
NOT_LINKED = {".git", "target", "vramlab-out"}
BLOCK_TIMEOUT_S = 300


@dataclass
class Block:
    doc: str
    line: int  # of the opening fence, from 1
    lang: str
    attrs: Dict[str, str] = field(default_factory=dict)
    text: str = ""

    def where(self) -> str:
        return f"{self.doc}:{self.line} ({self.lang or 'no info string'})"


FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def blocks(doc: str) -> List[Block]:
    """The fenced code blocks of a Markdown file, in order."""
    found: List[Block] = []
    lines = (ROOT / doc).read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, info = opening.group(1), opening.group(2).strip()
        words = info.split()
        lang = words[0] if words else ""
        attrs = dict(w.split("=", 1) for w in words[1:] if "=" in w)
        body = []
        j = i + 1
        while j < len(lines):
            closing = re.match(r"^ {0,3}(`{3,}|~{3,})\s*$", lines[j])
            if closing and closing.group(1)[0] == fence[0] and len(closing.group(1)) >= len(fence):
                break
            body.append(lines[j])
            j += 1
        found.append(Block(doc, i + 1, lang, attrs, "\n".join(body) + "\n"))
        i = j + 1
    return found


def has_gpu() -> bool:
    return Path("/dev/nvidia0").exists()


def environment(bin_dir: Path) -> Dict[str, str]:
    """This process's environment, with the `vramlab` to test first on PATH."""
    env = dict(os.environ)
    path = [os.path.dirname(sys.executable)]
    chosen = os.environ.get("VRAMLAB_BIN")
    if chosen:
        binary = Path(chosen).resolve()
        if not binary.is_file():
            pytest.fail(f"VRAMLAB_BIN={chosen}: no such file")
        if binary.name != "vramlab":  # PATH finds commands by name
            bin_dir.mkdir(parents=True, exist_ok=True)
            (bin_dir / "vramlab").symlink_to(binary)
            binary = bin_dir / "vramlab"
        path.insert(0, str(binary.parent))
    env["PATH"] = os.pathsep.join(path + [env.get("PATH", "")])
    if shutil.which("vramlab", path=env["PATH"]) is None:
        pytest.fail("no `vramlab` command: pip install . into this interpreter's environment, or set VRAMLAB_BIN")
    return env


def scratch_root(work: Path) -> Path:
    """A folder that looks like the repository's root: a link to each of its entries."""
    work.mkdir(parents=True, exist_ok=True)
    for entry in ROOT.iterdir():
        if entry.name not in NOT_LINKED:
            (work / entry.name).symlink_to(entry)
    return work


def run_block(block: Block, cwd: Path, scripts: Path, env: Dict[str, str]) -> subprocess.CompletedProcess:
    scripts.mkdir(parents=True, exist_ok=True)
    if block.lang in ("sh", "sh-gpu"):
        script = scripts / f"line{block.line}.sh"
        script.write_text("set -e\n" + block.text, encoding="utf-8")
        command = ["bash", str(script)]
    else:
        script = scripts / f"line{block.line}.py"
        script.write_text(block.text, encoding="utf-8")
        command = [sys.executable, str(script)]
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S
    )


def has_torch() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def shown(block: Block) -> List[re.Pattern]:
    """What a block's ``print(...)  # comment`` lines show, as patterns of one output line each
    (``...`` in a comment stands for anything)."""
    patterns = []
    for line in block.text.splitlines():
        code, _, comment = line.partition("#")
        if "print(" in code and comment.strip():
            pieces = [re.escape(piece.strip()) for piece in comment.strip().split("...")]
            patterns.append(re.compile(".*".join(pieces)))
    return patterns


def check_shown(block: Block, done: subprocess.CompletedProcess) -> None:
    """A block's output is what it shows: each commented print's pattern matches a line, and
    every print printed."""
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    prints = sum(line.split("#", 1)[0].count("print(") for line in block.text.splitlines())
    assert len(lines) >= prints, f"{prints} prints, {len(lines)} lines printed\n" + describe(block, done)
    for pattern in shown(block):
        assert any(pattern.search(line) for line in lines), f"no line shows {pattern.pattern!r}\n" + describe(block, done)


def describe(block: Block, done: subprocess.CompletedProcess) -> str:
    return (
        f"{block.where()} exited {done.returncode}\n--- block\n{block.text}"
        f"--- stdout (end)\n{done.stdout[-3000:]}\n--- stderr (end)\n{done.stderr[-3000:]}"
    )


@pytest.mark.parametrize("doc", RUN_DOCS + LINKED_DOCS[1:])
def test_every_block_says_what_it_is(doc):
    found = blocks(doc)
    unknown = [b.where() for b in found if b.lang not in KNOWN]
    assert not unknown, f"blocks with an info string this test does not know (one of {sorted(KNOWN)}): {unknown}"
    for b in found:
        if b.lang in FILE:
            name = b.attrs.get("file")
            assert name, f"{b.where()}: a toml block needs file=NAME (where the docs say to save it)"
            assert not Path(name).is_absolute() and ".." not in Path(name).parts, f"{b.where()}: {name}"
        else:
            assert not b.attrs, f"{b.where()}: attributes {b.attrs} only go on toml blocks"
    if doc in RUN_DOCS:
        assert any(b.lang in RUN for b in found), f"{doc} has no block to run"


@pytest.mark.parametrize("doc", RUN_DOCS)
def test_blocks_run_as_written(doc, tmp_path):
    env = environment(tmp_path / "bin")
    work = scratch_root(tmp_path / "clone")
    scripts = tmp_path / "scripts"
    ran = 0
    for block in blocks(doc):
        if block.lang in FILE:
            target = work / block.attrs["file"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text, encoding="utf-8")
        elif block.lang in RUN or block.lang in TORCH and has_torch():
            done = run_block(block, work, scripts, env)
            assert done.returncode == 0, describe(block, done)
            if block.lang in TORCH:
                check_shown(block, done)
            ran += 1
        elif block.lang in GPU and not has_gpu():
            done = run_block(block, work, scripts, env)
            said = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
            assert done.returncode == 1, describe(block, done)
            assert len(said) == 1 and "needs an NVIDIA GPU" in said[0], describe(block, done)
            ran += 1
    assert ran > 0


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set:
    found, seen = set(), {}
    inside = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            inside = not inside
            continue
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading and not inside:
            base = slug(heading.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


@pytest.mark.parametrize("doc", LINKED_DOCS)
def test_relative_links_resolve(doc):
    path = ROOT / doc
    text, inside = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            inside = not inside
        elif not inside:
            text.append(re.sub(r"`[^`]*`", "", line))
    broken = []
    for target in LINK.findall("\n".join(text)):
        if re.match(r"^[a-z]+:", target):
            continue  # http:, https:, mailto:
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        if not resolved.exists():
            broken.append(f"{target}: no file {resolved}")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading with anchor #{anchor} in {resolved.name}")
    assert not broken, f"{doc}: {broken}"
