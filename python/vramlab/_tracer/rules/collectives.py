"""Collectives and streams, as the GPU runs them (issue 36; the process group itself is
vramlab/_tracer/distributed.py, the streams vramlab/_tracer/streams.py).

- Functional collectives (``_c10d_functional``, DTensor's and tensor parallelism's): their meta kernels
  (torch/distributed/_functional_collectives.py) make outputs of the right sizes, as the CUDA
  kernels allocate them (all_reduce clones its input and reduces in place; all_gather makes
  world_size x the input; reduce_scatter 1/world_size), but ``wait_tensor``'s makes a new tensor
  where the GPU's returns its input (it only makes the current stream wait: Functional.cpp; so does
  ``_wrap_tensor_autograd``, an alias for autograd), and
  the ``_out`` variants make one where the GPU's writes into ``out``: both are answered as on the GPU.
- DDP's Reducer copies its bucket order back to the host when it rebuilds its buckets
  (reducer.cpp: sync_bucket_indices); stand-ins have no values, so the host tensor keeps this
  rank's own order (every rank computes the same one)."""

from __future__ import annotations

from typing import Any

from . import PASS, Call, FunctionRule, Rule, register, register_function


@register
class FunctionalCollectives(Rule):
    ops = {"wait_tensor", "_wrap_tensor_autograd", "all_gather_into_tensor_out", "reduce_scatter_tensor_out"}
    source = "torch/csrc/distributed/c10d/Functional.cpp: wait_tensor returns its input; the _out variants write into out"
    order = 30

    def before(self, call: Call) -> Any:
        if call.op in ("wait_tensor", "_wrap_tensor_autograd"):
            return call.args[0]
        out = call.kwargs.get("out")
        if out is None:
            return PASS
        # The GPU writes into `out` (the meta kernel would make a new tensor).
        return out


@register
class HostCopiesKept(Rule):
    """Copies to the host whose values nothing on the GPU depends on, inside the library code
    that makes them (session.host_copies_kept, set by distributed.py): DDP's bucket order read back
    (each rank keeps its own), FSDP2's CPU offload (sharded parameters and gradients moved to the
    host; the host's optimizer then steps on values the trace does not have, which allocates
    nothing on the GPU). The host tensor is made (or kept) without the GPU's values."""

    ops = {"copy_", "_to_copy"}
    source = "reducer.cpp: sync_bucket_indices; fsdp/_fully_shard/_fsdp_param.py and _fsdp_collectives.py: CPU offload's device-to-host copies"
    order = 5

    def before(self, call: Call) -> Any:
        if not getattr(self.session, "host_copies_kept", 0):
            return PASS
        torch = self.torch
        if call.op == "_to_copy":
            src = call.args[0]
            device = call.kwargs.get("device")
            if isinstance(src, torch.Tensor) and src.device.type == "meta" and device is not None and torch.device(device).type == "cpu":
                dtype = call.kwargs.get("dtype") or src.dtype
                return torch.empty_strided(src.shape, src.stride(), dtype=dtype, device="cpu")
            return PASS
        dst, src = call.args[0], call.args[1]
        if isinstance(dst, torch.Tensor) and dst.device.type == "cpu" and isinstance(src, torch.Tensor) and src.device.type == "meta":
            return dst
        return PASS
@register_function
class DataSetToDevice(FunctionRule):
    """``param.data = param.to("cuda")`` (FSDP2 moves a CPU model's parameters so before sharding,
    fsdp/_fully_shard/_fsdp_init.py: _move_states_to_device; a common idiom of programs too): on
    the GPU a host tensor may take a CUDA tensor's data, but a host tensor may not take a meta
    one's, so the tensor is swapped for one holding the stand-in (the Python object, a module's
    parameter, stays the same), as ``module.to`` does in a trace."""

    names = ("__set__",)
    source = "torch/csrc/autograd/variable.cpp: VariableHooks::set_data (_has_compatible_shallow_copy_type allows CPU to CUDA, not CPU to meta)"

    def call(self, mode: Any, func: Any, args: Any, kwargs: Any) -> Any:
        torch = self.torch
        if getattr(getattr(func, "__self__", None), "__name__", "") != "data" or len(args) != 2:
            return PASS
        tensor, value = args
        if not (isinstance(tensor, torch.Tensor) and isinstance(value, torch.Tensor)):
            return PASS
        if tensor.device.type == "meta" or value.device.type != "meta" or type(value) is not torch.Tensor:
            return PASS
        if isinstance(tensor, torch.nn.Parameter):
            replacement = torch.nn.Parameter(value, requires_grad=tensor.requires_grad)
        elif type(tensor) is torch.Tensor:
            replacement = value.detach().requires_grad_(tensor.requires_grad)
        else:
            return PASS
        torch.utils.swap_tensors(tensor, replacement)
        return None
