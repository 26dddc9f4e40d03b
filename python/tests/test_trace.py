"""vramlab.trace on a CPU-only machine against PyTorch's own figures recorded on an H100
(reports/reference/h100/trace-workloads, scripts/record_trace_workloads.py). The workloads are
scripts/trace_workloads.py; the tracer's rules were written while looking at these recordings, so
the figures here are seen-while-designing, not held out."""

import gzip
import json
import os
import pathlib
import pickle
import re
import subprocess
import sys
import zlib

import pytest

torch = pytest.importorskip("torch", reason="vramlab.trace needs PyTorch (pip install torch)")

import vramlab  # noqa: E402
from vramlab import UnfollowedError  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "reports" / "reference" / "h100" / "trace-workloads"
sys.path.insert(0, str(ROOT / "scripts"))
from trace_workloads import ALL, GROUPS  # noqa: E402
from sampling import sampled, share  # noqa: E402

# The held-out workloads (committed before their GPU runs) are checked here too, so that a change
# to the tracer that breaks them fails CI; their held-out figures are in RESULTS.md.
# ISSUE35 (scripts/trace_workloads_35.py) is left out until its misses are mended: its held-out
# figures are in RESULTS.md. ISSUE35B is in, but for torch.compile, which the trace runs eagerly
# (+26.7%, said in its notes: test_trace_rules.py).
# ISSUE35C is in, but for the misses its held-out table showed that are not mended yet
# (RESULTS.md): a U-Net's convolutions outside the workspace tables.
# ISSUE35D is in, but for its misses after the mends (RESULTS.md): convolutions outside the
# measured kinds (dilated, 1-d) or sized wrongly by the fitted model.
NOT_YET = {
    # cuDNN RNN's workspaces are estimated (rules/cudnn_rnn.py): peak allocated -0.60% (default)
    # and -0.28% (expandable), peak reserved exact in both.
    "lstm",
    "compiled_mlp_adamw",
    "unet_groupnorm_adam",
    "espcn_pixel_shuffle",
    "upsample_autoencoder",
    "tv_deeplabv3_mobilenet",
    "simclr_resnet18",
    # Its patch convolution's workspace (16x16, stride 16: a kind the measurements lack) is not
    # traced while the copy of its permuted gradient is: +2.8% reserved under expandable segments.
    "timm_mixer_bf16",
}
# ISSUE35E (RESULTS.md) is traced here only where this stop's mends were made on it, the three
# that show them (CI's time is bounded; the whole group is `scripts/trace_table.py --issue35e`).
ISSUE35E_IN_CI = {"moe_dense_top2", "mae_random_masking", "hf_roberta_qa"}
# ISSUE35F (scripts/trace_workloads_35f.py), likewise: the PPO update its mends made exact.
ISSUE35F_IN_CI = {"ppo_actor_critic"}
# ISSUE35G (scripts/trace_workloads_35g.py), likewise: Trainer and sampling generate, which its
# mends made exact.
ISSUE35G_IN_CI = {"hf_trainer_gpt2_bf16", "hf_llama_sampling_generate"}
WORKLOADS = {
    name: workload
    for name, workload in ALL.items()
    if name not in GROUPS["issue35"] and name not in NOT_YET and (name not in GROUPS["issue35e"] or name in ISSUE35E_IN_CI)
    and (name not in GROUPS["issue35f"] or name in ISSUE35F_IN_CI)
    and (name not in GROUPS["issue35g"] or name in ISSUE35G_IN_CI)
    # ISSUE35H to ISSUE35P were recorded on an H200: test_trace_rules_35h.py and _35k.py compare them.
    and not any(name in GROUPS[group] for group in ("issue35h", "issue35i", "issue35j", "issue35k", "issue35l", "issue35m", "issue35n", "issue35o", "issue35p", "issue35q", "issue35r", "issue35s", "issue35t", "issue35u", "issue35v", "issue35w", "issue35x", "issue35y", "issue35z", "issue35aa"))
}
# VRAMLAB_TRACE_SAMPLE=N[:K]: every Nth workload from the Kth (sampling.py; CI's runs).
SAMPLE = share()[0]
WORKLOADS = dict(sampled(WORKLOADS.items()))

SETTINGS = {"default": "", "expandable": "expandable_segments:True"}
# Refused, with the reason, rather than answered wrong.
REFUSED: dict = {}


def recording_folder(name):
    """Where `name` was recorded with the transformers installed here: the Hugging Face workloads
    were recorded under transformers 5.17 and again under 5.24, whose models allocate otherwise
    (T5 10% less); the others do not use it."""
    if name.startswith("hf_"):
        transformers = pytest.importorskip("transformers", reason="the Hugging Face workload needs transformers")
        if transformers.__version__.startswith("5.24."):
            return RECORDINGS.parent / "trace-workloads-transformers-5.24"
        if not transformers.__version__.startswith("5.17."):
            pytest.skip(f"no H100 recording under transformers {transformers.__version__} (5.17 and 5.24 are recorded)")
    return RECORDINGS


def recorded(name, label):
    path = recording_folder(name) / f"{name}-{label}.json"
    if not path.exists() and path.parent != RECORDINGS:
        pytest.skip(f"{name} was recorded under transformers 5.17 only")
    return json.loads(path.read_text())["memory_stats"]


# Each workload is traced once for the tests that compare it (a trace is seconds of CPU; CI's
# time is bounded): its snapshot kept pickled and compressed, a few hundred KiB.
_TRACED: dict = {}


def traced(name):
    if name not in _TRACED:
        _TRACED[name] = zlib.compress(pickle.dumps(_trace(name), protocol=pickle.HIGHEST_PROTOCOL), 1)
    return pickle.loads(zlib.decompress(_TRACED[name]))


def _trace(name):
    if name.startswith("hf_"):
        pytest.importorskip("transformers", reason="the Hugging Face workload needs transformers")
    if name.startswith("tv_") or "vit" in name:
        pytest.importorskip("torchvision", reason="the torchvision workload needs torchvision")
    for library in ("timm", "peft", "accelerate"):
        if library in name:
            pytest.importorskip(library, reason=f"the workload needs {library}")
    if "_trainer_" in name:
        pytest.importorskip("accelerate", reason="Hugging Face's Trainer needs accelerate")
    with vramlab.trace(gpu="h100") as t:
        ALL[name]("cuda")
    return t.snapshot()


pytestmark = pytest.mark.usefixtures("as_2_11")


@pytest.mark.parametrize("name", [n for n in WORKLOADS if n not in REFUSED])
def test_a_trace_replays_to_pytorchs_peaks(name):
    snapshot = traced(name)
    for label, setting in SETTINGS.items():
        ours = vramlab.replay(snapshot, alloc_conf=setting)["results"][0]["pytorch_stats"]
        theirs = recorded(name, label)
        allocated = ours["allocated_bytes.all.peak"] / theirs["allocated_bytes.all.peak"] - 1
        reserved = ours["reserved_bytes.all.peak"] / theirs["reserved_bytes.all.peak"] - 1
        assert abs(allocated) <= 0.005, f"{name} {label}: peak allocated off by {allocated:+.2%}"
        gap = PLACEMENT_GAPS.get((recording_folder(name).name, name, label))
        if abs(reserved) > 0.02 and gap:
            pytest.xfail(gap)
        assert abs(reserved) <= 0.02, f"{name} {label}: peak reserved off by {reserved:+.2%}"


# Known misses that are the driver's placement of segments, not the trace (the recording replayed
# without its segment addresses gives the trace's figure: the test below).
PLACEMENT_GAPS = {
    ("trace-workloads-transformers-5.24", "hf_llama_sdpa_autocast", "default"): "transformers 5.24: +8.2% peak reserved over counted addresses (RESULTS.md); its recording replayed without its addresses is exact with the placement model, not yet checked traced under 5.24",
    ("trace-workloads", "hand_sdpa_autocast", "default"): "-2.20% peak reserved: the one recording of the placement model's fit group it misses (alloc/src/placement.rs, VALIDATION.md); counted addresses had it exact",
    # Not the placement: traced alone (scripts/trace_table.py --issue35b, or this test with -k) it is
    # exact; traced after the other workloads in one pytest process, -2.70% reserved in CI on
    # 2026-11-27. Something a trace leaves behind in the process changes it; not found yet.
    ("trace-workloads", "hf_t5_generate_fixed_length", "default"): "-2.70% peak reserved when traced after the other workloads in one process (exact alone): state a trace leaves in the process, not yet found",
}


# Workloads whose trace asks for other allocations, or frees them in another order, than the GPU
# was asked (scripts/trace_compare.py says which, COMPARE.md why).
ASKS_OTHERWISE: set = {
    # Held out (the UNSEEN group), within the issue's limits but not to the byte: DenseNet-121
    # misses 16 small buffers of its backward, Qwen3 with checkpointing misses two of 16 KiB
    # (RESULTS.md). Swin-T, which asked otherwise around its shifted windows, is exact since the
    # roll rule (rules/roll.py, found on ISSUE35K's Swin-V2).
    "tv_densenet121_sgd",
    "hf_qwen3_checkpointed_bf16",
    # Held out (FASTPATH_GENERAL): ViT-B/16's patch convolution in half precision is outside the
    # measured convolution tables, so its cuDNN workspace (2 x 20,807,696 B) is not traced (the
    # snapshot says so); peaks within 0.01%.
    "vit_half_inference",
    # Held out (ISSUE35B), within the limits but not to the byte (RESULTS.md): Llama with Hugging
    # Face's checkpointing (-0.02%), top-k/sort retrieval (CUB's scratch, -0.27% reserved), T5
    # generate (-0.92% reserved, expandable). Swin-T at batch 16 (+0.19%, +1.08% then) is exact
    # since the roll rule.
    "hf_llama_gradient_checkpointing",
    "retrieval_topk_sort",
    "hf_t5_generate_fixed_length",
    # Held out (ISSUE35C), within the limits but not to the byte (RESULTS.md): OPT's reserved
    # (+0.36%), ViT (-0.01%), DeiT's reserved (+0.17%), the EMA copy (-0.00%), the DLRM's reserved
    # (+1.91%, its EmbeddingBag backward's scratch), WGAN-GP's double backward (+0.47%).
    "hf_opt_fp16_scaler",
    "hf_vit_classifier_bf16",
    "timm_deit_tiny_adamw",
    "ema_transformer_lm",
    "dlrm_embeddingbag_adagrad",
    "wgan_gp_mlp",
    # ISSUE35D, within the limits but not to the byte (RESULTS.md): LoRA on T5 (-0.10%
    # allocated, default); Whisper's peaks are exact but its 1-d convolutions' workspaces are not
    # traced.
    "peft_lora_t5_bf16",
    "hf_whisper_seq2seq",
    # The program resets the peak statistics: its trace records the reset, the GPU's snapshot has
    # no record of one, so their replays' statistics differ by design (the peaks are compared
    # with memory_stats() above, exactly).
    "phases_reset_peak_empty_cache",
}


def without_placement(snapshot):
    """A recording without the addresses its driver gave its segments, which the replay would
    otherwise follow: what is left is what the program asked the allocator for."""
    kept = [e for e in snapshot["device_traces"][0] if not e["action"].startswith("segment")]
    return {**snapshot, "segments": [], "device_traces": [kept]}


@pytest.mark.parametrize("name", [n for n in WORKLOADS if n not in REFUSED and n not in ASKS_OTHERWISE])
def test_a_trace_replays_as_its_recording_does_without_the_drivers_placement(name):
    """Stronger than the peaks: the trace and the GPU's own record, replayed alike (each block
    placed by the replay's device, not the recording's driver), agree to the byte."""
    snapshot = traced(name)
    for label, setting in SETTINGS.items():
        recording = pickle.load(gzip.open(recording_folder(name) / f"{name}-{label}.pickle.gz"))
        ours = vramlab.replay(snapshot, alloc_conf=setting)["results"][0]["pytorch_stats"]
        theirs = vramlab.replay(without_placement(recording), alloc_conf=setting)["results"][0]["pytorch_stats"]
        for key in ("allocated_bytes.all.peak", "reserved_bytes.all.peak", "num_alloc_retries"):
            assert ours[key] == theirs[key], f"{name} {label}: {key} {ours[key]} against {theirs[key]}"


@pytest.mark.parametrize("name", [n for n in REFUSED if n in WORKLOADS])
def test_what_it_cannot_follow_is_refused_in_one_line(name):
    with pytest.raises(UnfollowedError) as err:
        traced(name)
    message = str(err.value)
    assert REFUSED[name] in message and re.search(r"trace_workloads\w*\.py:", message) and "\n" not in message


def test_the_snapshot_is_pytorchs_format_and_says_what_it_is():
    snapshot = traced("mlp_adamw")
    events = snapshot["device_traces"][0]
    assert {e["action"] for e in events} <= {"alloc", "free_requested", "free_completed", "empty_cache"}
    assert all({"addr", "size", "stream", "frames"} <= set(e) for e in events)
    assert "without a GPU" in snapshot["vramlab_notes"][0]
    # The cuBLAS workspaces (program thread, autograd thread) and cuBLASLt's, as measured.
    sizes = [e["size"] for e in events if e["action"] == "alloc"]
    assert sizes.count(32 << 20) == 2 and sizes.count(1 << 20) >= 1
    result = vramlab.replay(snapshot, alloc_conf="")
    assert any("without a GPU" in n for n in result["notes"])


def test_values_read_back_stop_the_trace_with_the_line_and_keep_what_came_before():
    with pytest.raises(UnfollowedError) as err:
        with vramlab.trace() as t:
            x = torch.randn(1024, 1024, device="cuda")
            torch.empty(int(x.sum().long().item()), device="cuda")
    # The count is read as a placeholder (unknown.UnknownInt); int() of it for a size decides, and
    # stops the trace naming both lines (an int() only printed or dropped is answered: printed.py).
    assert "an integer made of it" in str(err.value) and str(err.value).count("test_trace.py:") == 2
    assert [e["size"] for e in t.snapshot()["device_traces"][0] if e["action"] == "alloc"][0] == 4 << 20


@pytest.mark.parametrize(
    "program, needle",
    [
        (
            lambda: torch.nn.functional.scaled_dot_product_attention(*(torch.randn(1, 2, 8, 160, device="cuda"),) * 3),
            "head sizes over 128",
        ),
        (lambda: torch.nonzero(torch.randn(4, device="cuda")), "nonzero"),
        (lambda: torch.cuda.CUDAGraph(), "torch.cuda.CUDAGraph"),
        (lambda: torch.nested.nested_tensor([torch.randn(3, 8), torch.randn(5, 8)], device="cuda"), "nested tensors"),
        (lambda: torch.sparse_coo_tensor(torch.zeros(2, 1, dtype=torch.long, device="cuda"), torch.ones(1, device="cuda"), (2, 2)), "sparse tensors"),
        (lambda: torch.nn.Embedding(10, 4, sparse=True).cuda()(torch.zeros(2, dtype=torch.long, device="cuda")).sum().backward(), "sparse tensors"),
        (lambda: torch.ones(2, device="cuda:1"), "device cuda:1"),
        (lambda: torch.ones(2).cuda(1), "device cuda:1"),
        (lambda: torch.ones(2).cuda("cuda:1"), "device cuda:1"),
        (lambda: torch.randn(4, device="cuda").tolist(), "reads a GPU tensor's values on the host"),
    ],
)
def test_each_unfollowed_case_names_itself(program, needle):
    with pytest.raises(UnfollowedError) as err:
        with vramlab.trace():
            program()
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_work_in_another_thread_is_not_a_silent_zero():
    """A thread the trace does not follow reaches CUDA itself: it gets one line there, and the
    trace ends with that line rather than with a peak that leaves the thread's work out."""
    import threading

    errors = []

    def work():
        try:
            torch.zeros(4, device="cuda")
        except UnfollowedError as e:
            errors.append(str(e))

    with pytest.raises(UnfollowedError, match="from a thread the trace does not follow") as err:
        with vramlab.trace():
            worker = threading.Thread(target=work)
            worker.start()
            worker.join()
    assert errors and "\n" not in str(err.value) and "test_trace.py:" in str(err.value)
    # The program's own error that follows (a result the thread never made) gives way to it.
    results = {}
    with pytest.raises(UnfollowedError, match="from a thread the trace does not follow"):
        with vramlab.trace():
            worker = threading.Thread(target=lambda: results.update(y=torch.zeros(4, device="cuda")))
            worker.start()
            worker.join()
            results["y"] * 2


def test_checkpoints_load_onto_the_gpu_and_are_never_overwritten(tmp_path):
    """torch.load(map_location="cuda") puts each saved storage on the GPU, one allocation each; a
    torch.save to a file inside a trace writes nothing, so a real checkpoint is never replaced by
    one without values."""
    path = tmp_path / "checkpoint.pt"
    torch.save({"weight": torch.ones(1000), "state": {"exp_avg": torch.zeros(256, 256)}, "step": 3}, path)
    before = path.read_bytes()
    with vramlab.trace() as t:
        loaded = torch.load(path, map_location="cuda")
        assert loaded["weight"].is_cuda and loaded["state"]["exp_avg"].shape == (256, 256) and loaded["step"] == 3
        torch.save(loaded, path)
    assert path.read_bytes() == before
    assert [e["size"] for e in t.snapshot()["device_traces"][0] if e["action"] == "alloc"] == [4000, 262144]
    assert any("not written" in n for n in t.snapshot()["vramlab_notes"])


def test_a_checkpoint_saved_in_the_trace_loads_back_from_it(tmp_path):
    """A program that saves its best model and loads it back: the file is not written, but what it
    would hold (tensors without data) is kept, and torch.load of the same path reads it, each
    storage one allocation on the GPU as from a real file; other paths still go to the disk."""
    path = tmp_path / "best.pt"
    with vramlab.trace() as t:
        model = torch.nn.Linear(256, 128).cuda()
        torch.save(model.state_dict(), path)
        state = torch.load(str(path), map_location="cuda")
        assert state["weight"].is_cuda and state["weight"].shape == (128, 256)
        model.load_state_dict(state)
        with pytest.raises(FileNotFoundError):
            torch.load(tmp_path / "other.pt")
    assert not path.exists()
    sizes = [e["size"] for e in t.snapshot()["device_traces"][0] if e["action"] == "alloc"]
    assert sizes == [128 * 256 * 4, 128 * 4] * 2


def test_more_than_the_gpu_holds_raises_cudas_out_of_memory():
    """Tensors alive beyond the profile's memory fail on the GPU whatever the allocator does: the
    program sees torch.OutOfMemoryError, as on the GPU, and can recover."""
    with vramlab.trace(gpu="h100") as t:
        with pytest.raises(torch.OutOfMemoryError, match="CUDA out of memory"):
            torch.empty(100 << 30, dtype=torch.uint8, device="cuda")
        small = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
        assert small.is_cuda
    assert t.peak_allocated == 1 << 20


def test_pytorchs_foreach_and_fused_paths_are_taken_as_on_the_gpu():
    """clip_grad_norm_ takes its foreach path (as on CUDA), fused SGD runs (in place, no
    allocation), and torch.jit.trace makes its graph without comparing values it does not have."""
    with vramlab.trace():
        model = torch.nn.Linear(64, 64).cuda()
        model(torch.randn(8, 64, device="cuda")).sum().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, fused=True)
        opt.step()
        traced = torch.jit.trace(model, torch.randn(8, 64, device="cuda"))
        assert traced(torch.randn(2, 64, device="cuda")).shape == (2, 64)


def test_the_command_line_keeps_the_trace_when_the_script_fails(tmp_path):
    """A script that raises its own error: its traceback, then one line, and the trace up to
    there written; a missing script is one line and exit 2."""
    script = tmp_path / "fails.py"
    script.write_text('import torch\nx = torch.ones(1024, device="cuda")\nraise ValueError("boom")\n')
    out = tmp_path / "snap.pickle"
    done = subprocess.run([sys.executable, "-m", "vramlab.trace", "--out", str(out), str(script)], capture_output=True, text=True)
    assert done.returncode == 1 and "ValueError: boom" in done.stderr and "RuntimeWarning" not in done.stderr
    assert "the trace up to there is in" in done.stderr and out.exists()
    missing = subprocess.run([sys.executable, "-m", "vramlab.trace", "--out", str(out), str(tmp_path / "absent.py")], capture_output=True, text=True)
    assert missing.returncode == 2 and missing.stderr.strip().count("\n") == 0 and "no such script" in missing.stderr


def test_generate_runs_to_max_new_tokens_under_answered_reads():
    """Hugging Face generate stops when every sequence is finished: "past max_length" is known
    without data, and an `or` with a known all-True operand is True whatever the other holds
    (vramlab/_tracer/values.py), so with answer_reads (EOS never seen) it stops at max_new_tokens."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(num_hidden_layers=1, hidden_size=64, num_attention_heads=2, intermediate_size=128, vocab_size=500, bos_token_id=0, eos_token_id=0)
    with vramlab.trace(answer_reads=0.0):
        model = transformers.LlamaForCausalLM(config).cuda().eval()
        with torch.no_grad():
            out = model.generate(input_ids=torch.randint(0, 500, (2, 16), device="cuda"), attention_mask=torch.ones(2, 16, dtype=torch.long, device="cuda"), max_new_tokens=5)
        assert out.shape == (2, 21)


def test_a_loop_on_answered_values_stops_with_one_line(monkeypatch):
    """A loop that waits for a value would never end on answered ones: past a bound of answers
    at one line, the trace stops there in one line rather than hang."""
    monkeypatch.setattr(sys.modules["vramlab._tracer.session"], "MOST_ANSWERS_AT_ONE_LINE", 50)
    with pytest.raises(UnfollowedError, match="answered 50 times") as err:
        with vramlab.trace(answer_reads=0.0):
            x = torch.randn(4, device="cuda")
            while x.sum().item() != 1.0:
                x = x * 0.5
    assert "\n" not in str(err.value) and "test_trace.py:" in str(err.value)


def test_checkpointing_a_custom_function_and_histc_are_followed():
    """Non-reentrant checkpointing compares devices of saved and recomputed tensors, and a custom
    autograd.Function runs with the stand-ins saying meta; histc's shape is its bins, whatever the
    values (MoE routing in transformers 5)."""
    from torch.utils.checkpoint import checkpoint

    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    with vramlab.trace():
        x = torch.randn(8, 64, device="cuda", requires_grad=True)
        checkpoint(Double.apply, x, use_reentrant=False).sum().backward()
        assert torch.histc((torch.arange(64, device="cuda") % 4).int(), bins=4, min=0, max=3).shape == (4,)
        assert torch.histc(torch.randn(64, device="cuda"), bins=7).shape == (7,)


def test_a_factory_like_a_tensor_of_unknown_values_is_known():
    """torch.ones_like(ids) of random ids is all ones (a mask made beside the ids, as Hugging Face
    users write it): its values are known, and masking code that asks `mask.all()` is answered."""
    with vramlab.trace():
        ids = torch.randint(0, 100, (4, 16), device="cuda")
        assert bool(torch.ones_like(ids).all()) and not bool(torch.zeros_like(ids).any())
        assert int(torch.full_like(ids, 7).sum()) == 7 * 64 and int(ids.new_ones(3).sum()) == 3
        with pytest.raises(UnfollowedError):
            bool(ids.all())


def test_known_values_are_read_under_inference_mode_too():
    """Under inference_mode bool(x) reaches the trace as is_nonzero, not as the read it becomes
    elsewhere: nn.Transformer's causal-mask check (a comparison with a mask made by a known
    factory) is answered there too, and answer_reads answers the others."""
    with vramlab.trace():
        model = torch.nn.Transformer(64, 4, 1, 1, 128, batch_first=True).cuda().eval()
        src, tgt = torch.randn(2, 16, 64, device="cuda"), torch.randn(2, 12, 64, device="cuda")
        mask = torch.nn.Transformer.generate_square_subsequent_mask(12, device="cuda")
        with torch.inference_mode():
            assert model(src, tgt, tgt_mask=mask).shape == (2, 12, 64)
    with vramlab.trace(answer_reads=0.0):
        with torch.inference_mode():
            x = torch.randn(4, device="cuda")
            assert bool(x.sum() > 0) is False and x.sum().item() == 0.0


def test_a_trace_that_stopped_early_says_so_in_its_snapshot():
    """The record of a refused program is kept, and its replay must not pass for the whole
    program's: the snapshot says where and why it stopped."""
    with pytest.raises(UnfollowedError):
        with vramlab.trace() as t:
            torch.empty(1 << 20, device="cuda")
            torch.nonzero(torch.randn(4, device="cuda"))
    notes = vramlab.replay(t.snapshot())["notes"]
    assert any("stopped before the program ended (nonzero at " in n and "lower bound" in n for n in notes)
    with vramlab.trace() as whole:
        torch.empty(1 << 20, device="cuda")
    assert not any("stopped" in n for n in whole.snapshot()["vramlab_notes"])


def test_device_zero_is_accepted_however_the_program_names_it():
    with vramlab.trace():
        for device in (0, "cuda", "cuda:0", torch.device("cuda", 0)):
            assert torch.ones(2).cuda(device).is_cuda and torch.ones(2, device=device).is_cuda


def test_cuda_answers_as_the_target_gpu_and_nothing_leaks_out():
    with vramlab.trace(gpu="h200") as t:
        assert torch.cuda.is_available()
        torch.cuda.init()
        torch.cuda.ipc_collect()
        props = torch.cuda.get_device_properties(0)
        assert (props.major, props.minor) == (9, 0) and "H200" in props.name
        x = torch.empty(1 << 20, device="cuda")
        assert torch.cuda.memory_allocated() == 4 << 20
        del x
        torch.cuda.empty_cache()
    assert not torch.cuda.is_available() or torch.cuda.device_count() > 0
    actions = [e["action"] for e in t.snapshot()["device_traces"][0]]
    assert actions == ["alloc", "free_requested", "free_completed", "empty_cache"]


def test_a_script_traces_unchanged_from_the_command_line(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import sys, torch\n"
        "model = torch.nn.Linear(256, 256).cuda()\n"
        "model(torch.randn(int(sys.argv[1]), 256, device='cuda')).sum().backward()\n"
    )
    out = tmp_path / "snap.pickle.gz"
    done = subprocess.run(
        [sys.executable, "-m", "vramlab.trace", "--gpu", "h100", "--out", str(out), str(script), "64"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    snapshot = pickle.load(gzip.open(out))
    assert any(e["size"] == 64 * 256 * 4 for e in snapshot["device_traces"][0])
    result = vramlab.replay(str(out), alloc_conf="")
    assert result["results"][0]["pytorch_stats"]["allocated_bytes.all.peak"] > 0


def test_autocast_policies_are_pytorchs_own():
    """Every operator the installed torch gives a CUDA autocast kernel has a policy in the tracer,
    and each policy is the one torch's own header (torch/include/ATen/autocast_mode.h) lists."""
    import re

    from vramlab._tracer.compat import release
    from vramlab._tracer.rules.autocast import policies, registered_cuda_policies

    POLICIES = policies(release(torch))
    registered = set(registered_cuda_policies(torch))
    assert registered <= set(POLICIES), sorted(registered - set(POLICIES))
    # A policy of the tracer's for an operator this release has but gives no autocast kernel
    # would cast where the GPU does not (2.15 dropped named-dimension overloads: they are gone).
    def exists(name):
        base, _, overload = name.partition(".")
        return hasattr(getattr(torch.ops.aten, base, None), overload or "default")

    assert not [n for n in set(POLICIES) - registered if exists(n)]
    header = pathlib.Path(torch.__file__).parent / "include" / "ATen" / "autocast_mode.h"
    if not header.exists():
        pytest.skip("this torch ships no C++ headers to read the policies from")
    text = header.read_text()
    lists = {
        "AT_FORALL_LOWER_PRECISION_FP": "lower_precision_fp",
        "AT_FORALL_FP32": "fp32",
        "AT_FORALL_FP32_SET_OPT_DTYPE": "fp32_set_opt_dtype",
        "AT_FORALL_PROMOTE": "promote",
    }
    checked = 0
    for macro, policy in lists.items():
        body = re.search(rf"#define {macro}\(_\)((?:.*\\\n)*.*\n)", text).group(1)
        for name, overload in re.findall(r"_\((\w+)(?:,\s*(\w+))?\)", body):
            key = f"{name}.{overload}" if overload else name
            assert POLICIES[key] == policy, (key, POLICIES[key], policy)
            checked += 1
    assert checked > 100


def test_autocast_casts_as_cuda_would():
    """Under a traced autocast("cuda", bfloat16): a linear layer computes in bfloat16 and casts each
    float32 weight once per region (the cast cache), layer_norm and softmax give float32, and
    leaving the region stops the casts."""
    with vramlab.trace(gpu="h100") as t:
        layer = torch.nn.Linear(1024, 1024).cuda()
        x = torch.randn(64, 1024, device="cuda")
        before = len(t.snapshot()["device_traces"][0])
        with torch.autocast("cuda", dtype=torch.bfloat16):
            assert torch.is_autocast_enabled("cuda")
            y = layer(layer(x))
            assert y.dtype == torch.bfloat16
            assert torch.nn.functional.layer_norm(y, (1024,)).dtype == torch.float32
            assert y.softmax(-1).dtype == torch.float32
            with torch.autocast("cuda", enabled=False):
                assert layer(x).dtype == torch.float32
        assert layer(x).dtype == torch.float32
        events = t.snapshot()["device_traces"][0][before:]
    weight_casts = [e for e in events if e["action"] == "alloc" and e["size"] == 1024 * 1024 * 2]
    assert len(weight_casts) == 1, [e["size"] for e in events if e["action"] == "alloc"]


def test_cudnn_attention_allocates_as_measured_on_the_h100():
    """bfloat16 attention on an H100 runs cuDNN: the forward makes the dropout seed and offset, the
    output, the log-sum-exp and a 256-byte workspace; the backward dq, dk, dv and a workspace (the
    sizes an H100 gave for B=2, H=8, Lq=200, Lk=300, D=64 with torch 2.11 and cuDNN 9.19)."""
    with vramlab.trace(gpu="h100") as t:
        q = torch.randn(2, 8, 200, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k, v = (torch.randn(2, 8, 300, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
        grad = torch.ones(2, 8, 200, 64, device="cuda", dtype=torch.bfloat16)
        before = len(t.snapshot()["device_traces"][0])
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        forward = [e["size"] for e in t.snapshot()["device_traces"][0][before:] if e["action"] == "alloc"]
        before = len(t.snapshot()["device_traces"][0])
        out.backward(grad)
        backward = [e["size"] for e in t.snapshot()["device_traces"][0][before:] if e["action"] == "alloc"]
    assert forward == [8, 8, 409_600, 12_800, 256]
    assert backward == [409_600, 614_400, 614_400, 832_256]
    assert any("cuDNN attention" in n for n in t.snapshot()["vramlab_notes"])


def test_memory_efficient_attention_allocates_as_the_h100_did():
    """Float32 attention runs memory-efficient attention: every allocation and free of its forward
    and backward, for the 90 shapes measured on the H100 (reports/reference/h100/
    efficient-attention; the workspace rule was fitted to these, so they check the fit and the
    sequence, not a held-out case)."""
    rows = [json.loads(line) for line in gzip.open(ROOT / "reports/reference/h100/efficient-attention/efficient.jsonl.gz", "rt")]
    assert len(rows) == 90
    for row in rows:
        dtype = torch.float32 if row["dtype"] == "torch.float32" else torch.bfloat16
        b, h, lq, lk, d = row["b"], row["h"], row["lq"], row["lk"], row["d"]
        with vramlab.trace(gpu="h100") as t:
            q = torch.randn(b, h, lq, d, device="cuda", dtype=dtype, requires_grad=True)
            k, v = (torch.randn(b, h, lk, d, device="cuda", dtype=dtype, requires_grad=True) for _ in range(2))
            grad = torch.randn(b, h, lq, d, device="cuda", dtype=dtype)
            start = len(t.snapshot()["device_traces"][0])
            with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.EFFICIENT_ATTENTION):
                out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
            middle = len(t.snapshot()["device_traces"][0])
            out.backward(grad)
            events = t.snapshot()["device_traces"][0]
        ours = [[(e["action"], e["size"]) for e in part if e["action"] in ("alloc", "free_completed")] for part in (events[start:middle], events[middle:])]
        theirs = [[(e[0], e[1]) for e in row[part]] for part in ("forward", "backward")]
        assert ours == theirs, (row["dtype"], b, h, lq, lk, d)


def _cell_events(cfg):
    """What tracing one measured recurrent cell allocates and frees: moving it to the GPU, its
    forward and its backward, each as [action, bytes] in order, as scripts/measure_cudnn_rnn.py
    measured them."""
    from measure_cudnn_rnn import build_cell

    dtype = getattr(torch, cfg["dtype"])
    with vramlab.trace(gpu="h100") as t:
        # The measuring process had made cuBLAS's workspaces (one per handle: the program's thread
        # and autograd's) before these cells ran.
        a = torch.ones(4, 4, device="cuda", requires_grad=True)
        torch.nn.functional.linear(a, a, a[0]).sum().backward()
        marks = [len(t.record.events)]
        module = build_cell(cfg).to("cuda", dtype)
        marks.append(len(t.record.events))
        x = torch.randn(cfg["batch"], cfg["input"], device="cuda", dtype=dtype)
        marks.append(len(t.record.events))
        out = module(x)
        marks.append(len(t.record.events))
        (out[0] if isinstance(out, tuple) else out).float().sum().backward()
        marks.append(len(t.record.events))
    phases = {}
    for name, (a, b) in (("to_device", marks[0:2]), ("forward", marks[2:4]), ("backward", marks[3:5])):
        phases[name] = [[e["action"][0], e["size"]] for e in t.record.events[a:b] if e["action"] in ("alloc", "free_completed")]
    return phases


def test_legacy_cuda_constructors_make_their_tensors_as_torch_empty_and_tensor_would():
    """torch.cuda.FloatTensor(4, 4) and the like make the tensor in C++ on the device, which needs
    a driver; inside a trace they make it as torch.empty (sizes) and torch.tensor (values) do."""
    original = torch.cuda.FloatTensor
    with vramlab.trace(gpu="h100") as t:
        sized = torch.cuda.FloatTensor(4, 4)
        valued = torch.cuda.HalfTensor([1.0, 2.0, 3.0])
        assert sized.is_cuda and sized.shape == (4, 4) and sized.dtype == torch.float32
        assert valued.is_cuda and valued.shape == (3,) and valued.dtype == torch.float16
        assert isinstance(sized, torch.cuda.FloatTensor) and not isinstance(valued, torch.cuda.FloatTensor)
        assert torch.cuda.LongTensor().shape == (0,)
    assert [e["size"] for e in t.snapshot()["device_traces"][0] if e["action"] == "alloc"] == [64, 6]
    assert torch.cuda.FloatTensor is original


def test_recurrent_cells_allocate_as_the_h100_did():
    """nn.LSTMCell, nn.GRUCell and nn.RNNCell take CUDA's fused path (vramlab/_tracer/rules/cells.py, from
    PyTorch's RNN.cpp and RNN.cu): every allocation and free of moving the cell to the GPU, its
    forward and its backward, for the cells measured on the H100 (reports/reference/h100/recurrent):
    154 seen while designing, 298 held out (measured after the rule was committed). The first
    cells of each measuring process are left out: they made its cuBLAS and cuBLASLt workspaces."""
    folder = ROOT / "reports/reference/h100/recurrent"
    seen = [json.loads(line) for line in gzip.open(folder / "random.jsonl.gz", "rt")]
    held_out = [json.loads(line) for line in gzip.open(folder / "cells-heldout.jsonl.gz", "rt")]
    cells = [row for row in seen if row.get("config", {}).get("cell")][1:] + [row for row in held_out if "config" in row][2:]
    assert len(cells) == 154 + 298
    # CI's time: every second cell (every 2 x VRAMLAB_TRACE_SAMPLE-th under a sampled run); all
    # 452 with VRAMLAB_ALL_ROWS=1.
    every = 1 if os.environ.get("VRAMLAB_ALL_ROWS") else 2 * SAMPLE
    for row in cells[::every]:
        ours = _cell_events(row["config"])
        for phase in ("to_device", "forward", "backward"):
            assert ours[phase] == [[a, size] for a, size, _ in row[phase]], (row["config"], phase)


def _fast_path_events(cfg):
    """What tracing one measured call of scripts/measure_mha_fastpath.py allocates and frees, as
    [action, bytes] in order (the call alone)."""
    import measure_mha_fastpath

    with vramlab.trace(gpu="h100") as t:
        # The measuring process had made cuBLAS's and cuBLASLt's workspaces first.
        a = torch.ones(8, 8, device="cuda")
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            torch.nn.functional.linear(a.to(dtype), a.to(dtype), a[0].to(dtype))
        marks = []

        def during(call):
            marks.append(len(t.record.events))
            out = call()
            marks.append(len(t.record.events))
            return out, None

        measure_mha_fastpath.events_during, measured = during, measure_mha_fastpath.events_during
        try:
            measure_mha_fastpath.measure(cfg)
        finally:
            measure_mha_fastpath.events_during = measured
    return [[e["action"][0], e["size"]] for e in t.record.events[marks[0] : marks[1]] if e["action"] in ("alloc", "free_completed")]


def test_attention_fast_paths_allocate_as_the_h100_did():
    """nn.MultiheadAttention and nn.TransformerEncoderLayer in inference, asked for attention
    weights, given masks, or in half precision (cuDNN attention), and the same calls where PyTorch
    takes its ordinary path: every allocation and free of the call, against a quarter of the 1,200
    calls measured on the H100 (all of them with VRAMLAB_ALL_ROWS=1; reports/reference/h100/mha-fastpath, seen while designing).
    nn.TransformerEncoder's nested tensors are refused in one line."""
    from vramlab._tracer.compat import release

    if release(torch) != (2, 11):
        # Under torch 2.15 the bf16 encoder layer with a padding mask frees a 72,912-byte block
        # before its next allocation where 2.11 did after (row encoder_padding, event 13): not
        # investigated yet, and these measurements are 2.11's.
        pytest.skip(f"the fast-path calls were measured under torch 2.11; torch {torch.__version__} differs in one row (not investigated)")
    # Every fourth row (every 4N-th under VRAMLAB_TRACE_SAMPLE=N); all 1,200 with
    # VRAMLAB_ALL_ROWS=1.
    every = 1 if os.environ.get("VRAMLAB_ALL_ROWS") else 4 * SAMPLE
    rows = [json.loads(line) for line in gzip.open(ROOT / "reports/reference/h100/mha-fastpath/mha.jsonl.gz", "rt")][1::every]
    assert len(rows) == len(range(1, 1200, every))
    refused = 0
    for row in rows:
        if "_nested_tensor_from_mask" in row["fast_ops"]:
            with pytest.raises(UnfollowedError, match="nested tensors") as err:
                _fast_path_events(row["config"])
            assert "\n" not in str(err.value)
            refused += 1
            continue
        assert _fast_path_events(row["config"]) == [[a, size] for a, size, _ in row["events"]], row["config"]
    assert refused == 48 if every == 1 else 0 < refused < 40


def test_grad_scaler_steps_are_traced_as_healthy_steps_and_noted():
    """GradScaler's step reads back found_inf; the trace answers 0 (no overflow) and says so."""
    with vramlab.trace(gpu="h100") as t:
        model = torch.nn.Linear(256, 256).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cuda")
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(torch.randn(32, 256, device="cuda")).float().square().mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        # Other reads of values that decide still stop the trace.
        with pytest.raises(UnfollowedError):
            loss.item() > 1.0
    assert any("GradScaler's found_inf answered 0" in n for n in t.snapshot()["vramlab_notes"])


@pytest.mark.parametrize("profile", ["h100", "h200"])
def test_the_shipped_convolution_table_is_the_measurements(profile):
    """The package's table of cuDNN workspaces is what scripts/build_conv_table.py makes of the
    committed measurements, and a convolution measured twice gave the same answer."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import build_conv_table

    shipped = json.load(gzip.open(pathlib.Path(vramlab.__file__).parent / "_tracer" / "rules" / f"_conv_{profile}.json.gz", "rt"))
    assert shipped == build_conv_table.build(profile)
    assert len(shipped["entries"]) > 10_000 and shipped["cudnn"] == 91900


def test_each_gpu_answers_from_its_own_measurements():
    """cuDNN chooses otherwise on an H200 for some shapes: the trace for each GPU follows its own."""
    from vramlab._tracer.rules import convolution as _convolution

    h100, h200 = _convolution.table("NVIDIA H100 80GB HBM3"), _convolution.table("NVIDIA H200")
    differs = next(
        k for k in sorted(h100["entries"]) if k in h200["entries"] and 0 < h100["entries"][k][1] != h200["entries"][k][1] > 0
    )
    dtype, x, w, stride, padding, dilation, groups = differs.split("|")
    shape = lambda text: [int(v) for v in text.split(",")]
    made = {}
    for gpu in ("h100", "h200"):
        with vramlab.trace(gpu=gpu) as t:
            conv = torch.nn.Conv2d(shape(x)[1], shape(w)[0], shape(w)[2:], shape(stride), shape(padding), shape(dilation), int(groups), bias=False)
            conv.to(device="cuda", dtype=getattr(torch, dtype))(torch.randn(shape(x), device="cuda", dtype=getattr(torch, dtype)))
        made[gpu] = [e["size"] for e in t.snapshot()["device_traces"][0] if e["action"] == "alloc"][-1]
    assert made == {"h100": h100["entries"][differs][1], "h200": h200["entries"][differs][1]}


def test_convolutions_allocate_their_measured_workspaces_in_pytorchs_order():
    """A measured convolution: output, then its workspace; backward: the input's gradient and its
    workspace, then the weight's and its workspace, then the bias gradient."""
    from vramlab._tracer.rules import convolution as _convolution

    entry = _convolution.table("NVIDIA H100 80GB HBM3")["entries"][_convolution.key(torch.float32, [64, 64, 32, 32], [128, 64, 3, 3], 1, 1, 1, 1)]
    forward, data, weight = _convolution.workspaces(entry)
    assert entry[0] == "Cudnn" and min(forward, data, weight) > 0
    with vramlab.trace() as t:
        conv = torch.nn.Conv2d(64, 128, 3, padding=1).cuda()
        x = torch.randn(64, 64, 32, 32, device="cuda", requires_grad=True)
        conv(x).sum().backward()
    sizes = [e["size"] for e in t.snapshot()["device_traces"][0] if e["action"] == "alloc"]
    out, grad_in, grad_w = 64 * 128 * 32 * 32 * 4, 64 * 64 * 32 * 32 * 4, 128 * 64 * 9 * 4
    assert sizes[sizes.index(out) + 1] == forward
    at = sizes.index(grad_in, sizes.index(forward) + 1)
    assert sizes[at : at + 4] == [grad_in, data, grad_w, weight]
    assert any("as measured" in n for n in t.snapshot()["vramlab_notes"])


@pytest.mark.parametrize(
    "program, why",
    [
        (lambda: torch.nn.Conv2d(3, 8, 3).cuda().double()(torch.randn(3, 3, 17, 17, device="cuda", dtype=torch.float64)), "outside the measured table and the fitted model"),
        (lambda: torch.nn.ConvTranspose2d(8, 8, 3, stride=2, output_padding=1).cuda()(torch.randn(2, 8, 8, 8, device="cuda")), "transposed"),
        (lambda: torch.nn.Conv3d(4, 8, 3, dilation=2).cuda()(torch.randn(2, 4, 8, 8, 8, device="cuda")), "3-d convolutions outside the fitted model"),
        (lambda: torch.nn.Conv1d(8, 8, 3, dilation=2).cuda()(torch.randn(2, 8, 32, device="cuda")), "outside the measured table and the fitted model"),
    ],
)
def test_convolutions_outside_the_table_are_traced_without_workspaces_and_said(program, why):
    with vramlab.trace() as t:
        program()
    notes = [n for n in t.snapshot()["vramlab_notes"] if "without cuDNN's workspaces" in n]
    assert len(notes) == 1 and why in notes[0]


def test_convolutions_outside_the_table_take_the_fitted_models_workspaces_and_say_so():
    """An ordinary convolution the measured table lacks gets the fitted model's workspaces
    (rules/conv_model.py), after its output, with a note saying they are fitted, not measured."""
    from vramlab._tracer.rules import conv_model

    with vramlab.trace() as t:
        # A shape neither GPU's table holds (so neither table answers it).
        torch.nn.Conv2d(16, 64, 5, padding=2).cuda()(torch.randn(16, 16, 64, 64, device="cuda"))
    forward = conv_model.workspaces("h100", "float32", 16, 16, 64, 64, 64, 5, 5, 1, 2, 1, 1)[0]
    sizes = [e["size"] for e in t.snapshot()["device_traces"][0] if e["action"] == "alloc"]
    out = 16 * 64 * 64 * 64 * 4
    assert forward and sizes[sizes.index(out) + 1] == forward
    assert any("model fitted to it" in n for n in t.snapshot()["vramlab_notes"])


def test_channels_last_convolutions_outside_the_table_take_the_channels_last_models_workspaces():
    """A channels-last convolution neither table holds gets the channels-last trees' workspaces
    (conv_model.CHANNELS_LAST_MODEL), not the NCHW model's, and a note saying which; before those
    trees it was traced with none."""
    from vramlab._tracer.rules import conv_model

    with vramlab.trace(gpu="h200") as t:
        conv = torch.nn.Conv2d(48, 96, 3, padding=1).cuda().to(memory_format=torch.channels_last)
        conv(torch.randn(40, 48, 72, 72, device="cuda").to(memory_format=torch.channels_last))
    forward = conv_model.workspaces("h200", "float32", 40, 48, 72, 72, 96, 3, 3, 1, 1, 1, 1, channels_last=True)[0]
    contiguous = conv_model.workspaces("h200", "float32", 40, 48, 72, 72, 96, 3, 3, 1, 1, 1, 1)[0]
    assert forward != contiguous
    sizes = [e["size"] for e in t.snapshot()["device_traces"][0] if e["action"] == "alloc"]
    out = 40 * 96 * 72 * 72 * 4
    assert sizes[sizes.index(out) + 1 :] == ([forward] if forward else [])
    assert any("channels-last model" in n for n in t.snapshot()["vramlab_notes"])


def test_1d_convolutions_take_the_fitted_models_workspaces_as_cudnns_2d_ones_and_say_so():
    """A 1-d convolution runs on cuDNN as the 2-D one of height 1 (Convolution.cpp: view1d_as_2d,
    view4d; its input made contiguous first): the fitted model's workspaces for that shape, after
    the output, with a note giving the model's accuracy on 1-d convolutions kept out of its fit."""
    from vramlab._tracer.rules import conv_model

    with vramlab.trace() as t:
        # A text CNN's: embeddings (batch, time, 300) seen as (batch, 300, time).
        x = torch.randn(64, 400, 300, device="cuda").transpose(1, 2)
        torch.nn.Conv1d(300, 256, 3).cuda()(x)
    forward = conv_model.workspaces("h100", "float32", 64, 300, 1, 400, 256, 1, 3, (1, 1), (0, 0), (1, 1), 1)[0]
    sizes = [e["size"] for e in t.snapshot()["device_traces"][0] if e["action"] == "alloc"]
    copy, out = 64 * 300 * 400 * 4, 64 * 256 * 398 * 4
    assert forward and sizes[-3:] == [copy, out, forward]
    assert any("1-d convolutions" in n and "kept out of the fit" in n for n in t.snapshot()["vramlab_notes"])


def test_3d_convolutions_take_the_3d_models_workspaces_and_say_so():
    """A 3-d convolution gets the workspaces of the model fitted to 3-d convolutions measured on
    the H100 (rules/conv_model.py, workspaces_3d), after its output, with a note giving its
    held-out figures; a transposed one its extrapolation."""
    from vramlab._tracer.rules import conv_model

    with vramlab.trace(gpu="h100") as t:
        # A video network's stem: 3x7x7, stride (1, 2, 2).
        torch.nn.Conv3d(3, 64, (3, 7, 7), stride=(1, 2, 2), padding=(1, 3, 3), bias=False).cuda()(torch.randn(8, 3, 16, 112, 112, device="cuda"))
    forward = conv_model.workspaces_3d("h100", "float32", 8, 3, 16, 112, 112, 64, 3, 7, 7, (1, 2, 2), (1, 3, 3), (1, 1, 1), 1)[0]
    sizes = [e["size"] for e in t.snapshot()["device_traces"][0] if e["action"] == "alloc"]
    out = 8 * 64 * 16 * 56 * 56 * 4
    assert forward and sizes[sizes.index(out) + 1] == forward
    assert any("3-d convolutions" in n and "kept out of its fit" in n for n in t.snapshot()["vramlab_notes"])
    with vramlab.trace(gpu="h100") as t:
        torch.nn.ConvTranspose3d(32, 16, 2, stride=2).cuda()(torch.randn(2, 32, 8, 16, 16, device="cuda"))
    assert any("transposed 3-d convolutions have workspaces extrapolated" in n for n in t.snapshot()["vramlab_notes"])


def test_transposed_convolutions_take_the_models_extrapolation_and_say_so():
    """A transposed convolution's workspaces are those of the convolution cuDNN runs for it
    (rules/conv_model.py, extrapolate=True), with a note saying they are extrapolated."""
    from vramlab._tracer.rules import conv_model

    with vramlab.trace() as t:
        torch.nn.ConvTranspose2d(512, 256, 4, 2, 1, bias=False).cuda()(torch.randn(64, 512, 4, 4, device="cuda"))
    forward = conv_model.workspaces("h100", "float32", 64, 512, 4, 4, 256, 4, 4, 2, 1, 1, 1, transposed=True, extrapolate=True)[0]
    sizes = [e["size"] for e in t.snapshot()["device_traces"][0] if e["action"] == "alloc"]
    out = 64 * 256 * 8 * 8 * 4
    assert forward and sizes[sizes.index(out) + 1] == forward
    assert any("extrapolated" in n for n in t.snapshot()["vramlab_notes"])


def test_cudnn_benchmark_mode_is_not_answered_from_the_table():
    with vramlab.trace() as t:
        torch.backends.cudnn.benchmark = True
        try:
            torch.nn.Conv2d(64, 128, 3, padding=1).cuda()(torch.randn(64, 64, 32, 32, device="cuda"))
        finally:
            torch.backends.cudnn.benchmark = False
    assert any("benchmark" in n for n in t.snapshot()["vramlab_notes"])


def test_a_gpu_without_measurements_traces_convolutions_without_workspaces_and_says_so(tmp_path):
    profile = (ROOT / "experiments" / "profiles" / "h100.toml").read_text()
    assert 'name = "NVIDIA H100 80GB HBM3"' in profile
    other = tmp_path / "h100-pcie.toml"
    other.write_text(profile.replace('name = "NVIDIA H100 80GB HBM3"', 'name = "NVIDIA H100 PCIe"'))
    with vramlab.trace(gpu=str(other)) as t:
        torch.nn.Conv2d(64, 128, 3, padding=1).cuda()(torch.randn(64, 64, 32, 32, device="cuda"))
    assert any("no convolution workspaces were measured on the NVIDIA H100 PCIe" in n for n in t.snapshot()["vramlab_notes"])


PROBE = ROOT / "reports" / "reference" / "h100" / "sdpa-backends" / "probe.jsonl.gz"


def _probe_tensors(row, device, length):
    dtype = getattr(torch, row["dtype"].split(".")[-1])
    grad = row.get("grad", True)
    q = torch.randn(2, row["hq"], length, row["d"], device=device, dtype=dtype, requires_grad=grad)
    k = torch.randn(2, row["hk"], length, row["d"], device=device, dtype=dtype, requires_grad=grad)
    v = torch.randn(2, row["hk"], length, row["d"], device=device, dtype=dtype, requires_grad=grad)
    mask = {
        None: None,
        "bool": lambda: torch.ones(2, 1, length, length, device=device, dtype=torch.bool).tril(),
        "float": lambda: torch.zeros(2, 1, length, length, device=device, dtype=dtype),
        "float_grad": lambda: torch.zeros(1, row["hq"], length, length, device=device, dtype=dtype, requires_grad=grad),
    }[row["mask"]]
    return q, k, v, mask() if mask else None


def test_attention_backends_are_chosen_as_on_the_h100():
    """torch._fused_sdp_choice on the H100 for 864 argument sets (dtypes, head sizes, grouped key
    heads with and without enable_gqa, masks, causal, gradients, lengths): the trace picks the same
    backend for each (seen while designing: two of its rules were mended from these)."""
    from vramlab._tracer.rules import attention as _attention

    rows = [json.loads(line) for line in gzip.open(PROBE, "rt")]
    choices = [r for r in rows if r["kind"] == "choice"]
    assert len(choices) == 864
    wrong = []
    for row in choices:
        q, k, v, mask = _probe_tensors(row, "meta", row["length"])
        bound = _attention.bind((q, k, v), {"attn_mask": mask, "is_causal": row["causal"], "enable_gqa": row["gqa"]})
        ours = _attention.choose(torch, bound, 9)
        if ours != row["backend"]:
            wrong.append((row, ours))
    assert not wrong, f"{len(wrong)} differ, first: {wrong[0]}"


def test_attention_allocates_as_the_h100_did_on_every_backend():
    """Forward and backward, each allocation and free in order, for the math path (grouped key
    heads in float32), memory-efficient attention with boolean, float and learned masks, and
    cuDNN attention with masks, large heads and grouped key heads (fitted: recorded on the H100)."""
    rows = [json.loads(line) for line in gzip.open(PROBE, "rt") if '"allocations"' in line]
    assert len(rows) == 9
    for row in rows:
        with vramlab.trace() as t:
            q, k, v, mask = _probe_tensors(row, "cuda", 384)
            start = len(t.snapshot()["device_traces"][0])
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=row["causal"], enable_gqa=row["gqa"])
            middle = len(t.snapshot()["device_traces"][0])
            out.backward(torch.ones_like(out))
            end = len(t.snapshot()["device_traces"][0])
        events = t.snapshot()["device_traces"][0]

        def steps(lo, hi):
            return [[e["action"][0], e["size"]] for e in events[lo:hi] if e["action"] in ("alloc", "free_completed")]

        recorded = {part: [[a, size] for a, size, *_ in row[part]] for part in ("forward", "backward")}
        assert steps(start, middle) == recorded["forward"], (row["dtype"], row["d"], row["mask"])
        assert steps(middle, end) == recorded["backward"], (row["dtype"], row["d"], row["mask"])


def test_values_known_without_a_gpu_are_answered_and_others_still_stop():
    """A mask made on the CPU or by a factory has known values (vramlab/_tracer/values.py): reading them
    answers as the GPU would, in-place writes through views included; random values still stop."""
    with vramlab.trace() as t:
        tokens = torch.ones(4, 16, dtype=torch.long)
        tokens[1, -3:] = 0
        mask = tokens.to("cuda")
        assert not bool(mask.all()) and int(mask.sum()) == 61
        ones = torch.ones(4, 16, dtype=torch.long, device="cuda")
        assert bool(ones.all())
        ones[:, -2:] = 0
        assert not bool(ones.all()) and int((ones == 0).sum()) == 8
        assert float((1.0 - ones[0].float()).max()) == 1.0
    assert any("values read back were known" in n for n in t.snapshot()["vramlab_notes"])
    with pytest.raises(UnfollowedError, match="_local_scalar_dense"):
        with vramlab.trace():
            bool(torch.randint(0, 2, (8,), device="cuda").all())
    with pytest.raises(UnfollowedError, match="_local_scalar_dense"):
        with vramlab.trace():
            weight = torch.nn.Linear(64, 64).cuda().weight
            # A decision on it: a number only printed or dropped would be answered (printed.py).
            if float(weight.sum()) > 0:
                pass


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_recomputation_runs_as_on_the_gpu(reentrant):
    """The autograd engine does not carry torch function modes into a checkpoint's recomputation;
    the trace puts its own back, so the recomputed attention takes the GPU's backend again (a
    different one would save other tensors and PyTorch's checkpoint would refuse)."""
    from torch.utils.checkpoint import checkpoint

    def block(x):
        q = x.view(2, 64, 4, 32).transpose(1, 2)
        return torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).transpose(1, 2).reshape(2, 64, 128)

    with vramlab.trace() as t:
        x = torch.randn(2, 64, 128, device="cuda", requires_grad=True)
        checkpoint(block, x, use_reentrant=reentrant).sum().backward()
    notes = t.snapshot()["vramlab_notes"]
    assert any("2 memory-efficient attention calls" in n for n in notes), notes


def test_fused_optimizers_and_memory_queries_answer_as_on_the_gpu():
    with vramlab.trace() as t:
        model = torch.nn.Linear(1024, 1024).cuda()
        opt = torch.optim.Adam(model.parameters(), fused=True)
        model(torch.randn(64, 1024, device="cuda")).sum().backward()
        opt.step()
        torch.cuda.reset_peak_memory_stats()
        assert torch.cuda.max_memory_allocated() == torch.cuda.memory_allocated()
        assert torch.cuda.memory_reserved() >= torch.cuda.memory_allocated() > 0
        free, total = torch.cuda.mem_get_info()
        assert total == torch.cuda.get_device_properties(0).total_memory and free < total
    assert any("a lower bound" in n for n in t.snapshot()["vramlab_notes"])


def test_a_reset_of_the_peaks_is_replayed_as_memory_stats_reports_it(tmp_path):
    """torch.cuda.reset_peak_memory_stats() in the program: the replay's PyTorch statistics count
    their peaks from it, as memory_stats() does (CUDACachingAllocator.cpp, resetPeakStats), from
    the trace and from its saved snapshot alike; the replay's own peak stays the whole program's."""
    with vramlab.trace(gpu="h100") as t:
        big = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
        del big
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        small = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
        del small
    t.save(tmp_path / "snap.pickle")
    for source in (t, str(tmp_path / "snap.pickle")):
        result = vramlab.replay(source)["results"][0]
        assert result["pytorch_stats"]["allocated_bytes.all.peak"] == 4 << 20
        assert result["peak_allocated_bytes"] == 64 << 20
    assert any("resets of the peak statistics" in n for n in t.snapshot()["vramlab_notes"])


def test_kernels_with_unsized_scratch_are_said():
    with vramlab.trace() as t:
        x = torch.randn(64, 1000, device="cuda")
        x.sort(dim=1)
        x.cumsum(1)
    assert any("sorts, scans, top-k" in n for n in t.snapshot()["vramlab_notes"])


def test_cuda_utilities_training_scripts_call_answer_inside_a_trace(tmp_path):
    """Events, the default stream, device contexts, the default device and PyTorch's own memory
    history calls work inside a trace (each failed with 'no NVIDIA driver' on a CPU machine)."""
    with vramlab.trace() as t:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda.current_stream().synchronize()
        with torch.cuda.device(0):
            torch.set_default_device("cuda")
            x = torch.randn(1024)
            torch.set_default_device("cpu")
        end.record()
        assert start.elapsed_time(end) == 0.0
        torch.cuda.memory._record_memory_history(max_entries=10)
        torch.cuda.memory._dump_snapshot(str(tmp_path / "inside.pickle"))
        assert x.is_cuda and x.device.type == "cuda"
    assert torch.get_default_device().type == "cpu"
    assert pickle.loads((tmp_path / "inside.pickle").read_bytes())["device_traces"][0][0]["size"] == 4096
    assert any("a trace has no time" in n for n in t.snapshot()["vramlab_notes"])


def test_copies_to_the_host_are_read_only_where_the_values_are_known():
    with vramlab.trace():
        labels = torch.tensor([0, 1, 1]).to("cuda")
        assert labels.cpu().tolist() == [0, 1, 1]
    # Unknown values are copied without them (test_trace_rules_35q.py), and their read stops it.
    with pytest.raises(UnfollowedError, match="reads values it copied from the GPU to the host"):
        with vramlab.trace():
            torch.randn(4, device="cuda").cpu().tolist()


def test_the_breakdown_sums_to_the_peak_and_names_what_holds_it():
    with vramlab.trace() as t:
        model = torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.Linear(2048, 2048)).cuda()
        opt = torch.optim.Adam(model.parameters())
        for _ in range(2):
            model(torch.randn(256, 2048, device="cuda")).sum().backward()
            opt.step()
            opt.zero_grad()
    where = t.breakdown()
    assert where["peak_allocated"] == t.peak_allocated == sum(where["live_at_peak"].values())
    weights = 2 * (2048 * 2048 + 2048) * 4
    parameters = where["live_at_peak"]["parameters and buffers"]
    assert weights <= parameters < weights + 4096
    # Adam's two moments per parameter were made in the first step and live through the second.
    assert where["live_at_peak"]["optimizer"] >= 2 * weights
    assert where["live_at_peak"]["workspaces"] >= 32 << 20


def test_reads_are_answered_only_when_asked_and_always_said():
    def program():
        model = torch.nn.Linear(64, 64).cuda()
        for step in range(2):
            loss = model(torch.randn(8, 64, device="cuda")).square().mean()
            loss.backward()
            print(f"step {step}: loss {loss.item():.3f}, first {model.weight[0].cpu()[0]:.3f}")

    # Values only printed are handed over as placeholders (unknown.py), and said.
    with vramlab.trace() as t:
        program()
    notes = [n for n in t.snapshot()["vramlab_notes"] if "placeholders" in n]
    assert len(notes) == 1 and notes[0].startswith("4 values read back")
    # A value that decides stops the trace, naming where it was read.
    with pytest.raises(UnfollowedError, match=r"a comparison \(lt\) at .*decides on a value it read back at"):
        with vramlab.trace():
            loss = torch.nn.Linear(64, 64).cuda()(torch.randn(8, 64, device="cuda")).square().mean()
            if loss.item() < 1.0:
                pass
    with vramlab.trace(answer_reads=0.0) as t:
        program()
    notes = [n for n in t.snapshot()["vramlab_notes"] if "answer_reads" in n]
    assert len(notes) == 1 and notes[0].startswith("4 values read back")
    with pytest.raises(UnfollowedError, match="nonzero"):
        with vramlab.trace(answer_reads=1.0):
            torch.nonzero(torch.randn(4, device="cuda"))


def test_stand_ins_say_they_are_on_cuda_and_pytorchs_fast_paths_are_refused():
    """Programs and PyTorch's own Python code branch on a tensor's device: the stand-ins answer
    as CUDA tensors, so nn.MultiheadAttention without gradients takes its fused fast path, as on
    the GPU (before, the trace silently took the slow path); nested tensors are refused in one
    line."""
    with vramlab.trace():
        x = torch.randn(2, 10, 64, device="cuda")
        assert x.is_cuda and x.device == torch.device("cuda", 0) and x.device.type == "cuda" and x.get_device() == 0
        assert torch.zeros(3, device=x.device).device.type == "cuda"
        mha = torch.nn.MultiheadAttention(64, 4, batch_first=True).cuda()
        mha(x, x, x)[0].sum().backward()  # with gradients: the ordinary path, followed
    # The fast path's scaled-dot-product branch (no weights asked for, no mask) is followed:
    # the projection, the attention (memory-efficient, in float32 on the H100), the output.
    with vramlab.trace() as t:
        x = torch.randn(2, 10, 64, device="cuda")
        mha = torch.nn.MultiheadAttention(64, 4, batch_first=True).cuda().eval()
        with torch.no_grad():
            out = mha(x, x, x, need_weights=False)[0]
    assert out.shape == (2, 10, 64) and any("memory-efficient attention" in n for n in t.snapshot()["vramlab_notes"])
    # Its general branch (attention weights asked for, or a mask) is followed too.
    with vramlab.trace():
        x = torch.randn(2, 10, 64, device="cuda")
        mha = torch.nn.MultiheadAttention(64, 4, batch_first=True).cuda().eval()
        with torch.no_grad():
            out, weights = mha(x, x, x)
    assert out.shape == (2, 10, 64) and weights.shape == (2, 10, 10)
    with pytest.raises(UnfollowedError, match="_nested_tensor_from_mask_left_aligned"):
        with vramlab.trace():
            encoder = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True), 2).cuda().eval()
            pad = torch.zeros(2, 10, dtype=torch.bool)
            pad[1, -3:] = True
            with torch.no_grad():
                encoder(torch.randn(2, 10, 64, device="cuda"), src_key_padding_mask=pad.cuda())


def test_tensors_made_from_host_data_are_recorded_with_their_values():
    """torch.tensor(data, device="cuda") copies to the GPU out of dispatch modes' sight: it was
    missing from the trace (4 MB here) and its values unknown."""
    import numpy

    with vramlab.trace() as t:
        big = torch.tensor(numpy.ones(1 << 20, dtype=numpy.float32), device="cuda")
        ids = torch.as_tensor([3, 1, 2], device="cuda")
        new = big.new_tensor([1.0, 2.0])
        leaf = torch.tensor([1.0, 2.0], device="cuda", requires_grad=True)
        assert int(ids.max()) == 3 and new.is_cuda and leaf.is_leaf and leaf.requires_grad
    sizes = [e["size"] for e in t.snapshot()["device_traces"][0] if e["action"] == "alloc"]
    assert sizes[:4] == [4 << 20, 24, 8, 8], sizes


def test_values_that_shape_results_are_answered_when_known_and_refused_in_one_line_when_not():
    """A boolean mask's indexing and nonzero make shapes from values: answered from known values
    (vramlab/_tracer/values.py), else UnfollowedError; an operator PyTorch has no meta kernel for is
    refused in one line instead of escaping as NotImplementedError."""
    with vramlab.trace() as t:
        x = torch.randn(6, 4, device="cuda")
        mask = torch.tensor([True, False, True, True, False, False]).cuda()
        assert x[mask].shape == (3, 4) and torch.nonzero(mask).shape == (3, 1)
        labels = torch.tensor([0, -100, 2]).cuda()
        assert labels.masked_select(labels >= 0).tolist() == [0, 2]
    assert any("whose result's shape comes from values" in n for n in t.snapshot()["vramlab_notes"])
    with pytest.raises(UnfollowedError, match="index at .*test_trace.py:.*boolean mask"):
        with vramlab.trace():
            x = torch.randn(6, 4, device="cuda")
            x[x > 0]
    # The fused Adagrad step has a CUDA kernel and no meta one (the CTC loss and binomial, once the
    # examples here, are followed now: test_trace_ctc.py, rules/samplers.py).
    with pytest.raises(UnfollowedError, match="_fused_adagrad_ at .*no meta kernel") as err:
        with vramlab.trace():
            ones = [torch.ones(3, device="cuda")]
            torch.ops.aten._fused_adagrad_(ones, ones, ones, [torch.ones(1, device="cuda")], lr=0.1, lr_decay=0.0, weight_decay=0.0, eps=1e-10, maximize=False)
    assert "\n" not in str(err.value)
    # A factory has no tensor argument to say it is the GPU's: its device does.
    with pytest.raises(UnfollowedError, match="_cudnn_init_dropout_state at .*no meta kernel"):
        with vramlab.trace():
            torch.ops.aten._cudnn_init_dropout_state(0.5, True, 0, dtype=torch.uint8, device="cuda")


def test_more_of_torch_cuda_answers_inside_a_trace(tmp_path):
    """Each of these raised 'no NVIDIA driver', 'Invalid device argument' or an AssertionError."""
    with vramlab.trace() as t:
        x = torch.randn(256, device="cuda")
        assert torch.cuda.memory.memory_allocated(0) == torch.cuda.memory_allocated() == 1024
        torch.cuda.memory.reset_peak_memory_stats(0)
        torch.cuda.reset_accumulated_memory_stats()
        generator = torch.Generator(device="cuda")
        generator.manual_seed(0)
        torch.randn(4, device="cuda", generator=generator)
        torch.cuda.set_rng_state(torch.cuda.get_rng_state())
        half = x.type(torch.cuda.HalfTensor)
        assert half.dtype == torch.float16 and half.is_cuda
        model = torch.nn.Linear(8, 8).cuda()
        opt = torch.optim.Adam(model.parameters(), capturable=True)
        model(torch.randn(2, 8, device="cuda")).sum().backward()
        opt.step()
        torch.save(model.state_dict(), tmp_path / "model.pt")
    assert any("torch.save calls" in n for n in t.snapshot()["vramlab_notes"])


def test_a_read_in_a_library_names_the_programs_line_too(tmp_path):
    library = tmp_path / "site-packages" / "somelib.py"
    library.parent.mkdir()
    library.write_text("def reads(t):\n    return bool(t.sum() > 0)\n")
    sys.path.insert(0, str(library.parent))
    try:
        import somelib

        with pytest.raises(UnfollowedError) as err:
            with vramlab.trace():
                somelib.reads(torch.randn(4, device="cuda"))
    finally:
        sys.path.remove(str(library.parent))
    assert "somelib.py:2 (called from " in str(err.value) and "test_trace.py:" in str(err.value)


def test_no_mode_is_left_on_the_stack_after_a_trace():
    """Leaving a trace used to set the default device to "cpu", which leaves a DeviceContext mode
    on PyTorch's stack for good: every later call (the program's own, on the CPU) paid for it and
    PyTorch's fast paths were turned off."""
    before = torch.overrides._get_current_function_mode_stack()
    with vramlab.trace():
        torch.set_default_device("cuda")
        torch.randn(4)
    assert torch.overrides._get_current_function_mode_stack() == before and torch.get_default_device().type == "cpu"
    with vramlab.trace():
        torch.randn(4, device="cuda")
    assert torch.overrides._get_current_function_mode_stack() == before


def test_the_programs_own_meta_tensors_are_not_gpu_memory():
    """A model built on the meta device (no memory) is the program's, not a stand-in for CUDA
    tensors: neither it nor what is computed from it alone is recorded, and the snapshot says so;
    to_empty(device="cuda") then allocates the parameters on the GPU, as on the GPU."""
    with vramlab.trace() as t:
        with torch.device("meta"):
            model = torch.nn.Linear(1024, 1024)
        doubled = model.weight * 2
        assert doubled.device.type == "meta"
        model.to_empty(device="cuda")
        y = model(torch.empty(8, 1024, device="cuda"))
    events = t.snapshot()["device_traces"][0]
    sizes = [e["size"] for e in events if e["action"] == "alloc"]
    assert sizes[:3] == [1024 * 1024 * 4, 1024 * 4, 8 * 1024 * 4], sizes
    notes = t.snapshot()["vramlab_notes"]
    assert any("made on the meta device" in n and "were not recorded" in n for n in notes), notes
    with vramlab.trace() as t:
        torch.nn.Linear(1024, 1024).cuda()
    assert not any("meta device" in n for n in t.snapshot()["vramlab_notes"])


def test_a_trace_says_what_it_holds_and_tune_takes_it_as_it_is():
    """Issue 38, item 11: a trace's repr is one line with its GPU, events and peak; summary() says
    the rest (steps traced, what next); vramlab.tune(t) and replay(t) take the trace object."""
    with vramlab.trace(gpu="h100") as t:
        model = torch.nn.Linear(1024, 1024).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            model(torch.randn(64, 1024, device="cuda")).sum().backward()
            optimizer.step()
    said = repr(t)
    assert re.fullmatch(r"<vramlab\.trace for NVIDIA H100[^>]*: [\d,]+ events, peak allocated [\d,]+ B \([\d.,]+ MiB\)>", said), said
    summary = t.summary()
    assert summary.splitlines()[0].startswith("vramlab.trace for NVIDIA H100"), summary
    assert "2 training steps traced" in summary and "vramlab.tune(t" in summary, summary
    tuned = vramlab.tune(t, capacity="1 GiB", grid=["", "expandable_segments:True"])
    assert tuned["answer"].startswith("answer: ") and tuned["results"][0]["failed_allocs"] == 0
    assert vramlab.replay(t)["results"][0]["peak_allocated_bytes"] >= t.peak_allocated
    steady = t.steady()
    assert steady["steps"] == 2 and isinstance(steady["advice"], str)


def test_a_1x1_kernels_weight_made_channels_last_makes_its_convolution_channels_last():
    """``.to(memory_format=torch.channels_last)`` gives a 1x1 kernel's weight strides (C, 1, C, C),
    contiguous in both layouts; PyTorch reads such strides as channels-last
    (suggest_memory_format), so cuDNN copies a contiguous input to channels-last first and makes a
    channels-last output (ISSUE35AA's ResNeSt-50d, whose default reserved went from -3.31% to exact)."""
    with vramlab.trace(gpu="h200") as t:
        conv = torch.nn.Conv2d(64, 256, 1, bias=False).cuda().to(memory_format=torch.channels_last)
        assert conv.weight.is_contiguous() and conv.weight.stride() == (64, 1, 64, 64)
        x = torch.randn(8, 64, 28, 28, device="cuda")
        y = conv(x)
    assert y.is_contiguous(memory_format=torch.channels_last) and not y.is_contiguous()
    sizes = [e["size"] for e in t.snapshot()["device_traces"][0] if e["action"] == "alloc"]
    copy, out = 8 * 64 * 28 * 28 * 4, 8 * 256 * 28 * 28 * 4
    assert sizes[sizes.index(out) - 1] == copy
