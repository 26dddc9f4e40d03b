"""The library versions a recording was made with, against those installed here.

A traced program runs the libraries installed on the tracing machine; the recording ran those of
the GPU machine. Where a library's code differs between the two (timm 1.0.31's LAMB is a foreach
implementation, 1.0.29's loops over parameters), the trace follows another program than the one
recorded, and its error is the libraries', not the tracer's. The table scripts say so at their top.
"""

import importlib.metadata
import pathlib
import re

LIBRARIES = ("transformers", "timm", "peft", "torchvision", "accelerate")


def recorded(folder):
    """{library: version} from the machine*.txt files of a recording folder (and its subfolders)."""
    versions = {}
    for path in sorted(pathlib.Path(folder).rglob("machine*.txt")):
        text = path.read_text(errors="replace")
        for library in LIBRARIES:
            found = re.search(rf"\b{library}[ =]+([0-9][^\s,']*)", text)
            if found:
                versions.setdefault(library, found[1])
        # record_distributed.py writes one line of bare versions: torch, CUDA, NCCL, then
        # transformers, timm and accelerate.
        bare = re.search(r"^\S+\+cu\d+ \S+ \([\d, ]+\) (\S+) (\S+) (\S+)$", text, re.M)
        if bare:
            for library, version in zip(("transformers", "timm", "accelerate"), bare.groups()):
                versions.setdefault(library, version)
    return versions


def installed(library):
    try:
        return importlib.metadata.version(library)
    except importlib.metadata.PackageNotFoundError:
        return None


def mismatches(folder):
    """Lines naming each library whose installed version is not the recording's."""
    lines = []
    for library, version in recorded(folder).items():
        here = installed(library)
        # torchvision's local tag (+cu130) names its build, not its code.
        if here is not None and here.split("+")[0] != version.split("+")[0]:
            lines.append(f"{library} {here} is installed here, the recording ran {version}")
    return lines


def warn(folder, out):
    """Prints, before a table, which libraries differ from the recording's."""
    for line in mismatches(folder):
        print(f"**Library versions differ:** {line}; its programs are traced with other code than the GPU ran.\n", file=out)
