"""A collective's future in a trace (``work.get_future()``), as c10 makes ProcessGroupNCCL's: a
future with the work's CUDA device, whose ``then`` callbacks run on streams from the pool."""

from __future__ import annotations

from typing import Any

from .distributed import _flat
from .standin import Table, device_of

POOL_STREAM_NOTE = "{count} callbacks chained on a collective's future (Future.then, as in DDP's PowerSGD hook) ran on streams from the low-priority pool, as c10's Future does for a future with CUDA devices (ATen/core/ivalue_inl.h: invokeCallback takes getStreamFromGlobalPool for each callback, round-robin over 32 streams): their allocations, cuBLAS's workspace per stream among them, are in those streams' pools"


def future_paths(session: Any) -> Table:
    """A collective's future, as the program sees it (``work.get_future()``). ProcessGroupNCCL's
    is a c10 Future with the work's CUDA device, and such a future runs each ``then`` callback on
    a stream it takes from the pool, after making that stream wait for the future's events and
    marking the value's storages used on it (ATen/core/ivalue_inl.h: invokeCallback,
    synchronizeWithCurrentStreams); the future ``then`` returns has the same devices. A stand-in
    group's future has none (a trace has no CUDA), so the callbacks would run on the current
    stream: this one takes the pool stream itself. The value's blocks are not marked used on the
    pool stream: their frees would then wait for a host synchronisation in a trace, where on four
    H100s DDP's bf16_compress_hook (a callback on every bucket) freed its compressed buckets for
    reuse at once: its largest rank's reserved peak is within the tracer's limits without the mark
    and 10% above the GPU's with it (reports/reference/h100/distributed-x4d,
    ddp_bf16_compress_hook under expandable segments)."""
    torch = session.torch
    Work = getattr(getattr(torch._C, "_distributed_c10d", None), "Work", None)
    get_future = getattr(Work, "get_future", None)
    if get_future is None:
        return {}

    def holds_stand_ins(value: Any) -> bool:
        return any(device_of(torch, t) == "meta" for t in _flat(value))

    Future: Any = torch.futures.Future

    class CudaFuture(Future):
        """A future with the GPU among its devices: each `then` callback on a pool stream."""

        def then(self, callback: Any) -> Any:
            streams = session._streams
            stream = streams.Stream()
            with streams.stream(stream):
                streams.waited()
                session.note(POOL_STREAM_NOTE)
                result = callback(self)
            chained = CudaFuture()
            chained.set_result(result)
            return chained

    def future_of(work: Any) -> Any:
        future = get_future(work)
        if not future.done() or not holds_stand_ins(future.value()):
            return future
        ours = CudaFuture()
        ours.set_result(future.value())
        return ours

    return {(Work, "get_future"): future_of}
