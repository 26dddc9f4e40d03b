"""PyTorch's own Python code that asks which device it runs on, answered as on the GPU: the
optimizers' foreach, fused and capturable checks, checkpointing's device checks and recomputation,
torch.load's "cuda" deserializer, torch.save, torch.jit.trace's value check, DataLoader pinning,
autocast's device type, and the fast paths' check for torch function modes. Each entry is a
(owner, name) -> value of the trace's patch table (standin.Patches installs them all at once)."""

from __future__ import annotations

import io
import os
import sys
from typing import Any, Dict, List

from .recorder import UNKNOWN_EITHER_WAY
from .standin import Table, counting
from .where import here, user_frame


def optimizer_paths(session: Any) -> Table:
    """On the GPU the optimizers take their multi-tensor (foreach) path by default, with its own
    temporaries; `fused=True` and `capturable=True` ask for CUDA tensors: the meta tensors that
    stand in for CUDA ones are given the same answers (torch/optim/optimizer.py)."""
    torch = session.torch
    from torch.optim import optimizer as optim_module

    if torch.distributed.is_available():
        # torch.distributed.optim's functional optimizers (ZeroRedundancyOptimizer's, DDP's
        # overlapped optimizer) are TorchScript classes compiled when the module is first imported,
        # down to these checks: imported inside a trace, TorchScript would meet the stand-ins below
        # (lambdas it cannot parse) instead of PyTorch's own functions. Imported first, it compiles
        # PyTorch's, and what they allocate is the same.
        try:
            import torch.distributed.optim  # noqa: F401
        except Exception:
            pass

    table: Table = {}
    supported = optim_module._get_foreach_kernels_supported_devices

    def foreach_devices() -> List[str]:
        return list(supported()) + ["meta"]

    # clip_grad_norm_ and the other users of torch.utils._foreach_utils ask it the same question.
    for owner in (optim_module, torch.utils._foreach_utils):
        if hasattr(owner, "_get_foreach_kernels_supported_devices"):
            table[(owner, "_get_foreach_kernels_supported_devices")] = foreach_devices
    fused = optim_module._get_fused_kernels_supported_devices
    table[(optim_module, "_get_fused_kernels_supported_devices")] = lambda: list(fused()) + ["meta"]
    # Each optimizer's module holds its own reference to the capturable check.
    capturable = optim_module._get_capturable_supported_devices
    for module in [optim_module] + [m for n, m in list(sys.modules.items()) if n.startswith("torch.optim.") and m is not None]:
        if getattr(module, "_get_capturable_supported_devices", None) is capturable:
            table[(module, "_get_capturable_supported_devices")] = lambda supports_xla=True: list(capturable(supports_xla)) + ["meta"]
    module_apply = torch.nn.Module._apply
    from torch.nn.utils import spectral_norm as spectral_norm_module, weight_norm as weight_norm_module

    reparametrizations = (sys.modules[weight_norm_module.__module__].WeightNorm, sys.modules[spectral_norm_module.__module__].SpectralNorm)

    def moving(module: Any, *args: Any, **kwargs: Any) -> Any:
        # The trace swaps parameters on conversion so that a host module moved to the GPU keeps
        # each parameter's identity (session.py). A module already on the GPU converted in place
        # (`.half()`, `.to(torch.bfloat16)`) takes PyTorch's own path there, `param.data = new`,
        # which frees each old parameter before the next is made; a swap would free it one
        # conversion later (the old data lives on in `_apply`'s local until the next parameter).
        own = [p for p in module._parameters.values() if p is not None]
        for hook in module._forward_pre_hooks.values():
            # The legacy weight_norm and spectral_norm keep the weight they compute as a plain
            # attribute whose autograd graph holds their parameters, so a swap would find them
            # referenced; PyTorch's .to() leaves that attribute as it is (the hook computes it again
            # in the forward), and so does the trace, without its graph.
            computed = getattr(module, hook.name, None) if isinstance(hook, reparametrizations) else None
            if isinstance(computed, torch.Tensor) and not isinstance(computed, torch.nn.Parameter) and computed.grad_fn is not None:
                setattr(module, hook.name, computed.detach())
            del computed
        with torch._C.DisableTorchFunction():
            # The tensors' own devices, not what the trace's mode answers for them (cuda).
            on_gpu = [p.is_meta for p in own]
        swap_was = torch.__future__.get_swap_module_params_on_conversion()
        if own and all(on_gpu):
            torch.__future__.set_swap_module_params_on_conversion(False)
        elif own:
            torch.__future__.set_swap_module_params_on_conversion(True)
        session.in_module_move += 1
        try:
            return module_apply(module, *args, **kwargs)
        finally:
            session.in_module_move -= 1
            torch.__future__.set_swap_module_params_on_conversion(swap_was)

    table[(torch.nn.Module, "_apply")] = moving
    return table


def checkpoint_paths(session: Any) -> Table:
    """Checkpointing (torch/utils/checkpoint.py). Non-reentrant checkpointing compares each saved
    tensor's device with its recomputed one's; code PyTorch runs with the trace's function mode
    off (a custom autograd.Function's forward) sees the stand-ins' own device: both are the GPU.
    The autograd engine runs recomputations without the program's torch function modes, so the
    recomputed forward would run as on the meta device and differ from the first; both run as on
    the GPU here."""
    torch = session.torch
    import torch.utils.checkpoint as checkpointing

    cuda0 = torch.device("cuda", session.device_index)

    def checked_metadata(x: Any) -> Dict[str, Any]:
        device = cuda0 if x.device.type in ("meta", "cuda") else x.device
        return {"shape": x.shape, "dtype": x.dtype, "device": device}

    checks = dict(checkpointing._allowed_determinism_checks_to_fns)
    checks[checkpointing._DEFAULT_DETERMINISM_MODE] = checked_metadata

    on_the_gpu = session.on_the_gpu

    reentrant_backward = checkpointing.CheckpointFunction.backward
    table: Table = {
        (checkpointing, "_allowed_determinism_checks_to_fns"): checks,
        (checkpointing.CheckpointFunction, "backward"): staticmethod(on_the_gpu(reentrant_backward)),
    }
    # checkpoint() runs the function through this generator (torch 2.11), or through its _impl
    # (torch 2.15: utils/checkpoint.py calls _checkpoint_without_reentrant_generator_impl, the old
    # name left as a shim nothing in torch calls): whichever the release has, both are wrapped.
    for name in ("_checkpoint_without_reentrant_generator", "_checkpoint_without_reentrant_generator_impl"):
        generator = getattr(checkpointing, name, None)
        if generator is not None:
            table[(checkpointing, name)] = lambda fn, *args, _generator=generator, **kwargs: _generator(on_the_gpu(fn), *args, **kwargs)
    return table


def serialization_paths(session: Any) -> Table:
    """torch.load puts storages saved from the GPU (or mapped to it with map_location) on the
    device through the "cuda" deserializer of torch.serialization's registry: the trace's own puts
    them on the stand-in device, each one allocation, in the file's order. torch.save of stand-ins
    copies their values to the host on the GPU, which allocates nothing there; a trace has no
    values, so a file is not written (it would replace a real checkpoint) and a buffer gets the
    tensors without data, both noted. What a file would have held is kept in memory (tensors
    without data: a few bytes each), and a torch.load of that path later in the trace reads it,
    as a program that saves its best checkpoint and loads it back does."""
    torch = session.torch
    from torch import serialization

    def restore_on_gpu(storage: Any, location: str) -> Any:
        if location != "cuda" and not location.startswith("cuda:"):
            return None
        session.one_gpu(location)
        # Made below the trace's function mode: a stand-in, not the program's own meta tensor.
        with torch._C.DisableTorchFunction():
            placed = torch.UntypedStorage(storage.nbytes(), device="meta")
            session.record.track(torch.empty(0, dtype=torch.uint8, device="meta").set_(placed), user_frame())
        return placed

    registry = [
        (priority, tagger, restore_on_gpu if getattr(restore, "args", None) == ("cuda",) else restore)
        for priority, tagger, restore in serialization._package_registry
    ]
    save = torch.save

    def save_without_values(*args: Any, **kwargs: Any) -> Any:
        stack = torch.overrides._get_current_function_mode_stack()
        if not (stack and stack[-1] is session.modes[0]):
            return save(*args, **kwargs)
        target = args[1] if len(args) > 1 else kwargs.get("f")
        if isinstance(target, (str, bytes, os.PathLike)):
            session.note(
                "{count} torch.save calls to files were not written (a trace has no values, and the file would replace a real checkpoint); copying to the host allocates nothing on the GPU, and a torch.load of the same path in the trace reads what was saved"
            )
            buffer = io.BytesIO()
            rest = {k: v for k, v in kwargs.items() if k not in ("obj", "f")}
            with torch.overrides._pop_mode_temporarily():
                save(args[0] if args else kwargs["obj"], buffer, *args[2:], **rest)
            saved_files[os.path.realpath(os.fsdecode(target))] = buffer.getvalue()
            return None
        session.note(
            "{count} torch.save calls wrote the GPU's tensors without their values into the program's buffers (a trace has none); copying to the host allocates nothing on the GPU"
        )
        with torch.overrides._pop_mode_temporarily():
            return save(*args, **kwargs)

    load = torch.load
    saved_files: Dict[str, bytes] = {}

    def load_saved(*args: Any, **kwargs: Any) -> Any:
        source = args[0] if args else kwargs.get("f")
        if isinstance(source, (str, bytes, os.PathLike)):
            saved = saved_files.get(os.path.realpath(os.fsdecode(source)))
            if saved is not None:
                rest = {k: v for k, v in kwargs.items() if k != "f"}
                # Its tensors were saved as stand-ins (meta, without storage): rebuilt on meta,
                # they stand in for the GPU's again, not for the program's own meta tensors.
                return counting(session, "stand_in_meta", load)(io.BytesIO(saved), *args[1:], **rest)
        return load(*args, **kwargs)

    return {(serialization, "_package_registry"): registry, (torch, "save"): save_without_values, (torch, "load"): load_saved}


class Parked:
    """A stand-in's saved tensor parked in host memory by save_on_cpu: its shape and dtype (a
    trace has no values to copy)."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: Any, dtype: Any) -> None:
        self.shape, self.dtype = shape, dtype


def saved_on_host(session: Any) -> Any:
    """torch.autograd.graph.save_on_cpu as the GPU runs it (torch/autograd/graph.py): each tensor
    autograd saves is copied to host memory as it is saved, so the GPU's block goes as soon as the
    program lets the tensor go, and the backward copies it back into a new block of its size
    (contiguous: pack_to_cpu makes the host copy with empty(size) or .cpu()). A copy to the host
    from a strided GPU tensor (Linear's saved weight.t()) goes through a contiguous copy on the
    GPU first, freed when the copy is done (aten/src/ATen/native/cuda/Copy.cu, copy_kernel_cuda:
    src.expand_as(dst).contiguous()). A stand-in's host copy keeps its shape and dtype, and the
    copy back is a new stand-in; the program's own CPU tensors are kept as PyTorch keeps them."""
    torch = session.torch
    hooks: Any = torch.autograd.graph.saved_tensors_hooks

    class save_on_cpu(hooks):  # type: ignore[misc]  # noqa: N801 (PyTorch's name)
        def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
            def pack(tensor: Any) -> Any:
                if tensor.device.type == "meta":
                    if not tensor.is_contiguous():
                        session.record.scratch([tensor.numel() * tensor.element_size()], user_frame())
                    return (tensor.device, Parked(tensor.shape, tensor.dtype))
                return (tensor.device, tensor.cpu())

            def unpack(packed: Any) -> Any:
                device, host = packed
                if isinstance(host, Parked):
                    return torch.empty(host.shape, dtype=host.dtype, device=device)
                return host.to(device, non_blocking=pin_memory)

            super().__init__(pack, unpack)

    return save_on_cpu


def program_paths(session: Any) -> Table:
    """DataLoader pinning, torch.jit.trace's check, the fast paths' check for modes, the default
    device, and storage resizes."""
    torch = session.torch
    from torch.utils.data._utils import pin_memory as pinning

    table: Table = {}
    # A DataLoader that pins memory pins in a thread of its own: pinned host memory is not the
    # GPU's, so the batches are used as they are.
    table[(pinning, "pin_memory")] = lambda data, device=None: data
    table[(torch.autograd.graph, "save_on_cpu")] = saved_on_host(session)
    # torch.jit.trace checks its graph by running it again and comparing values, which a trace
    # has none of: the graph is made without that check.
    jit_trace = torch.jit.trace

    def trace_without_check(*args: Any, **kwargs: Any) -> Any:
        kwargs["check_trace"] = False
        return jit_trace(*args, **kwargs)

    table[(torch.jit, "trace")] = trace_without_check
    # PyTorch's fast paths (nn.MultiheadAttention's) are refused where any torch function mode is
    # on; the GPU runs the program without the trace's, so the trace's own is not counted.
    has_torch_function = torch.overrides.has_torch_function

    def program_has_torch_function(values: Any) -> bool:
        stack = torch.overrides._get_current_function_mode_stack()
        if stack and stack[-1] is session.modes[0]:
            with torch.overrides._pop_mode_temporarily():
                return bool(has_torch_function(values))
        return bool(has_torch_function(values))

    table[(torch.overrides, "has_torch_function")] = program_has_torch_function
    set_default_device = torch.set_default_device
    table[(torch, "set_default_device")] = lambda device: set_default_device(session.redirect(device))
    # UntypedStorage.resize_ does not reach dispatch modes: on the GPU it moves the storage to a
    # new block (rules/storage.py).
    resize = torch.UntypedStorage.resize_

    def resize_storage(storage: Any, size: int) -> Any:
        if storage.device.type == "meta" and isinstance(size, int) and size < 0:
            # The GPU's allocator refuses a negative size; a meta storage would take it.
            raise RuntimeError(f"UntypedStorage.resize_({size}) at {here()}: a storage's size cannot be negative")
        result = resize(storage, size)
        if storage.device.type == "meta":
            session.record.resized(storage, user_frame())
        return result

    table[(torch.UntypedStorage, "resize_")] = resize_storage
    # torch.compile: under the trace's modes Dynamo does not compile, and the program runs eagerly;
    # on the GPU Inductor fuses operators and plans its own buffers, which the trace does not
    # follow. The program is run eagerly on purpose, and the snapshot says so. With CUDA graphs
    # (a mode whose options turn them on, or their own backend) the GPU's peak is not even bounded
    # by the eager one: the note says the peak is unknown.
    def compile_eagerly(model: Any = None, **options: Any) -> Any:
        session.note(COMPILE_CUDA_GRAPHS_NOTE if compiles_cuda_graphs(torch, options) else COMPILE_NOTE)
        if model is None:
            return lambda fn: fn
        if isinstance(model, torch.nn.Module):
            # What torch.compile returns for a module, run eagerly: its OptimizedModule holds the
            # module as `_orig_mod` (nanoGPT unwraps it so; its state_dict keys carry the prefix).
            from torch._dynamo.eval_frame import DisableContext, OptimizedModule

            return OptimizedModule(model, DisableContext())
        return model

    table[(torch, "compile")] = compile_eagerly
    module_compile = getattr(torch.nn.Module, "compile", None)
    if module_compile is not None:
        table[(torch.nn.Module, "compile")] = lambda module, *args, **kwargs: compile_eagerly(module) and None
    return table


COMPILE_NOTE = (
    "{count} torch.compile calls were traced as eager PyTorch: Inductor's fused kernels and buffer reuse on the GPU are not followed, "
    "so peak memory may be higher than the compiled program's (a compiled training step often holds fewer intermediates)"
)
COMPILE_CUDA_GRAPHS_NOTE = (
    f"{UNKNOWN_EITHER_WAY} {{count}} torch.compile calls with CUDA graphs (mode 'reduce-overhead' or 'max-autotune', "
    "options turning on triton.cudagraphs, or the cudagraphs backend; transformers' generate makes one for a static cache) "
    "were traced as eager PyTorch: on the GPU each graph is recorded into a memory pool of its own that keeps its static "
    "inputs, outputs and intermediates between calls (torch/_inductor/cudagraph_trees.py), and Inductor plans its own buffers, "
    "so the GPU's peaks may be far higher or lower than these (Llama's static-cache generate on an H200: 62% higher allocated, "
    "reports/reference/h200/trace-workloads-35o); trace without CUDA graphs (mode 'default'; transformers: "
    "generate(..., disable_compile=True)) for a figure to trust"
)


def compiles_cuda_graphs(torch: Any, options: Dict[str, Any]) -> bool:
    """Whether torch.compile with these arguments runs CUDA graphs: the cudagraphs backend, or
    Inductor with triton.cudagraphs on, by its options or by its mode's (torch._inductor's own
    list_mode_options)."""
    backend = options.get("backend", "inductor")
    if backend == "cudagraphs":
        return True
    if backend != "inductor":
        return False
    chosen = dict(options.get("options") or {})
    mode = options.get("mode")
    if mode not in (None, "default"):
        try:
            from torch._inductor import list_mode_options

            chosen = {**list_mode_options(mode), **chosen}
        except Exception:  # noqa: BLE001 (a mode this release does not know: torch.compile itself says so on the GPU)
            pass
    return bool(chosen.get("triton.cudagraphs"))


# The order autocast's cached casts are freed in on the GPU is that of a hash table keyed by
# their weights' CPU addresses; the trace frees them in the order they were made.
AUTOCAST_CACHE_ORDER_NOTE = (
    "{count} times autocast's cache of cast weights was freed on leaving autocast: the GPU frees the casts in the order of "
    "c10's cached_casts, an std::unordered_map keyed by the weights' CPU addresses, which a trace does not know, and the trace "
    "frees them in the order they were made; the caching allocator can then reuse other blocks for the next allocations, so "
    "peak allocated may differ slightly (by up to the casts' sizes; ISSUE35K's distillation run: +0.92% under the default setting)"
)


def autocast_paths(session: Any, kernels: Any) -> Table:
    """autocast("cuda"): PyTorch's own context manager keeps the thread's autocast state (so
    torch.is_autocast_enabled("cuda") and get_autocast_dtype answer as on the GPU), and the
    trace's kernels (rules/autocast.py) make the casts while it is on. A device type that
    PyTorch's own code reads below the program ("meta") means "cuda"."""
    torch = session.torch
    autocast = torch.amp.autocast_mode.autocast
    original_init, original_enter, original_exit = autocast.__init__, autocast.__enter__, autocast.__exit__
    original_clear, original_available = torch.clear_autocast_cache, torch.amp.autocast_mode.is_autocast_available

    def autocast_init(mode: Any, device_type: str, *args: Any, **kwargs: Any) -> None:
        original_init(mode, "cuda" if device_type == "meta" else device_type, *args, **kwargs)

    def autocast_enter(mode: Any) -> Any:
        entered = original_enter(mode)
        kernels.switch(torch.is_autocast_enabled("cuda"))
        return entered

    def autocast_exit(mode: Any, *exc: Any) -> Any:
        left = original_exit(mode, *exc)
        kernels.switch(torch.is_autocast_enabled("cuda"))
        return left

    def clear_autocast_cache() -> None:
        original_clear()
        if len(kernels.cache) > 1:
            session.note(AUTOCAST_CACHE_ORDER_NOTE)
        kernels.clear_cache()

    return {
        (autocast, "__init__"): autocast_init,
        (autocast, "__enter__"): autocast_enter,
        (autocast, "__exit__"): autocast_exit,
        (torch, "clear_autocast_cache"): clear_autocast_cache,
        (torch.amp.autocast_mode, "is_autocast_available"): lambda device_type: device_type == "meta" or original_available(device_type),
    }
