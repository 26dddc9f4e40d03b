"""``isin`` on CUDA (``aten/src/ATen/native/TensorCompare.cpp``, ``isin_Tensor_Tensor_out``): where
the test elements are few (fewer than ``10 * numel(elements) ** 0.145``, numpy's heuristic) the
default kernel (``TensorCompare.cu``, ``isin_default_kernel_gpu``) compares every element with every
test element, ``elements.unsqueeze(-1).eq(test_elements)`` (a bool per pair), reduces it with
``any(-1)`` (a bool per element) and copies that into the result: two temporaries after the result,
freed in reverse. Hugging Face's generation checks each step's tokens against the stop tokens this
way (ISSUE35E's left-padded Llama). Otherwise ``isin_sorting`` sorts, which the trace notes.
"""

from __future__ import annotations

from typing import Any, List

from . import Call, Rule, register


def uses_default_kernel(elements: int, tests: int) -> bool:
    return tests < int(10.0 * float(elements) ** 0.145)


@register
class IsinDefaultKernel(Rule):
    ops = {"isin"}
    source = "aten/src/ATen/native/TensorCompare.cpp (isin_Tensor_Tensor_out), cuda/TensorCompare.cu (isin_default_kernel_gpu)"
    order = 60

    def after(self, call: Call, out: Any, made: List[Any]) -> None:
        torch = self.torch
        elements, tests = (call.args + (None, None))[:2]
        if not made or not isinstance(elements, torch.Tensor) or elements.device.type != "meta" or elements.numel() == 0:
            return
        n_tests = tests.numel() if isinstance(tests, torch.Tensor) else 1
        if not uses_default_kernel(elements.numel(), n_tests):
            self.session.note(
                "{count} isin calls with many test elements are traced without isin_sorting's sort and temporaries (rules/isin.py)"
            )
            return
        call.record.scratch([elements.numel() * n_tests, elements.numel()], call.frame)
