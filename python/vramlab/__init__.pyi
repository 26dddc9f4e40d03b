import os
from typing import Any, Dict, List, Optional, Sequence, Union

Trace = Union[str, os.PathLike[str], bytes, Dict[str, Any]]

__version__: str
DEFAULT_TUNE_GRID: List[str]

def replay(
    trace: Trace,
    *,
    alloc_conf: Union[None, str, Sequence[str]] = ...,
    capacity: Optional[int] = ...,
    policy: Optional[str] = ...,
    device: Optional[int] = ...,
) -> Dict[str, Any]:
    """Replays a trace under PyTorch's allocator settings; the dict `vramlab replay --json` prints."""

def tune(
    trace: Trace,
    *,
    capacity: Optional[int] = ...,
    grid: Optional[Sequence[str]] = ...,
    device: Optional[int] = ...,
) -> Dict[str, Any]:
    """Many PYTORCH_ALLOC_CONF settings at once, ranked: fits first, then by peak reserved."""

def run(
    targets: Union[str, Sequence[str]] = ...,
    backend: str = ...,
    profile: str = ...,
    seed: int = ...,
) -> List[Dict[str, Any]]:
    """Runs experiments; one record dict per experiment."""

def explain(topic: str, profile: str = ..., **params: Any) -> str:
    """A teaching view of one case (occupancy, banks, coalescing, constant)."""
