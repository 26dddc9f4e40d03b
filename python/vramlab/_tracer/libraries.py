"""Rules for libraries above PyTorch whose control flow reads values a trace can know from their
own configuration, not from the data. Each is installed when the library's module is imported
(now or later, inside the trace), and removed with the trace's other patches.

- transformers' ``generate``: its loop stops when every sequence is finished, which it reads back
  each step (``unfinished_sequences.max() == 0``). The length criterion's value is known; the
  end-of-sequence criterion's depends on the tokens. Where the generation config makes the
  end-of-sequence token impossible before the maximum length (``min_new_tokens >=
  max_new_tokens``, or ``min_length >= max_length``: MinNewTokensLengthLogitsProcessor and
  MinLengthLogitsProcessor set its score to -inf, so neither argmax nor sampling can pick it), the
  criterion is still run (it allocates what it allocates) and its result is known to be all False,
  so generate runs to its maximum length without answer_reads, as it does on the GPU.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Any, Callable, Dict, Optional

from .standin import Table


def eos_impossible(config: Any) -> bool:
    """Whether the generation config keeps the end-of-sequence token from being generated before
    the maximum length (transformers/generation/utils.py, _get_logits_processor)."""
    min_new, max_new = getattr(config, "min_new_tokens", None), getattr(config, "max_new_tokens", None)
    if min_new is not None and max_new is not None and min_new > 0 and min_new >= max_new:
        return True
    min_length, max_length = getattr(config, "min_length", None), getattr(config, "max_length", None)
    return bool(min_length and max_length and min_length >= max_length and max_new is None)


class KnownFalse:
    """The end-of-sequence criterion where it cannot fire: run, then known all False."""

    def __init__(self, criterion: Any) -> None:
        self.criterion = criterion

    def __getattr__(self, name: str) -> Any:
        return getattr(self.criterion, name)

    def __call__(self, input_ids: Any, scores: Any, *args: Any, **kwargs: Any) -> Any:
        done = self.criterion(input_ids, scores, *args, **kwargs)
        done.zero_()
        return done


def generation_paths(session: Any, utils: Any) -> Table:
    """transformers.generation.utils, once imported."""
    mixin = getattr(utils, "GenerationMixin", None)
    original = getattr(mixin, "_get_stopping_criteria", None)
    criteria_module = sys.modules.get("transformers.generation.stopping_criteria")
    eos_class = getattr(criteria_module, "EosTokenCriteria", None)
    if mixin is None or original is None or eos_class is None:
        return {}

    def stopping_criteria(model: Any, generation_config: Any, *args: Any, **kwargs: Any) -> Any:
        criteria = original(model, generation_config, *args, **kwargs)
        if eos_impossible(generation_config):
            for i, criterion in enumerate(criteria):
                if isinstance(criterion, eos_class):
                    criteria[i] = KnownFalse(criterion)
                    session.note(
                        "{count} generate() calls ran to their maximum length: their configs (min_new_tokens >= max_new_tokens, or min_length >= max_length) keep the end-of-sequence token from being generated earlier, so its stopping criterion is known False (transformers' MinNewTokensLengthLogitsProcessor / MinLengthLogitsProcessor)"
                    )
        return criteria

    return {(mixin, "_get_stopping_criteria"): stopping_criteria}


# Module name -> the patches to make once it is imported.
RULES: Dict[str, Callable[[Any, Any], Table]] = {"transformers.generation.utils": generation_paths}


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs `patch(module)` right after a watched module is executed."""

    def __init__(self, patch: Callable[[str, Any], None]) -> None:
        self.patch = patch
        self.busy: set = set()

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in RULES or fullname in self.busy:
            return None
        self.busy.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self.busy.discard(fullname)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _PatchedLoader(spec.loader, self.patch, fullname)
        return spec


class _PatchedLoader(importlib.abc.Loader):
    """A module's own loader, with the patch run once the module has executed."""

    def __init__(self, loader: Any, patch: Callable[[str, Any], None], name: str) -> None:
        self.loader, self.patch, self.name = loader, patch, name

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.loader.exec_module(module)
        self.patch(self.name, module)


class Libraries:
    """The library rules of one trace."""

    def __init__(self, session: Any, install: Callable[[Table], None]) -> None:
        self.session = session
        self.install_table = install
        self.finder: Optional[_AfterImport] = None

    def _patch(self, name: str, module: Any) -> None:
        table = RULES[name](self.session, module)
        if table:
            self.install_table(table)

    def install(self) -> None:
        for name in RULES:
            module = sys.modules.get(name)
            if module is not None:
                self._patch(name, module)
        self.finder = _AfterImport(self._patch)
        sys.meta_path.insert(0, self.finder)

    def uninstall(self) -> None:
        if self.finder is not None and self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        self.finder = None


__all__ = ["Libraries", "eos_impossible"]
