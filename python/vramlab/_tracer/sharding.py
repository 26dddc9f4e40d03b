"""The library code of torch.distributed's sharding that a trace runs its own way: FSDP2's backward
hooks and CPU offload, FSDP1's hooks, device meshes, DTensor's RNG tracker, and
torch.distributed.checkpoint's full state dicts (the process group itself is distributed.py)."""

from __future__ import annotations

from typing import Any

from .standin import Table, counting


def backward_paths(session: Any) -> Table:
    """Python that the autograd engine runs in the backward (tensor hooks, custom Functions'
    backward, FSDP2's pre- and post-backward and its final callback) runs without the program's
    torch function modes (the engine does not carry them): run inside the trace's, it names devices
    as the forward did ("cuda" is the stand-in device), as it would on the GPU."""
    torch = session.torch

    on_the_gpu = session.on_the_gpu

    table: Table = {}
    register_hook = torch.Tensor.register_hook

    def register(tensor: Any, hook: Any) -> Any:
        return register_hook(tensor, on_the_gpu(hook))

    table[(torch.Tensor, "register_hook")] = register
    backward_function = torch.autograd.function.BackwardCFunction
    table[(backward_function, "apply")] = on_the_gpu(backward_function.apply)
    try:
        from torch.distributed.fsdp._fully_shard import _fsdp_state
    except ImportError:
        return table
    state = _fsdp_state.FSDPState
    for name in ("_pre_backward", "_root_post_backward_final_callback"):
        if hasattr(state, name):
            table[(state, name)] = on_the_gpu(getattr(state, name))
    return table


def offload_paths(session: Any) -> Table:
    """FSDP2's CPU offload: the sharded parameters move to the host when sharded and the reduced
    gradients after each reduce-scatter; their host copies are made without values
    (rules/collectives.py: HostCopiesKept)."""
    table: Table = {}
    try:
        from torch.distributed.fsdp._fully_shard import _fsdp_collectives, _fsdp_param
    except ImportError:
        return table

    def keeping(fn: Any) -> Any:
        return counting(session, "host_copies_kept", fn)

    if hasattr(_fsdp_param.FSDPParam, "_init_sharded_param"):
        table[(_fsdp_param.FSDPParam, "_init_sharded_param")] = keeping(_fsdp_param.FSDPParam._init_sharded_param)
    if hasattr(_fsdp_collectives, "foreach_reduce"):
        reduce = keeping(_fsdp_collectives.foreach_reduce)
        table[(_fsdp_collectives, "foreach_reduce")] = reduce
        from torch.distributed.fsdp._fully_shard import _fsdp_param_group

        if getattr(_fsdp_param_group, "foreach_reduce", None) is _fsdp_collectives.foreach_reduce:
            table[(_fsdp_param_group, "foreach_reduce")] = reduce
    return table


TRACES = [0]


def mesh_paths(session: Any) -> Table:
    """Device meshes made in a trace are its own: a mesh is equal to (and hashes as) any mesh of the
    same shape and ranks, whichever rank made it, and DTensor caches plans by mesh (sharding
    propagation, redistribution), so a second trace in the same process (another rank) would find
    the first one's mesh and its process groups, gone with it. As PyTorch does for threads each
    playing a rank (the "threaded" backend), each mesh carries an identity of its trace."""
    try:
        from torch.distributed.device_mesh import DeviceMesh
    except ImportError:
        return {}
    TRACES[0] += 1
    token = ("vramlab.trace", TRACES[0])
    made = DeviceMesh.__init__

    def init(mesh: Any, *args: Any, **kwargs: Any) -> None:
        made(mesh, *args, **kwargs)
        mesh._thread_id = token
        mesh._hash = None

    return {(DeviceMesh, "__init__"): init}


def random_tracker_paths(session: Any) -> Table:
    """DTensor's RNG tracker, made at a DTensor's first random operation (``nn.init`` of a sharded
    model): it copies the CUDA generator's state to the device, broadcasts rank 0's, compares and
    sets it back from the host (tensor/_random.py: OffsetBasedRNGTracker). It runs inside
    DTensor's dispatch, below the trace's function mode, which it is run inside here (its
    ``.to(device)`` names the GPU); the broadcast leaves this rank's state, which every rank's
    trace has the same of."""
    try:
        from torch.distributed.tensor import _random
    except ImportError:
        return {}
    tracker = getattr(_random, "OffsetBasedRNGTracker", None)
    if tracker is None or "__init__" not in vars(tracker):
        return {}
    return {(tracker, "__init__"): counting(session, "same_state_broadcasts", session.on_the_gpu(tracker.__init__))}


def checkpoint_state_paths(session: Any, state_dict: Any) -> Table:
    """torch.distributed.checkpoint.state_dict, once imported: a full state dict gathered to the
    host for a checkpoint (``StateDictOptions(full_state_dict=True, cpu_offload=True)``) copies
    every parameter to the host, values nothing on the GPU depends on: made without them
    (rules/collectives.py: HostCopiesKept)."""
    # The public functions call these module globals at each call: a program that imported the
    # public ones before the trace began still comes through here.
    return {
        (state_dict, name): counting(session, "host_copies_kept", getattr(state_dict, name))
        for name in ("_get_model_state_dict", "_get_optim_state_dict")
        if hasattr(state_dict, name)
    }


def fsdp1_paths(session: Any) -> Table:
    """FSDP1 (FullyShardedDataParallel, fsdp/_runtime_utils.py): its post-backward hooks (on each
    flat parameter's AccumulateGrad node, or a multi-grad hook for use_orig_params' reshard-only
    path) and the final callback it queues on the autograd engine run without the program's torch
    function modes, as FSDP2's do (backward_paths): run inside the trace's, they see the flat
    parameters on the GPU, as on the GPU. They are looked up in the module when FSDP registers them
    (functools.partial of the module's global), so the module's names are replaced."""
    try:
        from torch.distributed.fsdp import _runtime_utils
    except ImportError:
        return {}
    table: Table = {}
    for name in ("_post_backward_hook", "_post_backward_reshard_only_hook", "_post_backward_final_callback"):
        if hasattr(_runtime_utils, name):
            table[(_runtime_utils, name)] = session.on_the_gpu(getattr(_runtime_utils, name))
    return table
