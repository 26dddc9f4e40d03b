"""Twenty-second held-out group of issue 35 (group ISSUE35V): sixteen more programs of kinds no earlier group had (ModernBERT masked-LM pretraining with padded batches and linear warmup in bf16 autocast; PEFT LoRA on a Gemma-3 1B-shaped text model with bf16 weights and gradient checkpointing; Phi-3 supervised fine-tuning with prompt-masked labels, dynamic padding and gradient accumulation; NLLB-shaped M2M100 translation training with Adafactor, label smoothing and a greedy translate pass; timm EfficientNetV2-S training with RMSpropTF, EMA and fp16 GradScaler; timm Hiera-S training with timm cosine warmup scheduler in bf16; torchvision DeepLabV3-ResNet50 with auxiliary loss, poly LR and fp16 GradScaler; torchvision RetinaNet-v2 detection training then detection; StarCoder2-3B-shaped bf16 batched perplexity evaluation; Granite reward model with a value head and pairwise loss in bf16 weights with fused AdamW; neural cellular automata with a sample pool and long unrolled rollouts; Hyena long-convolution language model with FFT convolutions; EGNN energy-and-force matching with double backward; GradCache chunked contrastive dual-encoder training; convolutional spiking network with surrogate gradients and BPTT; Conv-TasNet speech separation with permutation-invariant SI-SNR), written by a helper that read no part of the tracer, committed before they were recorded on a GPU (an H200) or compared with anything.

Each is a function of the device, recorded by scripts/record_trace_workloads.py (VRAMLAB_HOLDOUT=issue35v).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _padded_batch(batch, max_len, min_len, vocab_lo, vocab_hi, pad_id, device):
    """Right-padded random token batch; returns (ids, attention_mask, lengths) on device."""
    lengths = torch.randint(min_len, max_len + 1, (batch,))
    ids = torch.randint(vocab_lo, vocab_hi, (batch, max_len))
    mask = (torch.arange(max_len)[None, :] < lengths[:, None]).long()
    ids = torch.where(mask.bool(), ids, torch.full_like(ids, pad_id))
    return ids.to(device), mask.to(device), lengths.to(device)


# ---------------------------------------------------------------------------
# 1. ModernBERT masked-LM pretraining
# ---------------------------------------------------------------------------
def hf_modernbert_mlm_padded_warmup_bf16(device):
    """ModernBERT-base-shaped masked LM (transformers ModernBertForMaskedLM from a
    ModernBertConfig: 22 layers, hidden 768, 12 heads, MLP 1152, vocab 50368, alternating
    global / 128-token local attention, sdpa attention, ~150M params, fp32 weights).
    Trains 12 steps on batches of 24 right-padded sequences of 128..512 tokens with an
    attention mask, 30% dynamic masking (80% [MASK], 10% random, 10% kept), labels -100
    elsewhere, under bf16 autocast. AdamW (lr 5e-4, betas 0.9/0.98, wd 0.01 with no decay
    for norms/biases), linear warmup 3 steps then linear decay, grad-norm clipping 1.0."""
    from transformers import ModernBertConfig, ModernBertForMaskedLM, get_linear_schedule_with_warmup

    torch.manual_seed(0)
    dev_type = torch.device(device).type
    cls_id, sep_id, pad_id, mask_id = 50281, 50282, 50283, 50284
    cfg = ModernBertConfig(
        vocab_size=50368, hidden_size=768, intermediate_size=1152, num_hidden_layers=22,
        num_attention_heads=12, local_attention=128, max_position_embeddings=8192,
        pad_token_id=pad_id, cls_token_id=cls_id, sep_token_id=sep_id, bos_token_id=cls_id,
        eos_token_id=sep_id,
    )
    cfg._attn_implementation = "sdpa"
    model = ModernBertForMaskedLM(cfg).to(device)
    model.train()

    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim < 2 or "norm" in name else decay).append(p)
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
        lr=5e-4, betas=(0.9, 0.98), eps=1e-6,
    )
    steps = 12
    sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=3, num_training_steps=steps)

    batch, max_len = 24, 512
    for step in range(steps):
        lengths = torch.randint(128, max_len + 1, (batch,))
        ids = torch.randint(1000, 50000, (batch, max_len))
        pos = torch.arange(max_len)[None, :]
        attn = (pos < lengths[:, None]).long()
        ids[:, 0] = cls_id
        ids[pos == (lengths[:, None] - 1)] = sep_id
        ids[attn == 0] = pad_id
        special = (ids == cls_id) | (ids == sep_id) | (attn == 0)
        prob = torch.full(ids.shape, 0.3)
        prob[special] = 0.0
        masked = torch.bernoulli(prob).bool()
        labels = torch.where(masked, ids, torch.full_like(ids, -100))
        to_mask = torch.bernoulli(torch.full(ids.shape, 0.8)).bool() & masked
        ids[to_mask] = mask_id
        to_rand = torch.bernoulli(torch.full(ids.shape, 0.5)).bool() & masked & ~to_mask
        ids[to_rand] = torch.randint(1000, 50000, ids.shape)[to_rand]

        ids, attn, labels = ids.to(device), attn.to(device), labels.to(device)
        with torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
            out = model(input_ids=ids, attention_mask=attn, labels=labels)
        out.loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if step % 4 == 0:
            print(f"step {step} mlm loss {out.loss.item():.4f} grad norm {gnorm.item():.3f}")


# ---------------------------------------------------------------------------
# 2. PEFT LoRA on a Gemma-3 text model
# ---------------------------------------------------------------------------
def peft_lora_gemma3_1b_checkpointing_bf16_weights(device):
    """Gemma-3-1B-shaped text decoder (transformers Gemma3ForCausalLM from Gemma3TextConfig:
    26 layers, hidden 1152, MLP 6912, 4 query heads / 1 KV head of dim 256, 512-token sliding
    window on 5 of every 6 layers, vocab 262144, ~1B params) cast to bf16 weights, wrapped with
    PEFT LoRA (r 16, alpha 32, dropout 0.05 on q/k/v/o/gate/up/down projections), with
    non-reentrant gradient checkpointing via gradient_checkpointing_enable(). Trains 10 steps
    on batches of 4 right-padded sequences of 640..1024 tokens (labels -100 on padding) under
    bf16 autocast with AdamW (lr 2e-4) and a cosine schedule with 2 warmup steps, clipping 1.0."""
    from transformers import Gemma3TextConfig, Gemma3ForCausalLM, get_cosine_schedule_with_warmup
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    dev_type = torch.device(device).type
    cfg = Gemma3TextConfig(
        vocab_size=262144, hidden_size=1152, intermediate_size=6912, num_hidden_layers=26,
        num_attention_heads=4, num_key_value_heads=1, head_dim=256, sliding_window=512,
        max_position_embeddings=32768, query_pre_attn_scalar=256, pad_token_id=0,
        bos_token_id=2, eos_token_id=1,
    )
    cfg._attn_implementation = "sdpa"
    cfg.use_cache = False
    model = Gemma3ForCausalLM(cfg).to(device=device, dtype=torch.bfloat16)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.enable_input_require_grads()
    lora = LoraConfig(
        r=16, lora_alpha=32, lora_dropout=0.05, bias="none", task_type="CAUSAL_LM",
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    )
    model = get_peft_model(model, lora)
    model.print_trainable_parameters()
    model.train()

    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=2e-4, weight_decay=0.0)
    steps = 10
    sched = get_cosine_schedule_with_warmup(opt, num_warmup_steps=2, num_training_steps=steps)
    for step in range(steps):
        ids, attn, _ = _padded_batch(4, 1024, 640, 3, 262144, 0, device)
        ids[:, 0] = 2
        labels = ids.masked_fill(attn == 0, -100)
        with torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
            out = model(input_ids=ids, attention_mask=attn, labels=labels)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step} loss {out.loss.item():.4f} lr {sched.get_last_lr()[0]:.2e}")


# ---------------------------------------------------------------------------
# 3. Phi-3 supervised fine-tuning with prompt-masked labels
# ---------------------------------------------------------------------------
def hf_phi3_sft_prompt_masked_dynamic_padding_accumulate_bf16(device):
    """Phi-3-shaped decoder (transformers Phi3ForCausalLM from Phi3Config: 16 layers, hidden
    1536, 16 heads without GQA, fused qkv and gate_up projections, MLP 4096, vocab 32064,
    untied embeddings, ~550M params, fp32 weights, sdpa). Supervised fine-tuning: each example
    is a prompt (64..256 tokens, labels -100) plus a response (64..512 tokens, trained), micro
    batches of 4 dynamically right-padded to their longest example (labels -100 on padding),
    bf16 autocast, gradient accumulation over 4 micro-batches for 4 optimizer steps (16
    forward/backward passes). AdamW foreach (lr 3e-5, wd 0.1), cosine schedule with 1 warmup
    step, grad-norm clipping 1.0."""
    from transformers import Phi3Config, Phi3ForCausalLM, get_cosine_schedule_with_warmup

    torch.manual_seed(0)
    dev_type = torch.device(device).type
    pad_id = 32000
    cfg = Phi3Config(
        vocab_size=32064, hidden_size=1536, intermediate_size=4096, num_hidden_layers=16,
        num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=4096,
        original_max_position_embeddings=4096, pad_token_id=pad_id, bos_token_id=1,
        eos_token_id=32000, tie_word_embeddings=False,
    )
    cfg._attn_implementation = "sdpa"
    cfg.use_cache = False
    model = Phi3ForCausalLM(cfg).to(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-5, weight_decay=0.1, foreach=True)
    accum, opt_steps, micro = 4, 4, 4
    sched = get_cosine_schedule_with_warmup(opt, num_warmup_steps=1, num_training_steps=opt_steps)

    for ostep in range(opt_steps):
        total = 0.0
        for _ in range(accum):
            prompt_len = torch.randint(64, 257, (micro,))
            resp_len = torch.randint(64, 513, (micro,))
            seq_len = prompt_len + resp_len
            L = int(seq_len.max())
            ids = torch.full((micro, L), pad_id, dtype=torch.long)
            labels = torch.full((micro, L), -100, dtype=torch.long)
            attn = torch.zeros((micro, L), dtype=torch.long)
            for i in range(micro):
                n, p = int(seq_len[i]), int(prompt_len[i])
                toks = torch.randint(2, 32000, (n,))
                toks[0] = 1
                toks[n - 1] = 32000  # <|endoftext|>
                ids[i, :n] = toks
                labels[i, p:n] = toks[p:]
                attn[i, :n] = 1
            ids, labels, attn = ids.to(device), labels.to(device), attn.to(device)
            with torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
                out = model(input_ids=ids, attention_mask=attn, labels=labels)
                loss = out.loss / accum
            loss.backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        print(f"optimizer step {ostep} sft loss {total:.4f}")


# ---------------------------------------------------------------------------
# 4. NLLB-shaped M2M100 translation with Adafactor
# ---------------------------------------------------------------------------
def hf_m2m100_nllb_translation_adafactor_label_smoothing_bf16(device):
    """NLLB-200-600M-shaped translation model (transformers M2M100ForConditionalGeneration
    from M2M100Config: 12 encoder + 12 decoder layers, d_model 1024, 16 heads, FFN 4096,
    vocab 256206 with tied embeddings, ~615M params, fp32 weights, sdpa). Trains 10 steps on
    batches of 16 source/target pairs (right-padded, 40..128 tokens each, language-code first
    token) with decoder inputs made by shifting targets right, label-smoothed (0.1) cross
    entropy ignoring padding, bf16 autocast, transformers Adafactor (lr 1e-4, no relative step,
    no parameter scaling), grad-norm clipping 1.0. Then greedy generate() of 24 new tokens for
    8 source sentences in eval mode."""
    from transformers import M2M100Config, M2M100ForConditionalGeneration
    from transformers.optimization import Adafactor

    torch.manual_seed(0)
    dev_type = torch.device(device).type
    pad_id, bos_id, eos_id = 1, 0, 2
    vocab = 256206
    cfg = M2M100Config(
        vocab_size=vocab, d_model=1024, encoder_layers=12, decoder_layers=12,
        encoder_attention_heads=16, decoder_attention_heads=16, encoder_ffn_dim=4096,
        decoder_ffn_dim=4096, max_position_embeddings=1024, scale_embedding=True,
        dropout=0.1, attention_dropout=0.1, activation_dropout=0.0,
        pad_token_id=pad_id, bos_token_id=bos_id, eos_token_id=eos_id, decoder_start_token_id=eos_id,
    )
    cfg._attn_implementation = "sdpa"
    model = M2M100ForConditionalGeneration(cfg).to(device)
    model.train()
    opt = Adafactor(model.parameters(), lr=1e-4, scale_parameter=False, relative_step=False,
                    warmup_init=False, weight_decay=0.0)
    criterion = nn.CrossEntropyLoss(ignore_index=-100, label_smoothing=0.1)
    src_lang, tgt_lang = 256047, 256057  # two language-code tokens near the vocab end

    def make_side(batch, lang):
        ids, attn, lengths = _padded_batch(batch, 128, 40, 4, 256000, pad_id, device)
        ids[:, 0] = lang
        ids[torch.arange(batch, device=device), lengths - 1] = eos_id
        return ids, attn

    for step in range(10):
        src, src_mask = make_side(16, src_lang)
        tgt, tgt_mask = make_side(16, tgt_lang)
        labels = tgt.masked_fill(tgt_mask == 0, -100)
        dec_in = torch.full_like(tgt, pad_id)
        dec_in[:, 0] = eos_id
        dec_in[:, 1:] = tgt[:, :-1]
        with torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
            out = model(input_ids=src, attention_mask=src_mask, decoder_input_ids=dec_in,
                        decoder_attention_mask=(dec_in != pad_id).long())
            loss = criterion(out.logits.float().view(-1, vocab), labels.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step} smoothed loss {loss.item():.4f}")

    model.eval()
    src, src_mask = make_side(8, src_lang)
    with torch.no_grad(), torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
        gen = model.generate(input_ids=src, attention_mask=src_mask, max_new_tokens=24,
                             num_beams=1, do_sample=False, forced_bos_token_id=tgt_lang)
    print("generated shape", tuple(gen.shape))


# ---------------------------------------------------------------------------
# 5. timm EfficientNetV2-S with RMSpropTF + EMA + fp16 GradScaler
# ---------------------------------------------------------------------------
def timm_efficientnetv2_rw_s_rmsproptf_ema_fp16_scaler(device):
    """timm efficientnetv2_rw_s (pretrained=False, 1000 classes, drop_rate 0.2, drop_path 0.2,
    ~24M params) in channels_last, trained 16 steps on batches of 48 random 288x288 images with
    timm's label-smoothing cross entropy (0.1), fp16 autocast with torch.amp.GradScaler, the
    timm RMSpropTF optimizer from create_optimizer_v2 (lr 0.003, momentum 0.9, eps 1e-3, wd 1e-5
    without decay on norms/biases) and a timm ModelEmaV3 (decay 0.9998) updated every step;
    then the EMA copy is evaluated under no_grad + fp16 autocast on 2 batches of 64 images at
    384x384."""
    import timm
    from timm.loss import LabelSmoothingCrossEntropy
    from timm.optim import create_optimizer_v2
    from timm.utils import ModelEmaV3

    torch.manual_seed(0)
    dev_type = torch.device(device).type
    model = timm.create_model("efficientnetv2_rw_s", pretrained=False, num_classes=1000,
                              drop_rate=0.2, drop_path_rate=0.2)
    model = model.to(device).to(memory_format=torch.channels_last)
    model.train()
    opt = create_optimizer_v2(model, opt="rmsproptf", lr=0.003, weight_decay=1e-5,
                              momentum=0.9, eps=1e-3)
    ema = ModelEmaV3(model, decay=0.9998)
    scaler = torch.amp.GradScaler(dev_type)
    criterion = LabelSmoothingCrossEntropy(smoothing=0.1)

    for step in range(16):
        x = torch.randn(48, 3, 288, 288, device=device).contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (48,), device=device)
        with torch.autocast(device_type=dev_type, dtype=torch.float16):
            loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        ema.update(model, step=step)
        if step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f} scale {scaler.get_scale():.0f}")

    ema.module.eval()
    correct = 0
    with torch.no_grad(), torch.autocast(device_type=dev_type, dtype=torch.float16):
        for _ in range(2):
            x = torch.randn(64, 3, 384, 384, device=device).contiguous(memory_format=torch.channels_last)
            y = torch.randint(0, 1000, (64,), device=device)
            correct += (ema.module(x).argmax(-1) == y).sum().item()
    print("ema top1", correct / 128)


# ---------------------------------------------------------------------------
# 6. timm Hiera-S with timm cosine scheduler
# ---------------------------------------------------------------------------
def timm_hiera_small_cosine_warmup_adamw_bf16(device):
    """timm hiera_small_224 (pretrained=False, 1000 classes, drop_path 0.1, ~35M params)
    trained 12 steps on batches of 64 random 224x224 images with label-smoothed (0.1) cross
    entropy under bf16 autocast, AdamW (lr 1e-3, wd 0.05, no decay on 1-d params) and timm
    CosineLRScheduler (3 warmup updates, per-update stepping via step_update), grad-norm
    clipping 5.0; then one no_grad bf16 evaluation batch of 128."""
    import timm
    from timm.scheduler import CosineLRScheduler

    torch.manual_seed(0)
    dev_type = torch.device(device).type
    model = timm.create_model("hiera_small_224", pretrained=False, num_classes=1000,
                              drop_path_rate=0.1).to(device)
    model.train()
    decay = [p for p in model.parameters() if p.ndim > 1]
    no_decay = [p for p in model.parameters() if p.ndim <= 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                             {"params": no_decay, "weight_decay": 0.0}], lr=1e-3)
    steps = 12
    sched = CosineLRScheduler(opt, t_initial=steps, warmup_t=3, warmup_lr_init=1e-6,
                              lr_min=1e-5, t_in_epochs=False)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    for step in range(steps):
        x = torch.randn(64, 3, 224, 224, device=device)
        y = torch.randint(0, 1000, (64,), device=device)
        with torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
            loss = criterion(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step_update(num_updates=step + 1)
        if step % 4 == 0:
            print(f"step {step} loss {loss.item():.4f} lr {opt.param_groups[0]['lr']:.2e}")
    model.eval()
    with torch.no_grad(), torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
        logits = model(torch.randn(128, 3, 224, 224, device=device))
    print("eval logits", tuple(logits.shape))


# ---------------------------------------------------------------------------
# 7. torchvision DeepLabV3-ResNet50 segmentation
# ---------------------------------------------------------------------------
def tv_deeplabv3_resnet50_aux_loss_poly_lr_fp16_scaler(device):
    """torchvision deeplabv3_resnet50 (weights=None, weights_backbone=None, 21 classes,
    aux_loss=True, output stride 8, ~42M params) trained 10 steps on batches of 8 random
    480x480 crops with per-pixel labels containing ignore (255) regions: cross entropy
    (ignore_index 255) on the main output plus 0.5 x the auxiliary head, fp16 autocast with
    GradScaler, SGD (momentum 0.9, wd 1e-4, lr 0.02 backbone/classifier and 10x for the aux
    head as in the torchvision reference) with PolynomialLR (power 0.9). Then eval-mode
    inference_mode prediction on 2 images of 520x704 in fp16 autocast."""
    from torchvision.models.segmentation import deeplabv3_resnet50

    torch.manual_seed(0)
    dev_type = torch.device(device).type
    model = deeplabv3_resnet50(weights=None, weights_backbone=None, num_classes=21, aux_loss=True)
    model = model.to(device)
    model.train()
    lr = 0.02
    params = [
        {"params": [p for p in model.backbone.parameters() if p.requires_grad]},
        {"params": [p for p in model.classifier.parameters() if p.requires_grad]},
        {"params": [p for p in model.aux_classifier.parameters() if p.requires_grad], "lr": lr * 10},
    ]
    opt = torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=1e-4)
    steps = 10
    sched = torch.optim.lr_scheduler.PolynomialLR(opt, total_iters=steps, power=0.9)
    scaler = torch.amp.GradScaler(dev_type)
    criterion = nn.CrossEntropyLoss(ignore_index=255)

    for step in range(steps):
        img = torch.randn(8, 3, 480, 480, device=device)
        target = torch.randint(0, 21, (8, 480, 480), device=device)
        target[:, :, :24] = 255
        target[:, 400:, :] = 255
        with torch.autocast(device_type=dev_type, dtype=torch.float16):
            out = model(img)
            loss = criterion(out["out"], target) + 0.5 * criterion(out["aux"], target)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        sched.step()
        print(f"step {step} loss {loss.item():.4f}")

    model.eval()
    with torch.inference_mode(), torch.autocast(device_type=dev_type, dtype=torch.float16):
        pred = model(torch.randn(2, 3, 520, 704, device=device))["out"].argmax(1)
    print("pred", tuple(pred.shape))


# ---------------------------------------------------------------------------
# 8. torchvision RetinaNet v2 detection
# ---------------------------------------------------------------------------
def tv_retinanet_resnet50_fpn_v2_train_then_detect(device):
    """torchvision retinanet_resnet50_fpn_v2 (weights=None, weights_backbone=None, 91 classes,
    all backbone layers trainable with plain BatchNorm, GroupNorm heads, ~38M params) in fp32.
    Trains 8 steps on lists of 4 random images of varying size (about 480..640 x 560..800,
    resized internally to min side 800) each with 3..12 random ground-truth boxes, summing the
    focal classification and GIoU box-regression losses; SGD (lr 0.01, momentum 0.9, wd 1e-4)
    with a LinearLR warmup, grad-norm clipping 10. Then eval-mode detection under no_grad on
    4 images."""
    from torchvision.models.detection import retinanet_resnet50_fpn_v2

    torch.manual_seed(0)
    model = retinanet_resnet50_fpn_v2(weights=None, weights_backbone=None, num_classes=91).to(device)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9, weight_decay=1e-4)
    warmup = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.001, total_iters=5)

    def sample(n):
        images, targets = [], []
        for _ in range(n):
            h = int(torch.randint(480, 641, (1,)))
            w = int(torch.randint(560, 801, (1,)))
            images.append(torch.rand(3, h, w, device=device))
            k = int(torch.randint(3, 13, (1,)))
            x1 = torch.rand(k) * w * 0.7
            y1 = torch.rand(k) * h * 0.7
            bw = 16 + torch.rand(k) * w * 0.3
            bh = 16 + torch.rand(k) * h * 0.3
            boxes = torch.stack([x1, y1, (x1 + bw).clamp(max=w), (y1 + bh).clamp(max=h)], 1)
            targets.append({"boxes": boxes.to(device),
                            "labels": torch.randint(1, 91, (k,)).to(device)})
        return images, targets

    for step in range(8):
        images, targets = sample(4)
        loss_dict = model(images, targets)
        loss = sum(loss_dict.values())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 10.0)
        opt.step()
        warmup.step()
        print(f"step {step} " + " ".join(f"{k} {v.item():.3f}" for k, v in loss_dict.items()))

    model.eval()
    images, _ = sample(4)
    with torch.no_grad():
        dets = model(images)
    print("detections", [len(d["boxes"]) for d in dets])


# ---------------------------------------------------------------------------
# 9. StarCoder2 batched perplexity evaluation
# ---------------------------------------------------------------------------
def hf_starcoder2_3b_batched_perplexity_eval_bf16(device):
    """StarCoder2-3B-shaped code model (transformers Starcoder2ForCausalLM built through
    AutoModelForCausalLM.from_config with dtype bf16 directly on the device: 30 layers, hidden
    3072, 24 query heads / 2 KV heads, MLP 12288 with biases, LayerNorm, sliding window 4096,
    vocab 49152, ~3B params, sdpa). Pure evaluation: model.eval() and torch.inference_mode over
    6 batches of 8 right-padded sequences of 512..2048 tokens with attention masks (default
    use_cache), token-level NLL from float32 logits with padding ignored, reporting perplexity."""
    from transformers import AutoModelForCausalLM, Starcoder2Config

    torch.manual_seed(0)
    cfg = Starcoder2Config(
        vocab_size=49152, hidden_size=3072, intermediate_size=12288, num_hidden_layers=30,
        num_attention_heads=24, num_key_value_heads=2, max_position_embeddings=16384,
        sliding_window=4096, use_bias=True, bos_token_id=0, eos_token_id=0, pad_token_id=0,
    )
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa")
    model.eval()
    nll_sum, tok_count = 0.0, 0
    with torch.inference_mode():
        for b in range(6):
            ids, attn, _ = _padded_batch(8, 2048, 512, 1, 49152, 0, device)
            logits = model(input_ids=ids, attention_mask=attn).logits
            targets = ids[:, 1:].masked_fill(attn[:, 1:] == 0, -100)
            nll = F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.size(-1)),
                                  targets.reshape(-1), ignore_index=-100, reduction="sum")
            nll_sum += nll.item()
            tok_count += int((targets != -100).sum())
            print(f"batch {b} running ppl {math.exp(nll_sum / tok_count):.2f}")


# ---------------------------------------------------------------------------
# 10. Granite reward model (pairwise)
# ---------------------------------------------------------------------------
def hf_granite_reward_model_value_head_pairwise_bf16_fused_adamw(device):
    """Reward-model training on a Granite-3-shaped backbone (transformers GraniteModel from
    GraniteConfig: 24 layers, hidden 2048, 32 query heads / 8 KV heads, MLP 8192, vocab 49155,
    Granite embedding/attention/residual multipliers, ~1.5B params) plus a hand-added linear
    value head, all weights in bf16, non-reentrant gradient checkpointing. Each step takes 8
    (chosen, rejected) pairs stacked into 16 right-padded sequences of 384..1024 tokens, reads
    the reward at each sequence's last real token and minimises -logsigmoid(r_chosen -
    r_rejected). AdamW fused=True (lr 1e-5, wd 0.0) on the bf16 parameters, 10 steps,
    grad-norm clipping 1.0."""
    from transformers import GraniteConfig, GraniteModel

    torch.manual_seed(0)
    cfg = GraniteConfig(
        vocab_size=49155, hidden_size=2048, intermediate_size=8192, num_hidden_layers=24,
        num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=4096,
        embedding_multiplier=12.0, attention_multiplier=0.015625, residual_multiplier=0.22,
        logits_scaling=8.0, tie_word_embeddings=True, pad_token_id=0, bos_token_id=0,
        eos_token_id=0,
    )
    cfg._attn_implementation = "sdpa"
    cfg.use_cache = False

    class RewardModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = GraniteModel(cfg)
            self.v_head = nn.Linear(cfg.hidden_size, 1, bias=False)
            nn.init.normal_(self.v_head.weight, std=1.0 / math.sqrt(cfg.hidden_size + 1))

        def forward(self, ids, attn):
            h = self.backbone(input_ids=ids, attention_mask=attn).last_hidden_state
            last = attn.sum(1) - 1
            h_last = h[torch.arange(h.size(0), device=h.device), last]
            return self.v_head(h_last).squeeze(-1)

    model = RewardModel().to(device=device, dtype=torch.bfloat16)
    model.backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.0, fused=True)
    pairs = 8
    for step in range(10):
        ids, attn, _ = _padded_batch(2 * pairs, 1024, 384, 1, 49155, 0, device)
        rewards = model(ids, attn).float()
        r_chosen, r_rejected = rewards[:pairs], rewards[pairs:]
        loss = -F.logsigmoid(r_chosen - r_rejected).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        acc = (r_chosen > r_rejected).float().mean().item()
        print(f"step {step} pairwise loss {loss.item():.4f} acc {acc:.2f}")


# ---------------------------------------------------------------------------
# 11. Neural cellular automata
# ---------------------------------------------------------------------------
def neural_cellular_automata_sample_pool_growing(device):
    """Growing neural cellular automata (Mordvintsev et al.): 16-channel 96x96 cell grids,
    fixed depthwise identity/Sobel-x/Sobel-y/Laplacian perception with circular padding, a
    1x1-conv update MLP (64 -> 128 -> 16, zero-initialised output), stochastic fire-rate 0.5
    update masks and alive masking via 3x3 max-pool of the alpha channel. Keeps a pool of 256
    states on the device; each of 20 training iterations samples 16 states, re-seeds the worst
    (by loss) one, rolls the CA out 48..64 steps with full BPTT through every step in fp32,
    takes the RGBA MSE to a synthetic target, normalises each parameter's gradient and steps
    Adam (lr 2e-3), then writes the states back to the pool."""
    torch.manual_seed(0)
    C, H, W, hidden = 16, 96, 96, 128

    class CA(nn.Module):
        def __init__(self):
            super().__init__()
            ident = torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
            sobel = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]]) / 8.0
            lap = torch.tensor([[1.0, 2.0, 1.0], [2.0, -12.0, 2.0], [1.0, 2.0, 1.0]]) / 16.0
            k = torch.stack([ident, sobel, sobel.t(), lap])  # 4,3,3
            self.register_buffer("kernel", k.repeat(C, 1, 1).unsqueeze(1))  # 4C,1,3,3
            self.w1 = nn.Conv2d(4 * C, hidden, 1)
            self.w2 = nn.Conv2d(hidden, C, 1, bias=False)
            nn.init.zeros_(self.w2.weight)

        def alive(self, x):
            return F.max_pool2d(x[:, 3:4], 3, stride=1, padding=1) > 0.1

        def forward(self, x, fire_rate=0.5):
            pre = self.alive(x)
            y = F.conv2d(F.pad(x, (1, 1, 1, 1), mode="circular"), self.kernel, groups=C)
            dx = self.w2(F.relu(self.w1(y)))
            mask = (torch.rand(x.size(0), 1, x.size(2), x.size(3), device=x.device) <= fire_rate)
            x = x + dx * mask.to(x.dtype)
            post = self.alive(x)
            return x * (pre & post).to(x.dtype)

    ca = CA().to(device)
    opt = torch.optim.Adam(ca.parameters(), lr=2e-3)
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, H), torch.linspace(-1, 1, W), indexing="ij")
    blobs = [(-0.3, -0.2, 0.25, (1.0, 0.2, 0.2)), (0.3, 0.1, 0.3, (0.2, 0.8, 0.3)),
             (0.0, 0.35, 0.2, (0.2, 0.3, 1.0))]
    target = torch.zeros(4, H, W)
    for cx, cy, r, rgb in blobs:
        a = torch.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * r * r * 0.25))
        for c in range(3):
            target[c] = torch.maximum(target[c], a * rgb[c])
        target[3] = torch.maximum(target[3], a)
    target = (target * (target[3:4] > 0.05)).to(device)

    seed = torch.zeros(C, H, W, device=device)
    seed[3:, H // 2, W // 2] = 1.0
    pool = seed.unsqueeze(0).repeat(256, 1, 1, 1)
    batch = 16
    for it in range(20):
        idx = torch.randperm(256, device=device)[:batch]
        x = pool[idx].clone()
        with torch.no_grad():
            per = ((x[:, :4] - target) ** 2).mean(dim=(1, 2, 3))
            order = per.argsort(descending=True)
            idx, x = idx[order], x[order]
            x[0] = seed
        n_steps = int(torch.randint(48, 65, (1,)))
        for _ in range(n_steps):
            x = ca(x)
        loss = F.mse_loss(x[:, :4], target.expand(batch, -1, -1, -1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        for p in ca.parameters():
            if p.grad is not None:
                p.grad.div_(p.grad.norm() + 1e-8)
        opt.step()
        pool[idx] = x.detach()
        if it % 5 == 0:
            print(f"iter {it} steps {n_steps} loss {loss.item():.5f}")


# ---------------------------------------------------------------------------
# 12. Hyena long-convolution LM
# ---------------------------------------------------------------------------
def hyena_fft_long_convolution_lm_bf16(device):
    """Hand-written Hyena language model (order-2 Hyena operator: input projection to 3x width,
    depthwise short conv (k=3), implicit long filters produced by a sine-activated MLP over
    positional features with exponential decay windows and per-channel L1 normalisation, long convolution via float32
    rfft/irfft with 2L padding, multiplicative gating), 8 pre-LayerNorm blocks of width 512
    with 4x GELU MLPs, byte vocabulary 256, sequence length 4096, batch 8. Trains 12 steps of
    next-token prediction under bf16 autocast (FFTs kept in float32) with AdamW (lr 6e-4,
    wd 0.1), linear warmup 3 steps then cosine via LambdaLR, grad-norm clipping 1.0."""
    torch.manual_seed(0)
    dev_type = torch.device(device).type
    d_model, n_layers, seq_len, vocab, batch = 512, 8, 4096, 256, 8

    def fftconv(u, k, D):
        L = u.size(-1)
        n = 2 * L
        k_f = torch.fft.rfft(k.float(), n=n) / n
        u_f = torch.fft.rfft(u.float(), n=n)
        y = torch.fft.irfft(u_f * k_f, n=n, norm="forward")[..., :L]
        return y + u.float() * D.unsqueeze(-1)

    class Sin(nn.Module):
        def __init__(self, dim, w=1.0):
            super().__init__()
            self.freq = nn.Parameter(w * torch.ones(1, dim))

        def forward(self, x):
            return torch.sin(self.freq * x)

    class ImplicitFilter(nn.Module):
        def __init__(self, d, emb_dim=33, order=64, max_len=seq_len):
            super().__init__()
            bands = (emb_dim - 1) // 2
            t = torch.linspace(0, 1, max_len)[None, :, None]
            t_rescaled = torch.linspace(0, max_len - 1, max_len)[None, :, None]
            w = 2 * math.pi * t_rescaled / max_len
            f = torch.linspace(1e-4, bands - 1, bands)[None, None]
            z = torch.cat([t, torch.cos(f * w), torch.sin(-f * w)], dim=-1)  # 1,L,emb
            self.register_buffer("z", z)
            self.register_buffer("t", t)
            self.mlp = nn.Sequential(nn.Linear(emb_dim, order), Sin(order), nn.Linear(order, order),
                                     Sin(order), nn.Linear(order, d, bias=False))
            max_decay, min_decay = math.log(1e-2) / 0.3, math.log(1e-2) / 1.5
            self.register_buffer("deltas", torch.linspace(min_decay, max_decay, d)[None, None])
            self.bias = nn.Parameter(torch.randn(d))

        def forward(self, L):
            h = self.mlp(self.z[:, :L])  # 1,L,d
            h = h * torch.exp(-self.t[:, :L] * self.deltas.abs())
            h = h / (h.abs().sum(dim=1, keepdim=True) + 1e-6)  # L1-normalise each channel's filter
            return h[0].transpose(0, 1)  # d,L

    class HyenaOperator(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.d = d
            self.in_proj = nn.Linear(d, 3 * d)
            self.out_proj = nn.Linear(d, d)
            self.short = nn.Conv1d(3 * d, 3 * d, 3, padding=2, groups=3 * d)
            self.filt = ImplicitFilter(d)

        def forward(self, u):
            L = u.size(1)
            z = self.in_proj(u).transpose(1, 2)
            z = self.short(z)[..., :L]
            x0, x1, v = z.split(self.d, dim=1)
            k = self.filt(L)
            y = fftconv(v * x1, k, self.filt.bias).to(x0.dtype) * x0
            return self.out_proj(y.transpose(1, 2))

    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.mixer = HyenaOperator(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            x = x + self.mixer(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class HyenaLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d_model)
            self.blocks = nn.ModuleList([Block(d_model) for _ in range(n_layers)])
            self.ln_f = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, vocab, bias=False)
            self.head.weight = self.emb.weight
            nn.init.normal_(self.emb.weight, std=0.02)

        def forward(self, idx):
            x = self.emb(idx)
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln_f(x))

    model = HyenaLM().to(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1, betas=(0.9, 0.95))
    steps, warm = 12, 3
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else 0.5 * (1 + math.cos(math.pi * (s - warm) / (steps - warm))))
    for step in range(steps):
        data = torch.randint(0, vocab, (batch, seq_len + 1), device=device)
        x, y = data[:, :-1], data[:, 1:]
        with torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
            logits = model(x)
            loss = F.cross_entropy(logits.float().view(-1, vocab), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if step % 3 == 0:
            print(f"step {step} loss {loss.item():.4f}")


# ---------------------------------------------------------------------------
# 13. EGNN energy + force matching
# ---------------------------------------------------------------------------
def egnn_energy_force_matching_double_backward(device):
    """Hand-written E(n)-equivariant GNN (Satorras et al. EGNN: 6 layers, hidden 128, SiLU
    edge/coordinate/node MLPs, index_add_ message aggregation, normalised coordinate updates)
    on batches of 64 synthetic molecules x 48 atoms with fully connected intra-molecule edges
    (144,384 directed edges). Predicts per-molecule energy; forces are -dE/dpos from
    torch.autograd.grad(create_graph=True), and the loss (energy MSE + 10 x force MSE against a
    soft Lennard-Jones-like reference potential computed with autograd) is backpropagated
    through that gradient (double backward). Adam (lr 5e-4), 16 steps cycling 4 fp32 batches."""
    torch.manual_seed(0)
    n_mol, n_atoms, hidden, n_types, n_layers = 64, 48, 128, 10, 6

    ar = torch.arange(n_atoms)
    ii, jj = torch.meshgrid(ar, ar, indexing="ij")
    keep = ii != jj
    ii, jj = ii[keep], jj[keep]
    offsets = (torch.arange(n_mol) * n_atoms)[:, None]
    row = (ii[None] + offsets).reshape(-1).to(device)
    col = (jj[None] + offsets).reshape(-1).to(device)
    mol_index = torch.arange(n_mol).repeat_interleave(n_atoms).to(device)
    N = n_mol * n_atoms

    def reference(pos, types):
        with torch.enable_grad():
            p = pos.detach().requires_grad_(True)
            d = p[row] - p[col]
            r2 = (d * d).sum(-1) + 0.5
            eps = 0.1 + 0.05 * (types[row] + types[col]).float() / n_types
            pair = eps * ((1.0 / r2) ** 6 - 2 * (1.0 / r2) ** 3)
            e_atom = torch.zeros(N, device=pos.device).index_add_(0, row, 0.5 * pair)
            energy = torch.zeros(n_mol, device=pos.device).index_add_(0, mol_index, e_atom)
            forces = -torch.autograd.grad(energy.sum(), p)[0]
        return energy.detach(), forces.detach()

    class EGCL(nn.Module):
        def __init__(self, h):
            super().__init__()
            self.edge_mlp = nn.Sequential(nn.Linear(2 * h + 1, h), nn.SiLU(), nn.Linear(h, h), nn.SiLU())
            self.node_mlp = nn.Sequential(nn.Linear(2 * h, h), nn.SiLU(), nn.Linear(h, h))
            last = nn.Linear(h, 1, bias=False)
            nn.init.xavier_uniform_(last.weight, gain=0.001)
            self.coord_mlp = nn.Sequential(nn.Linear(h, h), nn.SiLU(), last)

        def forward(self, h, x):
            diff = x[row] - x[col]
            radial = (diff * diff).sum(-1, keepdim=True)
            m = self.edge_mlp(torch.cat([h[row], h[col], radial], dim=-1))
            trans = diff / (radial.sqrt() + 1.0) * self.coord_mlp(m)
            agg_x = torch.zeros_like(x).index_add_(0, row, trans) / (n_atoms - 1)
            x = x + agg_x
            agg_h = torch.zeros_like(h).index_add_(0, row, m)
            h = h + self.node_mlp(torch.cat([h, agg_h], dim=-1))
            return h, x

    class EGNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(n_types, hidden)
            self.layers = nn.ModuleList([EGCL(hidden) for _ in range(n_layers)])
            self.out = nn.Sequential(nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 1))

        def forward(self, types, pos):
            h, x = self.emb(types), pos
            for layer in self.layers:
                h, x = layer(h, x)
            e_atom = self.out(h).squeeze(-1)
            return torch.zeros(n_mol, device=pos.device, dtype=e_atom.dtype).index_add_(0, mol_index, e_atom)

    data = []
    for _ in range(4):
        pos = torch.randn(N, 3, device=device) * 1.8
        types = torch.randint(0, n_types, (N,), device=device)
        e_ref, f_ref = reference(pos, types)
        data.append((pos, types, e_ref, f_ref))
    e_scale = torch.cat([d[2] for d in data]).std() + 1e-6

    model = EGNN().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=5e-4)
    for step in range(16):
        pos, types, e_ref, f_ref = data[step % 4]
        pos = pos.clone().requires_grad_(True)
        energy = model(types, pos)
        forces = -torch.autograd.grad(energy.sum(), pos, create_graph=True)[0]
        loss = F.mse_loss(energy, e_ref / e_scale) + 10.0 * F.mse_loss(forces, f_ref / e_scale)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 4 == 0:
            print(f"step {step} loss {loss.item():.5f}")


# ---------------------------------------------------------------------------
# 14. GradCache chunked contrastive dual encoder
# ---------------------------------------------------------------------------
def gradcache_chunked_contrastive_dual_encoder_bf16(device):
    """GradCache-style large-batch contrastive retrieval training: a shared hand-written
    12-layer pre-norm transformer text encoder (nn.TransformerEncoder, d 768, 12 heads, FFN
    3072, GELU, dropout 0.1, vocab 30522, masked mean pooling, 768-d projection, L2 norm).
    Each of 6 steps takes 512 (query, passage) pairs (queries 8..32 tokens, passages 64..256
    tokens, key-padding masks): representations are first computed in chunks of 128 under
    no_grad, the in-batch-negative InfoNCE loss (temperature 0.05) is backpropagated to the
    cached representations only, then every chunk is re-encoded with grad (RNG state replayed
    for identical dropout) and backpropagated with the cached representation gradients. bf16
    autocast, AdamW (lr 2e-5, wd 0.01), grad-norm clipping 1.0."""
    torch.manual_seed(0)
    dev = torch.device(device)
    vocab, d, n_layers, pad_id = 30522, 768, 12, 0

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d, padding_idx=pad_id)
            self.pos = nn.Embedding(512, d)
            layer = nn.TransformerEncoderLayer(d, 12, 3072, dropout=0.1, activation="gelu",
                                               batch_first=True, norm_first=True)
            self.enc = nn.TransformerEncoder(layer, n_layers, norm=nn.LayerNorm(d),
                                             enable_nested_tensor=False)
            self.proj = nn.Linear(d, d)

        def forward(self, ids, mask):
            pos = torch.arange(ids.size(1), device=ids.device)
            h = self.tok(ids) + self.pos(pos)[None]
            h = self.enc(h, src_key_padding_mask=~mask)
            m = mask.unsqueeze(-1).to(h.dtype)
            pooled = (h * m).sum(1) / m.sum(1).clamp(min=1.0)
            return F.normalize(self.proj(pooled).float(), dim=-1)

    def get_rng():
        return torch.get_rng_state(), (torch.cuda.get_rng_state(dev) if dev.type == "cuda" else None)

    def set_rng(state):
        torch.set_rng_state(state[0])
        if state[1] is not None:
            torch.cuda.set_rng_state(state[1], dev)

    def make(n, lo, hi):
        ids, attn, _ = _padded_batch(n, hi, lo, 1000, vocab, pad_id, device)
        return ids, attn.bool()

    model = Encoder().to(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)
    n_pairs, chunk = 512, 128
    for step in range(6):
        q_ids, q_mask = make(n_pairs, 8, 32)
        p_ids, p_mask = make(n_pairs, 64, 256)
        chunks = [(q_ids[i:i + chunk], q_mask[i:i + chunk]) for i in range(0, n_pairs, chunk)] + \
                 [(p_ids[i:i + chunk], p_mask[i:i + chunk]) for i in range(0, n_pairs, chunk)]
        states, reps = [], []
        with torch.no_grad():
            for ids, m in chunks:
                states.append(get_rng())
                with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
                    reps.append(model(ids, m))
        reps = torch.cat(reps).detach().requires_grad_(True)
        q_rep, p_rep = reps[:n_pairs], reps[n_pairs:]
        scores = q_rep @ p_rep.t() / 0.05
        loss = F.cross_entropy(scores, torch.arange(n_pairs, device=device))
        loss.backward()
        rep_grads = reps.grad.split(chunk)
        for (ids, m), st, g in zip(chunks, states, rep_grads):
            saved = get_rng()
            set_rng(st)
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
                r = model(ids, m)
            set_rng(saved)
            torch.dot(r.flatten(), g.flatten()).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step} infonce {loss.item():.4f}")


# ---------------------------------------------------------------------------
# 15. Spiking CNN with surrogate gradients
# ---------------------------------------------------------------------------
def spiking_cnn_lif_surrogate_bptt_event_frames(device):
    """Convolutional spiking neural network for DVS-gesture-like event frames (T=16 time steps,
    batch 32, 2 polarity channels at 64x64, 11 classes, synthetic Bernoulli events). Conv/BN
    layers run on all time steps at once (T*B folded), leaky integrate-and-fire neurons
    (tau 2, threshold 1, hard reset) unrolled over time with a custom autograd.Function
    Heaviside spike whose backward is an arctan surrogate; 4 conv-BN-LIF stages (64, 128,
    128, 256 channels, max-pooling), then FC 512 LIF and FC 11 LIF; loss is MSE between
    output firing rates and one-hot labels. Full BPTT in fp32, Adam (lr 1e-3) with cosine
    annealing, 10 steps, then one no_grad evaluation batch."""
    torch.manual_seed(0)
    T, B, n_cls = 16, 32, 11

    class ATanSpike(torch.autograd.Function):
        @staticmethod
        def forward(ctx, v, alpha):
            ctx.save_for_backward(v)
            ctx.alpha = alpha
            return (v >= 0).to(v.dtype)

        @staticmethod
        def backward(ctx, grad):
            (v,) = ctx.saved_tensors
            a = ctx.alpha
            sg = a / 2 / (1 + (math.pi / 2 * a * v) ** 2)
            return grad * sg, None

    class LIF(nn.Module):
        def __init__(self, tau=2.0, v_th=1.0):
            super().__init__()
            self.tau, self.v_th = tau, v_th

        def forward(self, x_seq):  # T, B, ...
            v = torch.zeros_like(x_seq[0])
            out = []
            for t in range(x_seq.size(0)):
                v = v + (x_seq[t] - v) / self.tau
                s = ATanSpike.apply(v - self.v_th, 2.0)
                v = v * (1.0 - s)
                out.append(s)
            return torch.stack(out)

    class SeqWrap(nn.Module):
        """Applies a stateless module to a [T, B, ...] sequence by folding T into batch."""

        def __init__(self, *mods):
            super().__init__()
            self.m = nn.Sequential(*mods)

        def forward(self, x):
            y = self.m(x.flatten(0, 1))
            return y.view(x.size(0), x.size(1), *y.shape[1:])

    def stage(cin, cout, pool):
        mods = [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout)]
        seq = [SeqWrap(*mods), LIF()]
        if pool:
            seq.append(SeqWrap(nn.MaxPool2d(2)))
        return seq

    model = nn.Sequential(
        *stage(2, 64, False), *stage(64, 128, True), *stage(128, 128, True), *stage(128, 256, True),
        SeqWrap(nn.Flatten(), nn.Dropout(0.5), nn.Linear(256 * 8 * 8, 512)), LIF(),
        SeqWrap(nn.Dropout(0.5), nn.Linear(512, n_cls)), LIF(),
    ).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)

    def events():
        rate = 0.05 + 0.1 * torch.rand(B, 2, 1, 1, device=device)
        x = torch.bernoulli(rate.unsqueeze(0).expand(T, B, 2, 64, 64).contiguous())
        y = torch.randint(0, n_cls, (B,), device=device)
        return x, y

    model.train()
    for step in range(10):
        x, y = events()
        rate_out = model(x).mean(0)
        loss = F.mse_loss(rate_out, F.one_hot(y, n_cls).float())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if step % 3 == 0:
            print(f"step {step} loss {loss.item():.4f} acc {(rate_out.argmax(1) == y).float().mean().item():.2f}")
    model.eval()
    with torch.no_grad():
        x, y = events()
        print("eval acc", (model(x).mean(0).argmax(1) == y).float().mean().item())


# ---------------------------------------------------------------------------
# 16. Conv-TasNet speech separation
# ---------------------------------------------------------------------------
def conv_tasnet_pit_si_snr_speech_separation(device):
    """Hand-written Conv-TasNet (Luo & Mesgarani) two-speaker separation: learned Conv1d
    encoder (N=512 filters, L=16, stride 8), TCN separator (global LayerNorm via GroupNorm(1),
    bottleneck 128, 3 repeats x 8 dilated depthwise-separable blocks with hidden 512, PReLU,
    residual and skip 1x1 convs), ReLU masks and ConvTranspose1d decoder; ~5M params. Trains 10
    steps in fp32 on batches of 8 synthetic 4-second 8 kHz mixtures (sums of two random
    harmonic/noise sources) with utterance-level permutation-invariant negative SI-SNR over
    both speaker orderings, Adam (lr 1e-3), grad-norm clipping 5; then separates 2 mixtures
    of 8 seconds under no_grad."""
    torch.manual_seed(0)
    N, L, Bn, Hd, P, X, R, C = 512, 16, 128, 512, 3, 8, 3, 2
    sr, secs, batch = 8000, 4, 8

    def gln(ch):
        return nn.GroupNorm(1, ch, eps=1e-8)

    class TCNBlock(nn.Module):
        def __init__(self, dilation):
            super().__init__()
            self.net = nn.Sequential(
                nn.Conv1d(Bn, Hd, 1), nn.PReLU(), gln(Hd),
                nn.Conv1d(Hd, Hd, P, dilation=dilation, padding=dilation * (P - 1) // 2, groups=Hd),
                nn.PReLU(), gln(Hd),
            )
            self.res = nn.Conv1d(Hd, Bn, 1)
            self.skip = nn.Conv1d(Hd, Bn, 1)

        def forward(self, x):
            y = self.net(x)
            return x + self.res(y), self.skip(y)

    class ConvTasNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Conv1d(1, N, L, stride=L // 2, bias=False)
            self.ln = gln(N)
            self.bottleneck = nn.Conv1d(N, Bn, 1)
            self.blocks = nn.ModuleList([TCNBlock(2 ** x) for _ in range(R) for x in range(X)])
            self.mask = nn.Sequential(nn.PReLU(), nn.Conv1d(Bn, C * N, 1))
            self.decoder = nn.ConvTranspose1d(N, 1, L, stride=L // 2, bias=False)

        def forward(self, mix):  # B, T
            w = F.relu(self.encoder(mix.unsqueeze(1)))  # B,N,K
            x = self.bottleneck(self.ln(w))
            skip_sum = 0
            for blk in self.blocks:
                x, s = blk(x)
                skip_sum = skip_sum + s
            m = F.relu(self.mask(skip_sum)).view(mix.size(0), C, N, -1)
            est = self.decoder((w.unsqueeze(1) * m).flatten(0, 1))  # B*C,1,T'
            est = est.view(mix.size(0), C, -1)
            T = mix.size(-1)
            if est.size(-1) < T:
                est = F.pad(est, (0, T - est.size(-1)))
            return est[..., :T]

    def si_snr(est, ref, eps=1e-8):
        est = est - est.mean(-1, keepdim=True)
        ref = ref - ref.mean(-1, keepdim=True)
        proj = (est * ref).sum(-1, keepdim=True) * ref / (ref.pow(2).sum(-1, keepdim=True) + eps)
        noise = est - proj
        return 10 * torch.log10(proj.pow(2).sum(-1) / (noise.pow(2).sum(-1) + eps) + eps)

    def pit_loss(est, src):
        p0 = (si_snr(est[:, 0], src[:, 0]) + si_snr(est[:, 1], src[:, 1])) / 2
        p1 = (si_snr(est[:, 0], src[:, 1]) + si_snr(est[:, 1], src[:, 0])) / 2
        return -torch.maximum(p0, p1).mean()

    def sources(n, seconds):
        t = torch.arange(sr * seconds, device=device).float() / sr
        out = []
        for _ in range(C):
            f0 = 100 + 200 * torch.rand(n, 1, device=device)
            sig = sum(torch.sin(2 * math.pi * f0 * h * t + 6.28 * torch.rand(n, 1, device=device)) / h
                      for h in range(1, 6))
            env = 0.5 + 0.5 * torch.sin(2 * math.pi * (0.5 + 2 * torch.rand(n, 1, device=device)) * t)
            out.append(sig * env + 0.05 * torch.randn(n, t.numel(), device=device))
        return torch.stack(out, 1)  # n,C,T

    model = ConvTasNet().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    for step in range(10):
        src = sources(batch, secs)
        mix = src.sum(1)
        loss = pit_loss(model(mix), src)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        if step % 3 == 0:
            print(f"step {step} neg si-snr {loss.item():.3f}")
    model.eval()
    with torch.no_grad():
        src = sources(2, 8)
        est = model(src.sum(1))
        print("eval si-snr", -pit_loss(est, src).item())


ISSUE35V = {f.__name__: f for f in [
    hf_modernbert_mlm_padded_warmup_bf16,
    peft_lora_gemma3_1b_checkpointing_bf16_weights,
    hf_phi3_sft_prompt_masked_dynamic_padding_accumulate_bf16,
    hf_m2m100_nllb_translation_adafactor_label_smoothing_bf16,
    timm_efficientnetv2_rw_s_rmsproptf_ema_fp16_scaler,
    timm_hiera_small_cosine_warmup_adamw_bf16,
    tv_deeplabv3_resnet50_aux_loss_poly_lr_fp16_scaler,
    tv_retinanet_resnet50_fpn_v2_train_then_detect,
    hf_starcoder2_3b_batched_perplexity_eval_bf16,
    hf_granite_reward_model_value_head_pairwise_bf16_fused_adamw,
    neural_cellular_automata_sample_pool_growing,
    hyena_fft_long_convolution_lm_bf16,
    egnn_energy_force_matching_double_backward,
    gradcache_chunked_contrastive_dual_encoder_bf16,
    spiking_cnn_lif_surrogate_bptt_event_frames,
    conv_tasnet_pit_si_snr_speech_separation,
]}
