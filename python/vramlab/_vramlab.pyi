"""The Rust core's functions, as `vramlab/__init__.py` calls them; checked against the built
module by mypy's stubtest in CI."""

from typing import Any, List, Optional

__all__ = ["replay", "tune", "run", "explain", "DEFAULT_TUNE_GRID", "__version__"]

__version__: str
DEFAULT_TUNE_GRID: List[str]

def replay(trace: Any, alloc_conf: List[str], capacity: Optional[int] = ..., policy: Optional[str] = ..., device: Optional[int] = ...) -> str: ...
def tune(trace: Any, grid: List[str], capacity: Optional[int] = ..., device: Optional[int] = ...) -> str: ...
def run(targets: List[str], backend: str, profile: str, seed: int) -> str: ...
def explain(topic: str, params: List[str], profile: str) -> str: ...
