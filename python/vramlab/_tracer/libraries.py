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
- Beam search under such a config (``_beam_search``): a beam is finished only by a stopping
  criterion, and with the end-of-sequence token impossible only the length criterion fires, for
  every beam at once, at the maximum length. So the loop's test
  (``_beam_search_has_unfinished_sequences``) is True until the step that reaches ``max_length``
  and False there, and every returned beam is full length: ``max_generated_length`` is
  ``max_length - decoder_prompt_len`` (the two values it reads after the loop, answered from
  ``_beam_search``'s own variables).
- ``PreTrainedModel.warn_if_padding_and_no_attention_mask``: a model called without an attention
  mask checks whether the first or last token of any row is the pad token, only to warn
  (``pad_token_id in input_ids[:, [-1, 0]]``). The check still allocates what it allocates; its
  answer decides nothing but a warning, so it is answered "no padding", and said in the notes.
- PyTorch's own ``torch.optim.Adafactor`` (torch/optim/_adafactor.py, 2.5 to 2.15, its
  single-tensor and foreach forms) reads each parameter's norm for its relative step size
  (``alpha = max(eps2, param.norm(2).item() / ...) * rho``) and each update's norm for its RMS clip
  (``max(1.0, update.norm(2).item() / ...)``); the floats only scale updates made in place, whose
  allocations do not depend on them, so they are answered 1.0 and said.
- transformers' ``Adafactor`` with ``scale_parameter=True`` (transformers/optimization.py,
  ``Adafactor._get_lr``: ``param_scale = max(eps[1], state["RMS"])``, the RMS a 0-d tensor on the
  GPU) compares each parameter's RMS with ``eps[1]`` (1e-3). Above it, the learning rate is that
  tensor times the relative step, a 0-d tensor (one 512-byte block, alive for the parameter's
  update); below it (a parameter all zeros, such as LoRA's B at the start), a float and no block.
  Every other allocation of the step is the same either way. The comparison is answered "above",
  the case of a parameter with values, and said.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import sys
from types import FrameType
from typing import Any, Callable, Dict, Optional

from .sharding import checkpoint_state_paths
from .standin import Table, counting


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
        fixed = eos_impossible(generation_config)
        # Beam search keeps finished beams apart by their scores: with the end-of-sequence token
        # possible, which beams end when is the data's (only the fixed length is followed there).
        beams = (getattr(generation_config, "num_beams", 1) or 1) > 1
        for i, criterion in enumerate(criteria):
            if isinstance(criterion, eos_class) and (fixed or not beams):
                criteria[i] = KnownFalse(criterion)
                session.note(FIXED_LENGTH_NOTE if fixed else LONGEST_NOTE)
        return criteria

    table = {(mixin, "_get_stopping_criteria"): stopping_criteria}
    table.update(beam_search_paths(session, mixin))
    return table


FIXED_LENGTH_NOTE = "{count} generate() calls ran to their maximum length: their configs (min_new_tokens >= max_new_tokens, or min_length >= max_length) keep the end-of-sequence token from being generated earlier, so its stopping criterion is known False (transformers' MinNewTokensLengthLogitsProcessor / MinLengthLogitsProcessor)"
LONGEST_NOTE = "{count} generate() calls were traced to their maximum length (max_new_tokens or max_length), an upper bound: when each sequence generates its end-of-sequence token depends on the data, which a trace has none of. On the GPU a batch stops sooner only once every sequence in it has ended, and then allocates no more than this trace (fewer steps, a shorter cache); min_new_tokens equal to max_new_tokens makes the length exact"

LONGEST_BEAM_NOTE = "{count} beam searches were traced to their maximum length, an upper bound: which beams end when is the data's, which a trace has none of; each step's test of unfinished beams was answered True until max_length, and every returned beam taken as full length. On the GPU a search ends sooner only when its beams are done, and then allocates no more than this trace (fewer steps); min_new_tokens equal to max_new_tokens makes it exact"

BEAM_NOTE = "{count} beam searches ran to their maximum length: their configs keep the end-of-sequence token from being generated earlier, so no beam finishes before max_length, every step's test of unfinished beams is known True until then, and every returned beam is full length (transformers' _beam_search)"


class FixedLengthBeams:
    """One beam search whose length the config fixes: its steps so far, and the answers to the
    values `_beam_search` reads after its loop."""

    def __init__(self, code: Any, prompt_length: int, max_length: int) -> None:
        self.code, self.prompt_length, self.max_length, self.steps = code, prompt_length, max_length, 0

    def answer(self, tensor: Any) -> Any:
        """The value of `tensor` where it is `_beam_search`'s `max_generated_length` or
        `output_length`, else None."""
        frame: Optional[FrameType] = sys._getframe(1)
        while frame is not None and frame.f_code is not self.code:
            frame = frame.f_back
        if frame is None:
            return None
        storage = tensor.untyped_storage()._cdata
        known = {"max_generated_length": self.max_length - self.prompt_length, "output_length": self.max_length}
        for name, value in known.items():
            local: Any = frame.f_locals.get(name)
            if getattr(local, "device", None) is not None and local.untyped_storage()._cdata == storage:
                return value
        return None


def beam_search_paths(session: Any, mixin: Any) -> Table:
    beam_search = vars(mixin).get("_beam_search")
    unfinished = vars(mixin).get("_beam_search_has_unfinished_sequences")
    if beam_search is None or not isinstance(unfinished, staticmethod):
        return {}
    unfinished_test = unfinished.__func__
    running: list = []

    @functools.wraps(beam_search)
    def fixed_length_beam_search(model: Any, input_ids: Any, logits_processor: Any, stopping_criteria: Any, generation_config: Any, *args: Any, **kwargs: Any) -> Any:
        if not getattr(generation_config, "max_length", None):
            return beam_search(model, input_ids, logits_processor, stopping_criteria, generation_config, *args, **kwargs)
        fixed = eos_impossible(generation_config)
        beams = FixedLengthBeams(beam_search.__code__, int(input_ids.shape[-1]), int(generation_config.max_length))
        running.append(beams)
        session.read_answers.append(beams.answer)
        try:
            output = beam_search(model, input_ids, logits_processor, stopping_criteria, generation_config, *args, **kwargs)
            session.note(BEAM_NOTE if fixed else LONGEST_BEAM_NOTE)
            return output
        finally:
            running.remove(beams)
            session.read_answers.remove(beams.answer)

    def has_unfinished(*args: Any, **kwargs: Any) -> Any:
        result = unfinished_test(*args, **kwargs)
        if running:
            beams = running[-1]
            beams.steps += 1
            result.fill_(beams.prompt_length + beams.steps < beams.max_length)
        return result

    return {(mixin, "_beam_search"): fixed_length_beam_search, (mixin, "_beam_search_has_unfinished_sequences"): staticmethod(has_unfinished)}


PADDING_WARNING_NOTE = "{count} checks for padding without an attention mask (transformers' warn_if_padding_and_no_attention_mask, which only warns) answered 'no padding'"


class ReadsInside:
    """Answers every value read while a given function runs (its code on the stack) with one
    value, and says so in the notes."""

    def __init__(self, session: Any, code: Any, value: Any, note: str, floating_only: bool = False) -> None:
        self.session, self.code, self.value, self.note = session, code, value, note
        self.floating_only = floating_only

    def answer(self, tensor: Any) -> Any:
        if self.floating_only and not tensor.dtype.is_floating_point:
            return None
        frame: Optional[FrameType] = sys._getframe(1)
        while frame is not None and frame.f_code is not self.code:
            frame = frame.f_back
        if frame is None:
            return None
        self.session.note(self.note)
        return self.value


def padding_warning_paths(session: Any, modeling_utils: Any) -> Table:
    """transformers.modeling_utils, once imported."""
    model = getattr(modeling_utils, "PreTrainedModel", None)
    check = vars(model).get("warn_if_padding_and_no_attention_mask") if model is not None else None
    if check is None:
        return {}
    reads = ReadsInside(session, check.__code__, False, PADDING_WARNING_NOTE)
    return {(model, "warn_if_padding_and_no_attention_mask"): answering(session, check, reads)}


def answering(session: Any, function: Any, reads: ReadsInside, host: bool = False) -> Callable[..., Any]:
    """`function`, with `reads` answering the values read while it runs (and, with `host`, the
    values it copies to the host)."""
    lists = [session.read_answers] + ([session.host_answers] if host else [])

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for answers in lists:
            answers.append(reads.answer)
        try:
            return function(*args, **kwargs)
        finally:
            for answers in lists:
                answers.remove(reads.answer)

    return wrapper


TRAINER_LOG_NOTE = "{count} values Hugging Face's Trainer reads only to log and report them (the loss, the gradient norm and the count of floating-point operations, in Trainer._maybe_log_save_evaluate, _finalize_training and store_flos) were answered NaN: a trace has no data, and they decide no allocation"

TRAINER_EVALUATION_NOTE = "{count} floating-point values Hugging Face's Trainer.evaluation_loop reads or copies to the host (losses and predictions, for its metrics) were answered NaN: a trace has no data, and its metrics are not the GPU's; integer ones (labels) are not answered, and stop the trace"

# Trainer's methods (transformers/trainer.py, 5.x) whose values are answered NaN, with the note,
# whether their copies to the host are too, and whether integer values are. The first two read
# only logs and the returned metrics (`tr_loss ... .mean().item()`, `grad_norm.item()`,
# `self._total_loss_scalar += self._tr_loss.item()`); store_flos, under DDP, sums every rank's
# count of operations (an integer) for the logs; the evaluation loop gathers losses (and, with
# compute_metrics, logits and labels) on the GPU, then copies them to the host for the metrics:
# what it holds on the GPU is the trace's, the values only the metrics'.
TRAINER_ANSWERED = (
    ("_maybe_log_save_evaluate", TRAINER_LOG_NOTE, False, False),
    ("_finalize_training", TRAINER_LOG_NOTE, False, False),
    ("store_flos", TRAINER_LOG_NOTE, False, True),
    ("evaluation_loop", TRAINER_EVALUATION_NOTE, True, False),
)


def trainer_paths(session: Any, trainer_module: Any) -> Table:
    """transformers.trainer, once imported."""
    trainer = getattr(trainer_module, "Trainer", None)
    table: Table = {}
    for name, note, host, integers in TRAINER_ANSWERED:
        method = vars(trainer).get(name) if trainer is not None else None
        if method is not None:
            reads = ReadsInside(session, method.__code__, float("nan"), note, floating_only=not integers)
            table[(trainer, name)] = answering(session, method, reads, host=host)
    return table


ADAFACTOR_NOTE = (
    "{count} norms read back by torch.optim.Adafactor (torch/optim/_adafactor.py: the relative step size and the update's RMS clip) "
    "were answered 1.0: the floats only scale updates made in place, so the memory asked for does not depend on them"
)


def adafactor_paths(session: Any, adafactor_module: Any) -> Table:
    """torch.optim._adafactor (imported with torch): its two update functions, whose floating-point
    reads are answered 1.0 (`adafactor` looks them up in the module at each step)."""
    table: Table = {}
    for name in ("_single_tensor_adafactor", "_multi_tensor_adafactor"):
        function = getattr(adafactor_module, name, None)
        if function is not None:
            reads = ReadsInside(session, function.__code__, 1.0, ADAFACTOR_NOTE, floating_only=True)
            table[(adafactor_module, name)] = answering(session, function, reads)
    return table


HF_ADAFACTOR_NOTE = (
    "{count} comparisons of a parameter's RMS with eps[1] in transformers' Adafactor (optimization.py, _get_lr, scale_parameter=True) "
    "were answered 'above': the learning rate is then a 0-d tensor (one 512-byte block for the length of the parameter's update); "
    "a parameter whose RMS is below eps[1] (all zeros, as LoRA's B starts) takes a float on the GPU and allocates that block less"
)


def hf_adafactor_paths(session: Any, optimization: Any) -> Table:
    """transformers.optimization, once imported: Adafactor._get_lr's one read, a parameter's RMS
    against eps[1], answered True (what `max` asks of the tensor: is it above the float)."""
    adafactor = getattr(optimization, "Adafactor", None)
    get_lr = vars(adafactor).get("_get_lr") if adafactor is not None else None
    if not isinstance(get_lr, staticmethod):
        return {}
    reads = ReadsInside(session, get_lr.__func__.__code__, True, HF_ADAFACTOR_NOTE)
    return {(adafactor, "_get_lr"): staticmethod(answering(session, get_lr.__func__, reads))}


def accelerate_random_paths(session: Any, random_module: Any) -> Table:
    """accelerate.utils.random, once imported: synchronize_rng_state (at each epoch of a prepared
    DataLoader) moves a generator's state to the GPU, broadcasts rank 0's and copies it back to
    set it; the broadcast leaves this rank's state, which every rank's trace has the same of."""
    sync = getattr(random_module, "synchronize_rng_state", None)
    if sync is None:
        return {}
    return {(random_module, "synchronize_rng_state"): counting(session, "same_state_broadcasts", sync)}


# Module name -> the patches to make once it is imported.
RULES: Dict[str, Callable[[Any, Any], Table]] = {
    "transformers.generation.utils": generation_paths,
    "transformers.modeling_utils": padding_warning_paths,
    "transformers.trainer": trainer_paths,
    "accelerate.utils.random": accelerate_random_paths,
    "torch.distributed.checkpoint.state_dict": checkpoint_state_paths,
    "torch.optim._adafactor": adafactor_paths,
    "transformers.optimization": hf_adafactor_paths,
}


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
