"""vramlab's exceptions. Each is also the built-in exception it stands for, so code that
catches ``ValueError`` or ``OSError`` keeps working; catch ``VramlabError`` for all of them.

The Rust core picks the class by the kind of error it met (its error variant), not by its
message.
"""

from __future__ import annotations

__all__ = [
    "VramlabError",
    "TraceError",
    "SettingsError",
    "InputError",
    "FileError",
    "DeviceError",
    "UnfollowedError",
]


class VramlabError(Exception):
    """Anything vramlab refused or could not do; the message is one line naming the file,
    the value or the key at fault."""


class TraceError(VramlabError, ValueError):
    """A trace that cannot be read or replayed: not a snapshot, RMM log or vramlab trace, a
    truncated or oversized one, a device with no events."""


class SettingsError(VramlabError, ValueError):
    """Allocator settings that do not parse or cannot run: a ``PYTORCH_ALLOC_CONF``, a policy
    and its parameters, a cap."""


class InputError(VramlabError, ValueError):
    """Any other bad value: an experiment, suite, profile or parameter."""


class FileError(VramlabError, OSError):
    """A file that cannot be read or written (missing, a folder, a FIFO, no permission)."""


class DeviceError(VramlabError, OSError):
    """The GPU side failed: no driver or device, a CUDA call, a kernel, or a data check."""


class UnfollowedError(VramlabError, RuntimeError):
    """vramlab.trace met something it cannot follow without a GPU (a value read back with
    ``.item()``, a data-dependent shape, an attention kernel or cuDNN routine it does not model):
    the message names the operation and the program's line; the trace up to there is kept."""
