"""Whether a number a program makes with ``int(t)`` or ``float(t)`` of a GPU value is only printed.

An evaluation loop counts what it got right, ``correct += int((pred == y).sum())``, and prints
``correct / n``; a script prints ``float(loss)``. ``.item()`` of an unknown value gives a
placeholder that prints as ``?`` (unknown.py), but ``int()`` and ``float()`` cannot: Python makes a
plain number of whatever ``__int__`` or ``__float__`` returns, so nothing could stop the trace
later if the program decided on it. Such a read therefore stops the trace, unless the program's
own source shows that the number can decide nothing: that every path it flows along, through
arithmetic, names, containers, f-strings and the function's return to its caller, ends in
output (``print``, a logger, a progress bar, a metrics writer) or is dropped. Then the read is
answered 0 and the snapshot says so; anything else (a comparison, a branch, an index, a size, a
call the analysis does not know, a name a nested function or another module could see) keeps the
refusal.

The analysis reads the frame's source (``linecache``) and finds the call at the exact position
the interpreter is executing (``co_positions``, Python 3.11+): an over-cautious "no" costs a
refusal, never a wrong figure.
"""

from __future__ import annotations

import ast
import linecache
import sys
import types
from typing import Dict, Iterator, Optional, Set, Tuple

from .where import is_program

PRINTED_NUMBER_NOTE = (
    "{count} numbers the program made with int() or float() of a GPU value the trace does not have were answered 0: "
    "its source shows each only printed or logged (the printed numbers are not the GPU's), never compared, branched on or "
    "used as a size or an index"
)

EQUAL_PRINTED_NOTE = (
    "{count} torch.equal results of GPU values the trace does not have were answered True (the printed answers are not "
    "the GPU's): the program's source shows each only printed or logged, never branched on"
)
ROLL_SHIFT_NOTE = (
    "{count} roll shifts the program made with int() or float() of a GPU value the trace does not have were answered 0: "
    "a roll allocates the same whatever its shift (TensorTransformations.cu's roll_cuda makes its output with empty_like), "
    "so the figures stand; what the rolled tensors hold is not known"
)

# Calls whose result is a number (or string) made of their arguments: the analysis follows it.
_DERIVES = {"int", "float", "round", "abs", "min", "max", "sum", "str", "repr", "format", "divmod", "pow", "len", "all", "any", "bool"}
# Modules whose functions make numbers of numbers (math.exp of a mean loss: a perplexity).
_NUMERIC_MODULES = {"math", "statistics", "np", "numpy"}
# Methods that only write what they are given somewhere a person reads it.
_OUTPUT_METHODS = {
    "info", "debug", "warning", "warn", "error", "critical", "log", "log_dict", "add_scalar", "add_scalars",
    "set_postfix", "set_postfix_str", "set_description", "write",
}
# Modules whose functions of that name compute (torch.log): never output.
_ARRAY_MODULES = _NUMERIC_MODULES | {"torch", "F", "jax", "jnp"}
# Methods that put a value into the container they are called on.
_FILLS = {"append", "extend", "add", "insert", "update", "setdefault"}
# The code objects CPython makes for comprehensions: their source is their function's.
_COMPREHENSIONS = {"<genexpr>", "<listcomp>", "<setcomp>", "<dictcomp>"}
# How many callers a returned number is followed into.
_RETURN_DEPTH = 4

# Tensor methods and attributes whose result is made of the tensor's values or shape and of
# nothing else: a count printed through them (``x[mask].unique().numel()``) is still only printed.
_DERIVED_METHODS = {
    "unique", "numel", "nelement", "size", "sum", "count_nonzero", "tolist", "item", "float", "int", "long",
    "cpu", "mean", "max", "min", "amax", "amin", "shape", "__len__", "detach",
}

_Position = Tuple[int, int, int, int]
_PARSED: Dict[Tuple[str, int], Tuple[Dict[_Position, ast.AST], Dict[ast.AST, ast.AST]]] = {}
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Module)


def _parsed(filename: str) -> Optional[Tuple[Dict[_Position, ast.AST], Dict[ast.AST, ast.AST]]]:
    """A file's calls and subscripts by their source positions, and each node's parent; parsed
    once per source."""
    lines = linecache.getlines(filename)
    if not lines:
        return None
    key = (filename, hash("".join(lines)))
    if key not in _PARSED:
        try:
            tree = ast.parse("".join(lines))
        except (SyntaxError, ValueError):
            return None
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        calls: Dict[_Position, ast.AST] = {
            (n.lineno, n.end_lineno or n.lineno, n.col_offset, n.end_col_offset or 0): n
            for n in ast.walk(tree) if isinstance(n, (ast.Call, ast.Subscript))
        }
        _PARSED[key] = (calls, parents)
    return _PARSED[key]


def _rolls(call: ast.Call) -> bool:
    """Whether `call` is a roll: ``x.roll(...)`` or ``torch.roll(x, ...)``."""
    return isinstance(call.func, ast.Attribute) and call.func.attr == "roll"


def _positional_shift(call: ast.Call, node: ast.AST) -> bool:
    """Whether `node` is the shifts argument of the roll `call`, given by position: the first of
    ``x.roll(s, d)``, the second of ``torch.roll(x, s, d)``."""
    position = 1 if _root(call.func.value) == "torch" else 0  # type: ignore[attr-defined]
    return len(call.args) > position and call.args[position] is node


def _root(node: ast.AST) -> str:
    """The name an attribute chain starts from (`torch` of torch.nn.functional.log_softmax)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


class _Flow:
    """Where one value goes in one function's source."""

    def __init__(self, frame: types.FrameType, depth: int) -> None:
        self.frame = frame
        self.depth = depth
        self.names: Set[str] = set()
        self.scope: Optional[ast.AST] = None
        self.parents: Dict[ast.AST, ast.AST] = {}
        # Whether some path ends as a roll's shift (answered too: see ROLL_SHIFT_NOTE).
        self.shifts = False

    def call_node(self) -> Optional[ast.Call]:
        """The call the frame is executing now, found by its exact source position."""
        node = self.node()
        return node if isinstance(node, ast.Call) else None

    def node(self) -> Optional[ast.AST]:
        """The call or subscript the frame is executing now, found by its exact source position."""
        parsed = _parsed(self.frame.f_code.co_filename)
        if parsed is None:
            return None
        calls, self.parents = parsed
        positions = list(self.frame.f_code.co_positions())
        index = self.frame.f_lasti // 2
        if index >= len(positions):
            return None
        line, end_line, column, end_column = positions[index]
        if line is None or end_line is None or column is None or end_column is None:
            return None
        node = calls.get((line, end_line, column, end_column))
        if node is not None:
            self.scope = self._scope_of(node)
        return node

    def _scope_of(self, node: ast.AST) -> Optional[ast.AST]:
        while not isinstance(node, _SCOPES):
            parent = self.parents.get(node)
            if parent is None:
                return None
            node = parent
        name = self.frame.f_code.co_name
        if name in _COMPREHENSIONS and self.frame.f_back is not None:
            # all(torch.equal(a, b) for ...): the generator's frame runs the function's source.
            name = self.frame.f_back.f_code.co_name
        if isinstance(node, ast.Module):
            return node if name == "<module>" else None
        return node if getattr(node, "name", "<lambda>") == name else None

    def only_printed(self, node: ast.AST) -> bool:
        """Whether the value of `node` reaches only output, or nothing."""
        parent = self.parents.get(node)
        if parent is None or self.scope is None:
            return False
        if isinstance(parent, ast.Expr):
            return True
        if isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.FormattedValue, ast.JoinedStr, ast.Tuple, ast.List, ast.Set, ast.Starred)):
            return self.only_printed(parent)
        if isinstance(parent, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            return node is parent.elt and self.only_printed(parent)
        if isinstance(parent, ast.Dict):
            return any(node is value for value in parent.values) and self.only_printed(parent)
        if isinstance(parent, ast.keyword):
            call = self.parents.get(parent)
            if isinstance(call, ast.Call) and parent.arg == "shifts" and _rolls(call):
                self.shifts = True
                return True
            return isinstance(call, ast.Call) and self._argument_only_printed(call)
        if isinstance(parent, ast.Call):
            if node is not parent.func and _rolls(parent) and _positional_shift(parent, node):
                self.shifts = True
                return True
            return node is not parent.func and self._argument_only_printed(parent)
        if isinstance(parent, ast.Attribute):
            # history.append(...): putting more into a container reads nothing out of it.
            call = self.parents.get(parent)
            if isinstance(call, ast.Call) and call.func is parent:
                # x.numel(), counts.tolist(): made of what is only printed, and so only printed.
                return parent.attr in _FILLS or (parent.attr in _DERIVED_METHODS and self.only_printed(call))
            return parent.attr == "shape" and self.only_printed(parent)
        if isinstance(parent, ast.Subscript) and node is parent.value:
            # x.shape[0], counts[1]: a part of what is only printed.
            return self.only_printed(parent)
        if isinstance(parent, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            return node is parent.value and all(self._stored_only_printed(target) for target in targets)
        if isinstance(parent, ast.Return):
            return self._returned_only_printed()
        return False

    def _argument_only_printed(self, call: ast.Call) -> bool:
        function = call.func
        if isinstance(function, ast.Name):
            if function.id == "print":
                return True
            return function.id in _DERIVES and self.only_printed(call)
        if not isinstance(function, ast.Attribute):
            return False
        owner = function.value
        if isinstance(owner, ast.Name) and owner.id in _NUMERIC_MODULES:
            return self.only_printed(call)
        if function.attr in _DERIVED_METHODS and _root(owner) == "torch":
            # torch.unique(x), torch.numel(x): made of x alone.
            return self.only_printed(call)
        if function.attr in _OUTPUT_METHODS and _root(owner) not in _ARRAY_MODULES:
            # logger.info, wandb.log, writer.add_scalar; not torch.log, a tensor made of it.
            return True
        if function.attr == "format" and isinstance(owner, ast.Constant) and isinstance(owner.value, str):
            return self.only_printed(call)
        if function.attr in _FILLS and isinstance(owner, ast.Name):
            return self._name_only_printed(owner.id)
        return False

    def _stored_only_printed(self, target: ast.AST) -> bool:
        if isinstance(target, ast.Name):
            return self._name_only_printed(target.id)
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            # history["accuracy"] = ...: the container holds it.
            return self._name_only_printed(target.value.id)
        if isinstance(target, (ast.Tuple, ast.List)):
            # w, g, loss_g = stats.tolist(): each name holds one of them.
            return all(self._stored_only_printed(e.value if isinstance(e, ast.Starred) else e) for e in target.elts)
        return False

    def _name_only_printed(self, name: str) -> bool:
        """Whether every read of `name` in the function only prints what it holds."""
        if name in self.names:
            return True
        self.names.add(name)
        scope = self.scope
        if scope is None:
            return False
        for node in ast.walk(scope):
            if isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
                return False
        for node in self._own_nodes(scope):
            if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load) and not self.only_printed(node):
                return False
        # A module's name is anyone's who imports it; a script's (run as __main__) is its own. A
        # name a nested function reads is that function's too.
        if isinstance(scope, ast.Module) and self.frame.f_globals.get("__name__") != "__main__":
            return False
        return not any(
            isinstance(node, ast.Name) and node.id == name
            for inner in ast.walk(scope) if inner is not scope and isinstance(inner, _SCOPES)
            for node in ast.walk(inner)
        )

    def _own_nodes(self, scope: ast.AST) -> Iterator[ast.AST]:
        """The nodes of `scope`'s own body, not of the functions and classes inside it."""
        stack = list(ast.iter_child_nodes(scope))
        while stack:
            node = stack.pop()
            yield node
            if not isinstance(node, _SCOPES):
                stack.extend(ast.iter_child_nodes(node))

    def _returned_only_printed(self) -> bool:
        caller = self.frame.f_back
        if caller is None or self.depth >= _RETURN_DEPTH or not is_program(caller.f_code.co_filename):
            return False
        flow = _Flow(caller, self.depth + 1)
        call = flow.call_node()
        return call is not None and flow.only_printed(call)


def equal_only_printed() -> bool:
    """Whether the ``torch.equal(a, b)`` (or ``a.equal(b)``) the program is executing makes a
    truth that only reaches output (``same = all(torch.equal(...) for ...)``, printed)."""
    flow, call = _call_being_made()
    if flow is None or call is None or not (isinstance(call.func, ast.Attribute) and call.func.attr == "equal"):
        return False
    return flow.only_printed(call)


def _call_being_made() -> Tuple[Optional[_Flow], Optional[ast.Call]]:
    """The flow of the innermost frame of the program's own (outside torch and vramlab), and the
    call it is making."""
    frame: Optional[types.FrameType] = sys._getframe(2)
    while frame is not None and not is_program(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None, None
    flow = _Flow(frame, 0)
    return flow, flow.call_node()


SHAPE_PRINTED_NOTE = (
    "{count} selections whose shape comes from values the trace does not have (a boolean mask's indexing, unique) were answered "
    "as selecting every element: the program's source shows each result only printed or logged (a count of detections, of "
    "classes seen), never used for anything else; the printed counts are not the GPU's, and these selections allocate at least "
    "what the GPU's do"
)
# The calls whose result's shape comes from values that shape_only_printed answers.
_SELECTIONS = {"unique", "nonzero", "masked_select", "unique_consecutive"}


def shape_only_printed() -> bool:
    """Whether the boolean-mask indexing (``x[mask]``) or the ``unique``/``nonzero`` call the
    program is executing makes a tensor that only reaches output, through counts made of it
    (``print(f"{x[keep].unique().numel()} classes seen")``)."""
    frame: Optional[types.FrameType] = sys._getframe(1)
    while frame is not None and not is_program(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return False
    flow = _Flow(frame, 0)
    node = flow.node()
    if isinstance(node, ast.Call):
        function = node.func
        name = function.attr if isinstance(function, ast.Attribute) else function.id if isinstance(function, ast.Name) else ""
        if name not in _SELECTIONS:
            return False
    elif not isinstance(node, ast.Subscript):
        return False
    if isinstance(flow.parents.get(node), ast.Expr):
        # A selection made and dropped (a statement of its own) is not a count printed.
        return False
    flow.scope = flow._scope_of(node)
    return flow.only_printed(node)


def read_only_printed() -> Optional[str]:
    """Whether the ``int(t)``, ``float(t)`` or ``t.tolist()`` the program is executing now makes
    numbers that only reach output or a roll's shift: the innermost frame of the program's own
    (outside torch and vramlab) is the one making the call. The note that says so, or None."""
    flow, call = _call_being_made()
    if flow is None or call is None:
        return None
    function = call.func
    number = isinstance(function, ast.Name) and function.id in ("int", "float")
    listed = isinstance(function, ast.Attribute) and function.attr == "tolist"
    if not (number or listed) or not flow.only_printed(call) or (listed and flow.shifts):
        # A list's elements are placeholders (unknown.py), which no roll takes as its shifts.
        return None
    return ROLL_SHIFT_NOTE if flow.shifts else PRINTED_NUMBER_NOTE
