"""``python -m vramlab`` and the ``vramlab`` command pip installs: the command line of the Rust
binary, run in this process (``vramlab --help``)."""

from __future__ import annotations

import signal
import sys

from . import _vramlab


def main() -> int:
    """Runs ``vramlab`` with this process's arguments; its exit status."""
    # As the native binary does: Ctrl-C ends the command at once (Python would only see it
    # once the Rust call returned).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.stdout.flush()
    # Usage lines name the command as it was typed: `python -m vramlab`, not `__main__.py`.
    name = "python -m vramlab" if sys.argv[0].endswith("__main__.py") else "vramlab"
    return _vramlab.main([name] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
