"""The autograd engine's accumulation of gradients: on the GPU, two gradients of one input are
added in place into the one the engine holds alone (InputBuffer's accumulate, in place into a
buffered gradient when it holds it alone and it is dense: torch/csrc/autograd/input_buffer.cpp).
PyTorch makes a new tensor instead whenever a dispatch mode is on (isTensorSubclassLike), which
the trace's is; on the GPU there is none, so the trace adds in place where the GPU would. A backward formula's own add of a tensor it made
(cholesky_backward's) is not the engine's: the recorder says which node's backward made each
storage, and an add into one made by the running node is the formula's unless that node sends two
gradients to one input (ISSUE35H's Gaussian process)."""

from __future__ import annotations

import os
import sys
import types
from typing import Any, Optional

from ..where import PACKAGE_DIR, torch_dir
from . import PASS, Call, Rule, register
from .cub import non_overlapping_and_dense

# A gradient the autograd engine holds alone, as seen from inside the dispatch mode: the mode's
# own arguments and the Python objects add references (measured on torch 2.11 and 2.15: a tensor
# the engine holds alone shows a use count of 4 here, its storage 2).
ALONE_USE_COUNT = 4
ALONE_STORAGE_COUNT = 2


@register
class EngineAccumulation(Rule):
    ops = {"add"}
    source = "torch/csrc/autograd/input_buffer.cpp (accumulate)"
    order = 30

    def before(self, call: Call) -> Any:
        into = self._into(call)
        return PASS if into is None else into.add_(call.args[1])

    def _into(self, call: Call) -> Optional[Any]:
        torch, args = self.torch, call.args
        if call.func is not torch.ops.aten.add.Tensor or torch.is_grad_enabled() or call.kwargs.get("alpha", 1) != 1:
            return None
        node = torch._C._current_autograd_node()
        if node is None or len(args) != 2:
            return None
        a, b = args
        if not all(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in (a, b)):
            return None
        if a.shape != b.shape or a.dtype != b.dtype:
            return None
        if self.session.record.made_in_node(a.untyped_storage()) == node._sequence_nr() and not feeds_one_input_twice(node):
            # Made by the running node's own formula, which cannot hand the engine two gradients
            # of one input: the formula's add (cholesky_backward's gA + gA.tril(-1).mH()),
            # out of place on the GPU too.
            return None
        # Engine work has no Python frame of the program's between it and backward(); a Python
        # backward (autograd.Function) adding its own gradients does.
        frame: Optional[types.FrameType] = sys._getframe(1)
        torch_files = torch_dir()
        while frame is not None:
            name = frame.f_code.co_filename
            if not (name.startswith(torch_files) or name.startswith(PACKAGE_DIR)):
                return None
            if "/distributed/" in name.replace(os.sep, "/"):
                # torch.distributed's own Python run in the backward: a DTensor operator's
                # handler (loss_parallel's log-softmax and NLL backward add tensors of their own),
                # FSDP's hooks, or a DTensor gradient's accumulation, which the engine makes
                # out of place for a tensor subclass (input_buffer.cpp: isTensorSubclassLike).
                return None
            if name.replace(os.sep, "/").endswith(("autograd/graph.py", "autograd/__init__.py")):
                break
            frame = frame.f_back
        # Only the buffered gradient is reused: adding into the incoming one is input_buffer.cpp's
        # path for sparse buffers alone, so a dense buffered gradient held elsewhere too (a view
        # of another gradient, one also passed on) makes a new tensor.
        if dense(a) and a._use_count() <= ALONE_USE_COUNT and torch._C._storage_Use_Count(a.untyped_storage()._cdata) <= ALONE_STORAGE_COUNT:
            return a
        return None


def feeds_one_input_twice(node: Any) -> bool:
    """Whether two of `node`'s outputs go to one input of one next node (x * x's MulBackward0),
    which the engine accumulates while that node is still the current one."""
    edges = [(id(fn), nr) for fn, nr in node.next_functions if fn is not None]
    return len(set(edges)) < len(edges)


def dense(t: Any) -> bool:
    """``is_non_overlapping_and_dense``: the elements fill the storage span exactly once."""
    return non_overlapping_and_dense(list(t.shape), list(t.stride()))
