"""Traces a PyTorch program's CUDA memory on a machine without a GPU.

    >>> import torch, vramlab
    >>> with vramlab.trace(gpu="h100") as t:
    ...     model = torch.nn.Linear(4096, 4096).to("cuda")
    ...     model(torch.randn(64, 4096, device="cuda")).sum().backward()
    >>> vramlab.tune(t.snapshot(), capacity="1 GiB")

Inside ``trace``, tensors asked for on ``"cuda"`` are made on PyTorch's ``meta`` device: they have
shapes, dtypes and storages but no data, so nothing is computed. To the program (and to PyTorch's
own Python code, which picks fast paths by it) such a tensor says it is on ``cuda:0``
(``x.device``, ``x.is_cuda``); below it, inside PyTorch's operators, it is on ``meta``. Each
storage the program makes is
an allocation the CUDA caching allocator would serve, in the same order and of the same size; each
storage that dies is a free. ``snapshot()`` gives the record in the form of PyTorch's own memory
snapshots (``torch.cuda.memory._snapshot()``), which ``vramlab.replay``, ``vramlab.tune``, the CLI
and PyTorch's memory_viz read; the caching allocator itself, under any ``PYTORCH_ALLOC_CONF``, is
vramlab's replay.

The tracer is a package, vramlab/_tracer (docs/ARCHITECTURE.md draws it): a recorder, the
``torch.cuda`` stand-in as one table, two thin modes, and a registry of rules, one module per
operator family; it follows torch 2.11 to 2.15 (``_tracer/compat.py``) and stops in one line under
any other release.

Allocations PyTorch makes behind the program's back are added by the rules measured for the GPU
named (reports/reference/h100/trace-workloads, torch 2.11 on an H100):
- the cuBLAS workspace, 32 MiB for each handle (one per thread: the program's and the autograd
  engine's) on its first matrix multiply, and cuBLASLt's 1 MiB on the first matrix multiply with a
  bias (``addmm``) on that handle; each right after the multiply's output.

What it cannot follow it says, in one line naming the operation and the program's line, raising
``vramlab.UnfollowedError`` (the trace up to there is kept): a value read back that cannot be
known without the GPU (``.item()`` of a computed tensor, ``nonzero``, a data-dependent shape;
values that came from the CPU or from deterministic factories, such as a tokenizer's attention
mask, are known and answered: vramlab/_tracer/values.py; GradScaler's check for overflowed gradients is
answered as a healthy step's and noted), ``scaled_dot_product_attention`` where the GPU would run
flash attention or memory-efficient attention with heads over 128, recurrent layers run as cuDNN
RNN (``nn.LSTM``, ``nn.GRU``, ``nn.RNN``: cuDNN's workspace and reserve sizes are not modelled;
the cells ``nn.LSTMCell``, ``nn.GRUCell`` and ``nn.RNNCell`` are followed on CUDA's fused path,
vramlab/_tracer/rules/cells.py), PyTorch's fused inference fast paths (``nn.MultiheadAttention``
and ``nn.TransformerEncoderLayer`` without gradients) on nested tensors (``nn.TransformerEncoder``
given a key padding mask) or between different tensors (both branches of self-attention, the
scaled-dot-product one and the general one taken for attention weights or a mask, are followed as
attention.cu and transformer.cpp run them) and operators PyTorch has no meta kernel for
(``ctc_loss``). ``F.linear`` adds its bias in place where the GPU does (vramlab/_tracer/rules/linear.py). ``autocast("cuda")`` is followed, by PyTorch's own per-operator policies
(vramlab/_tracer/rules/autocast.py), and so is ``scaled_dot_product_attention`` on cuDNN, memory-efficient
and math attention, with the backend PyTorch would pick (vramlab/_tracer/rules/attention.py). Kernels' own scratch memory (reductions' buffers,
losses' temporaries) is added by PyTorch's rules (vramlab/_tracer/rules/kernels.py). cuDNN's convolution
workspaces, which cuDNN chooses on the GPU by no rule PyTorch states, come from tables measured on
each GPU (vramlab/_tracer/rules/convolution.py: torchvision's convolutions at common batch and image sizes,
H100 and H200). What it follows but cannot size, it notes in the snapshot (``vramlab_notes``,
said with every replay): convolutions outside those tables, among others.

One rank of a distributed program (DDP, FSDP2, tensor parallelism) is traced with
``trace(world_size=N, rank=r)``, or every rank of a torchrun script, each in a process of its own,
with ``python -m vramlab.trace --nproc N --out DIR script.py`` (DIR/rank{r}.pickle): the process
group is a stand-in that communicates nothing (vramlab/_tracer/distributed.py), CUDA streams and
events are followed (each allocation carries its stream: vramlab/_tracer/streams.py), and what
NCCL keeps outside the caching allocator (its communicators' buffers) and the CUDA context are not
in the snapshot, which says so. Point-to-point sends and receives (pipeline parallelism) stop the
trace in one line.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, List, Optional, Set

from ._tracer.recorder import peak_bound
from ._tracer.session import trace
from .errors import UnfollowedError

__all__ = ["trace", "UnfollowedError"]


# --nproc's ranks and trace(world_size=) share one host, whose devices PyTorch numbers below 128
# (c10::DeviceIndex is an int8_t); each rank's device is cuda:{rank}.
MOST_RANKS = 128
# The longest a value from the command line or the program is shown in a line of the tracer's own.
SHOWN_CHARACTERS = 300
# The signals whose default action ends the process without Python's exit path: while the program
# runs, each (where the program has not set a handler of its own) ends it as an exception does, so
# the trace up to there is written; then the process ends by the same signal, as it would have.
# How long the program's own cleanup may take after such a signal before the process ends anyway.
SIGNAL_GRACE_S = 10
ENDING_SIGNALS = ("SIGTERM", "SIGHUP", "SIGALRM", "SIGUSR1", "SIGUSR2", "SIGXCPU", "SIGVTALRM", "SIGPROF")


def shown(text: Any, limit: int = SHOWN_CHARACTERS) -> str:
    """`text` fit for one line of the terminal: what would move, hide or end the line (control
    characters, U+2028, bidirectional marks) escaped as \\u{..}, and at most `limit` characters."""
    text = str(text)
    cut = len(text) > limit
    out = "".join(c if c.isprintable() else f"\\u{{{ord(c):x}}}" for c in text[:limit])
    return f"{out}... ({len(text):,} characters)" if cut else out


def _said(value: Any) -> str:
    """str(value) as Python would print it, or a stand-in where its __str__ fails."""
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - the program's own object
        return f"<{type(value).__name__} object: str() failed>"


def _finite(text: str) -> float:
    """--answer-reads: a finite number (int(nan) or int(inf) of an answered read has no value)."""
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{shown(text)!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{shown(text)!r}: give a finite number (a read answered with it may be made an integer)")
    return value


def _check_script(path: str) -> Optional[str]:
    """Why `path` cannot be run as the script (checked before anything is traced), or None."""
    if not os.path.exists(path):
        return f"{shown(path)}: no such script"
    if os.path.isdir(path):
        return f"{shown(path)}: is a folder; give the script's file"
    if not os.path.isfile(path):
        return f"{shown(path)}: not a regular file (a FIFO or a device); give the script as a file"
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as e:
        return f"{shown(path)}: cannot be read ({e.strerror or e})"
    try:
        compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as e:
        where = f"{shown(path)}:{e.lineno}" if e.lineno else shown(path)
        return f"{where}: {type(e).__name__}: {shown(e.msg)}; nothing was traced"
    except (ValueError, RecursionError, MemoryError) as e:
        return f"{shown(path)}: cannot be compiled ({shown(_said(e) or type(e).__name__)}); nothing was traced"
    return None


def _check_out(path: str, script: str) -> Optional[str]:
    """Why the snapshot could not be written to `path` (checked before the program runs), or None.
    The folder is tried with a file of the name the save's own temporary file takes, so a
    read-only place, a full disk's refusal to make a file or a name too long is said now."""
    import tempfile

    from ._tracer.recorder import temporary_prefix

    folder = os.path.dirname(path) or "."
    if os.path.isdir(path):
        return f"{shown(path)}: is a folder (--out names the snapshot file)"
    if os.path.exists(path) and not os.path.isfile(path):
        return f"{shown(path)}: not a regular file (a device, a FIFO or a socket); --out names a file of its own"
    if os.path.exists(path) and os.path.samefile(path, script):
        return f"{shown(path)}: is the script itself; --out names the snapshot file to write"
    if not os.path.isdir(folder):
        return f"{shown(folder)}: no such folder for --out"
    if len(os.path.basename(path).encode("utf-8", "surrogateescape")) > 255:
        return f"{shown(path)}: file name too long for --out"
    try:
        fd, probe = tempfile.mkstemp(prefix=temporary_prefix(path), suffix=".partial", dir=folder)
    except OSError as e:
        return f"{shown(folder)}: --out cannot be written there ({e.strerror or e})"
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError:
        pass
    return None


def _lock(out: str) -> Optional[Any]:
    """An exclusive lock on `out` for this tracer's run (a hidden file beside it), or None where
    another tracer holds it."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): one writer is not enforced
        return (None, None)
    path = os.path.join(os.path.dirname(out), "." + os.path.basename(out)[:100] + ".vramlab-lock")
    try:
        handle = open(path, "w")
    except OSError:
        return (None, None)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    return (handle, path)


def _unlock(lock: Optional[Any], owner: int) -> None:
    """Gives the lock up (its file removed), in the process that took it only."""
    if lock is None or lock[0] is None or os.getpid() != owner:
        return
    handle, path = lock
    try:
        os.unlink(path)
    except OSError:
        pass
    handle.close()


class _Signalled(BaseException):
    """A signal that would have ended the program, raised where it ran so the trace is written."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _tracer_frame(filename: str) -> bool:
    """A frame of the tracer's own (vramlab's package, runpy's bootstrap), not the program's."""
    from ._tracer.where import PACKAGE_DIR

    return filename.startswith(PACKAGE_DIR) or filename == "<frozen runpy>"


def program_traceback(error: BaseException) -> str:
    """The program's traceback as Python would print it for the script run alone: the frames of
    the tracer that ran it (vramlab's, runpy's) left out, in chained exceptions too."""
    import traceback

    shown_error = traceback.TracebackException(type(error), error, error.__traceback__, compact=True)
    seen = set()
    pending: List[Optional[traceback.TracebackException]] = [shown_error]
    while pending:
        one = pending.pop()
        if one is None or id(one) in seen:
            continue
        seen.add(id(one))
        one.stack = traceback.StackSummary.from_list([f for f in one.stack if not _tracer_frame(f.filename)])
        pending += [one.__cause__, one.__context__] + list(getattr(one, "exceptions", None) or [])
    return "".join(shown_error.format())


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m vramlab.trace --gpu h100 --out snap.pickle script.py [args]``: runs a script
    unchanged under :class:`trace` and writes its snapshot (also where the tracer stops, the
    program fails, exits or is interrupted)."""
    import argparse
    import runpy
    import signal

    parser = argparse.ArgumentParser(
        prog="python -m vramlab.trace",
        description="Trace a PyTorch script's CUDA memory without a GPU; writes a memory snapshot that vramlab replay and tune read.",
    )
    parser.add_argument("--gpu", default="h100", help="the GPU to trace for: h100, h200 (measured), a100-80gb, a100-40gb, h100-pcie, b200, l40s, l4, a10g, rtx-4090, rtx-3090 (from datasheets; vramlab list), or a profile file")
    parser.add_argument(
        "--answer-reads",
        type=_finite,
        metavar="VALUE",
        help="answer values a trace cannot know (loss.item() in a log line) with VALUE instead of stopping; the snapshot says how many",
    )
    parser.add_argument("--out", required=True, help="snapshot file to write (.pickle, or .pickle.gz); with --sweep or --nproc, a folder")
    parser.add_argument(
        "--sweep",
        metavar="NAME=V1,V2,...",
        help="trace the script once per value of the environment variable NAME (in increasing order, each in a fresh process) and answer the largest value that fits under --capacity with some PYTORCH_ALLOC_CONF",
    )
    parser.add_argument(
        "--capacity",
        metavar="CAP",
        help='with --sweep or --nproc: the memory the job may use on each GPU ("72 GiB", "80GB" read as GiB, bytes, or a share of --gpu\'s memory: "90%%", 0.9); by default all of the GPU\'s',
    )
    parser.add_argument(
        "--max-events",
        type=int,
        metavar="N",
        help="stop the program (non-zero exit, the trace so far written) when the trace reaches N events; by default $VRAMLAB_TRACE_MAX_EVENTS, else 2,000,000 (a program that never ends would grow the host's memory for ever)",
    )
    parser.add_argument("--nproc", type=int, help=f"trace a torchrun script once per rank, each in a process of its own (N ranks, one GPU each; at most {MOST_RANKS})")
    parser.add_argument("--world-size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("script", help="the Python script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    options = parser.parse_args(argv)
    from . import _vramlab
    from .errors import VramlabError

    try:
        # An unknown GPU is one line (with the nearest names), before any work.
        _vramlab.gpu(options.gpu)
    except (ValueError, VramlabError) as e:
        print(f"error: --gpu: {shown(e)}", file=sys.stderr)
        return 2
    problem = _check_script(options.script)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2 if "nothing was traced" not in problem else 1
    if not options.out:
        print("error: --out is empty; name the snapshot file (a folder with --sweep or --nproc)", file=sys.stderr)
        return 2
    if options.capacity is not None:
        if options.sweep is None and options.nproc is None:
            print(
                f"error: --capacity {shown(options.capacity)!r} is read with --sweep or --nproc only; for one trace, replay its snapshot under a cap: vramlab replay OUT --capacity CAP",
                file=sys.stderr,
            )
            return 2
        try:
            _vramlab.capacity(options.capacity, options.gpu)
        except (ValueError, VramlabError) as e:
            print(f"error: --capacity {shown(options.capacity)!r}: {shown(e)}", file=sys.stderr)
            return 2
    if options.nproc is not None and not 1 <= options.nproc <= MOST_RANKS:
        print(f"error: --nproc {options.nproc}: give 1 to {MOST_RANKS} ranks (one host's GPUs, which PyTorch numbers below {MOST_RANKS}; a process each)", file=sys.stderr)
        return 2
    if options.max_events is not None:
        if options.max_events < 1:
            print(f"error: --max-events {options.max_events}: give a whole number of events, at least 1", file=sys.stderr)
            return 2
        # Read by every trace this command starts (the sweep's and the ranks' processes too).
        os.environ["VRAMLAB_TRACE_MAX_EVENTS"] = str(options.max_events)
    if options.sweep is not None:
        from ._tracer.sweep import sweep_script

        if os.path.exists(options.out) and not os.path.isdir(options.out):
            print(f"error: {shown(options.out)}: with --sweep, --out names a folder (one snapshot per value)", file=sys.stderr)
            return 2
        return sweep_script(options, os.path.abspath(options.out))
    if options.nproc is not None:
        from ._tracer.ranks import run_ranks

        status = run_ranks(options.nproc, os.path.abspath(options.out), options.gpu, options.answer_reads, os.path.abspath(options.script), options.args)
        if status == 0 and options.capacity:
            # Which setting fits every rank under the cap, and the rank that binds.
            from ._tracer.ranks import traced_ranks
            from ._tracer.sweep import ranked_ranks, ranks_answer

            capacity = _vramlab.capacity(options.capacity, options.gpu)[0]
            snapshots = traced_ranks(os.path.abspath(options.out), options.nproc)
            if snapshots is not None:
                print(ranks_answer(ranked_ranks(snapshots, capacity, options.gpu), capacity))
        return status
    # Resolved now: the program may change its working directory.
    out = os.path.abspath(options.out)
    problem = _check_out(out, os.path.abspath(options.script))
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        tracer = trace(gpu=options.gpu, answer_reads=options.answer_reads, world_size=options.world_size, rank=options.rank)
    except (ValueError, TypeError, UnfollowedError) as e:
        print(f"error: {shown(e, 2000)}", file=sys.stderr)
        return 2
    sys.argv = [options.script] + options.args
    status = 0
    failure: Optional[BaseException] = None
    message: Optional[str] = None
    ended_by: List[int] = []
    owner = os.getpid()
    saved: List[str] = []
    # One writer per path: a second tracer on the same --out while this one runs writes beside it
    # (OUT.PID) and says so, rather than over it.
    lock = _lock(out)
    target = out if lock is not None else f"{out}.{owner}"
    if lock is None:
        print(f"note: another vramlab.trace is writing {shown(out)}; this one writes {shown(target)}", file=sys.stderr)
    signals = [getattr(signal, name) for name in ENDING_SIGNALS if hasattr(signal, name)]
    # The events recorded when this process was forked (a child writes its own snapshot only where
    # it recorded more).
    forked_at: List[int] = []

    def save() -> str:
        # A forked child that outlives its parent writes beside the parent's snapshot, not over it.
        path = target if os.getpid() == owner else f"{out}.{os.getpid()}"
        if not saved or saved[-1] != path:
            # A signal while the file is written waits for it: a kill leaves no part-written file.
            blocked: Set[int] = {int(s) for s in signals} | {int(signal.SIGINT)}
            masked = hasattr(signal, "pthread_sigmask")
            before = signal.pthread_sigmask(signal.SIG_BLOCK, blocked) if masked else None
            try:
                tracer.save(path)
            finally:
                if masked and before is not None:
                    signal.pthread_sigmask(signal.SIG_SETMASK, before)
            saved.append(path)
        return path

    real_exit: Callable[[int], Any] = os._exit

    def exit_after_saving(code: int) -> None:
        try:
            child = os.getpid() != owner
            if not child or len(tracer.record.events) > (forked_at[-1] if forked_at else 0):
                tracer.stopped = tracer.stopped or f"the program called os._exit({code})"
                written = save()
                if child:
                    print(f"note: a forked process of the traced program (pid {os.getpid()}) wrote its own snapshot {shown(written)}", file=sys.stderr)
                else:
                    print(f"trace: the program called os._exit({code}); {len(tracer.record.events)} events, peak allocated {tracer.peak_allocated:,} B -> {shown(written)}", file=sys.stderr)
            _unlock(lock, owner)
        except BaseException as e:  # noqa: BLE001 - the process ends here whatever happens
            print(f"error: {shown(out)}: the snapshot could not be written ({shown(_said(e))})", file=sys.stderr)
        finally:
            real_exit(code)

    def ended(signum: int, frame: Any) -> None:
        if os.getpid() == owner and not ended_by:
            # The program's own cleanup runs as the exception unwinds it; where that hangs (a pool
            # waiting on a worker that never answers), the process still ends, SIGNAL_GRACE_S
            # seconds later, with the trace up to the signal already written.
            try:
                tracer.stopped = tracer.stopped or f"ended by {signal.Signals(signum).name}"
                save()
                saved.clear()
            except BaseException:  # noqa: BLE001 - the save after the unwinding says why
                pass
            import threading

            def too_late() -> None:
                print(f"error: the program was ended by {signal.Signals(signum).name} and its own cleanup did not end within {SIGNAL_GRACE_S} s; the trace up to the signal is kept in {shown(target)}", file=sys.stderr)
                sys.stderr.flush()
                real_exit(128 + signum)

            timer = threading.Timer(SIGNAL_GRACE_S, too_late)
            timer.daemon = True
            timer.start()
        raise _Signalled(signum)

    def later(signum: int, frame: Any) -> None:
        ended_by.append(signum)

    handlers = {}
    for signum in signals:
        try:
            if signal.getsignal(signum) == signal.SIG_DFL:
                handlers[signum] = signal.signal(signum, ended)
        except (ValueError, OSError):  # not the main thread, or a signal this host cannot catch
            pass

    def in_child() -> None:
        # A forked child (a DataLoader's or a pool's worker) ends on these signals as the program
        # would (a pool terminates its workers with SIGTERM); its os._exit still writes its own
        # snapshot where it recorded anything.
        forked_at.append(len(tracer.record.events))
        for signum in handlers:
            if signal.getsignal(signum) is ended:
                signal.signal(signum, signal.SIG_DFL)

    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=lambda: in_child() if os._exit is exit_after_saving else None)
    os._exit = exit_after_saving  # type: ignore[assignment]
    from ._tracer.spawned import SpawnedChildren

    # Children started by the 'spawn' method re-run the script: under a trace of their own, and a
    # child that cannot start stops this one (never a pool restarting dying workers for ever).
    spawned = SpawnedChildren({"gpu": options.gpu, "answer_reads": options.answer_reads, "world_size": options.world_size, "rank": options.rank}, out)
    try:
        with tracer, spawned:
            runpy.run_path(options.script, run_name="__main__")
    except UnfollowedError as e:
        message = f"error: {shown(_said(e), 2000)}"
        status = 1
    except SystemExit as e:
        # As Python shows it: a string (any object but an integer or None) is printed and gives
        # status 1.
        if e.code is None or (isinstance(e.code, int) and not isinstance(e.code, bool)):
            status = e.code or 0
        elif isinstance(e.code, bool):
            status = int(e.code)
        else:
            message, status = _said(e.code), 1
    except KeyboardInterrupt:
        message, status = "error: interrupted (KeyboardInterrupt); the trace up to there is kept", 130
    except _Signalled as e:
        ended_by.append(e.signum)
        tracer.stopped = f"ended by {signal.Signals(e.signum).name}"
        message = f"error: the program was ended by {signal.Signals(e.signum).name}; the trace up to there is kept"
    except BaseException as e:  # noqa: BLE001 - the program's own error, any kind of it
        # The script's own error: its traceback is the program's to show, after the trace up
        # to there is written.
        failure = e
        status = 1
    finally:
        os._exit = real_exit  # type: ignore[assignment]
        for signum in handlers:
            try:
                if signal.getsignal(signum) in (ended, later):
                    signal.signal(signum, later)
            except (ValueError, OSError):
                pass
    try:
        written = save()
    except OSError as e:
        print(f"error: {shown(out)}: the snapshot could not be written ({shown(e.strerror or _said(e))})", file=sys.stderr)
        return 1
    finally:
        _unlock(lock, owner)
    if failure is not None:
        sys.stderr.write(program_traceback(failure))
        print(f"error: the script raised {type(failure).__name__}; the trace up to there is in {shown(written)}", file=sys.stderr)
    if message is not None:
        print(message, file=sys.stderr)
    if written != out and lock is not None:
        print(f"note: this process is a fork of the one that started the trace; its snapshot is {shown(written)}", file=sys.stderr)
    events = len(tracer.record.events)
    notes = tracer.record.said_notes()
    bound = peak_bound(notes)
    print(f"trace: {events} events, peak allocated {bound}{tracer.peak_allocated:,} B ({tracer.peak_allocated / 2**20:,.1f} MiB) -> {shown(written)}", file=sys.stderr)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if tracer.record.held_deaths:
        released = tracer.record.peak_releasing_held()
        if released < tracer.peak_allocated:
            print(
                f"if DDP's replaced buckets are freed at the rebuild (as in runs whose steps leave NCCL's watchdog time to let them go; it varies by rank and run): peak allocated {released:,} B ({released / 2**20:,.1f} MiB)",
                file=sys.stderr,
            )
    where = tracer.breakdown()
    if where["peak_allocated"]:
        parts = ", ".join(f"{name} {size / 2**20:,.1f} MiB" for name, size in where["live_at_peak"].items())
        print(f"at the peak (during {where['peak_during']}): {parts}", file=sys.stderr)
    if tracer.record.step_ends:
        try:
            print(f"steps: {tracer.steady()['advice']}", file=sys.stderr)
        except Exception as e:  # noqa: BLE001 - the snapshot is written; the check is advice
            print(f"steps: not checked ({shown(_said(e))})", file=sys.stderr)
    for signum, previous in handlers.items():
        try:
            signal.signal(signum, signal.SIG_DFL)
        except (ValueError, OSError):
            pass
    if ended_by:
        # Ended as the program would have been: by the signal (its status says so to the shell).
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), ended_by[0])
        return 128 + ended_by[0]
    return status


if __name__ == "__main__":
    sys.exit(main())
