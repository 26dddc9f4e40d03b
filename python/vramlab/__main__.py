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
    return _vramlab.main(sys.argv)


if __name__ == "__main__":
    sys.exit(main())
