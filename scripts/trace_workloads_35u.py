"""Twenty-first held-out group of issue 35 (group ISSUE35U): sixteen more programs of kinds no earlier group had (a WavLM x-vector speaker-verification model trained with AM-softmax on padded synthetic speech under fp16 autocast and a GradScaler then scored for equal-error rate, a UperNet semantic-segmentation model on a ConvNeXt-T backbone trained with a polynomial learning rate under bf16 autocast then scored for mIoU, a DeepSeek-V3 causal LM with multi-head latent attention and grouped routed experts trained in bf16 weights then greedily generating, a LLaVA model (CLIP vision tower frozen, Llama language model) instruction-tuned on image-plus-text sequences with masked labels then generating answers, a time-series transformer with a Student-t head trained by negative log-likelihood then drawing 100 sample paths per series, a Swin2SR x4 pixel-shuffle super-resolution model trained with an L1 loss under bf16 autocast then scored for PSNR on an odd-sized image, a torchvision Mask R-CNN v2 trained on synthetic instance masks under fp16 autocast with a GradScaler then run in eval mode, a torchvision SSDlite320 MobileNet-V3 detector trained in fp32 with a cosine schedule then run in eval mode, a timm VOLO-D1 model trained with token-mixing token-labeling losses under bf16 autocast, a timm XCiT-tiny patch-8 model trained with LAMB and a binary cross-entropy loss under fp16 autocast with a GradScaler, a hand-written GPT trained with torch.optim.Muon on its hidden matrices and AdamW on the rest, a point-cloud matcher trained through 40 unrolled log-domain Sinkhorn iterations, a SIREN signed-distance field fitted with an eikonal loss by double backward, a hand-written masked-LM encoder whose blocks use non-reentrant checkpointing with a selective save-the-matmuls policy, a hand-written encoder-decoder trained to sort tokens then decoded by a hand-written beam search that reorders its key/value cache, and a 2-D Gaussian-splatting image fit with pixel-chunked gradient accumulation and one densification), written by a helper that read no part of the tracer, committed before they were recorded on a GPU (an H200) or compared with anything.

Each is a function of the device, recorded by scripts/record_trace_workloads.py (VRAMLAB_HOLDOUT=issue35u).
"""

import copy
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def hf_wavlm_xvector_speaker_verification_fp16_scaler(device):
    """WavLM x-vector speaker model (transformers WavLMForXVector built from a WavLMConfig: 6 transformer layers,
    hidden 384, 6 heads, FFN 1536, layer-norm convolutional feature extractor with stable layer norm, gated
    relative position bias, SpecAugment time masking p=0.05, TDNN head 512-512-512-512-1500 and an AM-softmax
    loss over 200 synthetic speakers).  Trained for 40 steps of AdamW (lr 2e-4, wd 0.01, 5-step linear warmup then
    linear decay via LambdaLR, grad-norm clip 5.0) under fp16 autocast with a GradScaler on batches of 16 padded
    utterances of 2.0-4.0 s of synthetic 16 kHz harmonic speech with an attention mask; loss, grad norm and lr are
    printed with .item() every 10 steps.  Then, under inference_mode and fp16 autocast, x-vectors of 96 trial pairs
    of 3 s utterances (half same-speaker) are extracted in chunks of 32, cosine-scored, and the equal-error rate is
    printed."""
    from transformers import WavLMConfig, WavLMForXVector

    torch.manual_seed(0)
    sr = 16000
    n_spk = 200
    batch = 16
    steps = 40
    n_pairs = 96
    cfg = WavLMConfig(
        hidden_size=384,
        num_hidden_layers=6,
        num_attention_heads=6,
        intermediate_size=1536,
        feat_extract_norm="layer",
        do_stable_layer_norm=True,
        num_labels=n_spk,
        hidden_dropout=0.1,
        layerdrop=0.0,
        mask_time_prob=0.05,
    )
    model = WavLMForXVector(cfg).to(device)

    spk_f0 = (90.0 + 160.0 * torch.rand(n_spk)).to(device)
    spk_amp = torch.rand(n_spk, 6).to(device)
    spk_noise = (0.05 + 0.15 * torch.rand(n_spk)).to(device)
    spk_rate = (2.0 + 4.0 * torch.rand(n_spk)).to(device)

    def synth(spk, n):
        t = torch.arange(n, device=device, dtype=torch.float32) / sr
        f0 = spk_f0[spk][:, None] * (1.0 + 0.03 * torch.randn(len(spk), 1, device=device))
        harm = torch.arange(1, 7, device=device, dtype=torch.float32)
        phase = 2 * math.pi * (f0[:, None, :] * harm) * t[None, :, None]
        wav = (torch.sin(phase) * spk_amp[spk][:, None, :]).sum(-1)
        env = 0.6 + 0.4 * torch.sin(2 * math.pi * spk_rate[spk][:, None] * t[None, :])
        wav = wav * env + spk_noise[spk][:, None] * torch.randn_like(wav)
        return (wav - wav.mean(1, keepdim=True)) / (wav.std(1, keepdim=True) + 1e-5)

    warmup = 5
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, (steps - s) / steps)
    )
    scaler = torch.amp.GradScaler("cuda")
    model.train()
    t0 = time.time()
    for step in range(steps):
        spk = torch.randint(0, n_spk, (batch,), device=device)
        lens = torch.randint(2 * sr, 4 * sr + 1, (batch,))
        T = int(lens.max())
        mask = (torch.arange(T)[None, :] < lens[:, None]).to(device)
        wav = synth(spk, T) * mask
        with torch.autocast("cuda", dtype=torch.float16):
            out = model(input_values=wav, attention_mask=mask.long(), labels=spk)
        scaler.scale(out.loss).backward()
        scaler.unscale_(opt)
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        sched.step()
        if step % 10 == 0 or step == steps - 1:
            print(f"step {step} loss {out.loss.item():.4f} grad_norm {gn.item():.2f} "
                  f"lr {sched.get_last_lr()[0]:.2e} ({time.time() - t0:.1f}s)")

    model.eval()
    n = 3 * sr
    a_spk = torch.randint(0, n_spk, (n_pairs,), device=device)
    same = torch.arange(n_pairs, device=device) % 2 == 0
    b_spk = torch.where(same, a_spk, (a_spk + torch.randint(1, n_spk, (n_pairs,), device=device)) % n_spk)
    scores = []
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.float16):
        for i in range(0, n_pairs, 32):
            ea = model(input_values=synth(a_spk[i:i + 32], n)).embeddings.float()
            eb = model(input_values=synth(b_spk[i:i + 32], n)).embeddings.float()
            scores.append(F.cosine_similarity(ea, eb, dim=-1))
    scores = torch.cat(scores).cpu()
    labels = same.cpu()
    thr = scores.sort().values
    far = ((scores[None, :] >= thr[:, None]) & ~labels[None, :]).sum(1).float() / (~labels).sum()
    frr = ((scores[None, :] < thr[:, None]) & labels[None, :]).sum(1).float() / labels.sum()
    i = int(torch.argmin((far - frr).abs()))
    print(f"EER {(far[i] + frr[i]).item() / 2:.3f} mean same {scores[labels].mean().item():.3f} "
          f"mean diff {scores[~labels].mean().item():.3f}")


def hf_upernet_convnext_tiny_segmentation_poly_bf16(device):
    """UperNet semantic segmentation (transformers UperNetForSemanticSegmentation from a UperNetConfig whose backbone
    is a ConvNextConfig with ConvNeXt-T depths 3-3-9-3 and widths 96-192-384-768, drop-path 0.2; pyramid-pooling and
    FPN head of width 384, auxiliary FCN head on stage 3 with loss weight 0.4, 40 classes, ignore index 255).
    Trained for 30 steps of AdamW (lr 2e-4, weight decay 0.05 except norms and biases) with a PolynomialLR
    (power 1) schedule under bf16 autocast on batches of 8 synthetic 512x512 scenes of coloured textured ellipses
    whose boundary pixels are labelled 255; the loss is printed every 5 steps.  Then 4 scenes are segmented under
    inference_mode and bf16 autocast and the pixel accuracy and mIoU are printed."""
    from transformers import ConvNextConfig, UperNetConfig, UperNetForSemanticSegmentation

    torch.manual_seed(0)
    n_cls = 40
    batch = 8
    size = 512
    steps = 30
    backbone = ConvNextConfig(
        depths=[3, 3, 9, 3],
        hidden_sizes=[96, 192, 384, 768],
        drop_path_rate=0.2,
        out_features=["stage1", "stage2", "stage3", "stage4"],
    )
    cfg = UperNetConfig(
        backbone_config=backbone,
        hidden_size=384,
        auxiliary_in_channels=384,
        auxiliary_channels=256,
        num_labels=n_cls,
        use_auxiliary_head=True,
        auxiliary_loss_weight=0.4,
        loss_ignore_index=255,
    )
    model = UperNetForSemanticSegmentation(cfg).to(device)

    palette = torch.rand(n_cls, 3, device=device)
    freq = 4.0 + 40.0 * torch.rand(n_cls, device=device)
    lin = torch.linspace(0, 1, size, device=device)
    yy, xx = torch.meshgrid(lin, lin, indexing="ij")

    def scenes(b):
        lab = torch.zeros(b, size, size, dtype=torch.long, device=device)
        for _ in range(8):
            cy, cx = torch.rand(b, 1, 1, device=device), torch.rand(b, 1, 1, device=device)
            ry, rx = 0.05 + 0.25 * torch.rand(b, 1, 1, device=device), 0.05 + 0.25 * torch.rand(b, 1, 1, device=device)
            cls = torch.randint(1, n_cls, (b, 1, 1), device=device)
            inside = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 < 1
            lab = torch.where(inside, cls, lab)
        tex = torch.sin(freq[lab] * (xx + yy))
        img = palette[lab].permute(0, 3, 1, 2) + 0.15 * tex[:, None] + 0.1 * torch.randn(b, 3, size, size, device=device)
        img = (img - 0.5) / 0.3
        edge = torch.zeros_like(lab, dtype=torch.bool)
        edge[:, 1:, :] |= lab[:, 1:, :] != lab[:, :-1, :]
        edge[:, :, 1:] |= lab[:, :, 1:] != lab[:, :, :-1]
        return img, lab.masked_fill(edge, 255)

    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim == 1 else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                             {"params": no_decay, "weight_decay": 0.0}], lr=2e-4)
    sched = torch.optim.lr_scheduler.PolynomialLR(opt, total_iters=steps, power=1.0)
    model.train()
    for step in range(steps):
        img, lab = scenes(batch)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(pixel_values=img, labels=lab)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step()
        if step % 5 == 0 or step == steps - 1:
            print(f"step {step} loss {out.loss.item():.4f} lr {sched.get_last_lr()[0]:.2e}")

    model.eval()
    conf = torch.zeros(n_cls, n_cls, dtype=torch.long, device=device)
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
        for _ in range(2):
            img, lab = scenes(2)
            logits = model(pixel_values=img).logits
            pred = logits.argmax(1)
            valid = lab != 255
            conf += torch.bincount(lab[valid] * n_cls + pred[valid], minlength=n_cls * n_cls).view(n_cls, n_cls)
    conf = conf.float()
    iou = conf.diag() / (conf.sum(0) + conf.sum(1) - conf.diag()).clamp(min=1)
    present = conf.sum(1) > 0
    print(f"pixel acc {(conf.diag().sum() / conf.sum()).item():.3f} mIoU {iou[present].mean().item():.3f}")


def hf_deepseek_v3_mla_moe_bf16_weights_generate(device):
    """DeepSeek-V3 causal LM (transformers DeepseekV3ForCausalLM.from_config, weights in bf16: vocab 32000, hidden
    1024, 8 layers of which the first is dense (FFN 2816) and 7 are mixture-of-experts with 32 routed experts of
    width 512 (top-4 of 4 groups, 2 groups kept, sigmoid routing) plus 1 shared expert; multi-head latent attention
    with 16 heads, q LoRA rank 384, kv LoRA rank 256, nope/rope/v head dims 64/32/64).  Trained for 30 steps of fused
    AdamW (lr 3e-4, betas 0.9/0.95, wd 0.1, grad-norm clip 1.0, cosine schedule with 5 warmup steps) on batches of
    8 sequences of 1024 tokens from a synthetic successor-table language, printing the loss every 5 steps; then a
    held-out batch is scored under no_grad and 4 prompts of 64 tokens are greedily extended by 48 tokens with
    generate() and a DynamicCache, printing the fraction of generated tokens that follow the successor table."""
    from transformers import AutoModelForCausalLM, DeepseekV3Config, get_cosine_schedule_with_warmup

    torch.manual_seed(0)
    vocab = 32000
    batch = 8
    seq = 1024
    steps = 30
    cfg = DeepseekV3Config(
        vocab_size=vocab,
        hidden_size=1024,
        intermediate_size=2816,
        moe_intermediate_size=512,
        num_hidden_layers=8,
        num_attention_heads=16,
        num_key_value_heads=16,
        n_shared_experts=1,
        n_routed_experts=32,
        num_experts_per_tok=4,
        n_group=4,
        topk_group=2,
        first_k_dense_replace=1,
        routed_scaling_factor=2.5,
        kv_lora_rank=256,
        q_lora_rank=384,
        qk_rope_head_dim=32,
        qk_nope_head_dim=64,
        v_head_dim=64,
        max_position_embeddings=2048,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).to(device)
    print(f"params {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M")

    succ = torch.randint(3, vocab, (vocab, 4), device=device)
    n_corpus = 96
    corpus = torch.empty(n_corpus, seq + 1, dtype=torch.long, device=device)
    corpus[:, 0] = torch.randint(3, vocab, (n_corpus,), device=device)
    choice = torch.randint(0, 4, (n_corpus, seq), device=device)
    for t in range(seq):
        corpus[:, t + 1] = succ[corpus[:, t], choice[:, t]]
    train, held = corpus[:80], corpus[80:]

    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=torch.device(device).type == "cuda")
    sched = get_cosine_schedule_with_warmup(opt, num_warmup_steps=5, num_training_steps=steps)
    model.train()
    for step in range(steps):
        idx = torch.randint(0, train.size(0), (batch,), device=device)
        ids = train[idx, :seq]
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step()
        if step % 5 == 0 or step == steps - 1:
            print(f"step {step} loss {out.loss.item():.4f} grad_norm {gn.item():.3f}")

    model.eval()
    with torch.no_grad():
        ids = held[:batch, :seq]
        val = model(input_ids=ids, labels=ids).loss.item()
    print(f"held-out loss {val:.4f} ppl {math.exp(min(val, 30)):.1f}")
    prompts = held[:4, :64]
    with torch.no_grad():
        gen = model.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=48,
                             do_sample=False, pad_token_id=0)
    new = gen[:, 63:]
    ok = (succ[new[:, :-1]] == new[:, 1:, None]).any(-1).float().mean().item()
    print(f"generated {tuple(gen.shape)} successor-consistent fraction {ok:.3f}")


def hf_llava_clip_llama_visual_instruction_tuning_bf16(device):
    """LLaVA visual instruction tuning (transformers LlavaForConditionalGeneration from a LlavaConfig: CLIP vision
    tower of 12 layers, hidden 768, 336x336 images with 14-pixel patches giving 576 image tokens from layer -2, GELU
    two-layer projector, Llama language model of 12 layers, hidden 1024, 16 heads with 8 KV heads, FFN 2816, vocab
    32064).  The vision tower is frozen; projector and language model (about 205M parameters) are trained for 30
    steps of AdamW (lr 1e-4, wd 0.0, grad-norm clip 1.0, CosineAnnealingLR) under bf16 autocast on batches of 8
    right-padded sequences of [bos, 576 image tokens, 16-32 prompt tokens, 8-24 answer tokens, eos] whose labels
    are -100 except on the answer and eos; images are synthetic colour/stripe patterns from 10 classes and each
    class has its own answer token sequence.  The loss is printed every 5 steps; then 4 new images are answered
    with greedy generate() (20 new tokens) under no_grad and the answer-token accuracy is printed."""
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration

    torch.manual_seed(0)
    vocab = 32064
    image_token = 32000
    n_img_tokens = 576
    n_cls = 10
    batch = 8
    steps = 30
    vcfg = CLIPVisionConfig(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
                            image_size=336, patch_size=14, projection_dim=768)
    tcfg = LlamaConfig(vocab_size=vocab, hidden_size=1024, intermediate_size=2816, num_hidden_layers=12,
                       num_attention_heads=16, num_key_value_heads=8, max_position_embeddings=2048,
                       pad_token_id=0, bos_token_id=1, eos_token_id=2)
    cfg = LlavaConfig(vision_config=vcfg, text_config=tcfg, image_token_index=image_token,
                      image_seq_length=n_img_tokens, vision_feature_layer=-2,
                      vision_feature_select_strategy="default")
    model = LlavaForConditionalGeneration(cfg).to(device)
    model.model.vision_tower.requires_grad_(False)
    model.model.vision_tower.eval()

    cls_color = torch.rand(n_cls, 3, device=device)
    cls_freq = torch.linspace(3.0, 30.0, n_cls, device=device)
    answers = [torch.randint(3, 32000, (int(torch.randint(8, 25, (1,))),)) for _ in range(n_cls)]
    lin = torch.linspace(0, 1, 336, device=device)
    yy, xx = torch.meshgrid(lin, lin, indexing="ij")

    def images(cls):
        b = len(cls)
        angle = math.pi * torch.rand(b, 1, 1, device=device)
        stripes = torch.sin(cls_freq[cls][:, None, None] * (xx * torch.cos(angle) + yy * torch.sin(angle)))
        img = cls_color[cls][:, :, None, None] * (0.7 + 0.3 * stripes[:, None])
        img = img + 0.05 * torch.randn(b, 3, 336, 336, device=device)
        return (img - 0.45) / 0.27

    def make_batch(cls, with_answer=True):
        rows, labs = [], []
        for c in cls.tolist():
            prompt = torch.randint(3, 32000, (int(torch.randint(16, 33, (1,))),))
            head = torch.cat([torch.tensor([1]), torch.full((n_img_tokens,), image_token), prompt])
            if with_answer:
                ans = torch.cat([answers[c], torch.tensor([2])])
                rows.append(torch.cat([head, ans]))
                labs.append(torch.cat([torch.full_like(head, -100), ans]))
            else:
                rows.append(head)
        L = max(len(r) for r in rows)
        if with_answer:
            ids = torch.zeros(len(rows), L, dtype=torch.long)
            lab = torch.full((len(rows), L), -100, dtype=torch.long)
            att = torch.zeros(len(rows), L, dtype=torch.long)
            for i, (r, l) in enumerate(zip(rows, labs)):
                ids[i, :len(r)] = r
                lab[i, :len(l)] = l
                att[i, :len(r)] = 1
            return ids.to(device), att.to(device), lab.to(device)
        ids = torch.zeros(len(rows), L, dtype=torch.long)
        att = torch.zeros(len(rows), L, dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, L - len(r):] = r
            att[i, L - len(r):] = 1
        return ids.to(device), att.to(device), None

    trainable = [p for p in model.parameters() if p.requires_grad]
    print(f"trainable {sum(p.numel() for p in trainable) / 1e6:.1f}M")
    opt = torch.optim.AdamW(trainable, lr=1e-4, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps, eta_min=1e-5)
    model.train()
    model.model.vision_tower.eval()
    for step in range(steps):
        cls = torch.randint(0, n_cls, (batch,))
        ids, att, lab = make_batch(cls)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(input_ids=ids, attention_mask=att, pixel_values=images(cls.to(device)), labels=lab)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step()
        if step % 5 == 0 or step == steps - 1:
            print(f"step {step} loss {out.loss.item():.4f}")

    model.eval()
    cls = torch.arange(4) % n_cls
    ids, att, _ = make_batch(cls, with_answer=False)
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        gen = model.generate(input_ids=ids, attention_mask=att, pixel_values=images(cls.to(device)),
                             max_new_tokens=20, do_sample=False, pad_token_id=0)
    new = gen[:, ids.size(1):].cpu()
    correct = total = 0
    for i, c in enumerate(cls.tolist()):
        ref = answers[c][:new.size(1)]
        correct += int((new[i, :len(ref)] == ref).sum())
        total += len(ref)
    print(f"generated {tuple(new.shape)} answer-token accuracy {correct / total:.3f}")


def hf_time_series_transformer_student_t_sampling_forecast(device):
    """Probabilistic forecasting with transformers TimeSeriesTransformerForPrediction (from a
    TimeSeriesTransformerConfig: context 168, prediction 48, 16 lags up to 169, Student-t distribution head and NLL
    loss, mean scaling, 2 time features, a static categorical series id with 2000 levels embedded in 16 dims, 4
    encoder and 4 decoder layers of d_model 128 with 8 heads and FFN 512).  2000 synthetic hourly series (level,
    trend, daily and weekly seasonality, heavy-tailed noise, 2% missing values masked out) are windowed at random
    offsets; trained in fp32 for 80 steps of AdamW (lr 1e-3, wd 1e-4, grad-norm clip 10, ExponentialLR 0.98) with
    batch 256, printing the loss every 10 steps.  Then, under no_grad, generate() draws 100 sample paths for 64
    held-out windows (an expanded decoder batch of 6400) and the median-forecast MAE and 80% interval coverage are
    printed."""
    from transformers import TimeSeriesTransformerConfig, TimeSeriesTransformerForPrediction

    torch.manual_seed(0)
    pred = 48
    ctx = 168
    lags = [1, 2, 3, 4, 5, 6, 7, 23, 24, 25, 47, 48, 49, 167, 168, 169]
    n_series = 2000
    batch = 256
    steps = 80
    n_eval = 64
    cfg = TimeSeriesTransformerConfig(
        prediction_length=pred,
        context_length=ctx,
        lags_sequence=lags,
        distribution_output="student_t",
        loss="nll",
        scaling="mean",
        num_time_features=2,
        num_static_categorical_features=1,
        cardinality=[n_series],
        embedding_dimension=[16],
        encoder_layers=4,
        decoder_layers=4,
        d_model=128,
        encoder_attention_heads=8,
        decoder_attention_heads=8,
        encoder_ffn_dim=512,
        decoder_ffn_dim=512,
        dropout=0.1,
        encoder_layerdrop=0.0,
        decoder_layerdrop=0.0,
        num_parallel_samples=100,
    )
    model = TimeSeriesTransformerForPrediction(cfg).to(device)
    past_len = ctx + max(lags)
    total_len = 2400
    t = torch.arange(total_len, device=device, dtype=torch.float32)
    level = 5.0 + 20.0 * torch.rand(n_series, 1, device=device)
    trend = 0.002 * torch.randn(n_series, 1, device=device)
    daily = 0.3 * torch.rand(n_series, 1, device=device)
    weekly = 0.2 * torch.rand(n_series, 1, device=device)
    noise = torch.distributions.StudentT(3.0).sample((n_series, total_len)).to(device) * 0.05
    series = level * (1 + trend * t + daily * torch.sin(2 * math.pi * t / 24) + weekly * torch.sin(2 * math.pi * t / 168) + noise)
    series = series.clamp(min=0.0)
    observed = (torch.rand(n_series, total_len, device=device) > 0.02).float()
    tfeat = torch.stack([torch.sin(2 * math.pi * t / 24), torch.cos(2 * math.pi * t / 24)], -1)

    def window(ids, start):
        pos = start[:, None] + torch.arange(past_len + pred, device=device)[None]
        vals = series[ids[:, None], pos]
        obs = observed[ids[:, None], pos]
        feats = tfeat[pos]
        return dict(
            past_values=vals[:, :past_len] * obs[:, :past_len],
            past_observed_mask=obs[:, :past_len],
            past_time_features=feats[:, :past_len],
            future_time_features=feats[:, past_len:],
            static_categorical_features=ids[:, None],
        ), vals[:, past_len:], obs[:, past_len:]

    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.98)
    train_end = total_len - 200 - past_len - pred
    model.train()
    for step in range(steps):
        ids = torch.randint(0, n_series, (batch,), device=device)
        start = torch.randint(0, train_end, (batch,), device=device)
        inputs, fut, fut_obs = window(ids, start)
        out = model(**inputs, future_values=fut, future_observed_mask=fut_obs)
        out.loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step()
        if step % 10 == 0 or step == steps - 1:
            print(f"step {step} nll {out.loss.item():.4f} grad_norm {gn.item():.2f}")

    model.eval()
    ids = torch.arange(n_eval, device=device) * (n_series // n_eval)
    start = torch.full((n_eval,), total_len - past_len - pred, device=device, dtype=torch.long)
    inputs, fut, _ = window(ids, start)
    with torch.no_grad():
        out = model.generate(**inputs)
    samples = out.sequences
    median = samples.median(dim=1).values
    lo, hi = samples.quantile(0.1, dim=1), samples.quantile(0.9, dim=1)
    mae = (median - fut).abs().mean().item()
    cover = ((fut >= lo) & (fut <= hi)).float().mean().item()
    print(f"samples {tuple(samples.shape)} median MAE {mae:.3f} 80% coverage {cover:.3f}")


def hf_swin2sr_x4_pixelshuffle_l1_bf16(device):
    """Image super-resolution with transformers Swin2SRForImageSuperResolution (from a Swin2SRConfig: x4 upscale,
    pixel-shuffle upsampler, embed dim 180, 4 residual Swin-V2 groups of depth 6 with 6 heads, window 8, MLP ratio 2,
    drop-path 0.1).  Trained for 40 steps of Adam (lr 2e-4, betas 0.9/0.99, MultiStepLR halving at steps 25 and 35)
    under bf16 autocast with an L1 loss between the reconstruction and the 256x256 ground truth, on batches of 6
    synthetic images (gratings, discs and edges) whose 64x64 inputs are made by antialiased bicubic downsampling;
    the loss is printed every 5 steps.  Then, under inference_mode, 2 odd-sized 76x100 inputs (reflect-padded by
    hand to 80x104, a multiple of the window, as the image processor does) are upscaled, the output is cropped, and
    the PSNR of the model and of bicubic upsampling are printed."""
    from transformers import Swin2SRConfig, Swin2SRForImageSuperResolution

    torch.manual_seed(0)
    batch = 6
    lr_size = 64
    scale = 4
    steps = 40
    cfg = Swin2SRConfig(upscale=scale, image_size=lr_size, patch_size=1, embed_dim=180, depths=[6, 6, 6, 6],
                        num_heads=[6, 6, 6, 6], window_size=8, mlp_ratio=2.0, upsampler="pixelshuffle",
                        img_range=1.0, resi_connection="1conv", drop_path_rate=0.1)
    model = Swin2SRForImageSuperResolution(cfg).to(device)

    def hr_images(b, h, w):
        yy, xx = torch.meshgrid(torch.linspace(0, 1, h, device=device), torch.linspace(0, 1, w, device=device),
                                indexing="ij")
        img = torch.zeros(b, 3, h, w, device=device)
        for _ in range(4):
            f = 2.0 + 30.0 * torch.rand(b, 3, 1, 1, device=device)
            a = math.pi * torch.rand(b, 1, 1, 1, device=device)
            img += 0.15 * torch.sin(f * (xx * torch.cos(a) + yy * torch.sin(a)) * 2 * math.pi)
        for _ in range(6):
            cy, cx = torch.rand(b, 1, 1, 1, device=device), torch.rand(b, 1, 1, 1, device=device)
            r = 0.03 + 0.2 * torch.rand(b, 1, 1, 1, device=device)
            col = torch.rand(b, 3, 1, 1, device=device) - 0.5
            img += col * (((yy - cy) ** 2 + (xx - cx) ** 2) < r * r).float()
        return (img + 0.5).clamp(0, 1)

    def degrade(hr):
        return F.interpolate(hr, scale_factor=1 / scale, mode="bicubic", antialias=True,
                             align_corners=False).clamp(0, 1)

    opt = torch.optim.Adam(model.parameters(), lr=2e-4, betas=(0.9, 0.99))
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[25, 35], gamma=0.5)
    model.train()
    for step in range(steps):
        hr = hr_images(batch, lr_size * scale, lr_size * scale)
        lr = degrade(hr)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            sr = model(pixel_values=lr).reconstruction
        loss = F.l1_loss(sr.float(), hr)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step()
        if step % 5 == 0 or step == steps - 1:
            print(f"step {step} l1 {loss.item():.4f} lr {sched.get_last_lr()[0]:.1e}")

    model.eval()
    hr = hr_images(2, 76 * scale, 100 * scale)
    lr = degrade(hr)
    ph, pw = (-lr.size(2)) % cfg.window_size, (-lr.size(3)) % cfg.window_size
    lr_pad = F.pad(lr, (0, pw, 0, ph), mode="reflect")
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
        sr = model(pixel_values=lr_pad).reconstruction.float().clamp(0, 1)
    sr = sr[..., :hr.size(2), :hr.size(3)]
    bic = F.interpolate(lr, scale_factor=scale, mode="bicubic", align_corners=False).clamp(0, 1)

    def psnr(a, b):
        return (10 * torch.log10(1.0 / F.mse_loss(a, b))).item()

    print(f"output {tuple(sr.shape)} PSNR model {psnr(sr, hr):.2f} dB bicubic {psnr(bic, hr):.2f} dB")


def tv_maskrcnn_resnet50_fpn_v2_train_then_eval_fp16_scaler(device):
    """torchvision Mask R-CNN v2 (maskrcnn_resnet50_fpn_v2, weights=None, weights_backbone=None, 11 classes, all
    backbone layers trainable with BatchNorm, internal resize min_size 512 / max_size 768).  Trained for 24 steps of
    SGD (lr 0.02, momentum 0.9, wd 1e-4, 8-step linear warmup via LambdaLR, grad-norm clip 10) under fp16 autocast
    with a GradScaler on batches of 4 synthetic images of varying sizes (384-640 px a side) holding 1-6 coloured
    ellipses or rectangles each with a box, a label and a full-image uint8 mask; the summed loss and its five parts
    are printed every 4 steps.  Then, in eval mode under no_grad, 4 new images are detected and the number of
    detections above score 0.5 and the mean predicted mask area are printed."""
    from torchvision.models.detection import maskrcnn_resnet50_fpn_v2

    torch.manual_seed(0)
    n_cls = 11
    batch = 4
    steps = 24
    model = maskrcnn_resnet50_fpn_v2(weights=None, weights_backbone=None, num_classes=n_cls,
                                     trainable_backbone_layers=5, min_size=512, max_size=768).to(device)
    palette = torch.rand(n_cls, 3, device=device)

    def sample():
        h = int(torch.randint(384, 641, (1,)))
        w = int(torch.randint(384, 641, (1,)))
        yy, xx = torch.meshgrid(torch.arange(h, device=device, dtype=torch.float32),
                                torch.arange(w, device=device, dtype=torch.float32), indexing="ij")
        img = 0.3 + 0.1 * torch.randn(3, h, w, device=device)
        n = int(torch.randint(1, 7, (1,)))
        masks, boxes, labels = [], [], []
        for _ in range(n):
            cls = int(torch.randint(1, n_cls, (1,)))
            cy, cx = float(torch.rand(1)) * h, float(torch.rand(1)) * w
            ry, rx = 20 + float(torch.rand(1)) * h / 4, 20 + float(torch.rand(1)) * w / 4
            if cls % 2:
                m = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 < 1
            else:
                m = ((yy - cy).abs() < ry) & ((xx - cx).abs() < rx)
            ys, xs = torch.nonzero(m, as_tuple=True)
            if ys.numel() < 50:
                continue
            img = torch.where(m[None], palette[cls][:, None, None] + 0.05 * torch.randn(3, h, w, device=device), img)
            masks.append(m.to(torch.uint8))
            boxes.append(torch.stack([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]).float())
            labels.append(cls)
        if not masks:
            m = torch.zeros(h, w, dtype=torch.uint8, device=device)
            m[h // 4:h // 2, w // 4:w // 2] = 1
            masks.append(m)
            boxes.append(torch.tensor([w // 4, h // 4, w // 2, h // 2], dtype=torch.float32, device=device))
            labels.append(1)
        target = {"boxes": torch.stack(boxes), "labels": torch.tensor(labels, device=device),
                  "masks": torch.stack(masks)}
        return img.clamp(0, 1), target

    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.02, momentum=0.9, weight_decay=1e-4)
    warm = 8
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, 0.001 + (1 - 0.001) * s / warm))
    scaler = torch.amp.GradScaler("cuda")
    model.train()
    for step in range(steps):
        imgs, targets = zip(*[sample() for _ in range(batch)])
        with torch.autocast("cuda", dtype=torch.float16):
            losses = model(list(imgs), list(targets))
            loss = sum(losses.values())
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(params, 10.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        sched.step()
        if step % 4 == 0 or step == steps - 1:
            parts = " ".join(f"{k[5:]}={v.item():.3f}" for k, v in losses.items())
            print(f"step {step} loss {loss.item():.4f} {parts}")

    model.eval()
    with torch.no_grad():
        imgs = [sample()[0] for _ in range(4)]
        dets = model(imgs)
    for i, d in enumerate(dets):
        keep = d["scores"] > 0.5
        area = (d["masks"][keep] > 0.5).float().sum((1, 2, 3)).mean().item() if keep.any() else 0.0
        print(f"image {i} {tuple(imgs[i].shape[1:])} detections {len(d['scores'])} above 0.5 {int(keep.sum())} "
              f"mean mask area {area:.0f}")


def tv_ssdlite320_mobilenet_v3_large_train_then_detect(device):
    """torchvision SSDlite320 with a MobileNet-V3-Large backbone (ssdlite320_mobilenet_v3_large, weights=None,
    weights_backbone=None, 21 classes, fixed 320x320 internal resize).  Trained in fp32 for 40 steps of SGD (lr 0.01,
    momentum 0.9, wd 4e-5, CosineAnnealingLR) on batches of 48 synthetic images of 280-400 px a side with 1-5
    coloured boxes each; the bbox-regression and classification losses are printed every 10 steps.  Then, in eval
    mode under inference_mode, 16 images are detected and the detection counts and mean top score are printed."""
    from torchvision.models.detection import ssdlite320_mobilenet_v3_large

    torch.manual_seed(0)
    n_cls = 21
    batch = 48
    steps = 40
    model = ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=n_cls).to(device)
    palette = torch.rand(n_cls, 3, device=device)

    def sample():
        h = int(torch.randint(280, 401, (1,)))
        w = int(torch.randint(280, 401, (1,)))
        img = 0.5 + 0.1 * torch.randn(3, h, w, device=device)
        n = int(torch.randint(1, 6, (1,)))
        xy = torch.rand(n, 2) * torch.tensor([w * 0.7, h * 0.7])
        wh = (0.15 + 0.3 * torch.rand(n, 2)) * torch.tensor([w, h])
        boxes = torch.cat([xy, (xy + wh).minimum(torch.tensor([w - 1.0, h - 1.0]))], 1)
        labels = torch.randint(1, n_cls, (n,))
        for b, c in zip(boxes.round().long().tolist(), labels.tolist()):
            img[:, b[1]:b[3], b[0]:b[2]] = palette[c][:, None, None] + 0.03 * torch.randn(3, b[3] - b[1], b[2] - b[0], device=device)
        return img.clamp(0, 1), {"boxes": boxes.to(device), "labels": labels.to(device)}

    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=4e-5)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    model.train()
    for step in range(steps):
        imgs, targets = zip(*[sample() for _ in range(batch)])
        losses = model(list(imgs), list(targets))
        loss = losses["bbox_regression"] + losses["classification"]
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step()
        if step % 10 == 0 or step == steps - 1:
            print(f"step {step} loss {loss.item():.4f} bbox {losses['bbox_regression'].item():.4f} "
                  f"cls {losses['classification'].item():.4f}")

    model.eval()
    with torch.inference_mode():
        imgs = [sample()[0] for _ in range(16)]
        dets = model(imgs)
    counts = [len(d["scores"]) for d in dets]
    top = torch.stack([d["scores"].max() if len(d["scores"]) else torch.zeros((), device=device) for d in dets])
    print(f"detections per image {counts} mean top score {top.mean().item():.3f}")


def timm_volo_d1_token_labeling_mix_token_bf16(device):
    """timm VOLO-D1 (volo_d1_224, pretrained=False, 100 classes, drop-path 0.1, use_mix_token=True so
    forward_train cuts a random token box between flipped batch halves) trained with the token-labeling recipe:
    cross-entropy of the class token against the box-area-mixed label plus 0.5 x cross-entropy of every auxiliary
    patch-token prediction against its image label.  32 steps of AdamW via timm.optim.create_optimizer_v2 (lr 8e-4,
    wd 0.05) with a timm CosineLRScheduler (4 warmup steps) under bf16 autocast, grad-norm clip 5.0, batch 32 of
    synthetic 224x224 class-patterned images; the losses are printed every 8 steps.  Then top-1 accuracy on 128
    held-out images is measured under inference_mode with the plain forward (class token plus 0.5 x max auxiliary
    logits)."""
    import timm
    from timm.optim import create_optimizer_v2
    from timm.scheduler import CosineLRScheduler

    torch.manual_seed(0)
    n_cls = 100
    batch = 32
    steps = 32
    model = timm.create_model("volo_d1_224", pretrained=False, num_classes=n_cls, drop_path_rate=0.1,
                              use_mix_token=True).to(device)
    cls_color = torch.rand(n_cls, 3, device=device)
    cls_freq = 2.0 + 20.0 * torch.rand(n_cls, 2, device=device)
    lin = torch.linspace(0, 1, 224, device=device)
    yy, xx = torch.meshgrid(lin, lin, indexing="ij")

    def images(y):
        f = cls_freq[y]
        pat = torch.sin(2 * math.pi * (f[:, 0, None, None] * xx + f[:, 1, None, None] * yy))
        img = cls_color[y][:, :, None, None] * (0.6 + 0.4 * pat[:, None]) + 0.1 * torch.randn(len(y), 3, 224, 224, device=device)
        return (img - 0.45) / 0.25

    opt = create_optimizer_v2(model, "adamw", lr=8e-4, weight_decay=0.05)
    sched = CosineLRScheduler(opt, t_initial=steps, warmup_t=4, warmup_lr_init=1e-6, lr_min=1e-5)
    model.train()
    for step in range(steps):
        y = torch.randint(0, n_cls, (batch,), device=device)
        x = images(y)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            x_cls, x_aux, (bx1, by1, bx2, by2) = model.forward_train(x)
            ph, pw = 224 // 16, 224 // 16
            lam = 1.0 - (int(bx2) - int(bx1)) * (int(by2) - int(by1)) / (ph * pw)
            loss_cls = lam * F.cross_entropy(x_cls, y) + (1 - lam) * F.cross_entropy(x_cls, y.flip(0))
            loss_aux = F.cross_entropy(x_aux.reshape(-1, n_cls), y[:, None].expand(-1, x_aux.size(1)).reshape(-1))
            loss = loss_cls + 0.5 * loss_aux
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step(step + 1)
        if step % 8 == 0 or step == steps - 1:
            print(f"step {step} loss {loss.item():.4f} cls {loss_cls.item():.4f} aux {loss_aux.item():.4f} "
                  f"lam {lam:.2f} lr {opt.param_groups[0]['lr']:.2e}")

    model.eval()
    correct = 0
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
        for i in range(4):
            y = torch.randint(0, n_cls, (32,), device=device)
            correct += (model(images(y)).argmax(-1) == y).sum().item()
    print(f"val top-1 {correct / 128:.3f}")


def timm_xcit_tiny_12_p8_lamb_bce_fp16_scaler(device):
    """timm XCiT-tiny-12 with 8-pixel patches (xcit_tiny_12_p8_224, pretrained=False, 100 classes, drop-path 0.05:
    cross-covariance attention over 784 tokens, local patch interaction depthwise convolutions, two class-attention
    layers) trained for 30 steps of LAMB via timm.optim.create_optimizer_v2 (lr 2e-3, wd 0.02) with a warmup-then-
    cosine LambdaLR, under fp16 autocast with a torch GradScaler and grad-norm clip 1.0 (after unscale_), using timm's
    BinaryCrossEntropy loss (smoothing 0.1) on batches of 32 synthetic 224x224 images; the loss and scale are printed
    every 10 steps.  Then top-1 accuracy on 96 held-out images is measured under inference_mode and fp16 autocast."""
    import timm
    from timm.loss import BinaryCrossEntropy
    from timm.optim import create_optimizer_v2

    torch.manual_seed(0)
    n_cls = 100
    batch = 32
    steps = 30
    model = timm.create_model("xcit_tiny_12_p8_224", pretrained=False, num_classes=n_cls,
                              drop_path_rate=0.05).to(device)
    proto = torch.randn(n_cls, 3, 8, 8, device=device)

    def images(y):
        base = F.interpolate(proto[y], size=(224, 224), mode="bilinear", align_corners=False)
        return base + 0.5 * torch.randn(len(y), 3, 224, 224, device=device)

    opt = create_optimizer_v2(model, "lamb", lr=2e-3, weight_decay=0.02)
    warm = 5
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else 0.5 * (1 + math.cos(math.pi * (s - warm) / (steps - warm))))
    crit = BinaryCrossEntropy(smoothing=0.1)
    scaler = torch.amp.GradScaler("cuda")
    model.train()
    for step in range(steps):
        y = torch.randint(0, n_cls, (batch,), device=device)
        with torch.autocast("cuda", dtype=torch.float16):
            logits = model(images(y))
            loss = crit(logits, y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        sched.step()
        if step % 10 == 0 or step == steps - 1:
            print(f"step {step} bce {loss.item():.4f} scale {scaler.get_scale():.0f}")

    model.eval()
    correct = 0
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.float16):
        for _ in range(3):
            y = torch.randint(0, n_cls, (32,), device=device)
            correct += (model(images(y)).argmax(-1) == y).sum().item()
    print(f"val top-1 {correct / 96:.3f}")


def muon_adamw_hybrid_gpt_bf16(device):
    """Hand-written GPT (12 pre-RMSNorm blocks, d_model 768, 12 heads with QK-RMSNorm and rotary embeddings, causal
    SDPA, squared-ReLU MLP of width 3072, untied 50304-token embedding and head, logits soft-capped with 30*tanh in
    fp32) trained in the modded-nanoGPT style: torch.optim.Muon (lr 0.02, momentum 0.95, Nesterov, 5 Newton-Schulz
    steps, no weight decay) on the 48 hidden 2-D matrices and fused AdamW (betas 0.8/0.95; embedding lr 0.01, head
    lr 0.004, norms lr 0.01) on the rest, both with a warmup-stable-decay LambdaLR, under bf16 autocast, 40 steps
    of batch 8 x 1024 tokens drawn from a synthetic 4-successor language; loss printed every 5 steps.  Then the loss
    on 4 held-out batches is averaged under no_grad."""
    torch.manual_seed(0)
    vocab = 50304
    d = 768
    n_layer = 12
    n_head = 12
    seq = 1024
    batch = 8
    steps = 40
    hd = d // n_head

    def rope(x, cos, sin):
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.RMSNorm(d)
            self.qkv = nn.Linear(d, 3 * d, bias=False)
            self.proj = nn.Linear(d, d, bias=False)
            self.ln2 = nn.RMSNorm(d)
            self.fc = nn.Linear(d, 4 * d, bias=False)
            self.out = nn.Linear(4 * d, d, bias=False)
            nn.init.zeros_(self.proj.weight)
            nn.init.zeros_(self.out.weight)

        def forward(self, x, cos, sin):
            B, T, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, n_head, hd).unbind(2)
            q, k = F.rms_norm(q, (hd,)), F.rms_norm(k, (hd,))
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(B, T, d))
            return x + self.out(F.relu(self.fc(self.ln2(x))).square())

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.blocks = nn.ModuleList(Block() for _ in range(n_layer))
            self.norm = nn.RMSNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
            ang = torch.outer(torch.arange(seq).float(), inv)
            self.register_buffer("cos", ang.cos()[:, None, :], persistent=False)
            self.register_buffer("sin", ang.sin()[:, None, :], persistent=False)

        def forward(self, idx):
            T = idx.size(1)
            x = F.rms_norm(self.embed(idx), (d,))
            for blk in self.blocks:
                x = blk(x, self.cos[:T], self.sin[:T])
            logits = self.head(self.norm(x)).float()
            return 30.0 * torch.tanh(logits / 30.0)

    model = GPT().to(device)
    hidden = [p for p in model.blocks.parameters() if p.ndim == 2]
    norms = [p for p in model.blocks.parameters() if p.ndim < 2] + list(model.norm.parameters())
    muon = torch.optim.Muon(hidden, lr=0.02, momentum=0.95, nesterov=True, weight_decay=0.0, ns_steps=5)
    adam = torch.optim.AdamW([{"params": [model.embed.weight], "lr": 0.01},
                              {"params": [model.head.weight], "lr": 0.004},
                              {"params": norms, "lr": 0.01}],
                             betas=(0.8, 0.95), weight_decay=0.0, fused=torch.device(device).type == "cuda")
    print(f"params {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M, Muon matrices {len(hidden)}")

    def wsd(s):
        cut = int(0.6 * steps)
        return min(1.0, (s + 1) / 4) if s < cut else max(0.1, 1.0 - 0.9 * (s - cut) / (steps - cut))

    scheds = [torch.optim.lr_scheduler.LambdaLR(o, wsd) for o in (muon, adam)]

    succ = torch.randint(0, vocab, (vocab, 4), device=device)
    n_corpus = 64
    corpus = torch.empty(n_corpus, seq + 1, dtype=torch.long, device=device)
    corpus[:, 0] = torch.randint(0, vocab, (n_corpus,), device=device)
    choice = torch.randint(0, 4, (n_corpus, seq), device=device)
    for t in range(seq):
        corpus[:, t + 1] = succ[corpus[:, t], choice[:, t]]
    train, held = corpus[:48], corpus[48:]

    model.train()
    for step in range(steps):
        rows = train[torch.randint(0, train.size(0), (batch,), device=device)]
        x, y = rows[:, :-1], rows[:, 1:]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x)
        loss = F.cross_entropy(logits.view(-1, vocab), y.reshape(-1))
        loss.backward()
        for o in (muon, adam):
            o.step()
            o.zero_grad(set_to_none=True)
        for s in scheds:
            s.step()
        if step % 5 == 0 or step == steps - 1:
            print(f"step {step} loss {loss.item():.4f} muon lr {scheds[0].get_last_lr()[0]:.4f}")

    model.eval()
    tot = 0.0
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        for i in range(4):
            rows = held[i * 4:(i + 1) * 4]
            logits = model(rows[:, :-1])
            tot += F.cross_entropy(logits.view(-1, vocab), rows[:, 1:].reshape(-1)).item()
    print(f"held-out loss {tot / 4:.4f} (uniform {math.log(vocab):.2f}, ideal {math.log(4):.2f})")


def sinkhorn_unrolled_point_cloud_matching(device):
    """Differentiable point-cloud correspondence: a point encoder (per-point MLP 3-64-128 on centred coordinates, a
    k=16 nearest-neighbour edge MLP on relative coordinates max-pooled, concatenation with a max-pooled global
    feature, MLP to 128-d L2-normalised descriptors) embeds two clouds of 1024 points, the second being a randomly
    rotated (up to 30 degrees), translated, jittered and permuted copy of the first; the cost 1 - cosine similarity
    (batch 16 x 1024 x 1024) is turned into a transport plan by 40 unrolled log-domain Sinkhorn iterations
    (epsilon 0.05, uniform marginals, logsumexp updates) and the loss is the negative log plan mass on the true
    correspondences.  Trained in fp32 for 40 steps of Adam (lr 1e-3) with the loss and matching accuracy printed
    every 10 steps; then, under no_grad, 100 Sinkhorn iterations match 16 new pairs, and the matching accuracy and
    the rotation error of a Kabsch/SVD fit on the soft correspondences are printed."""
    torch.manual_seed(0)
    B = 16
    N = 1024
    k = 16
    iters = 40
    eps = 0.05
    steps = 40

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.point = nn.Sequential(nn.Linear(3, 64), nn.ReLU(), nn.Linear(64, 128), nn.ReLU())
            self.edge = nn.Sequential(nn.Linear(6, 64), nn.ReLU(), nn.Linear(64, 128), nn.ReLU())
            self.out = nn.Sequential(nn.Linear(384, 256), nn.ReLU(), nn.Linear(256, 128))

        def forward(self, pts):
            c = pts - pts.mean(1, keepdim=True)
            f = self.point(c)
            with torch.no_grad():
                nbr = torch.cdist(c, c).topk(k, dim=-1, largest=False).indices
            neigh = torch.gather(c[:, None].expand(-1, c.size(1), -1, -1), 2, nbr[..., None].expand(-1, -1, -1, 3))
            rel = neigh - c[:, :, None]
            e = self.edge(torch.cat([rel, c[:, :, None].expand_as(rel)], -1)).amax(2)
            g = f.amax(1, keepdim=True).expand_as(f)
            return F.normalize(self.out(torch.cat([f, e, g], -1)), dim=-1)

    def sinkhorn(C, n_iter):
        n, m = C.shape[1], C.shape[2]
        f = torch.zeros(C.shape[0], n, device=C.device)
        g = torch.zeros(C.shape[0], m, device=C.device)
        for _ in range(n_iter):
            f = -eps * torch.logsumexp((g[:, None, :] - C) / eps, dim=2) - eps * math.log(n)
            g = -eps * torch.logsumexp((f[:, :, None] - C) / eps, dim=1) - eps * math.log(m)
        return (f[:, :, None] + g[:, None, :] - C) / eps

    def random_rotation(b, max_deg):
        axis = F.normalize(torch.randn(b, 3, device=device), dim=-1)
        ang = torch.rand(b, device=device) * math.radians(max_deg)
        K = torch.zeros(b, 3, 3, device=device)
        K[:, 0, 1], K[:, 0, 2], K[:, 1, 2] = -axis[:, 2], axis[:, 1], -axis[:, 0]
        K = K - K.transpose(1, 2)
        eye = torch.eye(3, device=device).expand(b, 3, 3)
        s, c = ang.sin()[:, None, None], ang.cos()[:, None, None]
        return eye + s * K + (1 - c) * K @ K

    def make_pairs(b):
        centres = torch.randn(b, 8, 3, device=device)
        which = torch.randint(0, 8, (b, N), device=device)
        src = torch.gather(centres, 1, which[..., None].expand(-1, -1, 3)) + 0.3 * torch.randn(b, N, 3, device=device)
        R = random_rotation(b, 30.0)
        tgt = src @ R.transpose(1, 2) + 0.2 * torch.randn(b, 1, 3, device=device) + 0.01 * torch.randn(b, N, 3, device=device)
        perm = torch.argsort(torch.rand(b, N, device=device), dim=1)
        tgt = torch.gather(tgt, 1, perm[..., None].expand(-1, -1, 3))
        inv = torch.argsort(perm, dim=1)
        return src, tgt, inv, R

    enc = Encoder().to(device)
    opt = torch.optim.Adam(enc.parameters(), lr=1e-3)
    for step in range(steps):
        src, tgt, inv, _ = make_pairs(B)
        fa, fb = enc(src), enc(tgt)
        C = 1.0 - fa @ fb.transpose(1, 2)
        log_p = sinkhorn(C, iters)
        loss = -torch.gather(log_p, 2, inv[..., None]).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 10 == 0 or step == steps - 1:
            acc = (log_p.argmax(2) == inv).float().mean().item()
            print(f"step {step} loss {loss.item():.4f} match acc {acc:.3f}")

    enc.eval()
    with torch.no_grad():
        src, tgt, inv, R = make_pairs(B)
        fa, fb = enc(src), enc(tgt)
        P = sinkhorn(1.0 - fa @ fb.transpose(1, 2), 100).exp()
        acc = (P.argmax(2) == inv).float().mean().item()
        P = P / P.sum(2, keepdim=True)
        matched = P @ tgt
        a = src - src.mean(1, keepdim=True)
        b = matched - matched.mean(1, keepdim=True)
        U, S, Vh = torch.linalg.svd(a.transpose(1, 2) @ b)
        dsign = torch.sign(torch.det(Vh.transpose(1, 2) @ U.transpose(1, 2)))
        D = torch.diag_embed(torch.stack([torch.ones_like(dsign), torch.ones_like(dsign), dsign], -1))
        R_hat = Vh.transpose(1, 2) @ D @ U.transpose(1, 2)
        cos = ((R_hat.transpose(1, 2) @ R).diagonal(dim1=1, dim2=2).sum(-1) - 1) / 2
        err = torch.rad2deg(torch.acos(cos.clamp(-1, 1))).mean().item()
    print(f"eval match acc {acc:.3f} rotation error {err:.2f} deg")


def siren_sdf_eikonal_double_backward(device):
    """SIREN signed-distance field (MLP 3-256-256-256-256-1 with sine activations, w0 = 30 and the SIREN uniform
    initialisation) fitted to the union of 6 random spheres: each step samples 100,000 surface points (sphere points
    not inside another sphere, a seeded data-dependent count) with their normals and 100,000 uniform off-surface
    points, computes the input gradient with torch.autograd.grad(create_graph=True), and minimises the SIREN loss
    3000*|f| on the surface + 100*(1 - cos(grad f, n)) on the surface + 100*exp(-100|f|) off the surface + 50*||grad
    f| - 1| everywhere, so every step is a double backward.  200 steps of Adam (lr 1e-4) in fp32 with the loss
    printed every 25 steps; then a 128^3 grid is evaluated under no_grad in chunks of 262,144 points, printing the
    sign agreement with the true SDF and the mean absolute error within 0.05 of the surface."""
    torch.manual_seed(0)
    hidden = 256
    n_hidden_layers = 3
    n_surf = 100_000
    n_off = 100_000
    steps = 200
    grid_n = 128
    w0 = 30.0

    class Sine(nn.Module):
        def __init__(self, fin, fout, first=False):
            super().__init__()
            self.lin = nn.Linear(fin, fout)
            bound = 1.0 / fin if first else math.sqrt(6.0 / fin) / w0
            nn.init.uniform_(self.lin.weight, -bound, bound)

        def forward(self, x):
            return torch.sin(w0 * self.lin(x))

    layers = [Sine(3, hidden, first=True)] + [Sine(hidden, hidden) for _ in range(n_hidden_layers)]
    last = nn.Linear(hidden, 1)
    nn.init.uniform_(last.weight, -math.sqrt(6.0 / hidden) / w0, math.sqrt(6.0 / hidden) / w0)
    model = nn.Sequential(*layers, last).to(device)

    centres = (torch.rand(6, 3, device=device) - 0.5) * 1.0
    radii = 0.15 + 0.2 * torch.rand(6, device=device)

    def sdf(x):
        return ((x[:, None, :] - centres[None]).norm(dim=-1) - radii[None]).amin(1)

    def surface_points(n):
        which = torch.randint(0, 6, (2 * n,), device=device)
        dirs = F.normalize(torch.randn(2 * n, 3, device=device), dim=-1)
        pts = centres[which] + radii[which, None] * dirs
        ok = sdf(pts) > -1e-4
        pts, dirs = pts[ok][:n], dirs[ok][:n]
        return pts, dirs

    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    for step in range(steps):
        sp, normals = surface_points(n_surf)
        op = (torch.rand(n_off, 3, device=device) - 0.5) * 2.0
        x = torch.cat([sp, op]).requires_grad_(True)
        f = model(x).squeeze(-1)
        (grad,) = torch.autograd.grad(f.sum(), x, create_graph=True)
        ns = sp.size(0)
        l_surf = f[:ns].abs().mean()
        l_norm = (1 - F.cosine_similarity(grad[:ns], normals, dim=-1)).mean()
        l_off = torch.exp(-100.0 * f[ns:].abs()).mean()
        l_eik = (grad.norm(dim=-1) - 1).abs().mean()
        loss = 3000 * l_surf + 100 * l_norm + 100 * l_off + 50 * l_eik
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 25 == 0 or step == steps - 1:
            print(f"step {step} surf pts {ns} loss {loss.item():.3f} surf {l_surf.item():.4f} "
                  f"normal {l_norm.item():.4f} eik {l_eik.item():.4f}")

    lin = torch.linspace(-1, 1, grid_n, device=device)
    grid = torch.stack(torch.meshgrid(lin, lin, lin, indexing="ij"), -1).view(-1, 3)
    agree = 0
    near_err, near_n = 0.0, 0
    with torch.no_grad():
        for i in range(0, grid.size(0), 262_144):
            g = grid[i:i + 262_144]
            pred = model(g).squeeze(-1)
            true = sdf(g)
            agree += ((pred > 0) == (true > 0)).sum().item()
            near = true.abs() < 0.05
            near_err += (pred[near] - true[near]).abs().sum().item()
            near_n += int(near.sum())
    print(f"sign agreement {agree / grid.size(0):.4f} near-surface MAE {near_err / max(near_n, 1):.4f}")


def selective_activation_checkpoint_mlm_bf16(device):
    """Hand-written pre-LayerNorm transformer masked-LM encoder (16 layers, d_model 1024, 16 heads, GELU FFN 4096,
    dropout 0.1, vocab 8192, learned positions, tied output embedding) whose blocks run under
    torch.utils.checkpoint.checkpoint(use_reentrant=False) with a selective-checkpoint context
    (create_selective_checkpoint_contexts) whose policy MUST_SAVEs the outputs of matmuls and SDPA kernels and
    PREFER_RECOMPUTEs everything else (layer norms, GELU, dropout, adds).  Batches of 16 sequences padded to 1024
    tokens (true lengths 512-1024, boolean key-padding mask passed to SDPA) from a synthetic repeated-motif language,
    15% of real tokens masked (80/10/10), logits computed only at masked positions; 30 steps of AdamW (lr 3e-4,
    wd 0.01, grad-norm clip 1.0, LinearLR warmup then CosineAnnealingLR via SequentialLR) under bf16 autocast,
    loss printed every 5 steps.  Then masked-token accuracy on 2 held-out batches under no_grad (no checkpointing)."""
    from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

    torch.manual_seed(0)
    vocab = 8192
    d = 1024
    n_layer = 16
    n_head = 16
    seq = 1024
    batch = 16
    steps = 30
    mask_id = 1
    pad_id = 0

    aten = torch.ops.aten
    save_ops = {aten.mm.default, aten.addmm.default, aten.bmm.default}
    for name in ("_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
                 "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu"):
        if hasattr(aten, name):
            save_ops.add(getattr(aten, name).default)

    def policy(ctx, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if op in save_ops else CheckpointPolicy.PREFER_RECOMPUTE

    def context_fn():
        return create_selective_checkpoint_contexts(policy)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, 4 * d)
            self.fc2 = nn.Linear(4 * d, d)
            self.drop = nn.Dropout(0.1)

        def forward(self, x, keep):
            B, T, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, n_head, d // n_head).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :],
                                               dropout_p=0.1 if self.training else 0.0)
            x = x + self.drop(self.proj(a.transpose(1, 2).reshape(B, T, d)))
            return x + self.drop(self.fc2(F.gelu(self.fc1(self.ln2(x)))))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(seq, d)
            self.blocks = nn.ModuleList(Block() for _ in range(n_layer))
            self.norm = nn.LayerNorm(d)
            self.bias = nn.Parameter(torch.zeros(vocab))
            nn.init.normal_(self.tok.weight, std=0.02)
            nn.init.normal_(self.pos.weight, std=0.02)

        def forward(self, ids, keep, where):
            x = self.tok(ids) + self.pos.weight[:ids.size(1)]
            for blk in self.blocks:
                if self.training and torch.is_grad_enabled():
                    x = checkpoint(blk, x, keep, use_reentrant=False, context_fn=context_fn)
                else:
                    x = blk(x, keep)
            h = self.norm(x[where])
            return h @ self.tok.weight.t() + self.bias

    motifs = torch.randint(2, vocab, (512, 8), device=device)

    def make_batch(b):
        lens = torch.randint(seq // 2, seq + 1, (b,), device=device)
        pick = torch.randint(0, 512, (b, seq // 8), device=device)
        ids = motifs[pick].view(b, seq)
        keep = torch.arange(seq, device=device)[None] < lens[:, None]
        ids = ids.masked_fill(~keep, pad_id)
        sel = (torch.rand(b, seq, device=device) < 0.15) & keep
        targets = ids[sel]
        r = torch.rand(b, seq, device=device)
        inp = torch.where(sel & (r < 0.8), torch.full_like(ids, mask_id), ids)
        inp = torch.where(sel & (r >= 0.8) & (r < 0.9), torch.randint_like(ids, 2, vocab), inp)
        return inp, keep, sel, targets

    model = Encoder().to(device)
    decay = [p for n, p in model.named_parameters() if p.ndim == 2]
    other = [p for n, p in model.named_parameters() if p.ndim != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": other, "weight_decay": 0.0}],
                            lr=3e-4, foreach=True)
    warm = 5
    sched = torch.optim.lr_scheduler.SequentialLR(
        opt, [torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=warm),
              torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps - warm)], milestones=[warm])
    print(f"params {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M")
    model.train()
    for step in range(steps):
        inp, keep, sel, targets = make_batch(batch)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(inp, keep, sel)
        loss = F.cross_entropy(logits.float(), targets)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step()
        if step % 5 == 0 or step == steps - 1:
            print(f"step {step} loss {loss.item():.4f} masked {targets.numel()} grad_norm {gn.item():.2f}")

    model.eval()
    correct = total = 0
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        for _ in range(2):
            inp, keep, sel, targets = make_batch(batch)
            pred = model(inp, keep, sel).argmax(-1)
            correct += (pred == targets).sum().item()
            total += targets.numel()
    print(f"masked-token accuracy {correct / total:.3f}")


def hand_beam_search_kv_cache_reorder_seq2seq(device):
    """Hand-written pre-LN encoder-decoder transformer (6+6 layers, d_model 512, 8 heads, FFN 2048, learned
    positions, shared 512-token embedding tied to the output layer) trained to sort a sequence of 16-48 tokens: 300
    steps of AdamW (lr 5e-4 with inverse-square-root warmup of 60 steps via LambdaLR, wd 0.01, grad-norm clip 1.0)
    under bf16 autocast with label-smoothed (0.1) teacher-forced cross-entropy on padded batches of 128, loss
    printed every 50 steps.  Then a hand-written beam search (beam 6, 64 sources, fixed 50 decoding steps, length
    penalty 0.6) runs under inference_mode and bf16 autocast: the encoder memory and the per-layer cross-attention
    keys/values are computed once for the 384 hypotheses, per-layer self-attention key/value caches grow by torch.cat
    every step and are reordered with index_select by the surviving beam indices; exact-match accuracy of the best
    hypotheses and of greedy decoding are printed."""
    torch.manual_seed(0)
    vocab = 512
    PAD, BOS, EOS = 0, 1, 2
    d = 512
    n_head = 8
    hd = d // n_head
    n_enc = n_dec = 6
    max_len = 50
    batch = 128
    steps = 300
    beam = 6
    n_eval = 64

    class MHA(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(d, d)
            self.kv = nn.Linear(d, 2 * d)
            self.o = nn.Linear(d, d)

        def split(self, t):
            return t.view(t.size(0), t.size(1), n_head, hd).transpose(1, 2)

        def keys_values(self, src):
            k, v = self.kv(src).chunk(2, -1)
            return self.split(k), self.split(v)

        def forward(self, x, k, v, mask=None, causal=False):
            q = self.split(self.q(x))
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
            return self.o(y.transpose(1, 2).reshape(x.size(0), x.size(1), d))

    class EncLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.att, self.ln2 = nn.LayerNorm(d), MHA(), nn.LayerNorm(d)
            self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x, mask):
            h = self.ln1(x)
            k, v = self.att.keys_values(h)
            x = x + self.att(h, k, v, mask=mask)
            return x + self.ff(self.ln2(x))

    class DecLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.self_att = nn.LayerNorm(d), MHA()
            self.ln2, self.cross = nn.LayerNorm(d), MHA()
            self.ln3 = nn.LayerNorm(d)
            self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x, mem_kv, mem_mask, cache=None):
            h = self.ln1(x)
            k, v = self.self_att.keys_values(h)
            if cache is not None:
                if cache.get("k") is not None:
                    k = torch.cat([cache["k"], k], 2)
                    v = torch.cat([cache["v"], v], 2)
                cache["k"], cache["v"] = k, v
                x = x + self.self_att(h, k, v)
            else:
                x = x + self.self_att(h, k, v, causal=True)
            x = x + self.cross(self.ln2(x), mem_kv[0], mem_kv[1], mask=mem_mask)
            return x + self.ff(self.ln3(x))

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d, padding_idx=PAD)
            nn.init.normal_(self.emb.weight, std=d ** -0.5)
            self.pos = nn.Embedding(max_len + 2, d)
            self.enc = nn.ModuleList(EncLayer() for _ in range(n_enc))
            self.dec = nn.ModuleList(DecLayer() for _ in range(n_dec))
            self.enc_norm, self.dec_norm = nn.LayerNorm(d), nn.LayerNorm(d)

        def encode(self, src):
            mask = (src != PAD)[:, None, None, :]
            x = self.emb(src) * math.sqrt(d) + self.pos.weight[:src.size(1)]
            for layer in self.enc:
                x = layer(x, mask)
            return self.enc_norm(x), mask

        def decode(self, tgt_in, mem_kvs, mem_mask, caches=None, offset=0):
            x = self.emb(tgt_in) * math.sqrt(d) + self.pos.weight[offset:offset + tgt_in.size(1)]
            for i, layer in enumerate(self.dec):
                x = layer(x, mem_kvs[i], mem_mask, None if caches is None else caches[i])
            return self.dec_norm(x) @ self.emb.weight.t()

        def forward(self, src, tgt_in):
            mem, mask = self.encode(src)
            kvs = [layer.cross.keys_values(mem) for layer in self.dec]
            return self.decode(tgt_in, kvs, mask)

    def make_batch(b):
        lens = torch.randint(16, 49, (b,), device=device)
        toks = torch.randint(3, vocab, (b, 48), device=device)
        valid = torch.arange(48, device=device)[None] < lens[:, None]
        src = toks.masked_fill(~valid, PAD)
        srt = torch.where(valid, toks, torch.full_like(toks, vocab)).sort(1).values
        srt = srt.masked_fill(srt == vocab, PAD)
        tgt = torch.full((b, 50), PAD, device=device, dtype=torch.long)
        tgt[:, 0] = BOS
        tgt[:, 1:49] = srt
        tgt[torch.arange(b, device=device), lens + 1] = EOS
        return src, tgt, lens

    model = Seq2Seq().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4, betas=(0.9, 0.98), weight_decay=0.01)
    warm = 60
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warm, math.sqrt(warm / (s + 1))))
    model.train()
    for step in range(steps):
        src, tgt, _ = make_batch(batch)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, vocab), tgt[:, 1:].reshape(-1), ignore_index=PAD,
                               label_smoothing=0.1)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step()
        if step % 50 == 0 or step == steps - 1:
            print(f"step {step} loss {loss.item():.4f} lr {sched.get_last_lr()[0]:.2e}")

    model.eval()
    src, tgt, lens = make_batch(n_eval)
    n_steps = 50
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
        mem, mask = model.encode(src)
        # greedy
        kvs = [layer.cross.keys_values(mem) for layer in model.dec]
        caches = [dict() for _ in model.dec]
        cur = torch.full((n_eval, 1), BOS, device=device, dtype=torch.long)
        greedy = []
        for t in range(n_steps):
            cur = model.decode(cur, kvs, mask, caches, offset=t)[:, -1].argmax(-1, keepdim=True)
            greedy.append(cur)
        greedy = torch.cat(greedy, 1)
        # beam search
        mem_b = mem.repeat_interleave(beam, 0)
        mask_b = mask.repeat_interleave(beam, 0)
        kvs = [layer.cross.keys_values(mem_b) for layer in model.dec]
        caches = [dict() for _ in model.dec]
        scores = torch.full((n_eval, beam), float("-inf"), device=device)
        scores[:, 0] = 0.0
        seqs = torch.full((n_eval * beam, 1), BOS, device=device, dtype=torch.long)
        finished = torch.zeros(n_eval * beam, dtype=torch.bool, device=device)
        lengths = torch.zeros(n_eval * beam, device=device)
        for t in range(n_steps):
            logp = model.decode(seqs[:, -1:], kvs, mask_b, caches, offset=t)[:, -1].float().log_softmax(-1)
            fin_row = torch.full_like(logp, float("-inf"))
            fin_row[:, PAD] = 0.0
            logp = torch.where(finished[:, None], fin_row, logp)
            cand = (scores.view(-1, 1) + logp).view(n_eval, beam * vocab)
            top_s, top_i = cand.topk(beam, dim=-1)
            src_beam = top_i // vocab
            tok = top_i % vocab
            flat = (torch.arange(n_eval, device=device)[:, None] * beam + src_beam).view(-1)
            for c in caches:
                c["k"] = c["k"].index_select(0, flat)
                c["v"] = c["v"].index_select(0, flat)
            seqs = torch.cat([seqs.index_select(0, flat), tok.view(-1, 1)], 1)
            was_done = finished.index_select(0, flat)
            lengths = lengths.index_select(0, flat) + (~was_done).float()
            finished = was_done | (tok.view(-1) == EOS)
            scores = top_s
        penalty = ((5.0 + lengths) / 6.0) ** 0.6
        best = (scores.view(-1) / penalty).view(n_eval, beam).argmax(-1)
        best_seqs = seqs.view(n_eval, beam, -1)[torch.arange(n_eval, device=device), best, 1:]

    def exact(pred):
        ok = 0
        for i in range(n_eval):
            L = int(lens[i]) + 1
            ok += int(torch.equal(pred[i, :L], tgt[i, 1:L + 1]))
        return ok / n_eval

    print(f"hypotheses {seqs.size(0)} cache len {caches[0]['k'].size(2)} exact match beam {exact(best_seqs):.3f} "
          f"greedy {exact(greedy):.3f}")


def gaussian_splatting_2d_image_fit_densify(device):
    """2-D Gaussian splatting image fit (GaussianImage style): 8,000 anisotropic Gaussians (mean, log-scale,
    rotation, RGB colour, opacity logit) are rendered onto a 256x256 synthetic target by accumulated opacity-weighted
    blending evaluated densely as (pixels x Gaussians) tensors, in 8 chunks of 8,192 pixels whose L1+MSE losses are
    back-propagated one chunk at a time (gradient accumulation over pixel chunks).  Adam with per-parameter learning
    rates (means 5e-3, scales 1e-2, rotation 1e-2, colour 1e-2, opacity 5e-2) for 300 steps in fp32; at step 100
    the 4,000 Gaussians with the largest accumulated mean-gradient norms are cloned with jitter (12,000 total) and
    the optimizer is rebuilt.  PSNR is printed every 50 steps with .item(); at the end the image is rendered under
    no_grad and the final PSNR is printed."""
    torch.manual_seed(0)
    H = W = 256
    n0 = 8000
    n_clone = 4000
    steps = 300
    densify_at = 100
    chunk = 8192

    yy, xx = torch.meshgrid(torch.linspace(0, 1, H, device=device), torch.linspace(0, 1, W, device=device),
                            indexing="ij")
    target = torch.stack([0.5 + 0.3 * torch.sin(6 * xx + 2 * yy), 0.4 + 0.3 * torch.cos(5 * yy), 0.3 + 0.2 * xx * yy], -1)
    for _ in range(25):
        cy, cx, r = torch.rand(3, device=device) * torch.tensor([1.0, 1.0, 0.15], device=device)
        col = torch.rand(3, device=device)
        disc = (((yy - cy) ** 2 + (xx - cx) ** 2) < (r + 0.02) ** 2).float()[..., None]
        target = target * (1 - disc) + col * disc
    stripes = (torch.sin(80 * xx) > 0).float()[..., None] * (yy > 0.8).float()[..., None]
    target = (target * (1 - 0.5 * stripes)).clamp(0, 1).view(-1, 3)
    pix = torch.stack([xx, yy], -1).view(-1, 2)

    def init_params(n):
        return {
            "means": torch.rand(n, 2, device=device),
            "log_scales": torch.full((n, 2), math.log(0.01), device=device) + 0.3 * torch.randn(n, 2, device=device),
            "rot": math.pi * torch.rand(n, device=device),
            "colors": torch.rand(n, 3, device=device),
            "opacity": torch.zeros(n, device=device),
        }

    lrs = {"means": 5e-3, "log_scales": 1e-2, "rot": 1e-2, "colors": 1e-2, "opacity": 5e-2}

    def make_opt(params):
        return torch.optim.Adam([{"params": [p], "lr": lrs[k]} for k, p in params.items()])

    def render(params, px):
        s = params["log_scales"].exp()
        c, sn = params["rot"].cos(), params["rot"].sin()
        dx = px[:, None, 0] - params["means"][None, :, 0]
        dy = px[:, None, 1] - params["means"][None, :, 1]
        u = (dx * c + dy * sn) / s[:, 0]
        v = (-dx * sn + dy * c) / s[:, 1]
        w = torch.sigmoid(params["opacity"]) * torch.exp(-0.5 * (u * u + v * v))
        return w @ params["colors"]

    params = {k: v.requires_grad_(True) for k, v in init_params(n0).items()}
    opt = make_opt(params)
    grad_acc = torch.zeros(n0, device=device)
    for step in range(steps):
        total = 0.0
        for i in range(0, H * W, chunk):
            out = render(params, pix[i:i + chunk])
            tgt = target[i:i + chunk]
            loss = (0.8 * (out - tgt).abs().mean() + 0.2 * F.mse_loss(out, tgt)) * out.size(0) / (H * W)
            loss.backward()
            total = total + loss.detach()
        if step < densify_at:
            grad_acc += params["means"].grad.norm(dim=-1)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step == densify_at:
            idx = grad_acc.topk(n_clone).indices
            with torch.no_grad():
                new = {k: v.detach() for k, v in params.items()}
                extra = {k: v[idx].clone() for k, v in new.items()}
                extra["means"] += 0.5 * extra["log_scales"].exp() * torch.randn_like(extra["means"])
                extra["log_scales"] -= math.log(1.6)
                new["log_scales"] = new["log_scales"].clone()
                new["log_scales"][idx] -= math.log(1.6)
                params = {k: torch.cat([new[k], extra[k]]).requires_grad_(True) for k in new}
            opt = make_opt(params)
            print(f"densified to {params['means'].size(0)} gaussians")
        if step % 50 == 0 or step == steps - 1:
            with torch.no_grad():
                mse = 0.0
                for i in range(0, H * W, chunk):
                    mse = mse + F.mse_loss(render(params, pix[i:i + chunk]), target[i:i + chunk], reduction="sum")
                psnr = 10 * torch.log10(1.0 / (mse / (H * W * 3)))
            print(f"step {step} loss {total.item():.4f} PSNR {psnr.item():.2f} dB")

    with torch.no_grad():
        img = torch.cat([render(params, pix[i:i + chunk]) for i in range(0, H * W, chunk)]).clamp(0, 1)
        psnr = 10 * torch.log10(1.0 / F.mse_loss(img, target))
    print(f"final image {tuple(img.view(H, W, 3).shape)} PSNR {psnr.item():.2f} dB")


ISSUE35U = {f.__name__: f for f in [
    hf_wavlm_xvector_speaker_verification_fp16_scaler,
    hf_upernet_convnext_tiny_segmentation_poly_bf16,
    hf_deepseek_v3_mla_moe_bf16_weights_generate,
    hf_llava_clip_llama_visual_instruction_tuning_bf16,
    hf_time_series_transformer_student_t_sampling_forecast,
    hf_swin2sr_x4_pixelshuffle_l1_bf16,
    tv_maskrcnn_resnet50_fpn_v2_train_then_eval_fp16_scaler,
    tv_ssdlite320_mobilenet_v3_large_train_then_detect,
    timm_volo_d1_token_labeling_mix_token_bf16,
    timm_xcit_tiny_12_p8_lamb_bce_fp16_scaler,
    muon_adamw_hybrid_gpt_bf16,
    sinkhorn_unrolled_point_cloud_matching,
    siren_sdf_eikonal_double_backward,
    selective_activation_checkpoint_mlm_bf16,
    hand_beam_search_kv_cache_reorder_seq2seq,
    gaussian_splatting_2d_image_fit_densify,
]}
