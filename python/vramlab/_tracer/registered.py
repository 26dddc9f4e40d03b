"""Python kernels the trace registers for ATen operators while it is on, and removes after."""

from __future__ import annotations

from typing import Any, Callable, List, Tuple


class RegisteredKernels:
    """A set of (operator, kernel, dispatch key) registered together for one trace: `kernels`
    says which, `install` registers them, `uninstall` takes them off."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.library: Any = None

    def kernels(self) -> List[Tuple[str, Callable[..., Any], str]]:
        raise NotImplementedError

    def install(self) -> None:
        library = self.torch.library.Library("aten", "IMPL")
        for name, kernel, key in self.kernels():
            library.impl(name, kernel, key)
        self.library = library

    def uninstall(self) -> None:
        if self.library is not None:
            self.library._destroy()
            self.library = None


class InPlaceWithoutMeta(RegisteredKernels):
    """Operators that update their tensors in place and allocate nothing on CUDA, for which
    PyTorch has no meta kernel: fused SGD (FusedSgdKernel.cu; its momentum buffers are made in
    Python)."""

    def kernels(self) -> List[Tuple[str, Callable[..., Any], str]]:
        return [(name, lambda *args, **kwargs: None, "Meta") for name in ("_fused_sgd_", "_fused_sgd_.tensor_lr")]
