"""cuDNN's convolution workspaces, as measured: which plan cuDNN's heuristics take for a
convolution, and so how much workspace PyTorch allocates around it (Conv_v8.cpp's run_conv_plan:
the plan's getWorkspaceSize(), allocated from the caching allocator and freed when the plan has
run), is cuDNN's own choice, made on the GPU and not derivable from a rule. Measured one
convolution at a time on a GPU (scripts/measure_conv_workspaces.py; the table is built by
scripts/build_conv_table.py from reports/reference/<gpu>/conv-workspaces), for torchvision's
models' convolutions at common batch and image sizes; a convolution outside the table is traced
without a workspace and the snapshot says so."""

import gzip
import json
import os
from typing import Any, Dict, List, Optional, Tuple

_HERE = os.path.dirname(os.path.abspath(__file__))
_TABLES: Dict[str, Optional[Dict[str, Any]]] = {}


def table(device: str) -> Optional[Dict[str, Any]]:
    """The measured table for a GPU (by the name its profile gives, as the driver names it), or
    None where none was measured."""
    if not _TABLES:
        for name in sorted(os.listdir(_HERE)):
            if name.startswith("_conv_") and name.endswith(".json.gz"):
                with gzip.open(os.path.join(_HERE, name), "rt") as f:
                    measured = json.load(f)
                _TABLES[measured["device"]] = measured
    return _TABLES.get(device)


def key(dtype: Any, x_shape: List[int], w_shape: List[int], stride: Any, padding: Any, dilation: Any, groups: int) -> str:
    def pair(v: Any) -> str:
        v = list(v) if isinstance(v, (list, tuple)) else [v]
        return f"{v[0]},{v[-1]}"

    name = str(dtype).replace("torch.", "")
    return f"{name}|{','.join(map(str, x_shape))}|{','.join(map(str, w_shape))}|{pair(stride)}|{pair(padding)}|{pair(dilation)}|{groups}"


def outside_defaults(torch: Any, x: Any, weight: Any, transposed: bool) -> Optional[str]:
    """Why the measured table cannot answer for this convolution, or None where it may."""
    cudnn = torch.backends.cudnn
    if transposed:
        return "transposed convolutions"
    if x.dim() != 4:
        return f"{x.dim() - 2}-d convolutions"
    if not (x.is_contiguous() and weight.is_contiguous()):
        return "channels-last or strided tensors"
    if not cudnn.enabled or cudnn.benchmark or cudnn.deterministic:
        return "cuDNN settings other than the defaults (benchmark or deterministic on, or cuDNN off)"
    if x.dtype == torch.float32 and not cudnn.allow_tf32:
        return "float32 without TF32"
    return None


def workspaces(entry: Optional[List[Any]]) -> Tuple[int, int, int]:
    """(forward, input gradient, weight gradient) workspace bytes of a table entry."""
    if entry is None:
        return (0, 0, 0)
    return (int(entry[1]), int(entry[2]), int(entry[3]))
