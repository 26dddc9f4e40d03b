"""The PyTorch releases vramlab.trace follows, and the rules that differ between them.

The tracer stands in for CUDA below PyTorch's Python code and above its kernels, so it depends on
private parts of PyTorch (dispatch keys, ``torch.cuda``/``torch.accelerator`` internals, the
optimizers' device checks). CI tests 2.11 (the GPU machines' release, so every GPU figure is
2.11's) and 2.15 (the newest on the registry). Between them: 2.13.0 was installed and the rules'
tests and a fifth of the workload table run under it by hand (the autocast list's rms_norm, found
there, is 2.12's); 2.12.1's and 2.14.1's wheels were read where a rule differs (autocast_mode.h,
cuDNN pins, libtorch_cuda.so's cuBLAS settings); what was not read is said in the snapshot. Outside the range the trace stops
in one line naming the installed release, rather than guessing.

A rule that differs between releases is keyed here by release (``by_release``), and its test names
the source line of each release it follows.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Tuple, TypeVar

from ..errors import UnfollowedError

# The first and the last release followed, inclusive (pyproject.toml's `trace` extra says the same).
OLDEST: Tuple[int, int] = (2, 11)
NEWEST: Tuple[int, int] = (2, 15)

T = TypeVar("T")


def release(torch: Any) -> Tuple[int, int]:
    """The installed torch's (major, minor), from its version string ("2.15.0+cu132" -> (2, 15))."""
    match = re.match(r"(\d+)\.(\d+)", str(torch.__version__))
    if match is None:
        raise UnfollowedError(f"torch {torch.__version__!r}: not a release number vramlab.trace can read")
    return int(match.group(1)), int(match.group(2))


def check(torch: Any) -> Tuple[int, int]:
    """The installed release, where vramlab.trace follows it; else one line naming it."""
    found = release(torch)
    if not OLDEST <= found <= NEWEST:
        raise UnfollowedError(
            f"torch {torch.__version__} is installed; vramlab.trace follows torch {OLDEST[0]}.{OLDEST[1]} to {NEWEST[0]}.{NEWEST[1]} "
            + "(its rules are read from those releases' sources): install one of them, e.g. pip install 'torch>=2.11,<2.16'"
        )
    return found


def by_release(table: Dict[Tuple[int, int], T], found: Tuple[int, int]) -> T:
    """The entry of `table` for the newest release at or before `found` (a rule keyed by the
    release that changed it)."""
    keys = sorted(k for k in table if k <= found)
    if not keys:
        raise KeyError(f"no rule for torch {found[0]}.{found[1]}")
    return table[keys[-1]]
