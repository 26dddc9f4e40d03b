"""Collectives and streams, as the GPU runs them (issue 36; the process group itself is
vramlab/_tracer/distributed.py, the streams vramlab/_tracer/streams.py).

- Functional collectives (``_c10d_functional``, DTensor's and tensor parallelism's): their meta kernels
  (torch/distributed/_functional_collectives.py) make outputs of the right sizes, as the CUDA
  kernels allocate them (all_reduce clones its input and reduces in place; all_gather makes
  world_size x the input; reduce_scatter 1/world_size), but ``wait_tensor``'s makes a new tensor
  where the GPU's returns its input (it only makes the current stream wait: Functional.cpp), and
  the ``_out`` variants make one where the GPU's writes into ``out``: both are answered as on the GPU.
- ``Tensor.record_stream``: no meta kernel; the block is marked used on that stream (its free
  completes later: streams.py).
- DDP's Reducer copies its bucket order back to the host when it rebuilds its buckets
  (reducer.cpp: sync_bucket_indices); stand-ins have no values, so the host tensor keeps this
  rank's own order (every rank computes the same one)."""

from __future__ import annotations

from typing import Any, List

from . import PASS, Call, FunctionRule, Rule, register, register_function


@register
class FunctionalCollectives(Rule):
    ops = {"wait_tensor", "all_gather_into_tensor_out", "reduce_scatter_tensor_out"}
    source = "torch/csrc/distributed/c10d/Functional.cpp: wait_tensor returns its input; the _out variants write into out"
    order = 30

    def before(self, call: Call) -> Any:
        if call.op == "wait_tensor":
            return call.args[0]
        out = call.kwargs.get("out")
        if out is None:
            return PASS
        # The output's shape is checked by the meta kernel's result; the GPU writes into `out`.
        call.func(*call.args, **{k: v for k, v in call.kwargs.items() if k != "out"})
        return out


@register
class HostCopiesKept(Rule):
    ops = {"copy_"}
    source = "reducer.cpp: sync_bucket_indices copies the broadcast bucket order back to the host"
    order = 30

    def before(self, call: Call) -> Any:
        if not getattr(self.session, "host_copies_kept", 0):
            return PASS
        torch = self.torch
        dst, src = call.args[0], call.args[1]
        if isinstance(dst, torch.Tensor) and dst.device.type == "cpu" and isinstance(src, torch.Tensor) and src.device.type == "meta":
            return dst
        return PASS
@register_function
class RecordStream(FunctionRule):
    """``Tensor.record_stream(s)``: the block is in use on `s` until `s`'s work is done, so its free
    completes later (CUDACachingAllocator.cpp: recordStream, insert_events, process_events)."""

    names = ("record_stream",)
    source = "c10/cuda/CUDACachingAllocator.cpp: recordStream adds the stream to the block's stream_uses; free() then inserts events and completes the free once they have happened"

    def call(self, mode: Any, func: Any, args: Any, kwargs: Any) -> Any:
        torch = self.torch
        tensor = args[0] if args else None
        stream = args[1] if len(args) > 1 else kwargs.get("stream")
        if not (isinstance(tensor, torch.Tensor) and tensor.device.type == "meta"):
            return PASS
        record = self.session.record
        addr = record.address(tensor.untyped_storage())
        number = getattr(stream, "cuda_stream", None)
        if addr is not None and number is not None and number != record.block_stream.get(addr):
            uses: List[int] = list(record.stream_uses.get(addr, ()))
            record.stream_uses[addr] = set(uses) | {number}
        return None
