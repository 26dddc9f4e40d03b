"""Processes a traced program starts with multiprocessing's ``spawn`` start method (a ``Pool``, a
``Process``, ``torch.multiprocessing`` or ``concurrent.futures`` with a spawn context): each child
re-runs the script (as ``__mp_main__``) before it runs its task. Outside the trace, a script that
uses the GPU at its top level fails there on this machine, where it would not on the GPU, and a
``Pool`` then starts a new worker for each dead one, for ever: the run hangs.

So each spawned child runs under a trace of its own (the same GPU and settings): on the GPU it
would be a process of its own, with its own CUDA context and caching allocator, so what it
allocates is not in the program's snapshot; where it allocated anything and ends by returning
from its task loop, its snapshot is written beside the program's (OUT.PID), as a forked child's
is. Where a child cannot start (its re-run of the script raises, or the trace stops in it), it
tells the traced process, which stops in one line naming the program's line, the trace up to
there kept: never a pool restarting dying workers.

The ``forkserver`` start method is refused in one line: its server process is started outside
the trace and the children are forked from it, not from the traced process.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
from typing import Any, Callable, Dict, List, Optional

from ..errors import UnfollowedError
from .where import PACKAGE_DIR, here, is_program


def _signal() -> int:
    """The signal a child that could not start sends the traced process: a real-time one no
    program or library here uses (SIGUSR2 where the platform has none)."""
    if hasattr(signal, "SIGRTMIN"):
        return int(signal.SIGRTMIN) + 3
    return int(signal.SIGUSR2)


class SpawnedChildren:
    """Installed in the traced process by ``python -m vramlab.trace`` while the program runs."""

    def __init__(self, settings: Dict[str, Any], out: str) -> None:
        self.settings = dict(settings, out=out, parent=os.getpid())
        self.folder: Optional[str] = None
        self.started_at: Optional[str] = None
        self._undo: List[Callable[[], Any]] = []

    def __enter__(self) -> "SpawnedChildren":
        import multiprocessing.forkserver as forkserver
        import multiprocessing.spawn as spawn

        self.folder = tempfile.mkdtemp(prefix="vramlab-spawned-")
        self.settings["folder"] = self.folder
        real_command_line = spawn.get_command_line

        def get_command_line(**kwds: Any) -> List[str]:
            if getattr(sys, "frozen", False):
                return real_command_line(**kwds)
            if self.started_at is None:
                self.started_at = here()
            arguments = ", ".join(f"{key}={value!r}" for key, value in kwds.items())
            prog = (
                f"import sys; sys.path.insert(0, {os.path.dirname(PACKAGE_DIR.rstrip(os.sep))!r}); "
                f"from vramlab._tracer.spawned import child; child({json.dumps(self.settings)!r}, {arguments})"
            )
            from multiprocessing import util

            return [spawn.get_executable()] + list(getattr(util, "_args_from_interpreter_flags")()) + ["-c", prog, "--multiprocessing-fork"]

        def forkserver_refused(*args: Any, **kwargs: Any) -> Any:
            raise UnfollowedError(
                f"multiprocessing's 'forkserver' start method at {here()}: its server process re-runs the script outside the trace and the children are forked from it; use the 'fork' or 'spawn' start method (children of either are traced); the trace up to there is kept"
            )

        spawn.get_command_line = get_command_line  # type: ignore[assignment]
        self._undo.append(lambda: setattr(spawn, "get_command_line", real_command_line))
        real_ensure = forkserver.ForkServer.ensure_running
        forkserver.ForkServer.ensure_running = forkserver_refused  # type: ignore[method-assign]
        self._undo.append(lambda: setattr(forkserver.ForkServer, "ensure_running", real_ensure))

        def failed(signum: int, frame: Any) -> None:
            reason = self._reason()
            if reason is None:
                return
            started = f" (started at {self.started_at})" if self.started_at else ""
            raise UnfollowedError(
                f"a process the program started with multiprocessing's 'spawn' method{started} could not start at {here()}: {reason}; the trace up to there is kept"
            )

        try:
            previous = signal.signal(_signal(), failed)
        except (ValueError, OSError):  # not the main thread: a child's failure is not heard
            pass
        else:
            # A child failing after the program's run ends is ignored, not a signal that kills.
            def restore() -> None:
                signal.signal(_signal(), signal.SIG_IGN if previous in (None, signal.SIG_DFL) else previous)

            self._undo.append(restore)
        return self

    def _reason(self) -> Optional[str]:
        """The first reason a child wrote (its file removed), or None."""
        if self.folder is None:
            return None
        try:
            names = sorted(n for n in os.listdir(self.folder) if n.endswith(".reason"))
        except OSError:
            return None
        for name in names:
            try:
                with open(os.path.join(self.folder, name), encoding="utf-8", errors="replace") as f:
                    return f.read().strip() or None
            except OSError:
                continue
        return None

    def __exit__(self, *exc: Any) -> None:
        import shutil

        while self._undo:
            self._undo.pop()()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def _why(error: BaseException) -> str:
    """A child's failure in one line: its innermost line of the program's and the error."""
    from ..trace import shown

    at = ""
    tb = error.__traceback__
    while tb is not None:
        if is_program(tb.tb_frame.f_code.co_filename) and not tb.tb_frame.f_code.co_filename.startswith("<"):
            at = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}: "
        tb = tb.tb_next
    try:
        said = str(error)
    except Exception:  # noqa: BLE001 - the program's own object
        said = ""
    if isinstance(error, UnfollowedError):
        return f"in it, {shown(said, 1500)}"
    return f"re-running the script in it, {at}{type(error).__name__}" + (f": {shown(said, 1000)}" if said else "")


def child(config: str, **kwds: Any) -> None:
    """A spawned child's entry (the command line `SpawnedChildren` gives multiprocessing): the
    script's re-run and the child's task under a trace of its own; a child that cannot start tells
    the traced process and exits."""
    import multiprocessing.process as process
    import multiprocessing.spawn as spawn

    settings = json.loads(config)
    from .session import trace

    tracer = trace(gpu=settings["gpu"], answer_reads=settings["answer_reads"], world_size=settings["world_size"], rank=settings["rank"])
    started: List[bool] = []
    real_main = spawn._main  # type: ignore[attr-defined]
    real_bootstrap = process.BaseProcess._bootstrap  # type: ignore[attr-defined]

    def bootstrap(self: Any, *args: Any, **kwargs: Any) -> Any:
        started.append(True)
        return real_bootstrap(self, *args, **kwargs)

    def main(*args: Any, **kwargs: Any) -> Any:
        try:
            return real_main(*args, **kwargs)
        except BaseException as error:  # noqa: BLE001 - the child cannot start: said to the parent
            if started:
                raise
            reason = os.path.join(settings["folder"], f"{os.getpid()}.reason")
            try:
                with open(reason + ".partial", "w", encoding="utf-8") as f:
                    f.write(_why(error))
                os.replace(reason + ".partial", reason)
                os.kill(int(settings["parent"]), _signal())
            except OSError:
                pass
            os._exit(1)

    spawn._main = main  # type: ignore[attr-defined]
    process.BaseProcess._bootstrap = bootstrap  # type: ignore[attr-defined]
    code: Any = 0
    with tracer:
        try:
            spawn.spawn_main(**kwds)
        except SystemExit as e:
            code = e.code
    if tracer.record.events:
        _save_unless_terminated(tracer, f"{settings['out']}.{os.getpid()}")
    sys.exit(code)


class _Terminated(BaseException):
    """SIGTERM while a spawned child writes its snapshot."""


def _save_unless_terminated(tracer: Any, path: str) -> None:
    """Writes a child's snapshot. A pool's ``terminate`` (SIGTERM) can come while a worker that
    left its task loop writes it: the part written is removed (write_atomically removes its
    temporary file on any exception) and the child then ends by the signal, as it would have."""

    def terminated(signum: int, frame: Any) -> None:
        raise _Terminated()

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        tracer.save(path)
        print(f"note: a process the traced program spawned (pid {os.getpid()}) allocated on the GPU in a process of its own; its snapshot is {path}", file=sys.stderr)
    except OSError as e:
        print(f"error: {path}: a spawned process's snapshot could not be written ({e.strerror or e})", file=sys.stderr)
    except _Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)
