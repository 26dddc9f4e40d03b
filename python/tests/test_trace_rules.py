"""The tracer's package (vramlab/_tracer): its layout, its torch releases, and the rules that are
not checked by whole workloads (test_trace.py): each test names the PyTorch source it follows."""

import importlib
import os
import pathlib
import pickle
import subprocess
import sys
import time
import types

import pytest

torch = pytest.importorskip("torch", reason="vramlab.trace needs PyTorch (pip install torch)")

import vramlab  # noqa: E402
from vramlab import UnfollowedError  # noqa: E402
from vramlab._tracer import compat  # noqa: E402
from vramlab._tracer.rules import cublas  # noqa: E402
from traced import allocations  # noqa: E402

PACKAGE = pathlib.Path(vramlab.__file__).resolve().parent
RELEASE = compat.release(torch)


# Layout --------------------------------------------------------------------------------------


def test_no_tracer_module_is_over_600_lines():
    modules = [PACKAGE / "trace.py"] + sorted((PACKAGE / "_tracer").rglob("*.py"))
    long = {str(m.relative_to(PACKAGE)): n for m in modules if (n := len(m.read_text().splitlines())) > 600}
    assert not long, f"tracer modules over 600 lines: {long}"


def test_every_rule_names_its_ops_and_its_source():
    with vramlab.trace() as t:
        rules = t.rules
    assert len(rules.all) >= 12
    for rule in rules.all:
        assert rule.source, f"{type(rule).__name__} names no source"
        assert rule.ops is None or len(set(rule.ops)) > 0, f"{type(rule).__name__} handles no operator"
    for name, function_rules in rules.functions.items():
        for rule in function_rules:
            assert rule.source, f"{type(rule).__name__} ({name}) names no source"


def test_a_rule_is_one_module(tmp_path, monkeypatch):
    """A module dropped into the rules package is found and consulted, with no list to edit."""
    from vramlab._tracer import rules as rules_package

    extra = tmp_path / "rules_extra"
    extra.mkdir()
    (extra / "padded_zeros.py").write_text(
        "from vramlab._tracer.rules import Rule, register\n"
        "@register\n"
        "class PaddedZeros(Rule):\n"
        "    ops = {'zeros'}\n"
        "    source = 'a test'\n"
        "    def after(self, call, out, made):\n"
        "        call.record.scratch([4096], call.frame)\n"
    )
    # Every rule module imported first: a module imported later (by the trace below) would add
    # its rules after this list was taken, and the restore would drop them for the process.
    for module in rules_package.rule_modules():
        importlib.import_module(f"{rules_package.__name__}.{module}")
    monkeypatch.setattr(rules_package, "__path__", list(rules_package.__path__) + [str(extra)])
    registered = list(rules_package._RULES)
    try:
        with vramlab.trace() as t:
            torch.zeros(10, device="cuda")
    finally:
        rules_package._RULES[:] = registered
        sys.modules.pop("vramlab._tracer.rules.padded_zeros", None)
    assert ("alloc", 4096) in allocations(t.snapshot())


# Releases ------------------------------------------------------------------------------------


def test_the_installed_release_is_followed():
    assert compat.OLDEST <= RELEASE <= compat.NEWEST


@pytest.mark.parametrize("version", ["2.10.1", "2.16.0a0+git123", "3.0.0"])
def test_a_release_outside_the_range_stops_in_one_line(version):
    with pytest.raises(UnfollowedError) as err:
        compat.check(types.SimpleNamespace(__version__=version))
    assert version in str(err.value) and "2.11 to 2.15" in str(err.value) and "\n" not in str(err.value)


def test_pyproject_declares_the_range():
    text = (pathlib.Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert f'"torch>={compat.OLDEST[0]}.{compat.OLDEST[1]},<{compat.NEWEST[0]}.{compat.NEWEST[1] + 1}"' in text


def test_the_ten_line_loop_of_issue_35_traces(tmp_path):
    """Linear-GELU-Linear, AdamW, bf16 autocast, two steps: on torch 2.15 the optimizer's graph
    capture check asks torch.accelerator.current_stream().is_capturing() (torch/optim/optimizer.py,
    _accelerator_graph_capture_health_check), which stopped the trace."""
    with vramlab.trace() as t:
        model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)).cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x = torch.randn(16, 256, device="cuda")
        for _ in range(2):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(x).float().pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
        assert torch.accelerator.current_stream().is_capturing() is False
        assert torch.accelerator.device_count() == 1
    # Parameters, gradients, two Adam states: each at least once at the peak.
    params = sum(p.numel() * 4 for p in model.parameters())
    assert t.peak_allocated >= 4 * params


# cuBLAS ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config, expected",
    [
        (":16:8", 16 * 1024 * 8),  # the documented deterministic setting: 128 KiB
        (":4096:8", 4096 * 1024 * 8),
        (":4096:2:16:8", 4096 * 1024 * 2 + 16 * 1024 * 8),  # 8.5 MiB
        ("x:64:2", 64 * 1024 * 2),  # the regex searches: text before a match is skipped
    ],
)
def test_cublas_workspace_config_is_read_as_pytorch_reads_it(config, expected):
    """CublasHandlePool.cpp, parseChosenWorkspaceSize: regex ':([0-9]+):([0-9]+)', SIZE KiB x COUNT."""
    assert cublas.workspace_size((2, 11), 9, 0, {"CUBLAS_WORKSPACE_CONFIG": config}) == expected


def test_an_unparsed_cublas_workspace_config_gives_the_default_with_pytorchs_warning():
    with pytest.warns(UserWarning, match="Could not parse CUBLAS_WORKSPACE_CONFIG"):
        assert cublas.workspace_size((2, 11), 9, 0, {"CUBLAS_WORKSPACE_CONFIG": "16,8"}) == cublas.LARGE_WORKSPACE


def test_a_traced_matmul_takes_the_configured_workspace(monkeypatch):
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    with vramlab.trace() as t:
        a = torch.randn(64, 64, device="cuda")
        a @ a
    assert ("alloc", 16 * 1024 * 8) in allocations(t.snapshot())


# Storages ------------------------------------------------------------------------------------


def test_a_storage_resized_moves_to_a_new_block():
    """resize_bytes_cuda (aten/src/ATen/native/cuda/Resize.cpp): the new block is allocated, the
    contents copied, the old block freed; to 0 bytes only the free; from 0 only the allocation
    (FSDP's all-gather buffers)."""
    with vramlab.trace() as t:
        x = torch.empty(1000, device="cuda")
        storage = x.untyped_storage()
        storage.resize_(0)
        storage.resize_(8000)
        x.resize_(3000)  # past the storage's end: maybe_resize_storage_cuda grows it
        x.resize_(10)  # within it: nothing
        del x, storage
    assert allocations(t.snapshot()) == [
        ("alloc", 4000),
        ("free_completed", 4000),
        ("alloc", 8000),
        ("alloc", 12000),
        ("free_completed", 8000),
        ("free_completed", 12000),
    ]


# Saving --------------------------------------------------------------------------------------


def test_the_save_is_atomic(tmp_path, monkeypatch):
    """A save that fails midway leaves the old snapshot, not a truncated one."""
    out = tmp_path / "snap.pickle"
    with vramlab.trace() as t:
        torch.zeros(4, device="cuda")
    t.save(str(out))
    good = out.read_bytes()

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pickle, "dump", broken)
    with pytest.raises(OSError):
        t.save(str(out))
    assert out.read_bytes() == good
    assert [p.name for p in tmp_path.iterdir()] == ["snap.pickle"]


def run_trace_cli(tmp_path, script, *extra):
    program = tmp_path / "program.py"
    program.write_text(script)
    return subprocess.run(
        [sys.executable, "-m", "vramlab.trace", *extra, str(program)], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )


@pytest.mark.parametrize(
    "ending, status, said",
    [
        ("raise KeyboardInterrupt", 130, "interrupted"),
        ("import sys; sys.exit('fatal: the data is gone')", 1, "fatal: the data is gone"),
        ("import sys; sys.exit(3)", 3, None),
        ("import os; os._exit(0)", 0, None),
    ],
)
def test_the_snapshot_is_kept_on_every_exit(tmp_path, ending, status, said):
    script = "import torch\nx = torch.zeros(1000, device='cuda')\n" + ending + "\n"
    done = run_trace_cli(tmp_path, script, "--out", "snap.pickle")
    assert done.returncode == status, done.stderr
    if said:
        assert said in done.stderr
    with open(tmp_path / "snap.pickle", "rb") as f:
        assert ("alloc", 4000) in allocations(pickle.load(f))


def test_out_is_resolved_before_the_program_changes_folder(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    done = run_trace_cli(tmp_path, "import os, torch\nos.chdir('elsewhere')\ntorch.zeros(8, device='cuda')\n", "--out", "snap.pickle")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "snap.pickle").exists() and not (tmp_path / "elsewhere" / "snap.pickle").exists()


@pytest.mark.parametrize("out, said", [(".", "is a folder"), ("missing/snap.pickle", "no such folder"), ("/dev/null", "not a regular file")])
def test_a_bad_out_is_refused_before_the_program_runs(tmp_path, out, said):
    done = run_trace_cli(tmp_path, "print('the program ran')\n", "--out", out)
    assert done.returncode == 2 and said in done.stderr and "the program ran" not in done.stdout
    assert len(done.stderr.strip().splitlines()) == 1


# Rules mended on held-out programs (issue 35's ISSUE35 group) ----------------------------------


def test_attention_on_the_math_path_computes_in_float32_under_autocast():
    """_scaled_dot_product_attention_math upcasts half-precision inputs and runs below autocast
    (autocast_mode.cpp calls the operator under ExcludeDispatchKeyGuard): its scores are float32
    on the GPU, [B, H, L, L] x 4 bytes, not cast back to bf16 by matmul's autocast policy."""
    with vramlab.trace() as t:
        # A last dimension that is not contiguous rules the fused backends out: the math path.
        q = torch.randn(2, 4, 32, 256, device="cuda").transpose(-1, -2)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            torch.nn.functional.scaled_dot_product_attention(q, q, q)
    assert ("alloc", 2 * 4 * 256 * 256 * 4) in allocations(t.snapshot())


def test_unsorted_packed_sequences_are_followed_with_their_copies():
    """pack_padded_sequence(enforce_sorted=False) sorts the batch by length and keeps the inverse
    permutation (torch.nn.utils.rnn.invert_permutation: an empty_like tensor scattered into whole,
    so its values are known from the sort of the CPU lengths); pad_packed_sequence copies it to the
    host. _pack_padded_sequence (PackedSequence.cpp) makes a contiguous copy of each block of steps
    where the batch narrows, then their cat: on the GPU, and so in the trace."""
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    with vramlab.trace() as t:
        x = torch.randn(4, 10, 8, device="cuda")
        packed = pack_padded_sequence(x, torch.tensor([10, 3, 7, 5]), batch_first=True, enforce_sorted=False)
        out, lengths = pad_packed_sequence(packed, batch_first=True)
    assert out.shape == (4, 10, 8) and lengths.tolist() == [10, 3, 7, 5]
    sizes = [size for action, size in allocations(t.snapshot()) if action == "alloc"]
    # Sorted lengths 10, 7, 5, 3: 3 steps of 4 rows, 2 of 3, 2 of 2 (8 floats a row), then the 25
    # rows' cat; the last block, 3 steps of one row, is contiguous as it is (no copy).
    blocks = [3 * 4 * 32, 2 * 3 * 32, 2 * 2 * 32, 25 * 32]
    start = sizes.index(blocks[0])
    assert sizes[start : start + len(blocks)] == blocks


def test_a_shadow_is_its_own_storages_and_dies_with_it():
    """Known values are kept by storage address (vramlab/_tracer/values.py), and addresses are
    reused. A 0-byte storage is never an allocation, so the recorder never tells the shadows it
    died: its shadow must still go with it, or a later storage at that address (an activation, or
    generate's `unfinished_sequences.max() == 0`) reads as known, with uninitialised values. CI
    on another machine saw exactly that: generate ran on, where its stop depends on the data."""
    import gc

    from vramlab._tracer.values import Shadows

    shadows = Shadows(torch)
    for shape in [(0,), (3,)]:
        t = torch.empty(shape, device="meta")
        shadows.adopt(t, torch.ones(shape))
        assert shadows.view(t) is not None
        key = t.untyped_storage()._cdata
        del t
        gc.collect()
        assert key not in shadows._storages, f"the shadow of a dead {shape} storage outlived it"


def test_small_host_floats_not_trained_are_known_and_weights_are_not():
    """values.py: torchvision's detection models check the targets' boxes, floats made on the
    CPU, for degenerate ones (`degenerate_boxes.any()`, RetinaNet's forward) before anything is
    built; ISSUE35V's RetinaNet stopped there. A small float tensor that is not trained is known
    once on the GPU; a module's weights, trained, and a float tensor past SMALL_HOST_FLOATS are
    not, so a model never runs on the CPU."""
    from vramlab._tracer.values import SMALL_HOST_FLOATS

    with vramlab.trace(gpu="h100"):
        boxes = torch.tensor([[2.0, 3.0, 10.0, 12.0], [5.0, 5.0, 9.0, 30.0]]).to("cuda")
        degenerate = boxes[:, 2:] <= boxes[:, :2]
        assert not degenerate.any()
        assert (boxes[:, 2] - boxes[:, 0]).tolist() == [8.0, 4.0]
        layer = torch.nn.Linear(4, 3).to("cuda")
        with pytest.raises(UnfollowedError):
            bool((layer.bias > 0).any())
        large = torch.randn(SMALL_HOST_FLOATS + 1).to("cuda")
        with pytest.raises(UnfollowedError):
            bool(large.sum() > 0)


def test_host_float_masks_past_the_small_limit_are_known_and_data_is_not():
    """values.py's _mask_like: a Decision Transformer's batch builds its padding mask on the CPU as
    floats (zeros, then `m[i, -n:] = 1.0` per window) and selects the valid predictions with
    `preds[m.reshape(-1) > 0]` on the GPU (ISSUE35X refused there). A float mask past
    SMALL_HOST_FLOATS, 0/1 or additive (0/-inf), is known; random data of the same size, a mask
    with a third value, and a frozen weight that is not a mask are not."""
    from vramlab._tracer.values import SMALL_HOST_FLOATS

    windows, context = 384, 50
    assert windows * context > SMALL_HOST_FLOATS
    torch.manual_seed(0)
    lengths = torch.randint(1, context + 1, (windows,))
    mask = torch.zeros(windows, context)
    for i in range(windows):
        mask[i, -int(lengths[i]):] = 1.0
    with vramlab.trace(gpu="h100"):
        m = mask.to("cuda")
        preds = torch.empty(windows * context, 6, device="cuda")
        valid = m.reshape(-1) > 0
        assert preds[valid].shape == (int(lengths.sum()), 6)
        additive = mask.masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, 0.0).to("cuda")
        assert int((additive == 0).sum()) == int(lengths.sum())
        for unknown in (torch.randn(windows, context), mask * 2 - (mask == 0).float() * 0.5):
            with pytest.raises(UnfollowedError):
                bool((unknown.to("cuda") > 0).any())
        frozen = torch.nn.Linear(context, windows).requires_grad_(False).to("cuda")
        with pytest.raises(UnfollowedError):
            bool((frozen.weight > 0).any())


def test_large_known_values_are_kept_within_their_budget_and_small_ones_always():
    """A long document's attention mask expanded to batch x 1 x S x S floats is past the small
    shadows' limit (LED reads `(mask > 0).any().item()` of one of 256 MiB; ISSUE35R refused it).
    Large shadows are kept while those alive hold at most LARGE_BUDGET: one past it is unknown
    (its read refused), one made after another died is known again, and a small one never
    waits on the budget."""
    from vramlab._tracer import values

    side = 4096
    batch = values.LARGE_LIMIT // (side * side * 4)
    assert batch * side * side * 4 > values.OTHER_LIMIT
    fit = values.LARGE_BUDGET // values.LARGE_LIMIT
    with vramlab.trace(gpu="h100") as t:
        mask = torch.ones(batch, side, device="cuda")
        expanded = mask[:, None, None, :].expand(batch, 1, side, side).to(torch.float32) * -1.0
        assert not (expanded > 0).any().item()
        held = [torch.zeros(batch, 1, side, side, device="cuda") for _ in range(fit - 1)]
        past = torch.zeros(batch, 1, side, side, device="cuda")
        with pytest.raises(vramlab.UnfollowedError):
            bool((past != 0).any())
        assert torch.ones(8, device="cuda").sum().item() == 8
        del held[0]
        again = torch.zeros(batch, 1, side, side, device="cuda")
        assert again.sum().item() == 0


def test_generate_runs_to_its_maximum_length_exact_where_fixed_and_as_an_upper_bound_elsewhere():
    """min_new_tokens == max_new_tokens: MinNewTokensLengthLogitsProcessor masks the EOS token
    (transformers/generation/logits_process.py), so the EOS criterion cannot fire and generate
    runs to max_new_tokens; the trace knows it without the data."""
    transformers = pytest.importorskip("transformers", reason="generate needs transformers")
    config = transformers.GPT2Config(n_layer=1, n_embd=64, n_head=2, vocab_size=128, n_positions=64, bos_token_id=1, eos_token_id=1)
    with vramlab.trace() as t:
        model = transformers.GPT2LMHeadModel(config).cuda().eval()
        ids = torch.randint(0, 128, (2, 8)).cuda()
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), min_new_tokens=5, max_new_tokens=5, do_sample=False, pad_token_id=0)
    assert out.shape == (2, 13)
    assert any("generate() calls ran to their maximum length" in n for n in t.snapshot()["vramlab_notes"])
    # Without the fixed length, when the EOS token comes is the data's: traced to the maximum
    # length, and said to be an upper bound (a batch stops only once every sequence has ended).
    with vramlab.trace() as t:
        model = transformers.GPT2LMHeadModel(config).cuda().eval()
        with torch.no_grad():
            out = model.generate(input_ids=torch.randint(0, 128, (2, 8)).cuda(), max_new_tokens=5, do_sample=True, pad_token_id=0)
    assert out.shape == (2, 13)
    notes = t.snapshot()["vramlab_notes"]
    assert any("traced to their maximum length" in n and "upper bound" in n for n in notes)
    assert not any("ran to their maximum length" in n for n in notes)
    # A stopping criterion of the program's own, on values the trace does not have, still stops.

    class StopOnToken(transformers.StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            return bool((input_ids[:, -1] == 7).all())

    with pytest.raises(UnfollowedError, match="reads values back"):
        with vramlab.trace():
            model = transformers.GPT2LMHeadModel(config).cuda().eval()
            with torch.no_grad():
                model.generate(input_ids=torch.randint(0, 128, (2, 8)).cuda(), max_new_tokens=5, do_sample=False, pad_token_id=0, stopping_criteria=transformers.StoppingCriteriaList([StopOnToken()]))


def test_trainers_logged_values_are_answered_nan_and_its_process_is_not_a_launched_rank(monkeypatch):
    """Hugging Face's Trainer reads the loss and the gradient norm back only to log them
    (transformers/trainer.py: _maybe_log_save_evaluate, _finalize_training): answered NaN, and said.
    A plain trace sets no torchrun variables: with LOCAL_RANK set, accelerate takes the process for
    a distributed one and Trainer wraps the model in DistributedDataParallel, which the GPU's plain
    run does not."""
    transformers = pytest.importorskip("transformers", reason="Trainer needs transformers")
    pytest.importorskip("accelerate", reason="Trainer needs accelerate")
    import tempfile

    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)

    class Tokens(torch.utils.data.Dataset):
        def __len__(self):
            return 16

        def __getitem__(self, i):
            ids = torch.randint(0, 128, (16,))
            return {"input_ids": ids, "labels": ids}

    config = transformers.GPT2Config(n_layer=1, n_embd=64, n_head=2, vocab_size=128, n_positions=64)
    with vramlab.trace() as t:
        # Made inside the trace: TrainingArguments picks its device when made (cuda, here).
        args = transformers.TrainingArguments(
            output_dir=tempfile.mkdtemp(), per_device_train_batch_size=4, max_steps=2, logging_steps=1, save_strategy="no",
            report_to="none", disable_tqdm=True,
        )
        seen = {name: os.environ.get(name) for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
        trainer = transformers.Trainer(model=transformers.GPT2LMHeadModel(config), args=args, train_dataset=Tokens())
        output = trainer.train()
    assert seen == {"RANK": None, "LOCAL_RANK": None, "WORLD_SIZE": None}
    assert not isinstance(trainer.model_wrapped, torch.nn.parallel.DistributedDataParallel)
    assert output.training_loss != output.training_loss  # NaN: the trace has no loss to report
    assert any("Trainer reads only to log" in n for n in t.snapshot()["vramlab_notes"])
    # A traced rank of a launched job has them, as torchrun sets them.
    with vramlab.trace(world_size=2, rank=1):
        assert (os.environ.get("RANK"), os.environ.get("LOCAL_RANK"), os.environ.get("WORLD_SIZE")) == ("1", "1", "2")


@pytest.mark.parametrize("early_stopping", [False, True, "never"])
def test_beam_search_of_a_fixed_length_runs_to_its_maximum_length(early_stopping):
    """With the EOS token masked, only the length criterion finishes a beam, every beam at the
    last step: the loop's test is known, and so is the length `_beam_search` crops its output to
    (every returned beam is full length). Whatever early_stopping says, nothing finishes sooner."""
    transformers = pytest.importorskip("transformers", reason="generate needs transformers")
    config = transformers.GPT2Config(n_layer=1, n_embd=64, n_head=2, vocab_size=128, n_positions=64, bos_token_id=1, eos_token_id=1)
    with vramlab.trace() as t:
        model = transformers.GPT2LMHeadModel(config).cuda().eval()
        ids = torch.randint(2, 128, (2, 8)).cuda()
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), num_beams=3, num_return_sequences=2, early_stopping=early_stopping, min_new_tokens=5, max_new_tokens=5, do_sample=False, pad_token_id=0)
    assert out.shape == (4, 13)
    notes = t.snapshot()["vramlab_notes"]
    assert sum("beam searches ran to their maximum length" in n for n in notes) == 1 and notes[[("beam searches" in n) for n in notes].index(True)].startswith("1 ")
    # A length the data decides: traced to the maximum, and said to be an upper bound.
    with vramlab.trace() as t:
        model = transformers.GPT2LMHeadModel(config).cuda().eval()
        with torch.no_grad():
            out = model.generate(input_ids=torch.randint(2, 128, (2, 8)).cuda(), num_beams=3, early_stopping=early_stopping, max_new_tokens=5, do_sample=False, pad_token_id=0)
    assert out.shape == (2, 13)
    notes = t.snapshot()["vramlab_notes"]
    assert any("beam searches were traced to their maximum length, an upper bound" in n for n in notes)
    assert not any("beam searches ran to their maximum length" in n for n in notes)


def test_a_host_running_short_of_memory_stops_the_program_in_one_line(monkeypatch):
    """A model built on the CPU can fill the host before .cuda() moves it; the operating system
    would kill the trace with no message. Once what is left falls below the reserve, the next
    PyTorch call stops the program, in one line, and the trace up to there is kept."""
    from vramlab._tracer import host

    left = {"bytes": 8 << 30}
    monkeypatch.setattr(host, "memory_left", lambda: (left["bytes"], 16 << 30))
    with pytest.raises(UnfollowedError) as err:
        with vramlab.trace() as t:
            kept = torch.zeros(1024, device="cuda")
            weights = []
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                weights.append(torch.empty(16))  # the host's memory, spent
                left["bytes"] = 100 << 20
    message = str(err.value)
    assert "host memory ran short (0.1 GiB left of 16.0 GiB" in message and 'with torch.device("cuda")' in message
    assert "test_trace_rules.py:" in message and "\n" not in message
    assert t.peak_allocated == kept.numel() * 4 and t.stopped.startswith("empty at ")
    # Plenty left: nothing stops.
    left["bytes"] = 8 << 30
    with vramlab.trace():
        for _ in range(200):
            torch.empty(16)
        time.sleep(4 * host.POLL_SECONDS)
        torch.zeros(4, device="cuda")


@pytest.mark.usefixtures("as_2_11")
def test_inference_mode_allocates_what_no_grad_does():
    """Under inference_mode composite operators reach the dispatch mode whole (autograd's keys are
    off); the GPU still runs their inner operators: linear's addmm with its cuBLAS and cuBLASLt
    workspaces, layer_norm's mean and rstd. The trace runs them too, and allocates alike."""

    def program(off):
        with vramlab.trace() as t:
            block = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.LayerNorm(512)).cuda().to(torch.bfloat16)
            with off():
                block(torch.randn(16, 128, 512, device="cuda", dtype=torch.bfloat16)).softmax(-1)
        return allocations(t.snapshot())

    from vramlab._tracer.modes import runs_as_composite_on_cuda

    aten = torch.ops.aten
    assert runs_as_composite_on_cuda(torch, aten.linear.default) and runs_as_composite_on_cuda(torch, aten.layer_norm.default)
    # A CUDA kernel of its own wins over the composite (kept for double backward).
    assert not runs_as_composite_on_cuda(torch, aten.silu_backward.default)
    under_inference = program(torch.inference_mode)
    assert under_inference == program(torch.no_grad)
    assert ("alloc", 32 << 20) in under_inference and ("alloc", 16 * 128 * 4) in under_inference


def test_what_cusolver_and_cufft_allocate_is_said_not_to_be_traced():
    """Their buffers are the libraries' choice per shape: the snapshot says the figure lacks them."""
    with vramlab.trace() as t:
        a = torch.randn(64, 64, device="cuda")
        torch.linalg.qr(a)
        torch.linalg.svd(a)
        torch.fft.rfft(torch.randn(8, 4096, device="cuda"))
    notes = t.snapshot()["vramlab_notes"]
    assert any(n.startswith("2 linear-algebra calls") and "cuSOLVER" in n for n in notes), notes
    assert any(n.startswith("1 FFTs are traced without cuFFT") for n in notes), notes


def test_nan_and_infinity_checks_are_answered_as_a_healthy_step():
    """A loop that skips a step on a NaN loss (Hugging Face's Trainer asks it of every loss) runs
    without answer_reads: the checks are answered as a healthy step's, and the snapshot says so.
    Other reads of unknown values still stop."""
    with vramlab.trace() as t:
        model = torch.nn.Linear(64, 1).cuda()
        skipped = 0
        for _ in range(2):
            loss = model(torch.randn(8, 64, device="cuda")).pow(2).mean()
            if torch.isnan(loss) or torch.isinf(loss) or not torch.isfinite(loss).all():
                skipped += 1
                continue
            loss.backward()
    assert skipped == 0 and model.weight.grad is not None
    assert any(n.startswith("6 checks for NaN or infinity") for n in t.snapshot()["vramlab_notes"])
    with pytest.raises(UnfollowedError, match="reads values back"):
        with vramlab.trace():
            bool(torch.randn(4, device="cuda").sum() > 0)


def test_settings_pytorch_refuses_stop_the_trace_in_its_words(monkeypatch):
    monkeypatch.setenv("PYTORCH_ALLOC_CONF", "banana:1")
    with pytest.raises(UnfollowedError, match="Unrecognized key 'banana'") as err:
        vramlab.trace()
    assert "\n" not in str(err.value)


def test_torch_compile_is_traced_eagerly_and_said():
    with vramlab.trace() as t:
        model = torch.compile(torch.nn.Linear(64, 64).cuda())
        model(torch.randn(8, 64, device="cuda"))
        decorated = torch.compile(mode="max-autotune")(lambda x: x * 2)
        decorated(torch.randn(8, device="cuda"))
    assert any("torch.compile calls were traced as eager" in n for n in t.snapshot()["vramlab_notes"])


def test_a_compiled_module_is_what_torch_compile_returns_run_eagerly():
    """torch.compile of a module returns an OptimizedModule holding it as `_orig_mod`, whose
    state_dict keys carry that prefix: nanoGPT unwraps `model.module._orig_mod` after DDP (issue
    36's eleventh group stopped there while compile returned the module itself)."""
    with vramlab.trace() as t:
        linear = torch.nn.Linear(64, 64).cuda()
        model = torch.compile(linear)
        assert model._orig_mod is linear and list(model.state_dict()) == ["_orig_mod.weight", "_orig_mod.bias"]
        model(torch.randn(8, 64, device="cuda")).sum().backward()
        assert linear.weight.grad is not None
    sizes = [e["size"] for e in t.snapshot()["device_traces"][0] if e["action"] == "alloc"]
    assert 8 * 64 * 4 in sizes


# Issue 38: the questions users bring -------------------------------------------------------------


def test_a_sweep_answers_the_largest_batch_that_fits_in_one_line(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import os, torch\n"
        "batch = int(os.environ['BATCH'])\n"
        "model = torch.nn.Linear(2048, 2048).cuda()\n"
        "model(torch.randn(batch, 2048, device='cuda')).sum().backward()\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "vramlab.trace", "--sweep", "BATCH=64,4096,65536,1048576", "--capacity", "2 GiB", "--out", str(tmp_path / "sweep"), str(script)],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip()
    assert "\n" not in line and line.startswith("the largest BATCH that fits under 2,048 MiB")
    assert "BATCH=65536, with" in line and "BATCH=1048576 does not fit" in line
    assert sorted(p.name for p in (tmp_path / "sweep").iterdir()) == ["BATCH=1048576.pickle", "BATCH=4096.pickle", "BATCH=64.pickle", "BATCH=65536.pickle"]


def traced_steps(steps, growing=False):
    with vramlab.trace() as t:
        model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
        opt = torch.optim.AdamW(model.parameters())
        for i in range(steps):
            model(torch.randn(256 * (i + 1 if growing else 1), 1024, device="cuda")).sum().backward()
            opt.step()
            opt.zero_grad()
    return t


def test_steady_state_says_whether_to_trace_more_steps():
    """Issue 38: "will it fit" depends on the steps traced; the last traced step is steady where
    it needed no more memory than the one before, else the answer says to trace more."""
    assert traced_steps(1).steady()["advice"].startswith("one training step traced")
    steady = traced_steps(3).steady()
    assert steady["steady"] is True and steady["steps"] == 3 and steady["peaks_reserved"][-1] == steady["peaks_reserved"][-2]
    growing = traced_steps(4, growing=True).steady()
    assert growing["steady"] is False and "trace more steps (at least 6)" in growing["advice"]
    # Allocated grows with the batch; reserved may absorb a step in cached segments (2.15's
    # per-call cuBLAS workspaces leave it flat at the last step here).
    assert growing["peaks_allocated"] == sorted(growing["peaks_allocated"]) and growing["peaks_allocated"][-1] > growing["peaks_allocated"][-2]
    # Under a cap, what the setting needs to fit (tune's "fits at every cap from") is compared.
    capped = traced_steps(3).steady(capacity=1 << 30)
    # (at most the uncapped peak reserved: under that cap nothing binds).
    assert capped["steady"] is True and 0 < capped["peaks_reserved"][-1] <= steady["peaks_reserved"][-1]


def test_a_sweep_whose_largest_value_outgrows_the_gpu_still_answers():
    """A value whose tensors alive outgrow the GPU stops its trace with PyTorch's
    OutOfMemoryError: that value fits under no setting, which is an answer, not an error."""

    def program(gib):
        x = torch.empty(gib, 1 << 30, device="cuda", dtype=torch.uint8)
        x + 1

    result = vramlab.sweep(program, [8, 16, 200], gpu="h100", name="GIB")
    assert [(p["value"], p["fits"]) for p in result["points"]] == [(8, True), (16, True), (200, False)]
    assert result["answer"].endswith("GIB=16, with PyTorch's default settings (it needs 32,768 MiB); at GIB=200 the tensors alive outgrow the GPU's memory")


def test_a_sweep_from_python_and_a_trace_object_replayed_whole():
    def step(batch):
        torch.nn.Linear(1024, 1024).cuda()(torch.randn(batch, 1024, device="cuda")).sum().backward()

    answered = vramlab.sweep(step, [16, 1 << 22], capacity=1 << 30, name="batch")
    assert answered["answer"].startswith("the largest batch that fits") and "batch=16" in answered["answer"]
    with vramlab.trace() as t:
        step(8)
    assert "peak allocated" in repr(t)
    assert vramlab.replay(t)["results"][0]["peak_allocated_bytes"] == vramlab.replay(t.snapshot())["results"][0]["peak_allocated_bytes"]


def test_a_second_tracer_on_the_same_out_writes_beside_it(tmp_path):
    """One writer per path (issue 40): while one tracer runs, a second on the same --out writes
    OUT.PID and says so; the first's snapshot is whole."""
    slow = tmp_path / "slow.py"
    slow.write_text("import time, torch\nx = torch.zeros(1000, device='cuda')\ntime.sleep(8)\n")
    quick = tmp_path / "quick.py"
    quick.write_text("import torch\ny = torch.zeros(3000, device='cuda')\n")
    first = subprocess.Popen([sys.executable, "-m", "vramlab.trace", "--out", "snap.pickle", str(slow)], cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    import time

    deadline = time.time() + 60
    while not (tmp_path / ".snap.pickle.vramlab-lock").exists() and time.time() < deadline:
        time.sleep(0.1)
    second = subprocess.run([sys.executable, "-m", "vramlab.trace", "--out", "snap.pickle", str(quick)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    first.communicate(timeout=300)
    assert first.returncode == 0 and second.returncode == 0
    assert "another vramlab.trace is writing" in second.stderr
    beside = [p for p in tmp_path.iterdir() if p.name.startswith("snap.pickle.")]
    assert len(beside) == 1
    with open(beside[0], "rb") as f:
        assert ("alloc", 12000) in allocations(pickle.load(f))
    with open(tmp_path / "snap.pickle", "rb") as f:
        assert ("alloc", 4000) in allocations(pickle.load(f))
    assert not (tmp_path / ".snap.pickle.vramlab-lock").exists()


# Where torch 2.15's rules differ from 2.11's (read from 2.15.0+cu132's wheel) -------------------


@pytest.mark.parametrize("cc, large_211, large_215", [((9, 0), True, True), ((10, 0), False, True), ((12, 0), False, True), ((8, 9), False, False)])
def test_the_cublas_default_by_release(cc, large_211, large_215):
    """parseChosenWorkspaceSize: 2.11 compares {major, minor} with {9, 0}; 2.15 tests major - 9 < 4
    (PR #175344, #189312)."""
    size = lambda release: cublas.workspace_size(release, *cc, {})  # noqa: E731
    assert size((2, 11)) == (cublas.LARGE_WORKSPACE if large_211 else cublas.SMALL_WORKSPACE)
    assert size((2, 15)) == (cublas.LARGE_WORKSPACE if large_215 else cublas.SMALL_WORKSPACE)
    assert size((2, 13)) == size((2, 11))  # releases not read take the nearest earlier rule


def test_cublas_workspaces_live_per_call_in_2_15_unless_cached():
    """getCurrentCUDABlasHandleWithWorkspace (2.15, PR #194311): each call allocates and frees the
    workspace unless TORCH_CUBLAS_WORKSPACE_CACHE is true; cached, cuBLASLt shares it unless
    TORCH_CUBLASLT_UNIFIED_WORKSPACE is false. 2.11 keeps them per handle and clamps cuBLASLt's."""
    plan = cublas.Plan((2, 15), 9, 0, {})
    assert plan.per_call and plan.lt_size == cublas.CUBLASLT_WORKSPACE
    cached = cublas.Plan((2, 15), 9, 0, {"TORCH_CUBLAS_WORKSPACE_CACHE": "1"})
    assert not cached.per_call and cached.lt_shares and cached.lt_size == 0
    as_211 = cublas.Plan((2, 15), 9, 0, {"TORCH_CUBLAS_WORKSPACE_CACHE": "1", "TORCH_CUBLASLT_UNIFIED_WORKSPACE": "0"})
    assert not as_211.lt_shares and as_211.lt_size == cublas.CUBLASLT_WORKSPACE
    old = cublas.Plan((2, 11), 9, 0, {"CUBLAS_WORKSPACE_CONFIG": ":16:8"})
    assert not old.per_call and old.lt_size == 16 * 1024 * 8  # clamped to cuBLAS's


def test_attention_prefers_cudnn_by_release():
    """check_prefer_cudnn_attention: 2.11 asks sm90, sm100 and sm103 (minor 0 or 3); 2.15 any 9.x
    or 10.x."""
    from vramlab._tracer.rules import attention

    assert attention.priority(10, 91900, 1, (2, 11))[0] == "flash"
    assert attention.priority(10, 92600, 1, (2, 15))[0] == "cudnn"
    assert attention.priority(9, 91900, 0, (2, 11))[0] == "cudnn"
    assert attention.priority(8, 92600, 0, (2, 15))[0] == "flash"


def test_autocast_lists_by_release():
    """autocast_mode.h puts rms_norm on the float32 list from 2.12 (2.12.1, 2.13.0, 2.14.1 and
    2.15.0's headers); 2.15 registers linalg_matrix_sqrth there too."""
    from vramlab._tracer.rules import autocast

    assert "rms_norm" not in autocast.policies((2, 11))
    assert autocast.policies((2, 15))["rms_norm"] == autocast.FP32
    assert autocast.policies((2, 12))["rms_norm"] == autocast.FP32
    assert "linalg_matrix_sqrth" not in autocast.policies((2, 13))


def test_2_15_allocates_the_cublas_workspace_per_matmul(monkeypatch):
    if RELEASE < (2, 15):
        pytest.skip(f"torch {torch.__version__} keeps cuBLAS workspaces per handle (2.15 allocates them per call)")
    monkeypatch.delenv("TORCH_CUBLAS_WORKSPACE_CACHE", raising=False)
    with vramlab.trace() as t:
        a = torch.randn(64, 64, device="cuda")
        a @ a
        a @ a
    events = allocations(t.snapshot())
    assert events.count(("alloc", cublas.LARGE_WORKSPACE)) == 2 and events.count(("free_completed", cublas.LARGE_WORKSPACE)) == 2


def test_a_convolutions_output_is_channels_last_where_cudnn_makes_it_so():
    """cudnn_conv_suggest_memory_format (ConvUtils.h): channels-last input or weight gives a
    channels-last output and input gradient; the meta kernel makes them contiguous."""
    with vramlab.trace():
        conv = torch.nn.Conv2d(3, 16, 3).cuda().to(memory_format=torch.channels_last)
        x = torch.randn(2, 3, 16, 16, device="cuda").to(memory_format=torch.channels_last).requires_grad_()
        y = conv(x)
        y.sum().backward()
        assert y.is_contiguous(memory_format=torch.channels_last) and not y.is_contiguous()
        assert x.grad.is_contiguous(memory_format=torch.channels_last)
        plain = torch.nn.Conv2d(3, 16, 3).cuda()(torch.randn(2, 3, 16, 16, device="cuda"))
        assert plain.is_contiguous()


def test_misuse_gets_one_line():
    with pytest.raises(TypeError, match="gpu must be"):
        vramlab.trace(gpu=123)
    with pytest.raises(TypeError, match="answer_reads must be a number"):
        vramlab.trace(answer_reads="abc")
    with vramlab.trace() as outer:
        torch.zeros(8, device="cuda")
        with pytest.raises(UnfollowedError, match="do not nest"):
            with vramlab.trace():
                pass
    assert ("alloc", 32) in allocations(outer.snapshot())


# Copies kernels make of inputs not laid out as they need -----------------------------------


def test_layer_norm_copies_a_strided_input_before_its_outputs_and_frees_it_on_return():
    """layer_norm_kernel.cu: layer_norm_cuda and layer_norm_backward_cuda take
    X = input.expect_contiguous() before making their outputs (Whisper's permuted conv output)."""
    with vramlab.trace(gpu="h100") as t:
        norm = torch.nn.LayerNorm(256).cuda()
        x = torch.randn(4, 256, 750, device="cuda", requires_grad=True)
        start = len(allocations(t.snapshot()))
        norm(x.permute(0, 2, 1)).sum().backward()
    events = allocations(t.snapshot())[start:]
    full, rows = 4 * 750 * 256 * 4, 4 * 750 * 4
    assert events[:5] == [("alloc", full), ("alloc", full), ("alloc", rows), ("alloc", rows), ("free_completed", full)]
    backward = events.index(("alloc", full), 5)
    # The copy of X, dX, dgamma, dbeta, the kernel's copy of the expanded dY, then X's copy freed.
    assert events[backward : backward + 7] == [
        ("alloc", full), ("alloc", full), ("alloc", 1024), ("alloc", 1024),
        ("alloc", full), ("free_completed", full), ("free_completed", full),
    ]


def test_a_convolution_copies_a_permuted_gradient_before_its_backward():
    """ConvShared.cpp, cudnn_convolution_backward: grad_output.to(input.suggest_memory_format())
    comes first; Convolution.cpp passes input.contiguous(format) to the backend."""
    with vramlab.trace(gpu="h100") as t:
        conv = torch.nn.Conv1d(80, 256, 3, padding=1).cuda()
        x = torch.randn(4, 80, 300, device="cuda", requires_grad=True)
        y = conv(x).permute(0, 2, 1)
        start = len(allocations(t.snapshot()))
        (y * 2).sum().backward()
    events = allocations(t.snapshot())[start:]
    grad, grad_input = 4 * 300 * 256 * 4, 4 * 80 * 300 * 4
    at = events.index(("alloc", grad_input))
    assert events[at - 1] == ("alloc", grad) and ("free_completed", grad) in events[at:]


# Flash attention (issue 38, the walk's first finding) -------------------------------------------
#
# Read from PyTorch's sources (flash_api.cpp at pytorch/pytorch 03b7c19; attention.cu,
# attention_backward.cu), not measured on a GPU: the GPUs that run flash by default (A100, RTX
# cards, L4) are not lent here, and the H100's torch 2.11 runs cuDNN attention first.


def _flash_events(gpu, b, h, lq, d, hk=None, lk=None, dropout=0.0, grad_layout="bhsd", causal=False):
    """(forward, backward) events of one SDPA call traced for `gpu` under bf16 autocast, the
    query made as Hugging Face makes it ([B, L, H, D] viewed as [B, H, L, D])."""
    hk, lk = hk or h, lk or lq
    with vramlab.trace(gpu=gpu) as t:
        q = torch.randn(b, lq, h, d, device="cuda", requires_grad=True)
        k = torch.randn(b, hk, lk, d, device="cuda", requires_grad=True)
        v = torch.randn(b, hk, lk, d, device="cuda", requires_grad=True)
        grad = torch.randn(b, h, lq, d, device="cuda", dtype=torch.bfloat16) if grad_layout == "bhsd" else torch.randn(b, lq, h, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            qh, kh, vh = q.to(torch.bfloat16).transpose(1, 2), k.to(torch.bfloat16), v.to(torch.bfloat16)
            start = len(t.record.events)
            out = torch.nn.functional.scaled_dot_product_attention(qh, kh, vh, is_causal=causal, dropout_p=dropout, enable_gqa=hk != h)
            middle = len(t.record.events)
        out.backward(grad)
        end = len(t.record.events)
    events = [(e["action"][0], e["size"]) for e in t.record.events if e["action"] != "free_completed"]
    keep = lambda lo, hi: [(e["action"][0], e["size"]) for e in t.record.events[lo:hi] if e["action"] != "free_completed"]
    return keep(start, middle), keep(middle, end), t


def test_flash_attention_is_traced_where_the_gpu_runs_it():
    """The walk's GPT-2 under bf16 autocast on an A100 or RTX 4090 stopped at flash attention;
    it is followed now: mha_fwd's out (empty_like q) and softmax_lse [B, H, Lq] float32, then
    rng_state (uint64[2]) and _unused (a uint64), made without dropout too; the backward makes
    grad_out contiguous in [B, L, H, D] where it is not (attention_backward.cu), then dq, dk, dv,
    softmax_d [B, H, Lq rounded to 128] and dq_accum [B, Lq rounded to 128, H, D rounded to 32]
    float32, freed in the order the C++ scopes end."""
    b, h, lq, d = 2, 4, 200, 64
    qkv = b * h * lq * d * 2
    for gpu in ("a100-80gb", "rtx-4090", "l4"):
        forward, backward, t = _flash_events(gpu, b, h, lq, d, causal=True)
        assert forward == [("a", qkv), ("a", b * h * lq * 4), ("a", 16), ("a", 8)], (gpu, forward)
        softmax_d, dq_accum = 4 * b * h * 256, 4 * b * 256 * h * 64
        # grad given as [B, H, L, D] contiguous: its [B, L, H, D] view is not, so a copy first.
        assert backward[:6] == [("a", qkv), ("a", qkv), ("a", qkv), ("a", qkv), ("a", softmax_d), ("a", dq_accum)], (gpu, backward)
        assert backward[6:9] == [("f", dq_accum), ("f", softmax_d), ("f", qkv)], (gpu, backward)
        notes = t.snapshot()["vramlab_notes"]
        assert any(n.startswith("1 flash attention calls: their allocations are derived from PyTorch's sources") and "not on a GPU that runs flash attention by default" in n for n in notes)
    # A gradient already in [B, L, H, D] order is not copied.
    _, backward, _ = _flash_events("a100-80gb", b, h, lq, d, grad_layout="bshd")
    assert backward[:5] == [("a", qkv), ("a", qkv), ("a", qkv), ("a", 4 * b * h * 256), ("a", 4 * b * 256 * h * 64)]


def test_flash_attention_splits_short_queries_over_long_keys():
    """set_params_splitkv: without dropout, where B*H*ceil(Lq/64) blocks fill under 80% of twice
    the SMs, num_splits_heuristic splits the keys and mha_fwd holds softmax_lse_accum
    [splits, B, H, Lq] and out_accum [splits, B, H, Lq, D rounded] float32 until it returns. On
    the A100 (108 SMs) B=1, H=2, Lq=64, Lk=4096, D=64 runs 16 splits; with dropout, none."""
    from vramlab._tracer.rules import attention

    assert attention.flash_num_splits(2, 216, 16, 128) == 16
    assert attention.flash_num_splits(1536, 216, 4, 128) == 1
    forward, _, _ = _flash_events("a100-80gb", 1, 2, 64, 64, lk=4096)
    lse_accum, out_accum = 4 * 16 * 2 * 64, 4 * 16 * 2 * 64 * 64
    assert forward == [("a", 2 * 64 * 64 * 2), ("a", 2 * 64 * 4), ("a", lse_accum), ("a", out_accum), ("a", 16), ("a", 8), ("f", lse_accum), ("f", out_accum)], forward
    # Dropout: no split; a second rng_state replaces the first (flash_api.cpp, p_dropout > 0).
    forward, _, _ = _flash_events("a100-80gb", 1, 2, 64, 64, lk=4096, dropout=0.1)
    assert forward[2:] == [("a", 16), ("a", 8), ("a", 16), ("f", 16)], forward


def test_flash_attention_pads_heads_and_expands_grouped_keys():
    """attention.cpp pads a head size that is not a multiple of 8 (pad_last_dim<8>: a copy of q,
    k and v) and slices the output back; mha_bwd sums grouped key heads from dk_expanded and
    dv_expanded [B, Lk, H, D]; deterministic algorithms make dq_accum ceil(SMs / (B*H)) times
    larger."""
    b, h, lq, d = 2, 4, 128, 60
    forward, _, _ = _flash_events("a100-80gb", b, h, lq, d)
    padded = b * h * lq * 64 * 2
    assert forward[:3] == [("a", padded)] * 3 and forward[3:5] == [("a", padded), ("a", b * h * lq * 4)], forward
    _, backward, _ = _flash_events("a100-80gb", 2, 8, 128, 64, hk=2)
    q_bytes, kv_bytes, softmax_d, dq_accum = 2 * 8 * 128 * 64 * 2, 2 * 2 * 128 * 64 * 2, 4 * 2 * 8 * 128, 4 * 2 * 128 * 8 * 64
    expanded = 2 * 128 * 8 * 64 * 2  # [B, Lk, H, D] bf16
    assert backward[:13] == [
        ("a", q_bytes), ("a", q_bytes), ("a", kv_bytes), ("a", kv_bytes),  # grad copy, dq, dk, dv
        ("a", softmax_d), ("a", dq_accum), ("a", expanded), ("a", expanded),
        ("f", expanded), ("f", expanded), ("f", dq_accum), ("f", softmax_d), ("f", q_bytes),
    ], backward
    torch.use_deterministic_algorithms(True)
    try:
        _, backward, _ = _flash_events("a100-80gb", 2, 4, 128, 64)
    finally:
        torch.use_deterministic_algorithms(False)
    assert ("a", 4 * 2 * 128 * 4 * 64 * -(-108 // 8)) in backward, backward


def test_flash_attention_on_the_h100_only_where_cudnn_is_off():
    """sdp_utils.cpp: torch 2.11 puts cuDNN first on sm90 (cuDNN 9.19 > 9.15), so the H100 runs
    flash for these arguments only where cuDNN attention is turned off or refuses."""
    forward, _, _ = _flash_events("h100", 2, 4, 200, 64)
    assert ("a", 256) in forward  # cuDNN's forward workspace
    torch.backends.cuda.enable_cudnn_sdp(False)
    try:
        forward, _, t = _flash_events("h100", 2, 4, 200, 64)
    finally:
        torch.backends.cuda.enable_cudnn_sdp(True)
    assert forward == [("a", 2 * 4 * 200 * 64 * 2), ("a", 2 * 4 * 200 * 4), ("a", 16), ("a", 8)]


@pytest.mark.usefixtures("as_2_11")
def test_flash_attention_allocates_as_the_h100_did_with_flash_forced():
    """rules/attention.py's flash rule, written from flash_api.cpp before the measurement, against
    the 14 cases measured on an H100 with the flash backend forced
    (reports/reference/h100/flash-attention), allocation by allocation."""
    import importlib.util
    import json

    root = pathlib.Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "scripts"))
    spec = importlib.util.spec_from_file_location("compare_flash_attention", root / "scripts/compare_flash_attention.py")
    compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare)
    cases = [json.loads(line) for line in (root / "reports/reference/h100/flash-attention/flash-h100.jsonl").read_text().splitlines()]
    assert len(cases) == 14
    for case in cases:
        forward, backward = compare.traced(case)
        assert forward == [e[:2] for e in case["forward"]], case
        assert backward == [e[:2] for e in case["backward"]], case


def test_rms_norm_allocates_what_the_fused_cuda_kernel_does():
    """nn.RMSNorm on CUDA runs _fused_rms_norm (its output, then one float32 rstd per row) and the
    fused backward (the input's gradient, then the weight's), not the float32 decomposition the
    meta device would run (measured on two H200s: reports/reference/h200x2/distributed-x2e,
    fsdp2_prefetch_bf16); where autograd is off, the same two outputs."""
    with vramlab.trace() as t:
        norm = torch.nn.RMSNorm(768).cuda().to(torch.bfloat16)
        x = torch.randn(4, 512, 768, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        start = len(allocations(t.snapshot()))
        y = norm(x)
        forward = allocations(t.snapshot())[start:]
        assert y.dtype == torch.bfloat16
        y.backward(torch.ones_like(y))
        backward = allocations(t.snapshot())[start + len(forward) + 1:]
        assert x.grad.shape == x.shape and norm.weight.grad.shape == (768,)
        with torch.no_grad():
            before = len(allocations(t.snapshot()))
            norm(x)
            inference = allocations(t.snapshot())[before:]
    activation = 4 * 512 * 768 * 2
    assert forward == [("alloc", activation), ("alloc", 4 * 512 * 4)], forward
    assert [a for a in backward if a[0] == "alloc"][:2] == [("alloc", activation), ("alloc", 768 * 2)], backward
    assert [a for a in inference if a[0] == "alloc"] == [("alloc", activation), ("alloc", 4 * 512 * 4)], inference


def _reduction_rows():
    """Every tenth call of the draw the rules were mended on (seed 11), of a second draw made after
    them (seed 12, held out: 400 of 400 as traced), and of variances and standard deviations
    (seed 13, Welford's rule held out: 400 of 400)."""
    import gzip
    import json

    rows = []
    for name in ("reductions/reductions-seed11.jsonl.gz", "welford-and-channels-last-3d/reductions-seed12.jsonl.gz", "welford-and-channels-last-3d/moments-seed13.jsonl.gz"):
        with gzip.open(pathlib.Path(__file__).resolve().parents[2] / "reports/reference/h200" / name, "rt") as f:
            rows += [r for r in (json.loads(line) for line in f) if "error" not in r][::10]
    return rows


@pytest.mark.parametrize("row", _reduction_rows(), ids=lambda r: f"{r['op']}-{r['dtype']}-{'x'.join(map(str, r['shape']))}-{r['dims']}-{'t' if r['permute'] else 'c'}")
def test_reductions_stage_as_the_h200_did(row):
    """gpu_reduce_kernel's staging buffer and semaphores (rules/kernels.py) for the extrema, all/any,
    sums and Welford's moments, and min/max's contiguous copy of a strided input, against the allocations the H200
    made for the same call (reports/reference/h200/reductions)."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))
    import measure_reduction_scratch as measured

    with vramlab.trace(gpu="h200") as t:
        x = measured.make_input(row["shape"], row["dtype"], row["permute"])
        call = measured.call_of(row["op"], x, row["dims"])
        start = len(t.snapshot()["device_traces"][0])
        call()
    made = [e["size"] for e in t.snapshot()["device_traces"][0][start:] if e["action"] == "alloc"]
    assert made == [e[1] for e in row["events"] if e[0] == "a"]


def test_a_value_only_logged_is_a_placeholder_and_a_decision_on_it_stops_the_trace():
    """unknown.py: loss.item() in a log line is handed over as '?'; arithmetic on it (a ratio of two
    norms, a running mean) stays unknown without computing on its stand-in 0.0 (which divided by
    zero in ISSUE35S's deep-equilibrium net); a comparison stops the trace naming both lines."""
    with vramlab.trace(gpu="h100") as t:
        norm = torch.randn(16, device="cuda").norm()
        ratio = norm.item() / (1e-5 + norm.item())
        line = f"{ratio:.3f} {3 / norm.item()} {sum([norm.item(), 1.0]) / 2} {-norm.item()} {abs(norm.item()) ** 2}"
        with pytest.raises(UnfollowedError, match=r"a comparison \(lt\) at .*test_trace_rules.py:\d+: the program decides on a value it read back at .*test_trace_rules.py:\d+"):
            if ratio < 1e-3:
                pass
        with pytest.raises(UnfollowedError, match="an integer made of it"):
            range(int(norm.item()))
    assert line == "? ? ? ? ?"
    assert any(n.startswith("7 values read back") for n in t.snapshot()["vramlab_notes"])


def test_min_max_and_math_of_a_placeholder_are_placeholders():
    """unknown.python_paths: a perplexity logged as math.exp(min(loss.item(), 30)) prints '?' (not
    exp of the stand-in 0.0, 1.0), min and max of plain values answer as the builtins do, and a
    decision on a placeholder's minimum still stops the trace."""
    import math

    with vramlab.trace(gpu="h100"):
        loss = torch.randn(8, device="cuda").sum().item()
        count = (torch.randn(8, device="cuda") > 0).sum().item()
        line = f"{math.exp(min(loss, 30)):.1f} {max([loss, 1.0])} {math.log(abs(loss))} {min(count, 3)} {max(count, 2.5)}"
        assert (min(3, 4), max("ab", "b"), min((), default=5), max([2, 7], key=lambda v: -v)) == (3, "b", 5, 2)
        with pytest.raises(UnfollowedError, match=r"a comparison \(gt\) at .*test_trace_rules.py:\d+"):
            if min(loss, 30) > 2:
                pass
    assert line == "? ? ? ? ?"
    import builtins

    # Python's own again once the trace is over.
    assert getattr(builtins.min, "__self__", None) is builtins and getattr(math.exp, "__self__", None) is math


def test_a_count_read_back_is_a_placeholder_until_it_becomes_a_size():
    """unknown.UnknownInt: an accuracy's count (an integer .item()) prints as '?' and stays unknown
    through sums and divisions; used as a size, an index or in a comparison it stops the trace at
    that line. A boolean read is a decision and stops the trace where it is read."""
    with vramlab.trace(gpu="h200"):
        logits, labels = torch.randn(64, 10, device="cuda"), torch.randint(0, 10, (64,), device="cuda")
        correct = 0
        for _ in range(2):
            correct += (logits.argmax(1) == labels).sum().item()
        line = f"{100.0 * correct / 128:.2f} {correct} {repr((logits.argmax(1) == labels).sum())}"
        with torch.inference_mode():
            # Where autograd is off, .item() reaches the dispatch mode whole (ISSUE35T's Slot Attention).
            line += f" {logits.mean().item():.3f} {(logits > 0).sum().item()}"
        with pytest.raises(UnfollowedError, match="a size, an index or a range made of it"):
            range(correct)
        with pytest.raises(UnfollowedError, match=r"a comparison \(gt\)"):
            correct > 3
        with pytest.raises(UnfollowedError, match="reads values back"):
            (logits > 0).any().item()
    assert line == "? ? tensor(?, device='cuda:0') ? ?"
    with pytest.raises(UnfollowedError, match="an integer the program read back was used as a size"):
        with vramlab.trace(gpu="h200"):
            torch.empty(torch.randint(0, 10, (1,), device="cuda").item(), device="cuda")


def test_repeat_interleave_by_an_integer_reads_no_value():
    """Repeat.cpp: an integer count is an expand and a contiguous clone, one allocation (generate's
    beam expansion under no_grad); a tensor of counts is a shape made from values."""
    with vramlab.trace(gpu="h200") as t:
        x = torch.randn(4, 16, device="cuda")
        with torch.no_grad():
            start = len(allocations(t.snapshot()))
            repeated = x.repeat_interleave(3, dim=0)
            assert repeated.shape == (12, 16)
            assert allocations(t.snapshot())[start:] == [("alloc", 12 * 16 * 4)]
        with pytest.raises(UnfollowedError, match="makes a shape from them"):
            x.repeat_interleave(torch.randint(1, 3, (4,), device="cuda"), dim=0)


def test_cudnn_batch_norm_copies_an_input_not_in_its_layout_and_keeps_it():
    """_batch_norm_impl_index's cuDNN branch copies a transposed [N, C, L] input before the output
    and the statistics, and cudnn_batch_norm keeps that copy for its backward, which copies the
    output's gradient too (Normalization.cpp, cudnn/BatchNorm.cpp; ISSUE35T's PatchTST, exact on an
    H200 with them). A contiguous input is not copied."""
    with vramlab.trace(gpu="h200") as t:
        norm = torch.nn.BatchNorm1d(32).cuda()
        x = torch.randn(64, 48, 32, device="cuda", requires_grad=True)
        size = 64 * 48 * 32 * 4
        start = len(allocations(t.snapshot()))
        y = norm(x.transpose(1, 2))
        forward = allocations(t.snapshot())[start:]
        start = len(allocations(t.snapshot()))
        y.transpose(1, 2).sum().backward()
        backward = [a for a in allocations(t.snapshot())[start:] if a[1] >= 32 * 4]
        start = len(allocations(t.snapshot()))
        norm(x.transpose(1, 2).contiguous())
        contiguous = allocations(t.snapshot())[start + 1 :]
    assert forward == [("alloc", size), ("alloc", size), ("alloc", 128), ("alloc", 128)], forward
    assert backward[:4] == [("alloc", size), ("alloc", size), ("alloc", 128), ("alloc", 128)], backward
    assert contiguous[:3] == [("alloc", size), ("alloc", 128), ("alloc", 128)], contiguous


def test_a_placeholder_prints_as_pytorch_prints_its_tensor():
    """Tensor.__format__ gives the value of a 0-dim tensor only: a one-element tensor of more
    dimensions is a TypeError under a spec, else its repr; a repr has its brackets, device, dtype
    and grad_fn as torch/_tensor_str.py writes them (the host copy has no device)."""
    with vramlab.trace(gpu="h100"):
        weight = torch.randn(1, device="cuda", requires_grad=True)
        loss = (weight * 2).sum()
        formatted, printed, leaf = f"{loss:.4f}", repr(loss), f"{weight}"
        half, host = repr(loss.half()), repr(loss.detach().cpu())
        with pytest.raises(TypeError, match="unsupported format string passed to Tensor.__format__"):
            f"{weight:.4f}"
    assert formatted == "?"
    assert printed == "tensor(?, device='cuda:0', grad_fn=<SumBackward0>)"
    assert leaf == "tensor([?], device='cuda:0', requires_grad=True)"
    assert half == "tensor(?, device='cuda:0', dtype=torch.float16, grad_fn=<ToCopyBackward0>)"
    assert host == "tensor(?)"


@pytest.mark.parametrize("autocast", [False, True])
def test_flex_attention_is_refused_in_one_line_not_an_abort(autocast):
    """ISSUE35W's flex_attention LM: the higher-order operator's autograd kernel builds its joint
    graph by make_fx, which on stand-ins aborted the whole process (terminate called after
    throwing python_error); under autocast it failed with NotImplementedError for the trace's
    autocast key. Its GPU kernels are torch.compile's, not sized here: refused, the trace kept."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    with vramlab.trace(gpu="h100") as t:
        q = torch.randn(1, 2, 128, 32, device="cuda", requires_grad=True)
        mask = create_block_mask(lambda b, h, i, j: i >= j, 1, 2, 128, 128, device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            with pytest.raises(UnfollowedError, match=r"flex_attention at .*test_trace_rules.py:\d+: the GPU runs kernels torch.compile generates"):
                torch.compile(flex_attention)(q, q, q, block_mask=mask)
        after = torch.empty(1024, device="cuda")
    assert after.shape == (1024,) and t.snapshot()["device_traces"][0]


def test_an_index_read_from_topk_selects_a_view_the_same_whichever_it_is():
    """ISSUE35X's Autoformer picks its top-k autocorrelation delays with `x[:, top_k_index[i]]`:
    PyTorch reads the 0-dim index back and selects by it, a view. With the index's bounds known
    (topk's) and the indexed values unknown, the trace selects by the lowest: the allocations are
    the same (the select backward's zeros of the input's shape), and the note says so. Without
    bounds the read still stops the trace."""
    with vramlab.trace(gpu="h200") as t:
        x = torch.randn(4, 64, 32, device="cuda", requires_grad=True)
        _, index = torch.topk(x.detach().mean((0, 2)), 5)
        picked = torch.stack([x[:, index[i]] for i in range(5)], -1)
        picked.sum().backward()
        with pytest.raises(UnfollowedError):
            x[:, (x[0, 0, 0] * 10).long()]
    assert picked.shape == (4, 32, 5)
    events = t.snapshot()["device_traces"][0]
    assert sum(1 for e in events if e["action"] == "alloc" and e["size"] == 4 * 64 * 32 * 4) >= 2
    assert any(n.startswith("5 indexings by a one-element integer tensor") for n in t.snapshot()["vramlab_notes"])


def test_graph_building_backwards_number_their_nodes_from_the_device_thread():
    """engine_thread.py: on the GPU a backward with create_graph=True runs on the engine's device
    thread, whose sequence counter (thread-local) is apart from the program thread's, so the nodes
    it makes number below the forward's and a later backward runs the forward's nodes first (a
    WGAN-GP critic held its activations 7% longer in the trace before; issue 36's tenth group). A
    plain backward stays in the program's thread, an error inside the pass reaches the program,
    and the thread ends with the trace."""
    import threading

    with vramlab.trace(gpu="h100"):
        # The program's thread has made a hundred nodes; the double backward below makes a few.
        warm = torch.randn(4, device="cuda", requires_grad=True)
        for _ in range(100):
            warm = warm * 1.5
        x = torch.randn(64, 64, device="cuda", requires_grad=True)
        y = (x.tanh() * x).sum()
        (g,) = torch.autograd.grad(y, x, create_graph=True)
        later = (x * 2).sum()
        assert g.grad_fn._sequence_nr() < y.grad_fn._sequence_nr() < later.grad_fn._sequence_nr()
        penalty = (g.norm() - 1) ** 2 + later
        penalty.backward()
        assert x.grad is not None and x.grad.shape == x.shape
        seen = []
        x.register_hook(lambda grad: seen.append(threading.current_thread().name))
        (x * x).sum().backward()
        assert seen == [threading.current_thread().name]

        def fails(grad):
            raise ValueError("from inside the pass")

        z = torch.randn(8, device="cuda", requires_grad=True)
        z.register_hook(fails)
        with pytest.raises(ValueError, match="from inside the pass"):
            torch.autograd.grad((z * z).sum(), z, create_graph=True)
    assert not any(t.name == "vramlab-autograd-device" for t in threading.enumerate())


def test_half_softmax_asked_for_float_makes_no_copy():
    """composites.py: CUDA's softmax and log_softmax of float16 with dtype=float32 (what autocast
    calls for every float16 softmax) write float32 from half in one kernel, with no float32 copy
    of the input (SoftMax.cpp: half_to_float); bfloat16 is converted first. CANINE's attention
    under fp16 (ISSUE35Y) was +20% reserved in the trace for want of this."""
    with vramlab.trace(gpu="h100") as t:
        x = torch.randn(64, 1024, device="cuda", dtype=torch.float16, requires_grad=True)
        with torch.autocast("cuda", dtype=torch.float16):
            probs = torch.softmax(x, -1)
            logp = torch.log_softmax(x, -1)
        assert probs.dtype == logp.dtype == torch.float32
        (probs.sum() + logp.sum()).backward()
        assert x.grad.dtype == torch.float16
        b = torch.randn(64, 1024, device="cuda", dtype=torch.bfloat16)
        assert torch.softmax(b, -1, dtype=torch.float32).dtype == torch.float32
    sizes = [e["size"] for e in t.snapshot()["device_traces"][0] if e["action"] == "alloc"]
    half, single = 64 * 1024 * 2, 64 * 1024 * 4
    # x, then the two float32 results: nothing between them.
    assert sizes[:3] == [half, single, single]
    # bfloat16 to float32: its copy, then the result.
    assert sizes[-2:] == [single, single] and sizes[-3] == half


def test_forward_mode_zero_tangents_take_no_memory_and_their_sums_copy():
    """zero_tensors.py: a jvp input without a tangent gets an _efficientzerotensor (no storage on
    CUDA), mul's ZeroTensor kernel returns another (BinaryOps.cpp: mul_zerotensor), add's copies
    the other operand (maybe_add_maybe_sub), and each moves its zero operand to meta through the
    ZeroTensor fallback, one element made real and freed. The sequence asserted is the H200's for
    the same two lines of TrigFlow's time embedding (reports/reference/h200/trace-workloads-35y,
    trigflow_consistency_training_forward_mode_jvp, expandable, events 451-464)."""
    with vramlab.trace(gpu="h200") as t:
        freqs = torch.randn(64, device="cuda")
        x, v = torch.rand(64, device="cuda"), torch.rand(64, device="cuda")
        start = len(allocations(t.snapshot()))
        out, tangent = torch.func.jvp(lambda s: 2 * 3.14159 * s[:, None] * freqs[None, :], (x,), (v,))
        assert tangent.shape == out.shape == (64, 64)
    events = allocations(t.snapshot())[start:]
    column, square = 64 * 4, 64 * 64 * 4
    one = [("alloc", 4), ("free_completed", 4)]
    assert events[:14] == (
        # 2*pi*s: the primal, s's tangent times 2*pi, the zero tangent of 2*pi plus it (a copy).
        [("alloc", column), ("alloc", column)] + one + [("alloc", column), ("free_completed", column)]
        # * freqs: the primal, the tangent times freqs, freqs' zero tangent times s (no memory),
        # then the sum (a copy).
        + [("alloc", square), ("alloc", square)] + one + one + [("alloc", square), ("free_completed", square)]
    )


def test_a_matrix_multiply_clones_an_expanded_operand_for_cublas():
    """cublas.py: addmm_out_cuda_impl (Blas.cpp, behind mm) passes each matrix through
    prepare_matrix_for_cublas, which clones one that is neither dense nor column- or row-major (an
    expanded zero tangent made real, as jvp through a Linear makes) before the GEMM and frees it
    after; a transposed or dense operand is taken as it is."""
    with vramlab.trace(gpu="h200") as t:
        a = torch.randn(64, 128, device="cuda")
        w = torch.randn(512, 128, device="cuda")
        a @ w.t()
        start = len(allocations(t.snapshot()))
        expanded = torch.zeros((), device="cuda").expand(128, 512)
        a @ expanded
    out, clone = 64 * 512 * 4, 128 * 512 * 4
    # Releases with per-call cuBLAS workspaces (2.12 on) allocate and free one around the GEMM too.
    events = [e for e in allocations(t.snapshot())[start:] if e[1] in (4, out, clone)]
    assert events == [("alloc", 4), ("alloc", out), ("alloc", clone), ("free_completed", clone), ("free_completed", out)]
