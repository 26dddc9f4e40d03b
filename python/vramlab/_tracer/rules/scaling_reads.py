"""Values an optimizer reads back only to scale an update in place. ``torch.optim.Adafactor``
(torch/optim/_adafactor.py, 2.5 to 2.15, both its single-tensor and foreach forms) reads each
parameter's norm for its relative step size (``alpha = max(eps2, param.norm(2).item() / ...) *
rho``) and each update's norm for its RMS clip (``max(1.0, update.norm(2).item() / ...)``); the
floats become scalars of ``mul_``/``add_``/``addcmul_``-style calls, whose allocations do not
depend on them. Each such read is answered 1.0 and said; a read anywhere else is left to the
other rules (refused unless known)."""

from __future__ import annotations

import inspect
from typing import Any, Optional

# (file, functions) whose scalar reads only scale: read in their sources, 2.11 and 2.15.
SCALING_READERS = {"torch/optim/_adafactor.py": {"_single_tensor_adafactor", "_multi_tensor_adafactor"}}

NOTE = (
    "{count} norms read back by torch.optim.Adafactor (torch/optim/_adafactor.py: the relative step size and the update's RMS clip) "
    "were answered 1.0: the floats only scale updates made in place, so the memory asked for does not depend on them"
)


def answer(session: Any, value: Any) -> Optional[float]:
    """1.0 for a one-element floating-point read made inside a SCALING_READERS function, else None."""
    torch = session.torch
    if not isinstance(value, torch.Tensor) or not value.is_floating_point() or value.numel() != 1:
        return None
    frame = inspect.currentframe()
    while frame is not None:
        path = frame.f_code.co_filename.replace("\\", "/")
        if any(path.endswith(file) and frame.f_code.co_name in names for file, names in SCALING_READERS.items()):
            session.note(NOTE)
            return 1.0
        frame = frame.f_back
    return None
