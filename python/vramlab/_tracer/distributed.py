"""One rank of a torch.distributed program in a trace (``vramlab.trace(world_size=N, rank=r)``).

The program starts its process group as on the GPU (``init_process_group("nccl")``, with or without
``device_id``; ``init_device_mesh("cuda", ...)``); inside a trace the group is `StandInGroup`, a
Python ProcessGroup that communicates with no one: each collective leaves its outputs as they are
(stand-ins have no values; host tensors keep this rank's own data, as if every rank held the same)
and returns a finished Work whose future holds the tensors, as ProcessGroupNCCL's does (DDP's
Reducer reads it). What ProcessGroupNCCL itself asks of the caching allocator is recorded
(ProcessGroupNCCL.cpp, torch 2.11), on the stream current at the call:

- list ``all_gather`` / ``all_gather_object``'s: a flat output of world_size x the input
  (``newLikeFlat``), copied out and let go once the work is done;
- list ``reduce_scatter``: a flat input of world_size x the output;
- ``allreduce_coalesced``: the flattened tensors;
- ``barrier``: a one-element tensor all-reduced.

In-place collectives (all_reduce, broadcast, all_gather_into_tensor, reduce_scatter_tensor,
all_to_all_single) allocate nothing. NCCL's own buffers and the CUDA context are not the caching
allocator's and are not in a snapshot (said in its notes).

Also here: DDP's check that every rank's parameters have the same shapes
(``_verify_param_shape_across_processes``: reads the metadata back on the host, which a trace
cannot; every rank runs the same program, so the check is passed, its small allocations not
recorded and noted); the Reducer's bucket order sync, whose indices it reads back on the host
(each rank keeps its own order, which DDP makes the same on every rank); FSDP2's refusal of
parameters on the meta device (stand-ins are on it); and the environment a launcher gives each
rank (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT).

What cannot be followed stops in one line naming the call: point-to-point sends and receives
(pipeline parallelism: what arrives depends on other ranks' programs), backends other than NCCL and
Gloo, and a world size other than the trace's."""

from __future__ import annotations

import functools
import inspect
import os
from typing import Any, Dict, List, Optional

from ..errors import UnfollowedError
from .sharding import backward_paths, fsdp1_paths, mesh_paths, offload_paths, random_tracker_paths
from .standin import Table, device_of
from .where import here, user_frame

BACKEND = "vramlab"
RNG_STATE_NOTE = "{count} random generators' states broadcast from rank 0 (accelerate's synchronize_rng_state, DTensor's RNG tracker) kept this rank's own: a trace draws no numbers, and every rank's generator is the same fixed one"
ACCEPTED_BACKENDS = {None, "nccl", "gloo", "cuda:nccl,cpu:gloo", "cpu:gloo,cuda:nccl", "undefined"}
# The environment torchrun gives each rank (torch/distributed/run.py, elastic agent).
ENVIRONMENT = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID")


def _flat(value: Any) -> List[Any]:
    out: List[Any] = []
    for item in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(item, (list, tuple)):
            out.extend(_flat(item))
        else:
            out.append(item)
    return out


class Distributed:
    """The distributed stand-ins of one trace."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.torch = session.torch
        self.saved_env: Dict[str, Optional[str]] = {}
        self.groups: List[Any] = []

    # The environment ---------------------------------------------------------------------------

    def enter(self) -> None:
        s = self.session
        if not s.launched:
            return
        env = {
            "RANK": str(s.rank),
            "WORLD_SIZE": str(s.world_size),
            "LOCAL_RANK": str(s.device_index),
            "LOCAL_WORLD_SIZE": str(s.world_size),
            "GROUP_RANK": "0",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": os.environ.get("MASTER_PORT", "29500"),
            "TORCHELASTIC_RUN_ID": "vramlab-trace",
        }
        for name, value in env.items():
            self.saved_env[name] = os.environ.get(name)
            os.environ[name] = value

    def exit(self) -> None:
        for name, value in self.saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self.saved_env = {}
        dist = self.torch.distributed
        if dist.is_available() and dist.is_initialized() and self.groups:
            # The program's group was the trace's: it goes with the trace (a later trace in the
            # same process starts its own).
            try:
                dist.destroy_process_group()
            except Exception:
                pass
        self.groups = []

    # Allocations of ProcessGroupNCCL's own ----------------------------------------------------------

    def temporary(self, tensors: List[Any], what: str) -> None:
        """A flat tensor the size of `tensors` together, made and let go inside the collective."""
        torch = self.torch
        stand_ins = [t for t in tensors if device_of(torch, t) == "meta"]
        if not stand_ins:
            return
        size = sum(t.numel() * t.element_size() for t in stand_ins)
        self.session.record.scratch([size], user_frame())
        self.session.note(
            "{count} collectives on lists of tensors (list all_gather, list reduce_scatter, coalesced all_reduce, barrier) made ProcessGroupNCCL's flat temporary, recorded as let go when the collective returns (on the GPU: when its work is done)"
        )

    # The table -----------------------------------------------------------------------------------

    def table(self) -> Table:
        torch = self.torch
        table: Table = device_table(self.session)
        if not torch.distributed.is_available():
            return table
        dist = torch.distributed
        session = self.session
        me = self
        Group = make_group(self)

        def create(store: Any, rank: int, size: int, timeout: Any) -> Any:
            group = Group(rank, size)
            me.groups.append(group)
            return group

        if BACKEND.upper() not in dist.Backend._plugins:
            dist.Backend.register_backend(BACKEND, create, devices=["cpu", "cuda"])
        else:
            dist.Backend._plugins[BACKEND.upper()] = dist.Backend._BackendPlugin(create, False)
        original_init = dist.init_process_group

        def init_process_group(backend: Any = None, init_method: Any = None, timeout: Any = None, world_size: int = -1, rank: int = -1, store: Any = None, group_name: str = "", pg_options: Any = None, device_id: Any = None, **kwargs: Any) -> None:
            name = None if backend is None else str(backend).lower()
            if name not in ACCEPTED_BACKENDS:
                raise UnfollowedError(
                    f"init_process_group({backend!r}) at {here()}: vramlab.trace stands in for the nccl and gloo backends only (the trace up to there is kept)"
                )
            if world_size not in (-1, None, session.world_size) or rank not in (-1, None, session.rank):
                raise UnfollowedError(
                    f"init_process_group(world_size={world_size}, rank={rank}) at {here()}: the trace is of rank {session.rank} of {session.world_size} (vramlab.trace(world_size=..., rank=...), --nproc); the trace up to there is kept"
                )
            if device_id is not None:
                session.one_gpu(device_id)
            kw: Dict[str, Any] = {}
            if timeout is not None:
                kw["timeout"] = timeout
            if group_name:
                kw["group_name"] = group_name
            session.note(
                f"process group stood in for on rank {session.rank} of {session.world_size}: collectives communicate nothing and their outputs hold no values; NCCL's own GPU memory (communicators, their buffers) and the CUDA context are outside the caching allocator and not in this record"
            )
            return original_init(BACKEND, store=dist.HashStore(), rank=session.rank, world_size=session.world_size, **kw)

        # init_device_mesh starts the default group itself where the program has not, through
        # device_mesh's own reference to init_process_group (device_mesh.py:
        # _setup_world_group_and_device).
        import torch.distributed.device_mesh as device_mesh

        for owner in (dist, dist.distributed_c10d, device_mesh):
            if getattr(owner, "init_process_group", None) is original_init:
                table[(owner, "init_process_group")] = init_process_group
        # DDP checks that every rank's parameters have the same shapes by reading gathered metadata
        # back on the host (torch/distributed/utils.py: _verify_param_shape_across_processes).
        import torch.distributed.utils as dist_utils
        import torch.nn.parallel.distributed as ddp

        def verify(process_group: Any, tensors: Any, logger: Any = None) -> None:
            # reducer.cpp: verify_params_across_processes makes, on the parameters' device, the
            # parameter count (8 B), world_size tensors like it for an all_gather (with its flat
            # temporary), then every parameter's sizes and strides (8 B each) to broadcast; all
            # let go when it returns, in reverse order of making. Its reads are not run: every rank
            # runs the same program.
            record, frame = session.record, user_frame()
            params = [t for t in tensors if isinstance(t, torch.Tensor)]
            if params and device_of(torch, params[0]) == "meta":
                size = process_group.size() if hasattr(process_group, "size") else session.world_size
                count = record.alloc(8, frame)
                gathered = [record.alloc(8, frame) for _ in range(size)]
                record.scratch([8 * size], frame)
                shapes = 8 * sum(2 * t.dim() for t in params)
                metadata = record.alloc(shapes, frame) if shapes else None
                if metadata is not None:
                    record.free(metadata, shapes)
                for addr in gathered:
                    record.free(addr, 8)
                record.free(count, 8)
            session.note(
                "{count} DDP checks of parameter shapes across ranks were not run (they read other ranks' values back on the host; every rank runs the same program); their small tensors are recorded as reducer.cpp makes them"
            )

        for owner in (dist_utils, ddp):
            if hasattr(owner, "_verify_param_shape_across_processes"):
                table[(owner, "_verify_param_shape_across_processes")] = verify
        # The Reducer's bucket rebuild syncs the bucket order from rank 0 and reads it back on the
        # host (reducer.cpp: sync_bucket_indices): the copy back is answered with this rank's own.
        Reducer = getattr(torch._C._distributed_c10d, "Reducer", None)
        if Reducer is not None:
            rebuild = Reducer._rebuild_buckets

            def rebuild_buckets(reducer: Any) -> Any:
                # The buckets the rebuild replaces are kept allocated to the end of the trace.
                # Whether a rank frees them at the rebuild depends on timing: the last step's NCCL
                # work holds them until its watchdog thread lets it go (frees without Python
                # frames, from that thread, in the recordings). On four H100s
                # (reports/reference/h100/distributed-x4*/COMPARE.md) the largest rank kept them in
                # 5 of 6 runs of three DDP workloads; on two H200s
                # (reports/reference/h200x2/distributed-x2e) every rank freed them at the rebuild
                # in 4 of 6 runs of three. The largest rank decides whether a job fits, and keeping
                # them is never below the GPU: the note gives what a run that frees them saves.
                session.host_copies_kept += 1
                record = session.record
                held = len(record.held_deaths)
                record.hold_older_blocks()
                try:
                    return rebuild(reducer)
                finally:
                    session.host_copies_kept -= 1
                    record.release_hold()
                    kept = [size for _, _, size in record.held_deaths[held:]]
                    if kept:
                        session.note(
                            "{count} DDP bucket rebuilds kept the buckets they replaced allocated to the end of the trace, the upper envelope (a rank frees them at the rebuild only once NCCL's watchdog has let the last step's work go, which varies by rank and run; a run whose ranks all free them peaks lower by up to what they hold): "
                            + f"{sum(kept)} bytes here"
                        )

            table[(Reducer, "_rebuild_buckets")] = rebuild_buckets
        table.update(backward_paths(session))
        import torch.multiprocessing as multiprocessing

        def spawn_refused(*args: Any, **kwargs: Any) -> Any:
            raise UnfollowedError(
                f"torch.multiprocessing.spawn at {here()}: processes the program starts itself run outside the trace; trace a torchrun-style script once per rank instead (python -m vramlab.trace --nproc N, or vramlab.trace(world_size=N, rank=r) around one rank's code); the trace up to there is kept"
            )

        for name in ("spawn", "start_processes"):
            if hasattr(multiprocessing, name):
                table[(multiprocessing, name)] = spawn_refused
        table.update(object_paths(session))
        table.update(mesh_paths(session))
        table.update(random_tracker_paths(session))
        table.update(offload_paths(session))
        table.update(fsdp1_paths(session))
        try:
            from torch.distributed.fsdp._fully_shard import _fsdp_param_group as param_group
        except ImportError:
            return table
        if hasattr(param_group.FSDPParamGroup, "_validate_no_meta_params"):
            table[(param_group.FSDPParamGroup, "_validate_no_meta_params")] = lambda group: None
        return table


def make_group(owner: Distributed) -> Any:
    """The stand-in ProcessGroup class (a subclass of torch's, made when a trace starts)."""
    torch = owner.torch
    dist = torch.distributed
    from torch.futures import Future

    _create_work_from_future = torch._C._distributed_c10d._create_work_from_future
    ProcessGroup: Any = dist.ProcessGroup
    ReduceOp: Any = dist.ReduceOp

    def done(result: Any, keeps: bool = False, reduced: Any = ()) -> Any:
        # The outputs' values are the other ranks' too: whatever the trace knew of them (values.py)
        # is forgotten, but for those `reduced` has computed, and host tensors keep this rank's own
        # values, which the snapshot notes.
        for t in _flat(result):
            if isinstance(t, torch.Tensor):
                if device_of(torch, t) == "meta" and not keeps and t.untyped_storage()._cdata not in reduced:
                    owner.session.shadows.forget(t.untyped_storage()._cdata)
                elif device_of(torch, t) == "cpu" and not keeps:
                    owner.session.note(
                        "{count} collectives on host tensors (a gloo group's) left this rank's own values in their outputs: the other ranks' are not known to a trace of one rank"
                    )
        future: Any = Future()
        future.set_result(result)
        return _create_work_from_future(future)

    same_result = {ReduceOp.MIN, ReduceOp.MAX, ReduceOp.BAND, ReduceOp.BOR, ReduceOp.AVG}

    def reduce_known(tensors: Any, opts: Any, size: int) -> Any:
        """The storages of `tensors` whose values the trace knew (values.py), all-reduced as if
        every rank held this rank's: DDP's find_unused_parameters map of used parameters, a count
        made on the host. A sum is `size` times the values (an `or` for booleans); a min, max, mean
        or bitwise and/or leaves them. Another reduction forgets them."""
        op = getattr(opts, "reduceOp", ReduceOp.SUM)
        reduced = set()
        for t in _flat(tensors):
            if not isinstance(t, torch.Tensor) or device_of(torch, t) != "meta":
                continue
            shadow = owner.session.shadows.view(t)
            if shadow is None:
                continue
            if op == ReduceOp.SUM:
                if shadow.dtype != torch.bool:
                    shadow.mul_(size)
            elif not any(op == kind for kind in same_result):
                continue
            reduced.add(t.untyped_storage()._cdata)
            owner.session.note(
                "{count} all-reduces of values the trace knew (a map of used parameters, a count) were computed as if every rank held this rank's values"
            )
        return reduced

    def copy_for_host(outputs: List[Any], source: Any) -> None:
        # Host tensors (a gloo group's, object collectives' sizes) get this rank's own values, as
        # if every rank held the same.
        if device_of(torch, source) == "cpu":
            for out in outputs:
                if device_of(torch, out) == "cpu" and out.numel() == source.numel():
                    with torch.no_grad():
                        out.copy_(source.reshape(out.shape))

    def refuse(what: str) -> Any:
        raise UnfollowedError(
            f"{what} at {here()}: point-to-point communication (pipeline parallelism) is not followed by vramlab.trace: what arrives depends on the other ranks' programs (the trace up to there is kept)"
        )

    class StandInGroup(ProcessGroup):
        def __init__(self, rank: int, size: int) -> None:
            super().__init__(rank, size)

        def getBackendName(self) -> str:
            return BACKEND

        # A Python ProcessGroup has no C++ backend to keep its name and description in.
        def _set_group_name(self, name: str) -> None:
            self._vramlab_name = name

        def _set_group_desc(self, desc: str) -> None:
            self._vramlab_desc = desc

        @property
        def group_name(self) -> str:
            return getattr(self, "_vramlab_name", None) or dist.distributed_c10d._world.pg_names[self]

        @property
        def group_desc(self) -> str:
            return getattr(self, "_vramlab_desc", "")

        @property
        def supports_splitting(self) -> bool:
            return False

        def allreduce(self, tensors: Any, opts: Any = None) -> Any:
            return done(tensors, reduced=reduce_known(tensors, opts, self.size()))

        def allreduce_coalesced(self, tensors: Any, opts: Any = None) -> Any:
            owner.temporary(_flat(tensors), "allreduce_coalesced")
            return done(tensors)

        def broadcast(self, tensors: Any, opts: Any = None) -> Any:
            # The root's own tensors keep their values; so do every rank's while a generator's
            # state is broadcast (session.same_state_broadcasts).
            root = getattr(opts, "rootRank", -1) == self.rank()
            if not root and owner.session.same_state_broadcasts:
                owner.session.note(RNG_STATE_NOTE)
            return done(tensors, keeps=root or bool(owner.session.same_state_broadcasts))

        def reduce(self, tensors: Any, opts: Any = None) -> Any:
            return done(tensors)

        def allgather(self, output_lists: Any, inputs: Any, opts: Any = None) -> Any:
            owner.temporary(_flat(output_lists), "allgather")
            for outs, inp in zip(output_lists, inputs):
                copy_for_host(outs, inp)
            return done(output_lists)

        def _allgather_base(self, output: Any, input: Any, opts: Any = None) -> Any:
            return done([output])

        def allgather_into_tensor_coalesced(self, outputs: Any, inputs: Any, opts: Any = None) -> Any:
            return done(outputs)

        # torch 2.15's names for the flat-tensor collectives (distributed_c10d.py calls
        # group.all_gather_single where 2.11 called _allgather_base, and so on); all_gather_object
        # and gather_object gather a host tensor through them, each slot this rank's object.
        def all_gather_single(self, output: Any, input: Any, opts: Any = None) -> Any:
            if device_of(torch, output) == "cpu":
                copy_for_host(list(output.reshape(self.size(), -1)), input.reshape(-1))
            return done([output])

        def all_gather_single_coalesced(self, outputs: Any, inputs: Any, opts: Any = None) -> Any:
            return done(outputs)

        def gather_single(self, output: Any, input: Any, opts: Any = None) -> Any:
            if output is not None and device_of(torch, output) == "cpu":
                copy_for_host(list(output.reshape(self.size(), -1)), input.reshape(-1))
            return done([output] if output is not None else [])

        def reduce_scatter_single(self, output: Any, input: Any, opts: Any = None) -> Any:
            return done([output])

        def reduce_scatter_single_coalesced(self, outputs: Any, inputs: Any, opts: Any = None) -> Any:
            return done(outputs)

        def all_to_all_single(self, output: Any, input: Any, output_split_sizes: Any, input_split_sizes: Any, opts: Any = None) -> Any:
            return done([output])

        def allgather_coalesced(self, output_lists: Any, inputs: Any, opts: Any = None) -> Any:
            owner.temporary(_flat(output_lists), "allgather_coalesced")
            return done(output_lists)

        def reduce_scatter(self, outputs: Any, input_lists: Any, opts: Any = None) -> Any:
            owner.temporary(_flat(input_lists), "reduce_scatter")
            return done(outputs)

        def _reduce_scatter_base(self, output: Any, input: Any, opts: Any = None) -> Any:
            return done([output])

        def reduce_scatter_tensor_coalesced(self, outputs: Any, inputs: Any, opts: Any = None) -> Any:
            return done(outputs)

        def alltoall_base(self, output: Any, input: Any, output_split_sizes: Any, input_split_sizes: Any, opts: Any = None) -> Any:
            return done([output])

        def alltoall(self, outputs: Any, inputs: Any, opts: Any = None) -> Any:
            return done(outputs)

        def scatter(self, outputs: Any, inputs: Any, opts: Any = None) -> Any:
            return done(outputs)

        def gather(self, output_lists: Any, inputs: Any, opts: Any = None) -> Any:
            return done(output_lists)

        def barrier(self, opts: Any = None) -> Any:
            # ProcessGroupNCCL::barrier all-reduces a one-element float tensor on the group's device.
            owner.session.record.scratch([4], user_frame())
            return done([])

        def send(self, tensors: Any, dst: int, tag: int = 0) -> Any:
            return refuse("send")

        def recv(self, tensors: Any, src: int, tag: int = 0) -> Any:
            return refuse("recv")

        def recv_anysource(self, tensors: Any, tag: int = 0) -> Any:
            return refuse("recv")

    return StandInGroup


# The most ranks a trace stands in for: one host's GPUs, as PyTorch numbers them.
MOST_RANKS = 128


def check_rank(world_size: Any, rank: Any) -> Any:
    """(world_size, rank) of a trace, checked: one GPU and rank 0 where neither is given."""
    if world_size is None and rank is None:
        return 1, 0
    world_size = 1 if world_size is None else world_size
    rank = 0 if rank is None else rank
    if not (isinstance(world_size, int) and isinstance(rank, int)) or isinstance(world_size, bool) or isinstance(rank, bool) or world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"world_size={world_size!r}, rank={rank!r}: a trace is of one rank, 0 <= rank < world_size")
    if world_size > MOST_RANKS:
        # Each rank's GPU is cuda:{rank} of one host, and the snapshot lists every device.
        raise ValueError(f"world_size={world_size}: a trace stands in for the GPUs of one host, which PyTorch numbers below {MOST_RANKS} (c10::DeviceIndex is an int8_t): at most {MOST_RANKS} ranks")
    return world_size, rank


def device_table(session: Any) -> Table:
    """The devices a rank sees on a host of world_size GPUs (one per rank): how many, and its own
    as the current one; setting another is refused (session.one_gpu)."""
    torch = session.torch
    cuda = torch.cuda
    n, index = session.world_size, session.device_index

    def set_device(device: Any) -> None:
        session.one_gpu(device)

    class DeviceContext:
        """``with torch.cuda.device(i)``: this rank's own GPU, or refused (another GPU is another
        CUDA context, which a trace of one rank does not follow)."""

        def __init__(self, device: Any) -> None:
            if not (isinstance(device, int) and device < 0):
                session.one_gpu(device)

        def __enter__(self) -> "DeviceContext":
            return self

        def __exit__(self, *exc: Any) -> None:
            return None

    table: Table = {
        (cuda, "device"): DeviceContext,
        (cuda, "device_count"): lambda: n,
        (cuda, "current_device"): lambda: index,
        (cuda, "set_device"): set_device,
    }
    if hasattr(torch._C, "_get_accelerator"):
        # FSDP2's default mesh asks it (fsdp/_fully_shard/_fsdp_init.py: _init_default_mesh).
        table[(torch._C, "_get_accelerator")] = lambda check=False: torch.device("cuda")
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None:
        for name, value in {
            "device_count": lambda: n,
            "current_device_index": lambda: index,
            "current_device_idx": lambda: index,
            "set_device_index": set_device,
            "set_device_idx": set_device,
        }.items():
            if hasattr(accelerator, name):
                table[(accelerator, name)] = value
    return table


def object_paths(session: Any) -> Table:
    """broadcast_object_list and scatter_object_list on a rank that receives: the objects are the
    root rank's, which a trace of this rank alone does not have (its list holds placeholders,
    usually None, and the sizes it would read back are uninitialised memory). Where every
    placeholder is already an object, this rank's are kept, as if the root's were the same; where
    one is None, the trace stops in one line. The root runs PyTorch's own."""
    dist = session.torch.distributed
    c10d = dist.distributed_c10d
    table: Table = {}

    def root_rank(src: Any, group: Any, group_src: Any) -> int:
        if src is not None:
            return int(src)
        if group_src is not None and group is not None:
            return int(c10d.get_global_rank(group, group_src))
        return int(group_src or 0)

    def receiving(name: str, original: Any, list_arg: str) -> Any:
        @functools.wraps(original)
        def run(*args: Any, **kwargs: Any) -> Any:
            bound = inspect.signature(original).bind(*args, **kwargs)
            values = bound.arguments
            if root_rank(values.get("src"), values.get("group"), values.get("group_src")) == dist.get_rank():
                return original(*args, **kwargs)
            received = values.get(list_arg) or []
            if any(o is None for o in received):
                raise UnfollowedError(
                    f"{name} at {here()}: rank {session.rank}'s trace does not have the objects the root rank sends (each rank is traced alone, and a placeholder here is None); the trace up to there is kept"
                )
            session.note(f"{{count}} calls of {name} on a receiving rank kept this rank's own objects, as if the root's were the same (each rank is traced alone)")
            return None

        return run

    for name, list_arg in (("broadcast_object_list", "object_list"), ("scatter_object_list", "scatter_object_output_list")):
        original = getattr(c10d, name, None)
        if original is not None:
            wrapped = receiving(name, original, list_arg)
            for owner in (dist, c10d):
                if getattr(owner, name, None) is original:
                    table[(owner, name)] = wrapped
    return table

