"""A snapshot given as Python objects, made plain for pickling: subclasses of dict, list, tuple,
str, int and float (``OrderedDict``, ``defaultdict``, a named tuple, an ``IntEnum``) become the
builtins, which is what the snapshot reader reads; a structure that contains itself, or nests
deeper than any snapshot does, is refused in one line naming where (Python's pickler would
raise ``RecursionError`` on it, or write classes the reader refuses).

The walk keeps its own stack, so no depth of nesting reaches Python's recursion limit, and
converts an object met twice once (a snapshot shares its strings and frames).
"""

from __future__ import annotations

from typing import Any

from vramlab.errors import TraceError

__all__ = ["plain", "MAX_DEPTH"]

# A PyTorch snapshot nests seven levels (root, segments, a segment, blocks, a block, frames, a
# frame); vramlab's notes and PyTorch's annotations a few more.
MAX_DEPTH = 64

_ENTER, _EXIT = 0, 1


def _where(path: tuple | None) -> str:
    """`path` (nested (parent, key) pairs) as Python would index it, shortened past 8 steps."""
    keys = []
    while path is not None:
        path, key = path
        keys.append(key)
    keys.reverse()
    shown = keys if len(keys) <= 8 else keys[:4] + ["..."] + keys[-3:]
    return "snapshot" + "".join(k if k == "..." else f"[{k!r:.40}]" for k in shown)


def _leaf(value: Any) -> Any:
    kind = type(value)
    if kind in (str, int, float, bool, bytes, type(None)):
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return value


def plain(value: Any) -> Any:
    """`value` with every container and scalar of a builtin's subclass made that builtin."""
    done: dict[int, Any] = {}
    open_: set[int] = set()
    stack: list[tuple] = [(_ENTER, value, None, 0)]
    while stack:
        frame = stack.pop()
        if frame[0] == _EXIT:
            _, source, children = frame
            if isinstance(source, dict):
                made: Any = {_made(done, k): _made(done, v) for k, v in children}
            elif isinstance(source, list):
                made = [_made(done, v) for v in children]
            else:
                made = tuple(_made(done, v) for v in children)
            done[id(source)] = made
            open_.discard(id(source))
            continue
        _, source, path, depth = frame
        if not isinstance(source, (dict, list, tuple)):
            continue
        key = id(source)
        if key in done:
            continue
        if key in open_:
            raise TraceError(f"{_where(path)} contains itself (a snapshot refers to nothing above it)")
        if depth > MAX_DEPTH:
            raise TraceError(
                f"{_where(path)} nests deeper than {MAX_DEPTH} levels (a PyTorch snapshot nests about 7)"
            )
        open_.add(key)
        children = list(source.items()) if isinstance(source, dict) else list(source)
        stack.append((_EXIT, source, children))
        if isinstance(source, dict):
            for k, v in children:
                stack.append((_ENTER, v, (path, k), depth + 1))
                stack.append((_ENTER, k, (path, k), depth + 1))
        else:
            for i, v in enumerate(children):
                stack.append((_ENTER, v, (path, i), depth + 1))
    return _made(done, value)


def _made(done: dict[int, Any], value: Any) -> Any:
    if isinstance(value, (dict, list, tuple)):
        return done[id(value)]
    return _leaf(value)
