"""Values the trace can know without a GPU: a tensor standing in for a CUDA one has no data, but
some do have known values, and programs branch on them. Hugging Face's masking code asks whether
an attention mask is all ones (``padding_mask.all()``) to decide whether to build a mask at all,
which changes which attention kernel runs and what it allocates.

A tensor's values are known when they come from the CPU (``.to("cuda")`` of a tokenizer's
output; floating-point tensors only as scalars, when small and not trained, or when they are
masks, holding one value besides zero, so a model's weights never are), from a deterministic factory (``ones``, ``zeros``, ``full``, ``arange``: an ``empty``
then filled whole), or from an operation whose inputs are all known. They are kept as a CPU copy
of the storage ("a shadow"), and every such operation is also run on the shadows, on the CPU, so
that views and in-place writes stay in step. Only small tensors get shadows (integer and boolean
ones up to ``INTEGER_LIMIT`` bytes, others up to ``OTHER_LIMIT``): ids, masks, labels, scalars,
never a model's weights or activations, so the trace still does no arithmetic worth the name.
Larger ones (up to ``LARGE_LIMIT``: a long document's attention mask expanded to batch x 1 x 4,096 x
4,096 floats is 256 MiB) get shadows while those alive together hold at most ``LARGE_BUDGET``, so that
a program keeping many large known tensors (a static cache of zeros) costs the host a bounded
amount; a small tensor's shadow never waits on that budget.
A value read (``.item()``, ``bool(t)``) of a tensor with a shadow is answered from it; without
one the trace stops, as before. Random operations never give shadows: the GPU's generator is
not the CPU's.

The reverse also holds: a GPU tensor copied to the host (``.cpu()``) whose values are not known
becomes a host tensor without values ("unknown on the host"), of the right shape and dtype, so that
a program collecting its predictions on the CPU goes on. What is computed from it on the CPU is
unknown too; a read of any of it (``.item()``, ``.tolist()``, ``.numpy()``, printing, a shape made
from its values) stops the trace at that line, naming where the copy was made, and a copy of it
back to the GPU has no shadow.

Indices have known bounds too: those ``topk``, ``sort``, ``argmax`` and the maxima and minima over
a dimension give lie within that dimension (a mixture of experts' router counting its choices with
``bincount(..., minlength=experts)``). Random integers do: ``randint(low, high)`` and ``random_(from, to)`` draw from
``[low, high)``, and so do the maxima, minima and copies of what they drew, a boolean selection of
them, and integer sums, differences and products of bounded operands (interval arithmetic: a
confusion matrix's ``labels * classes + predictions``); known integer values bound themselves. A comparison with a
number that the bounds decide for every element (``labels >= 0`` of labels drawn from
``[1, 32)``) has known values, all True or all False: programs check their labels this way
(Hugging Face's CTC models: ``labels.max() >= vocab_size``, ``labels.masked_select(labels >= 0)``).

Known values written into part of a draw (``labels[:, -pad:] = -100``) make its bounds per
element (element_bounds.py). A write of unknown values into a storage forgets its bounds.
"""

from __future__ import annotations

import weakref
from typing import Any, Dict, Optional, Tuple

from .element_bounds import ElementBounds

# A shadow's storage at most, in bytes: integer and boolean tensors (ids, masks, labels) and
# others (float masks built from them, scalars).
INTEGER_LIMIT = 64 << 20
OTHER_LIMIT = 16 << 20
# Floating-point tensors from the CPU that are not trained get shadows up to this many elements.
SMALL_HOST_FLOATS = 4096
# Past those limits, a shadow's storage at most, and what such shadows alive together may hold.
LARGE_LIMIT = 256 << 20
LARGE_BUDGET = 1 << 30


def _mask_like(torch: Any, host: Any) -> bool:
    """Whether a floating-point host tensor is a mask: no parameter, within the shadows' limit, and
    holding at most one value besides zero (1.0 for a padding mask, -inf or a large negative number
    for an additive one). Programs build such masks on the CPU and index or select by them on the
    GPU (``pred[mask.reshape(-1) > 0]``); data drawn at random and weights are never like this."""
    if isinstance(host, torch.nn.Parameter) or host.untyped_storage().nbytes() > OTHER_LIMIT or host.is_complex():
        return False
    # Every batch of data moved to the GPU asks this: its extremes, one pass and no copy, settle
    # it where neither is zero (data drawn at random), unless the tensor is one value throughout.
    lowest, highest = host.aminmax()
    if lowest != 0 and highest != 0:
        return bool(lowest == highest)
    other = highest if lowest == 0 else lowest
    return bool(((host == 0) | (host == other)).all())


# Operations that write every element of their first argument, whatever it held.
_OVERWRITES = {"fill_", "zero_", "copy_"}


# Factories that take only a shape, dtype and device from a tensor, never its values: the value
# each fills with, or the index of the argument holding it.
_FILLED = {"ones_like": 1, "zeros_like": 0, "new_ones": 1, "new_zeros": 0}
_FILLED_WITH = {"full_like": 1, "new_full": 2}

# Operators whose result an operand can decide alone: `or` with all True, `and` with all False.
_ABSORBING = {"bitwise_or": True, "logical_or": True, "bitwise_and": False, "logical_and": False}

# Operators whose (first) result's elements are some of their input's: bounds carry over.
_KEEPS_BOUNDS = {"max", "min", "amax", "amin", "clone", "_to_copy", "contiguous", "index", "masked_select"}
# Integer arithmetic whose result's bounds follow from its operands' (interval arithmetic).
_ARITHMETIC = {"add", "sub", "mul"}
# Operators with an output of indices into their input's dimension `dim`: the output's position
# among their results (overloads without a dimension, argmax's, index the flattened input).
_INDEX_RESULTS = {"topk": 1, "sort": 1, "max": 1, "min": 1, "argmax": 0, "argmin": 0, "kthvalue": 1, "mode": 1, "median": 1}
# Comparisons with a number, each as (all True, all False) given the bounds [lo, hi] and the
# number c: of two numbers (a tensor's bounds), or element by element of two tensors of bounds.
_DECIDED = {
    "ge": (lambda lo, hi, c: lo >= c, lambda lo, hi, c: hi < c),
    "gt": (lambda lo, hi, c: lo > c, lambda lo, hi, c: hi <= c),
    "le": (lambda lo, hi, c: hi <= c, lambda lo, hi, c: lo > c),
    "lt": (lambda lo, hi, c: hi < c, lambda lo, hi, c: lo >= c),
    "eq": (lambda lo, hi, c: (lo == hi) & (lo == c), lambda lo, hi, c: (lo > c) | (hi < c)),
    "ne": (lambda lo, hi, c: (lo > c) | (hi < c), lambda lo, hi, c: (lo == hi) & (lo == c)),
}


class _ByStorage:
    """Something kept for each live storage, by its address. An address is reused once its storage
    dies, so each entry holds a weak reference to its own storage: the entry goes when the storage
    dies, and a newer storage at the same address never reads it."""

    def __init__(self, dropped: Any = None) -> None:
        self._entries: Dict[int, Tuple[Any, Any]] = {}
        # Called with the value of each entry that goes (by death, replacement or `pop`).
        self._dropped = dropped

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __contains__(self, key: int) -> bool:
        return key in self._entries

    def get(self, storage: Any) -> Any:
        entry = self._entries.get(storage._cdata)
        if entry is None:
            return None
        if entry[0]() is not storage:
            self.pop(storage._cdata)
            return None
        return entry[1]

    def put(self, storage: Any, value: Any) -> None:
        key = storage._cdata
        self.pop(key)

        def died(ref: Any) -> None:
            if self._entries.get(key, (None,))[0] is ref:
                self.pop(key)

        self._entries[key] = (weakref.ref(storage, died), value)

    def pop(self, key: int) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None and self._dropped is not None:
            self._dropped(entry[1])


class Shadows:
    """The shadows, by storage. A storage's address (``_cdata``) is reused once it dies, and the
    recorder does not see every death (a storage of 0 bytes is never an allocation), so each
    shadow also holds a weak reference to its own storage: a dead one's shadow is dropped when it
    dies, and never lent to a newer storage at the same address, whose values would then be
    whatever the dead one's were (a 0-byte shadow grown by ``set_`` holds uninitialised memory)."""

    def __init__(self, torch: Any) -> None:
        self._torch = torch
        # Each storage's shadow: (the shadow's storage, whether it is a large one).
        self._storages = _ByStorage(self._shadow_dropped)
        # Bytes held by the large shadows alive.
        self._large_bytes = 0
        # Integer storages of random draws: (lowest, highest).
        self._bounds = _ByStorage()
        # Draws some elements of which were then written with known values: each element's bounds.
        self.elements = ElementBounds(self, _ByStorage())
        self._written: Dict[Any, Tuple[Tuple[int, ...], Tuple[str, ...]]] = {}
        # Host storages without values (copies of GPU tensors the trace has no values of): where
        # the copy was made.
        self._unknown_host = _ByStorage()
        # Rolls whose shift was answered without being known (printed.py's ROLL_SHIFT_NOTE): the
        # next so many rolls' results are not known, whatever their input.
        self.answered_shifts = 0

    def _shadow_dropped(self, entry: Tuple[Any, bool]) -> None:
        if entry[1]:
            self._large_bytes -= entry[0].nbytes()

    def mark_unknown_host(self, t: Any, where: str) -> None:
        """`t`, a host tensor, holds values the trace does not have (copied from the GPU at `where`)."""
        self._unknown_host.put(t.untyped_storage(), where)

    def unknown_host(self, leaves: Any) -> Optional[str]:
        """Where the first host tensor among `leaves` without values was copied from the GPU, or
        None where every host tensor among them has its values."""
        if not self._unknown_host:
            return None
        torch = self._torch
        for t in leaves:
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                where = self._unknown_host.get(t.untyped_storage())
                if where is not None:
                    return where
        return None

    def forget(self, key: int) -> None:
        self._storages.pop(key)
        self._bounds.pop(key)
        self.elements.pop(key)

    def bounds(self, t: Any) -> Optional[Tuple[int, int]]:
        """The lowest and highest values `t`'s elements can hold, where known: kept bounds, or
        the extremes of its known integer values."""
        each = self.elements.of(t)
        if each is not None:
            if each[0].numel() == 0:
                return None
            return int(each[0].min()), int(each[1].max())
        kept = self._bounds.get(t.untyped_storage())
        if kept is not None:
            return kept
        values = self.view(t)
        if values is None or values.numel() == 0 or not self._integral(values.dtype):
            return None
        lo, hi = self._torch.aminmax(values)
        return int(lo), int(hi)

    def _operand_bounds(self, value: Any) -> Optional[Tuple[int, int]]:
        """The bounds of an arithmetic operand: a stand-in's, a Python integer's, or a host
        integer scalar's (a wrapped number)."""
        torch = self._torch
        if isinstance(value, (bool, float)):
            return None
        if isinstance(value, int):
            return value, value
        if not isinstance(value, torch.Tensor) or not self._integral(value.dtype):
            return None
        if value.device.type == "meta":
            return self.bounds(value)
        if value.dim() == 0 and self.unknown_host([value]) is None:
            return int(value), int(value)
        return None

    def _arithmetic_bounds(self, op: str, args: Any, kwargs: Dict[str, Any]) -> Optional[Tuple[int, int]]:
        """Interval arithmetic for integer add, sub and mul (a confusion matrix's index
        ``labels * classes + predictions``)."""
        if len(args) < 2:
            return None
        left, right = self._operand_bounds(args[0]), self._operand_bounds(args[1])
        if left is None or right is None:
            return None
        if op == "mul":
            products = [a * b for a in left for b in right]
            return min(products), max(products)
        alpha = kwargs.get("alpha", args[2] if len(args) > 2 else 1)
        if isinstance(alpha, bool) or not isinstance(alpha, int):
            return None
        scaled = sorted((right[0] * alpha, right[1] * alpha))
        if op == "sub":
            scaled = [-scaled[1], -scaled[0]]
        return left[0] + scaled[0], left[1] + scaled[1]

    def _integral(self, dtype: Any) -> bool:
        """Whether a dtype's values can have bounds: integers, not floats, complex or bools."""
        return not (dtype.is_floating_point or dtype.is_complex or dtype == self._torch.bool)

    def _bound(self, t: Any, lo: int, hi: int) -> None:
        if not self._integral(t.dtype) or lo > hi:
            return
        self._bounds.put(t.untyped_storage(), (lo, hi))

    def _shadow(self, storage: Any) -> Optional[Any]:
        entry = self._storages.get(storage)
        return None if entry is None else entry[0]

    def shadowed(self, t: Any) -> bool:
        return self._shadow(t.untyped_storage()) is not None

    def _limit(self, dtype: Any) -> int:
        return OTHER_LIMIT if dtype.is_floating_point or dtype.is_complex else INTEGER_LIMIT

    def view(self, t: Any) -> Optional[Any]:
        """The CPU tensor holding `t`'s values, or None where they are not known."""
        storage = self._shadow(t.untyped_storage())
        if storage is None:
            return None
        torch = self._torch
        return torch.empty(0, dtype=t.dtype).set_(storage, t.storage_offset(), t.shape, t.stride())

    def _fits(self, t: Any) -> bool:
        """Whether `t`'s storage can have a shadow now."""
        nbytes = t.untyped_storage().nbytes()
        return nbytes <= self._limit(t.dtype) or (nbytes <= LARGE_LIMIT and self._large_bytes + nbytes <= LARGE_BUDGET)

    def _fresh(self, t: Any) -> Optional[Any]:
        """A new shadow for `t`'s storage, where it is small enough (or large, within the large
        shadows' budget); its view of `t`."""
        storage = t.untyped_storage()
        nbytes = storage.nbytes()
        large = nbytes > self._limit(t.dtype)
        if large:
            # The storage's own old shadow, if large, goes before the budget is asked.
            self._storages.pop(storage._cdata)
            if nbytes > LARGE_LIMIT or self._large_bytes + nbytes > LARGE_BUDGET:
                return None
            self._large_bytes += nbytes
        self._storages.put(storage, (self._torch.UntypedStorage(nbytes), large))
        return self.view(t)

    def adopt(self, t: Any, values: Any) -> None:
        """`t` (a stand-in) holds `values` (a CPU tensor of its shape)."""
        shadow = self._fresh(t)
        if shadow is not None:
            shadow.copy_(values)

    def after(self, func: Any, op: str, args: Any, kwargs: Dict[str, Any], out: Any) -> None:
        """Keeps the shadows in step with an operation just traced on stand-ins. Values are an aid,
        never a condition: where the CPU cannot keep them (a dtype with no CPU kernel, such as
        int4's fill), the stand-ins written or made are no longer known, and the trace goes on."""
        torch = self._torch
        if op == "roll" and self.answered_shifts:
            self.answered_shifts -= 1
            for t in torch.utils._pytree.tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.device.type == "meta":
                    self.forget(t.untyped_storage()._cdata)
            return
        try:
            self._after(func, op, args, kwargs, out)
        except Exception:  # noqa: BLE001 - an operation the CPU cannot run leaves values unknown
            # What an operation writes it returns (in place, out=): its inputs keep their values.
            for t in torch.utils._pytree.tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.device.type == "meta":
                    self.forget(t.untyped_storage()._cdata)
            return
        self._after_bounds(func, op, args, kwargs, out)

    def _after_bounds(self, func: Any, op: str, args: Any, kwargs: Dict[str, Any], out: Any) -> None:
        """Bounds of random integers drawn, kept through maxima, minima and copies, and the values
        of comparisons they decide."""
        torch = self._torch
        if op in _INDEX_RESULTS:
            self._index_bounds(func, op, args, kwargs, out)
        first = torch.utils._pytree.tree_leaves(out)[:1]
        result = first[0] if first and isinstance(first[0], torch.Tensor) and first[0].device.type == "meta" else None
        if result is None or self.view(result) is not None:
            return
        overload = func._overloadname
        if op == "random_" and overload in ("from", "to"):
            low, high = (args[1], args[2] if len(args) > 2 else kwargs.get("to")) if overload == "from" else (0, args[1])
            if isinstance(low, int) and isinstance(high, int) and _whole(result):
                self._bound(result, low, high - 1)
        elif op == "randint" and overload in ("default", "low", "generator", "low_generator"):
            low, high = (0, args[0]) if overload in ("default", "generator") else (args[0], args[1])
            if isinstance(low, int) and isinstance(high, int):
                self._bound(result, low, high - 1)
        elif op in _ARITHMETIC and overload in ("Tensor", "Scalar") and _whole(result) and self._integral(result.dtype):
            known = self._arithmetic_bounds(op, args, kwargs)
            if known is not None:
                self._bound(result, *known)
        elif op in _KEEPS_BOUNDS and args and isinstance(args[0], torch.Tensor) and args[0].device.type == "meta":
            known = self.elements.selected(op, args) or self.bounds(args[0])
            if known is not None and not result.dtype.is_floating_point and result.dtype != torch.bool and _whole(result):
                self._bound(result, *known)
        elif op in _DECIDED and overload == "Scalar" and len(args) > 1 and isinstance(args[1], (int, float)) and not isinstance(args[1], bool):
            each = self.elements.of(args[0]) if isinstance(args[0], torch.Tensor) else None
            if each is not None:
                all_true, all_false = (decide(each[0], each[1], args[1]) for decide in _DECIDED[op])
                if bool((all_true | all_false).all()) and result.shape == all_true.shape and self._fits(result):
                    self.adopt(result, all_true)
                return
            known = self.bounds(args[0]) if isinstance(args[0], torch.Tensor) else None
            if known is None:
                return
            all_true, all_false = _DECIDED[op]
            for value, decided in ((True, all_true), (False, all_false)):
                if decided(known[0], known[1], args[1]) and self._fits(result):
                    self.adopt(result, torch.full(result.shape, value, dtype=torch.bool))
                    return

    def _after(self, func: Any, op: str, args: Any, kwargs: Dict[str, Any], out: Any) -> None:
        torch = self._torch
        leaves = torch.utils._pytree.tree_leaves((args, kwargs))
        stand_ins = [a for a in leaves if isinstance(a, torch.Tensor) and a.device.type == "meta"]
        positions, names = self._written_arguments(func)
        # A foreach operation writes each tensor of its list (``Tensor(a!)[] self``).
        written = torch.utils._pytree.tree_leaves([args[i] for i in positions if i < len(args)] + [kwargs[k] for k in names if k in kwargs])
        if self.unknown_host(leaves) is not None:
            # Host values the trace does not have reach the GPU: what they make is unknown.
            for t in written + torch.utils._pytree.tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.device.type == "meta":
                    self.forget(t.untyped_storage()._cdata)
            return
        if op == "_to_copy" and args and isinstance(args[0], torch.Tensor) and args[0].device.type != "meta":
            # A model's weights moved to the GPU are not worth knowing (and would make the whole
            # model run on the CPU): floating-point tensors from the CPU are known only when they
            # are scalars, or small and not trained (a detection target's boxes, which torchvision
            # checks for degenerate ones before it builds anything).
            if isinstance(out, torch.Tensor) and out.device.type == "meta" and (
                not out.is_floating_point()
                or out.numel() <= 1
                or (not args[0].requires_grad and (out.numel() <= SMALL_HOST_FLOATS or _mask_like(torch, args[0])))
            ):
                self.adopt(out, args[0])
            return
        if (op in _FILLED or op in _FILLED_WITH) and isinstance(out, torch.Tensor) and out.device.type == "meta":
            # torch.ones_like(ids) is known whatever ids holds (a mask made beside random ids).
            fill = _FILLED[op] if op in _FILLED else args[_FILLED_WITH[op]] if len(args) > _FILLED_WITH[op] else None
            if isinstance(fill, (bool, int, float)) and self._fits(out):
                self.adopt(out, torch.full(out.shape, fill, dtype=out.dtype))
            return
        # Uninitialised memory and random draws have no values the CPU could know.
        random = torch.Tag.nondeterministic_seeded in func.tags or op.startswith(("empty", "new_empty"))
        # What every element of is rewritten needs no shadow before.
        overwritten = args[0] if op in _OVERWRITES and args and _whole(args[0]) else None
        if overwritten is None and op == "scatter_" and "reduce" not in kwargs and self._scatter_covers(args):
            overwritten = args[0]
        if overwritten is None and "out" in kwargs and isinstance(kwargs["out"], torch.Tensor) and _whole(kwargs["out"]):
            overwritten = kwargs["out"]
        known = not random and all(self.view(a) is not None for a in stand_ins if a is not overwritten)
        if overwritten is not None and known and self.view(overwritten) is None:
            known = self._fresh(overwritten) is not None
        made = [o for o in torch.utils._pytree.tree_leaves(out) if isinstance(o, torch.Tensor) and o.device.type == "meta"]
        if not known and not random and op in _ABSORBING and isinstance(out, torch.Tensor) and out.device.type == "meta":
            absorbed = self._absorbed(_ABSORBING[op], args, out)
            if absorbed is not None:
                self.adopt(out, absorbed)
                return
        if not known and not random and op in ("fill_", "copy_") and args and isinstance(args[0], torch.Tensor) and args[0].device.type == "meta":
            source = args[1] if len(args) > 1 else None
            if isinstance(source, torch.Tensor) and source.device.type == "meta":
                source = self.view(source)
            if isinstance(source, (int, torch.Tensor)) and not isinstance(source, bool) and self.elements.write(args[0], source):
                return
        if not known or not (stand_ins or made):
            for t in written:
                if isinstance(t, torch.Tensor) and t.device.type == "meta":
                    self.forget(t.untyped_storage()._cdata)
            return
        # Run on the shadows only where it changes what is known: a write into one, or a result
        # that is not a view of one and can have its own (a view's values are its storage's, and
        # a result too large for a shadow would be dropped).
        if not any(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in written) and not any(
            not self.shadowed(o) and self._fits(o) for o in made
        ):
            return
        try:
            cpu = torch.utils._pytree.tree_map(self._on_cpu, (args, kwargs))
            result = func(*cpu[0], **cpu[1])
        except Exception:  # noqa: BLE001 - an operation the CPU cannot run leaves values unknown
            for t in written + [o for o in torch.utils._pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]:
                if isinstance(t, torch.Tensor) and t.device.type == "meta":
                    self.forget(t.untyped_storage()._cdata)
            return
        results = torch.utils._pytree.tree_leaves(result)
        for made, values in zip(torch.utils._pytree.tree_leaves(out), results):
            if not (isinstance(made, torch.Tensor) and made.device.type == "meta" and isinstance(values, torch.Tensor)):
                continue
            if self.shadowed(made):
                continue  # a view of, or a write into, a storage already shadowed (updated above)
            if values.shape == made.shape:
                self.adopt(made, values)

    def _index_bounds(self, func: Any, op: str, args: Any, kwargs: Dict[str, Any], out: Any) -> None:
        """The bounds of an operator's indices into its input: [0, the dimension's size)."""
        torch = self._torch
        results = list(out) if isinstance(out, (tuple, list)) else [out]
        position = _INDEX_RESULTS[op]
        source = args[0] if args else kwargs.get("self")
        if position >= len(results) or not isinstance(source, torch.Tensor):
            return
        indices = results[position]
        if not (isinstance(indices, torch.Tensor) and indices.device.type == "meta" and indices.dtype == torch.int64 and _whole(indices)):
            return
        arguments = func._schema.arguments
        names = [a.name for a in arguments]
        dim = None
        if "dim" in names:
            at = names.index("dim")
            dim = args[at] if at < len(args) else kwargs.get("dim", arguments[at].default_value if arguments[at].has_default_value() else None)
        if dim is None:
            size = source.numel()
        else:
            size = source.shape[dim] if source.dim() else 1
        if size > 0:
            self._bound(indices, 0, size - 1)

    def _written_arguments(self, func: Any) -> Tuple[Tuple[int, ...], Tuple[str, ...]]:
        """The positions and names of the arguments `func` writes (its schema's ``(a!)``)."""
        found = self._written.get(func)
        if found is None:
            arguments = func._schema.arguments
            found = (
                tuple(i for i, a in enumerate(arguments) if _writes(a)),
                tuple(a.name for a in arguments if _writes(a)),
            )
            self._written[func] = found
        return found

    def _scatter_covers(self, args: Any) -> bool:
        """Whether an in-place scatter (``self.scatter_(dim, index, src)``) writes every element
        of a tensor that is its whole storage, by an index whose values are known: so its values
        after are known from the index and the source alone, whatever it held. What
        torch.nn.utils.rnn.invert_permutation does to an empty_like tensor, which
        pack_padded_sequence(enforce_sorted=False) uses to restore the batch's order."""
        torch = self._torch
        if len(args) < 3 or not isinstance(args[0], torch.Tensor) or not _whole(args[0]) or not isinstance(args[2], torch.Tensor):
            return False
        index = self.view(args[2])
        if index is None:
            return False
        written = torch.zeros(args[0].shape, dtype=torch.bool)
        written.scatter_(args[1], index, True)
        return bool(written.all())

    def _absorbed(self, value: bool, args: Any, out: Any) -> Any:
        """The result of an `or` (value True) or `and` (value False) one of whose operands is
        known to be `value` everywhere it meets the result: `value` everywhere, whatever the
        other operand holds (generate's stopping criteria: "past max_length" or "EOS seen")."""
        torch = self._torch
        if value and out.dtype != torch.bool:
            return None  # a bitwise or of integers is absorbed only by all bits set
        for operand in args[:2]:
            if isinstance(operand, bool) or (isinstance(operand, int) and not value):
                if bool(operand) == value:
                    return torch.full(out.shape, value, dtype=out.dtype)
                continue
            known = self.view(operand) if isinstance(operand, torch.Tensor) else None
            if known is None or torch.broadcast_shapes(known.shape, out.shape) != out.shape:
                continue
            if bool((known != 0).all()) if value else bool((known == 0).all()):
                return torch.full(out.shape, value, dtype=out.dtype)
        return None

    def _on_cpu(self, value: Any) -> Any:
        torch = self._torch
        if isinstance(value, torch.Tensor) and value.device.type == "meta":
            return self.view(value)
        if isinstance(value, torch.device) and value.type == "meta":
            return torch.device("cpu")
        return value

    def read(self, t: Any) -> Optional[Any]:
        """`t.item()` where `t`'s value is known, else None."""
        shadow = self.view(t)
        return None if shadow is None else shadow.item()


def _writes(argument: Any) -> bool:
    info = argument.alias_info
    return info is not None and info.is_write


def _whole(t: Any) -> bool:
    """Whether `t` covers its whole storage, each element once (so writing it writes all)."""
    if t.device.type != "meta" or t.storage_offset() != 0:
        return False
    return t.is_contiguous() and t.numel() * t.element_size() == t.untyped_storage().nbytes()
