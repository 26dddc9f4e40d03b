"""Where in the program an operation was asked for: the innermost frame of the program's own code
(outside torch and vramlab), for the snapshot's frames and for the one-line refusals."""

from __future__ import annotations

import os
import sys
import sysconfig
import types
from typing import Any, Dict, Optional

# The vramlab package's folder: frames from it are the tracer's, not the program's.
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# torch's folder, with the separator (torchvision and torchaudio are installed beside torch, and
# are not it); set when a trace starts (`set_torch`).
_TORCH_DIR = "\0"


def set_torch(torch: Any) -> None:
    global _TORCH_DIR
    _TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


def torch_dir() -> str:
    return _TORCH_DIR


def is_program(filename: str) -> bool:
    """Whether a frame's file is the program's (not torch's, vramlab's or frozen bootstrap code)."""
    return not (filename.startswith(_TORCH_DIR) or filename.startswith(PACKAGE_DIR) or filename.startswith("<frozen"))


def user_frame() -> Optional[Dict[str, Any]]:
    """The innermost frame of the traced program (outside torch and vramlab)."""
    frame: Optional[types.FrameType] = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if is_program(name):
            return {"filename": name, "line": frame.f_lineno, "name": frame.f_code.co_name}
        frame = frame.f_back
    return None


def where(frame: Optional[Dict[str, Any]]) -> str:
    """`frame`'s file:line; where that is a library's (an installed package's), also the line of
    the program's own that called into it, so that the message names the program's line."""
    if not frame:
        return "an unknown line"
    at = f"{frame['filename']}:{frame['line']}"
    if not installed(frame["filename"]):
        return at
    caller: Optional[types.FrameType] = sys._getframe(1)
    while caller is not None:
        name = caller.f_code.co_filename
        if is_program(name) and not name.startswith("<") and not installed(name):
            return f"{at} (called from {name}:{caller.f_lineno})"
        caller = caller.f_back
    return at


def here() -> str:
    """The program's line now, as `where` names it."""
    return where(user_frame())


def installed(filename: str) -> bool:
    """Whether `filename` is an installed package's or the standard library's, not the program's."""
    folders = {sysconfig.get_paths().get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    return any(folder and filename.startswith(folder + os.sep) for folder in folders) or (os.sep + "site-packages" + os.sep) in filename
