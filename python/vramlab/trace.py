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
from typing import Any, Callable, List, Optional

from ._tracer.session import trace
from .errors import UnfollowedError

__all__ = ["trace", "UnfollowedError"]


def _check_out(path: str) -> Optional[str]:
    """Why the snapshot could not be written to `path` (checked before the program runs), or None."""
    folder = os.path.dirname(path) or "."
    if os.path.isdir(path):
        return f"{path}: is a folder (--out names the snapshot file)"
    if os.path.exists(path) and not os.path.isfile(path):
        return f"{path}: not a regular file (a device, a FIFO or a socket); --out names a file of its own"
    if not os.path.isdir(folder):
        return f"{folder}: no such folder for --out"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder}: not writable (--out)"
    return None


def _lock(out: str) -> Optional[Any]:
    """An exclusive lock on `out` for this tracer's run (a hidden file beside it), or None where
    another tracer holds it."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): one writer is not enforced
        return (None, None)
    path = os.path.join(os.path.dirname(out), "." + os.path.basename(out) + ".vramlab-lock")
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


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m vramlab.trace --gpu h100 --out snap.pickle script.py [args]``: runs a script
    unchanged under :class:`trace` and writes its snapshot (also where the tracer stops, the
    program fails, exits or is interrupted)."""
    import argparse
    import runpy

    parser = argparse.ArgumentParser(
        prog="python -m vramlab.trace",
        description="Trace a PyTorch script's CUDA memory without a GPU; writes a memory snapshot that vramlab replay and tune read.",
    )
    parser.add_argument("--gpu", default="h100", help="the GPU to trace for: h100, h200 (measured), a100-80gb, a100-40gb, h100-pcie, b200, l40s, l4, a10g, rtx-4090, rtx-3090 (from datasheets; vramlab list), or a profile file")
    parser.add_argument(
        "--answer-reads",
        type=float,
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
    parser.add_argument("--nproc", type=int, help="trace a torchrun script once per rank, each in a process of its own (N ranks, one GPU each)")
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
        print(f"error: --gpu: {e}", file=sys.stderr)
        return 2
    if not os.path.isfile(options.script):
        print(f"error: {options.script}: no such script", file=sys.stderr)
        return 2
    if options.sweep is not None:
        from ._tracer.sweep import sweep_script

        if os.path.exists(options.out) and not os.path.isdir(options.out):
            print(f"error: {options.out}: with --sweep, --out names a folder (one snapshot per value)", file=sys.stderr)
            return 2
        return sweep_script(options, os.path.abspath(options.out))
    if options.nproc is not None:
        from ._tracer.ranks import run_ranks

        status = run_ranks(options.nproc, os.path.abspath(options.out), options.gpu, options.answer_reads, os.path.abspath(options.script), options.args)
        if status == 0 and options.capacity:
            # Which setting fits every rank under the cap, and the rank that binds.
            from . import _vramlab
            from ._tracer.ranks import traced_ranks
            from ._tracer.sweep import ranked_ranks, ranks_answer
            from .errors import VramlabError

            try:
                capacity = _vramlab.capacity(options.capacity, options.gpu)[0]
            except (ValueError, VramlabError) as e:
                print(f"error: --capacity {options.capacity!r}: {e}", file=sys.stderr)
                return 2
            snapshots = traced_ranks(os.path.abspath(options.out), options.nproc)
            if snapshots is not None:
                print(ranks_answer(ranked_ranks(snapshots, capacity, options.gpu), capacity))
        return status
    # Resolved now: the program may change its working directory.
    out = os.path.abspath(options.out)
    problem = _check_out(out)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        tracer = trace(gpu=options.gpu, answer_reads=options.answer_reads, world_size=options.world_size, rank=options.rank)
    except (ValueError, UnfollowedError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    sys.argv = [options.script] + options.args
    status = 0
    failure: Optional[BaseException] = None
    message: Optional[str] = None
    owner = os.getpid()
    saved: List[str] = []
    # One writer per path: a second tracer on the same --out while this one runs writes beside it
    # (OUT.PID) and says so, rather than over it.
    lock = _lock(out)
    target = out if lock is not None else f"{out}.{owner}"
    if lock is None:
        print(f"note: another vramlab.trace is writing {out}; this one writes {target}", file=sys.stderr)

    def save() -> str:
        # A forked child that outlives its parent writes beside the parent's snapshot, not over it.
        path = target if os.getpid() == owner else f"{out}.{os.getpid()}"
        if not saved or saved[-1] != path:
            tracer.save(path)
            saved.append(path)
        return path

    real_exit: Callable[[int], Any] = os._exit

    def exit_after_saving(code: int) -> None:
        try:
            tracer.stopped = tracer.stopped or f"the program called os._exit({code})"
            save()
        finally:
            real_exit(code)

    os._exit = exit_after_saving  # type: ignore[assignment]
    try:
        with tracer:
            runpy.run_path(options.script, run_name="__main__")
    except UnfollowedError as e:
        message = f"error: {e}"
        status = 1
    except SystemExit as e:
        # As Python shows it: a string is printed and gives status 1.
        if isinstance(e.code, int) or e.code is None:
            status = e.code or 0
        else:
            message, status = str(e.code), 1
    except KeyboardInterrupt:
        message, status = "error: interrupted (KeyboardInterrupt); the trace up to there is kept", 130
    except Exception as e:
        # The script's own error: its traceback is the program's to show, after the trace up
        # to there is written.
        failure = e
        status = 1
    finally:
        os._exit = real_exit  # type: ignore[assignment]
    try:
        written = save()
    except OSError as e:
        print(f"error: {out}: the snapshot could not be written ({e.strerror or e})", file=sys.stderr)
        return 1
    finally:
        _unlock(lock, owner)
    if failure is not None:
        import traceback

        traceback.print_exception(type(failure), failure, failure.__traceback__)
        print(f"error: the script raised {type(failure).__name__}; the trace up to there is in {written}", file=sys.stderr)
    if message is not None:
        print(message, file=sys.stderr)
    if written != out and lock is not None:
        print(f"note: this process is a fork of the one that started the trace; its snapshot is {written}", file=sys.stderr)
    events = len(tracer.record.events)
    print(f"trace: {events} events, peak allocated {tracer.peak_allocated:,} B ({tracer.peak_allocated / 2**20:,.1f} MiB) -> {written}", file=sys.stderr)
    where = tracer.breakdown()
    if where["peak_allocated"]:
        parts = ", ".join(f"{name} {size / 2**20:,.1f} MiB" for name, size in where["live_at_peak"].items())
        print(f"at the peak (during {where['peak_during']}): {parts}", file=sys.stderr)
    if tracer.record.step_ends:
        try:
            print(f"steps: {tracer.steady()['advice']}", file=sys.stderr)
        except Exception as e:  # noqa: BLE001 - the snapshot is written; the check is advice
            print(f"steps: not checked ({e})", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
