"""CUDA streams and events in a trace. Each stream the program (or PyTorch's own FSDP, DDP,
DTensor) makes is a stand-in with its own small ``cuda_stream`` number (0 is the default stream),
and the stream made current (``torch.cuda.stream(s)``, ``set_stream``) is the recorder's
(`Recorder.stream`): each allocation carries the stream it was made on, as the caching allocator
keeps a pool per stream (CUDACachingAllocator.cpp: blocks are reused only on their own stream),
and each free carries its block's stream.

Streams come from PyTorch's pools as on the GPU (c10/cuda/CUDAStream.cpp: 32 streams per priority
level, handed out round-robin), so a program that makes many streams reuses their numbers as it
would reuse their pools.

``Tensor.record_stream(s)`` (no meta kernel) marks the block used on `s`: its free is asked for at
the program's free (``free_requested``) and completed at the next synchronisation with the GPU's
work (an event waited on or synchronised, ``wait_stream``, ``synchronize``): a trace has no GPU
timing, so completion is placed there, the earliest the allocator could reuse it; the snapshot says
so. Streams' order of work is the program's: nothing runs concurrently in a trace."""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, Optional

from .standin import Table

STREAMS_PER_POOL = 32  # c10/cuda/CUDAStream.cpp: kStreamsPerPool
PRIORITY_LEVELS = 4  # c10/cuda/CUDAStream.h: max_compile_time_stream_priorities


class Streams:
    """The streams of one trace: the default one, the pools, the current one."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.torch = session.torch
        self.next_in_pool: Dict[int, int] = {}
        streams = self

        class Stream:
            """``torch.cuda.Stream`` in a trace."""

            device_type = 1  # c10::DeviceType::CUDA

            def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
                if kwargs.get("_default"):
                    self.cuda_stream, self.priority = 0, 0
                else:
                    self.cuda_stream, self.priority = streams.from_pool(priority)
                self.device_index = session.device_index
                self.stream_id = self.cuda_stream

            @property
            def device(self) -> Any:
                return streams.torch.device("cuda", self.device_index)

            @property
            def native_handle(self) -> int:
                return self.cuda_stream

            def wait_stream(self, stream: Any) -> None:
                streams.waited()

            def wait_event(self, event: Any) -> None:
                streams.waited()

            def record_event(self, event: Any = None) -> Any:
                event = event if event is not None else Event()
                event.record(self)
                return event

            def query(self) -> bool:
                return True

            def synchronize(self) -> None:
                streams.synchronised()

            def is_capturing(self) -> bool:
                return False

            def __eq__(self, other: Any) -> bool:
                return isinstance(other, Stream) and other.cuda_stream == self.cuda_stream

            def __hash__(self) -> int:
                return hash(("cuda", self.cuda_stream))

            def __repr__(self) -> str:
                return f"<torch.cuda.Stream device=cuda:{self.device_index} cuda_stream={self.cuda_stream:#x} (vramlab stand-in)>"

            def __enter__(self) -> "Stream":
                self._before = streams.current
                streams.set(self)
                return self

            def __exit__(self, *exc: Any) -> None:
                streams.set(self._before)

        class Event:
            """``torch.cuda.Event`` in a trace: recorded on a stream; synchronising it is a
            synchronisation with the host (frees of blocks used on other streams complete), a
            stream's waiting on it is not (streams.waited); a trace has no time (``elapsed_time``
            answers 0.0, noted)."""

            cuda_event = 0
            event_id = 0

            def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False, external: bool = False) -> None:
                self.enable_timing = enable_timing
                self.stream: Optional[Any] = None

            def record(self, stream: Any = None) -> None:
                self.stream = stream if stream is not None else streams.current

            def wait(self, stream: Any = None) -> None:
                streams.waited()

            def synchronize(self) -> None:
                streams.synchronised()

            def query(self) -> bool:
                return True

            def elapsed_time(self, end_event: Any) -> float:
                session.note("{count} CUDA event timings answered 0.0 ms: a trace has no time")
                return 0.0

        self.Stream = Stream
        self.Event = Event
        self.default = Stream(_default=True)
        self.current: Any = self.default

    def from_pool(self, priority: int) -> Any:
        # Priority 0 is the low-priority pool; -1, -2, ... the higher ones (clamped as PyTorch does).
        level = min(max(-int(priority or 0), 0), PRIORITY_LEVELS - 1)
        index = self.next_in_pool.get(level, 0)
        self.next_in_pool[level] = index + 1
        return 1 + level * STREAMS_PER_POOL + index % STREAMS_PER_POOL, -level

    def set(self, stream: Any) -> None:
        if stream is None:
            return
        if not isinstance(stream, self.Stream):
            from ..errors import UnfollowedError
            from .where import here

            raise UnfollowedError(f"a stream that is not torch.cuda's ({type(stream).__name__}) made current at {here()}: vramlab.trace follows torch.cuda.Stream only (the trace up to there is kept)")
        self.current = stream
        self.session.record.stream = stream.cuda_stream

    def backward_on_current(self, result: Any) -> None:
        """The autograd engine runs each backward node on the stream its forward operator ran on
        (torch/csrc/autograd/engine.cpp: thread_main guards the node's evaluation, its hooks too,
        with Node::stream(), the stream current when the forward made the node's inputs'
        metadata), so what a backward allocates follows the forward's stream: FSDP1 makes its
        parameters' views of the unsharded flat parameter on its unshard stream, and their
        backward allocates the flat gradient there. Called for the outputs of an operator run
        with autograd on while a stream other than the default one is current: the nodes it made
        switch the trace's current stream for their own evaluation (a marker in the node's
        metadata keeps it to one switch per node)."""
        torch = self.torch
        stream = self.current
        for t in torch.utils._pytree.tree_leaves(result):
            node = getattr(t, "grad_fn", None) if isinstance(t, torch.Tensor) else None
            if node is None or not hasattr(node, "metadata"):
                continue
            metadata = node.metadata
            if "vramlab_stream" in metadata:
                continue
            metadata["vramlab_stream"] = stream.cuda_stream
            saved: list = []

            def before(grad_outputs: Any, stream: Any = stream, saved: list = saved) -> None:
                saved.append(self.current)
                self.set(stream)

            def after(grad_inputs: Any, grad_outputs: Any, saved: list = saved) -> None:
                if saved:
                    self.set(saved.pop())

            node.register_prehook(before)
            node.register_hook(after)

    def waited(self) -> None:
        """A stream made to wait on another stream or an event (``wait_stream``, ``wait_event``,
        ``Event.wait``): an order between the GPU's streams that the host does not wait for. The
        allocator completes a free of a block used on another stream when it finds, at a later
        allocation, that the events it recorded at the free have passed
        (CUDACachingAllocator.cpp: process_events), which depends on how far the GPU has got: a
        trace has no GPU timing. Frees stay pending to the next synchronisation with the host.
        On four H100s, FSDP1's ranks (reports/reference/h100/distributed-x4d) reserved what the
        trace gives when pending frees complete at host synchronisations on 9 of 16
        rank-settings, and up to 5.4% more or less on the others, differently per rank; completing
        them at every stream wait instead gave 5 of 16, every miss below the GPU."""
        if self.session.record.pending:
            self.session.note(
                "{count} stream waits (wait_stream, wait_event) left frees of blocks used on other streams pending: the GPU completes them when its work passes the events recorded at the free, a timing the trace cannot know, so peak reserved here is likely higher than the GPU's (per rank on the GPU it varied by up to 5.4% around this trace's; ISSUE35M's prefetching loop, whose GPU had completed each such free by its next allocation, reserved 20% less than its trace; peak allocated does not depend on it)"
            )

    def synchronised(self) -> None:
        if self.session.record.pending:
            self.session.note(
                "{count} frees of blocks used on other streams (Tensor.record_stream) were completed at the next synchronisation with the host (an event or stream synchronised, torch.cuda.synchronize): a trace has no GPU timing, and the GPU may complete them earlier or, for work queued after an event the host waited on, later"
            )
        self.session.record.synchronised()

    @contextlib.contextmanager
    def stream(self, stream: Any) -> Iterator[Any]:
        before = self.current
        self.set(stream)
        try:
            yield stream
        finally:
            self.set(before)

    def table(self) -> Table:
        torch = self.torch
        cuda = torch.cuda
        streams = self

        class StreamContext:
            def __init__(self, stream: Any) -> None:
                self.stream = stream

            def __enter__(self) -> Any:
                self.before = streams.current
                streams.set(self.stream)
                return self.stream

            def __exit__(self, *exc: Any) -> None:
                streams.set(self.before)

        def synchronize(device: Any = None) -> None:
            streams.synchronised()

        record_stream = torch.Tensor.record_stream

        def record_on(tensor: Any, stream: Any) -> None:
            # No meta kernel, and PyTorch's argument parser wants its own stream type: the block is
            # marked used on `stream` (CUDACachingAllocator.cpp: recordStream adds it to the
            # block's stream_uses; free() then waits on events for it).
            with torch._C.DisableTorchFunction():
                stand_in = tensor.device.type == "meta"
            if not stand_in:
                return record_stream(tensor, stream)
            record = streams.session.record
            addr = record.address(tensor.untyped_storage())
            number = getattr(stream, "cuda_stream", None)
            if addr is not None and number is not None and number != record.block_stream.get(addr):
                record.stream_uses[addr] = set(record.stream_uses.get(addr, ())) | {number}

        table: Table = {
            (torch.Tensor, "record_stream"): record_on,
            (cuda, "Stream"): self.Stream,
            (cuda, "Event"): self.Event,
            (cuda, "stream"): lambda stream: StreamContext(stream),
            (cuda, "StreamContext"): StreamContext,
            (cuda, "current_stream"): lambda device=None: streams.current,
            (cuda, "default_stream"): lambda device=None: streams.default,
            (cuda, "set_stream"): lambda stream: streams.set(stream),
            (cuda, "synchronize"): synchronize,
        }
        for module in (getattr(cuda, "streams", None),):
            if module is not None:
                for name in ("Stream", "Event"):
                    if hasattr(module, name):
                        table[(module, name)] = getattr(self, name)
        accelerator = getattr(torch, "accelerator", None)
        if accelerator is not None:
            answers: Dict[str, Any] = {
                "current_stream": lambda device=None: streams.current,
                "set_stream": lambda stream: streams.set(stream),
                "synchronize": synchronize,
            }
            for name, value in answers.items():
                if hasattr(accelerator, name):
                    table[(accelerator, name)] = value
        return table
