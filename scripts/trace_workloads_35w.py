"""Twenty-third held-out group of issue 35 (group ISSUE35W): sixteen more programs of kinds no earlier group had (ESM-2 protein masked LM with rotary positions and token dropout; CLAP HTSAT audio-text contrastive training under fp16 with a GradScaler; BERT-to-GPT-2 EncoderDecoderModel summarization with greedy generate; Jamba hybrid Mamba/attention/MoE LM with router aux loss; PEFT DoRA on a bf16 Qwen3 with merge-and-unload eval; timm ConvNeXt-V2 nano with nesterov SGD, accumulation and fp16 scaler; torchvision Swin3D-T video classification with two-clip eval; FixMatch semi-supervised ResNet-18 with EMA teacher; CRNN OCR with BiLSTM, CTC and Adadelta; FT-Transformer on tabular features; flex_attention packed-document sliding-window LM; nested jagged tensor encoder with variable-length SDPA; PSMNet stereo concat cost volume with 3D hourglasses; Evoformer-lite MSA/pair trunk with triangle updates and recycling; soft actor-critic with twin Q and entropy tuning on a batched env; JEM energy classifier with SGLD replay buffer), written by a helper that read no part of the tracer, committed before they were recorded on a GPU (an H200) or compared with anything.

Each is a function of the device, recorded by scripts/record_trace_workloads.py (VRAMLAB_HOLDOUT=issue35w).
"""

import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def hf_esm2_protein_mlm_rotary_token_dropout_bf16(device):
    """ESM-2-style protein masked LM: EsmForMaskedLM built from an EsmConfig (12 layers, hidden 480, 20 heads,
    FFN 1920, rotary position embeddings, token dropout, 33-token vocabulary, ~35M parameters), fp32 weights.
    Trains 8 steps on fresh batches of 16 synthetic protein sequences of 100-1022 residues (plus cls/eos, padded
    to the longest in the batch) with 15% BERT-style 80/10/10 masking, bf16 autocast, AdamW (lr 4e-4, wd 0.01,
    no decay on biases and LayerNorm weights), linear warmup/decay schedule (2 warmup steps), grad-norm clip 1.0.
    Then a no-grad bf16 eval of masked-token perplexity over 4 batches of 8 sequences."""
    from transformers import EsmConfig, EsmForMaskedLM, get_linear_schedule_with_warmup

    torch.manual_seed(3501)
    dev_type = torch.device(device).type
    batch, min_len, max_len, steps = 16, 100, 1022, 8
    cfg = EsmConfig(
        vocab_size=33,
        mask_token_id=32,
        pad_token_id=1,
        hidden_size=480,
        num_hidden_layers=12,
        num_attention_heads=20,
        intermediate_size=1920,
        position_embedding_type="rotary",
        max_position_embeddings=1026,
        emb_layer_norm_before=False,
        token_dropout=True,
        layer_norm_eps=1e-5,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    model = EsmForMaskedLM(cfg).to(device)
    gen = torch.Generator().manual_seed(11)

    def make_batch(n):
        lengths = torch.randint(min_len, max_len + 1, (n,), generator=gen)
        width = int(lengths.max()) + 2
        ids = torch.full((n, width), 1, dtype=torch.long)
        for i, n_res in enumerate(lengths.tolist()):
            ids[i, 0] = 0
            ids[i, 1:n_res + 1] = torch.randint(4, 24, (n_res,), generator=gen)
            ids[i, n_res + 1] = 2
        attention_mask = (ids != 1).long()
        residue = (ids >= 4) & (ids < 24)
        chosen = residue & (torch.rand(ids.shape, generator=gen) < 0.15)
        labels = torch.where(chosen, ids, torch.full_like(ids, -100))
        roll = torch.rand(ids.shape, generator=gen)
        inputs = ids.clone()
        inputs[chosen & (roll < 0.8)] = 32
        swap = chosen & (roll >= 0.8) & (roll < 0.9)
        inputs[swap] = torch.randint(4, 24, (int(swap.sum()),), generator=gen)
        return inputs.to(device), attention_mask.to(device), labels.to(device)

    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
        lr=4e-4, betas=(0.9, 0.98), eps=1e-8,
    )
    sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=2, num_training_steps=steps)

    model.train()
    for _ in range(steps):
        input_ids, attention_mask, labels = make_batch(batch)
        with torch.autocast(dev_type, dtype=torch.bfloat16):
            out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)

    model.eval()
    total, count = 0.0, 0
    with torch.no_grad(), torch.autocast(dev_type, dtype=torch.bfloat16):
        for _ in range(4):
            input_ids, attention_mask, labels = make_batch(8)
            out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
            n_masked = int((labels != -100).sum())
            total += float(out.loss) * n_masked
            count += n_masked
    print("esm2 masked perplexity", math.exp(total / max(count, 1)))


def hf_clap_htsat_audio_text_contrastive_fp16_scaler(device):
    """CLAP audio-text contrastive training: ClapModel from a ClapConfig with the default HTSAT-tiny audio tower
    (Swin depths 2-2-6-2, patch embed 96, hidden 768, 256x256 spectrogram image, no fusion) and a 6-layer
    RoBERTa-style text tower (hidden 512, 8 heads, FFN 2048, vocab 16000), projection dim 512. Trains 6 steps on
    batches of 32 (log-mel input_features 32x1x1001x64 generated on the device, captions of 6-64 tokens padded
    with an attention mask) with return_loss=True, fp16 autocast, torch.amp.GradScaler (unscale, clip 1.0),
    AdamW (lr 1e-4, betas 0.9/0.98, wd 0.2), clamping both logit scales after each step. Then no-grad fp16
    retrieval eval: get_audio_features/get_text_features on 64 pairs in batches of 32 and recall@1."""
    from transformers import ClapConfig, ClapModel

    torch.manual_seed(3502)
    dev_type = torch.device(device).type
    batch, steps, n_frames, n_mels, max_tokens, vocab = 32, 6, 1001, 64, 64, 16000
    cfg = ClapConfig(
        text_config=dict(
            vocab_size=vocab, hidden_size=512, num_hidden_layers=6, num_attention_heads=8,
            intermediate_size=2048, max_position_embeddings=130,
        ),
        audio_config=dict(
            spec_size=256, num_mel_bins=n_mels, depths=[2, 2, 6, 2], num_attention_heads=[4, 8, 16, 32],
            patch_embeds_hidden_size=96, hidden_size=768, enable_fusion=False,
        ),
        projection_dim=512,
    )
    model = ClapModel(cfg).to(device)

    def make_batch(n):
        feats = torch.randn(n, 1, n_frames, n_mels, device=device) * 2.0 - 4.0
        lengths = torch.randint(6, max_tokens + 1, (n,), device=device)
        ids = torch.randint(3, vocab, (n, max_tokens), device=device)
        pos = torch.arange(max_tokens, device=device)[None, :]
        ids[:, 0] = 0
        ids = torch.where(pos == lengths[:, None] - 1, torch.full_like(ids, 2), ids)
        mask = (pos < lengths[:, None]).long()
        ids = torch.where(mask.bool(), ids, torch.full_like(ids, 1))
        return feats, ids, mask

    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.2)
    scaler = torch.amp.GradScaler(dev_type)
    model.train()
    for _ in range(steps):
        feats, ids, mask = make_batch(batch)
        with torch.autocast(dev_type, dtype=torch.float16):
            out = model(input_ids=ids, attention_mask=mask, input_features=feats, return_loss=True)
        scaler.scale(out.loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            model.logit_scale_a.clamp_(0, math.log(100))
            model.logit_scale_t.clamp_(0, math.log(100))

    model.eval()
    audio_embs, text_embs = [], []
    with torch.no_grad(), torch.autocast(dev_type, dtype=torch.float16):
        for _ in range(2):
            feats, ids, mask = make_batch(batch)
            audio_embs.append(model.get_audio_features(input_features=feats).pooler_output.float())
            text_embs.append(model.get_text_features(input_ids=ids, attention_mask=mask).pooler_output.float())
    sims = torch.cat(audio_embs) @ torch.cat(text_embs).t()
    recall1 = (sims.argmax(1) == torch.arange(sims.shape[0], device=sims.device)).float().mean()
    print("clap recall@1", float(recall1))


def hf_bert2gpt2_encoder_decoder_summarization_bf16_greedy(device):
    """Warm-start-style seq2seq summarization with EncoderDecoderModel built from configs: a BERT-base encoder
    (12 layers, hidden 768, 12 heads) and a 6-layer GPT-2 decoder with cross-attention (hidden 768, 12 heads,
    256 positions), shared 30522-token vocabulary. Trains 6 optimizer steps, each accumulating 2 micro-batches of
    8 padded documents (256-510 tokens) with 32-64-token target summaries (labels padded with -100), bf16
    autocast, AdamW (lr 5e-5, wd 0.01), linear warmup schedule, grad clip 1.0. Then greedy generate
    (max_new_tokens 40) for 16 documents under bf16 autocast."""
    from transformers import (
        BertConfig,
        EncoderDecoderConfig,
        EncoderDecoderModel,
        GPT2Config,
        get_linear_schedule_with_warmup,
    )

    torch.manual_seed(3503)
    dev_type = torch.device(device).type
    vocab, pad, bos, eos = 30522, 0, 101, 102
    micro, accum, steps, src_min, src_max, tgt_min, tgt_max = 8, 2, 6, 256, 510, 32, 64
    enc_cfg = BertConfig(
        vocab_size=vocab, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
        intermediate_size=3072, max_position_embeddings=512, pad_token_id=pad,
    )
    dec_cfg = GPT2Config(
        vocab_size=vocab, n_embd=768, n_layer=6, n_head=12, n_positions=256,
        bos_token_id=bos, eos_token_id=eos, pad_token_id=pad,
    )
    cfg = EncoderDecoderConfig.from_encoder_decoder_configs(enc_cfg, dec_cfg)
    cfg.decoder_start_token_id = bos
    cfg.pad_token_id = pad
    model = EncoderDecoderModel(config=cfg).to(device)

    def make_batch(n):
        src_len = torch.randint(src_min, src_max + 1, (n,))
        tgt_len = torch.randint(tgt_min, tgt_max + 1, (n,))
        width = int(src_len.max()) + 2
        src = torch.full((n, width), pad, dtype=torch.long)
        labels = torch.full((n, int(tgt_len.max()) + 1), -100, dtype=torch.long)
        for i in range(n):
            body = torch.randint(1000, vocab, (int(src_len[i]),))
            src[i, 0] = bos
            src[i, 1:int(src_len[i]) + 1] = body
            src[i, int(src_len[i]) + 1] = eos
            summary = body[::4][:int(tgt_len[i])]
            labels[i, :summary.numel()] = summary
            labels[i, summary.numel()] = eos
        return src.to(device), (src != pad).long().to(device), labels.to(device)

    opt = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01)
    sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=1, num_training_steps=steps)
    model.train()
    for _ in range(steps):
        for _ in range(accum):
            src, src_mask, labels = make_batch(micro)
            with torch.autocast(dev_type, dtype=torch.bfloat16):
                out = model(input_ids=src, attention_mask=src_mask, labels=labels)
            (out.loss / accum).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)

    model.eval()
    src, src_mask, _ = make_batch(2 * micro)
    with torch.no_grad(), torch.autocast(dev_type, dtype=torch.bfloat16):
        summaries = model.generate(
            input_ids=src, attention_mask=src_mask, max_new_tokens=40, do_sample=False, num_beams=1,
            decoder_start_token_id=bos, eos_token_id=eos, pad_token_id=pad,
        )
    print("bert2gpt2 generated", tuple(summaries.shape))


def hf_jamba_hybrid_mamba_attention_moe_bf16(device):
    """Jamba hybrid LM: JambaForCausalLM from a JambaConfig (8 layers: attention at layers 2 and 6, Mamba mixers
    elsewhere with d_state 16, d_conv 4, expand 2, torch-only selective scan since no mamba kernels are installed;
    8-expert top-2 MoE FFN on every odd layer, dense SwiGLU FFN otherwise; hidden 1024, FFN 2816, 16 heads with 4
    KV heads, vocab 32000, ~420M parameters), fp32 weights, output_router_logits with aux-loss coef 0.01.
    Trains 5 steps on batches of 4x512 tokens of repeated-pattern synthetic text, bf16 autocast, fused AdamW
    (lr 3e-4, wd 0.1), cosine schedule with 1 warmup step, clip 1.0. Then greedy generate of 24 new tokens from
    2 prompts of 64 tokens under bf16 autocast (hybrid Mamba/attention cache, router logits off)."""
    from transformers import JambaConfig, JambaForCausalLM, get_cosine_schedule_with_warmup

    torch.manual_seed(3504)
    dev_type = torch.device(device).type
    batch, seq, steps, vocab = 4, 512, 5, 32000
    cfg = JambaConfig(
        vocab_size=vocab,
        hidden_size=1024,
        intermediate_size=2816,
        num_hidden_layers=8,
        num_attention_heads=16,
        num_key_value_heads=4,
        num_experts=8,
        num_experts_per_tok=2,
        expert_layer_period=2,
        expert_layer_offset=1,
        attn_layer_period=4,
        attn_layer_offset=2,
        mamba_d_state=16,
        mamba_d_conv=4,
        mamba_expand=2,
        use_mamba_kernels=False,
        output_router_logits=True,
        router_aux_loss_coef=0.01,
        max_position_embeddings=4096,
        pad_token_id=0,
    )
    model = JambaForCausalLM(cfg).to(device)

    def make_batch(n, length):
        period = torch.randint(8, 64, (n, 1), device=device)
        base = torch.randint(1, vocab, (n, 64), device=device)
        pos = torch.arange(length, device=device)[None, :]
        ids = torch.gather(base, 1, pos % period)
        noise = torch.rand(n, length, device=device) < 0.05
        return torch.where(noise, torch.randint_like(ids, 1, vocab), ids)

    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    sched = get_cosine_schedule_with_warmup(opt, num_warmup_steps=1, num_training_steps=steps)
    model.train()
    for _ in range(steps):
        ids = make_batch(batch, seq)
        with torch.autocast(dev_type, dtype=torch.bfloat16):
            out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
    print("jamba loss", out.loss.item(), "aux", out.aux_loss.item())

    model.eval()
    prompts = make_batch(2, 64)
    with torch.no_grad(), torch.autocast(dev_type, dtype=torch.bfloat16):
        generated = model.generate(
            input_ids=prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=24, do_sample=False,
            pad_token_id=0, output_router_logits=False,
        )
    print("jamba generated", tuple(generated.shape))


def peft_dora_qwen3_bf16_weights_merge_eval(device):
    """PEFT DoRA (LoraConfig use_dora=True, r 16, alpha 32, dropout 0.05, on all seven attention/MLP projections)
    on a Qwen3ForCausalLM created from a Qwen3Config directly on the device in bf16 weights (16 layers, hidden
    1536, FFN 4096, 12 heads of dim 128 with 4 KV heads, vocab 32000, tied embeddings, ~450M base parameters);
    adapters and magnitude vectors kept in fp32 by PEFT, no autocast. Trains 6 SFT steps on batches of 8x768
    tokens with the 256-token prompt masked out of the labels, AdamW (lr 2e-4) on the trainable parameters,
    grad clip 1.0. Then merge_and_unload() and a no-grad eval loss on one batch of 8."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, Qwen3Config

    torch.manual_seed(3505)
    batch, seq, prompt_len, steps, vocab = 8, 768, 256, 6, 32000
    cfg = Qwen3Config(
        vocab_size=vocab,
        hidden_size=1536,
        intermediate_size=4096,
        num_hidden_layers=16,
        num_attention_heads=12,
        num_key_value_heads=4,
        head_dim=128,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
    )
    with torch.device(device):
        base = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    lora_cfg = LoraConfig(
        r=16,
        lora_alpha=32,
        lora_dropout=0.05,
        use_dora=True,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(base, lora_cfg)

    def make_batch(n):
        ids = torch.randint(3, vocab, (n, seq))
        ids[:, prompt_len::2] = ids[:, prompt_len - 1:seq - 1:2]
        labels = ids.clone()
        labels[:, :prompt_len] = -100
        return ids.to(device), labels.to(device)

    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=2e-4, weight_decay=0.0)
    model.train()
    for _ in range(steps):
        ids, labels = make_batch(batch)
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    merged = model.merge_and_unload()
    merged.eval()
    ids, labels = make_batch(batch)
    with torch.no_grad():
        eval_loss = merged(input_ids=ids, labels=labels).loss
    print("dora merged eval loss", float(eval_loss))


def timm_convnextv2_nano_grn_fp16_scaler_accumulate_nesterov(device):
    """timm convnextv2_nano (GRN blocks, pretrained=False, 200 classes, drop_path 0.1, ~15M params) trained for
    3 optimizer steps, each accumulating 4 micro-batches of 48 uint8 224x224 images (made on the CPU, normalized
    on the device), fp16 autocast with torch.amp.GradScaler (unscale then clip 5.0), timm create_optimizer_v2
    'sgd' (nesterov, momentum 0.9, lr 0.2, wd 5e-5 without bias/norm decay), timm CosineLRScheduler stepped per
    update with 1 warmup step, timm LabelSmoothingCrossEntropy(0.1). Then inference_mode fp16 eval over 2
    batches of 48."""
    import timm
    from timm.loss import LabelSmoothingCrossEntropy
    from timm.optim import create_optimizer_v2
    from timm.scheduler import CosineLRScheduler

    torch.manual_seed(3506)
    dev_type = torch.device(device).type
    micro, accum, steps, size, n_classes = 48, 4, 3, 224, 200
    model = timm.create_model("convnextv2_nano", pretrained=False, num_classes=n_classes, drop_path_rate=0.1)
    model = model.to(device)
    mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device=device).view(1, 3, 1, 1) * 255

    def make_batch(n):
        images = torch.randint(0, 256, (n, 3, size, size), dtype=torch.uint8)
        labels = torch.randint(0, n_classes, (n,))
        images = images.to(device, non_blocking=True).float().sub_(mean).div_(std)
        return images, labels.to(device, non_blocking=True)

    opt = create_optimizer_v2(model, opt="sgd", lr=0.2, weight_decay=5e-5, momentum=0.9)
    sched = CosineLRScheduler(opt, t_initial=steps, lr_min=1e-5, warmup_t=1, warmup_lr_init=1e-3,
                              t_in_epochs=False)
    criterion = LabelSmoothingCrossEntropy(smoothing=0.1)
    scaler = torch.amp.GradScaler(dev_type)
    model.train()
    for step in range(steps):
        for _ in range(accum):
            images, labels = make_batch(micro)
            with torch.autocast(dev_type, dtype=torch.float16):
                loss = criterion(model(images), labels) / accum
            scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        sched.step_update(num_updates=step + 1)

    model.eval()
    correct = 0
    with torch.inference_mode(), torch.autocast(dev_type, dtype=torch.float16):
        for _ in range(2):
            images, labels = make_batch(micro)
            correct += int((model(images).argmax(-1) == labels).sum())
    print("convnextv2 eval correct", correct)


def tv_swin3d_t_video_bf16_warmup_two_clip_eval(device):
    """torchvision swin3d_t video classifier (weights=None, 101 classes, patch 2x4x4, window 8x7x7) trained 5
    steps on batches of 4 clips of 16 frames at 224x224 (float clips generated on the device), bf16 autocast,
    AdamW (lr 3e-4, wd 0.05), LambdaLR linear warmup over 2 steps, label smoothing 0.1, grad clip 5.0. Then a
    no-grad bf16 eval of 4 videos x 2 temporal clips each (batch 8) averaging the softmax over clips."""
    from torchvision.models.video import swin3d_t

    torch.manual_seed(3507)
    dev_type = torch.device(device).type
    batch, frames, size, steps, n_classes = 4, 16, 224, 5, 101
    model = swin3d_t(weights=None, num_classes=n_classes).to(device)
    mean = torch.tensor([0.43216, 0.394666, 0.37645], device=device).view(1, 3, 1, 1, 1)
    std = torch.tensor([0.22803, 0.22145, 0.216989], device=device).view(1, 3, 1, 1, 1)

    def make_clips(n):
        coarse = torch.rand(n, 3, frames // 4, size // 16, size // 16, device=device)
        clips = F.interpolate(coarse, size=(frames, size, size), mode="trilinear", align_corners=False)
        clips = clips + 0.05 * torch.randn_like(clips)
        return (clips - mean) / std, torch.randint(0, n_classes, (n,), device=device)

    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: min(1.0, (k + 1) / 2))
    model.train()
    for _ in range(steps):
        clips, labels = make_clips(batch)
        with torch.autocast(dev_type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(clips), labels, label_smoothing=0.1)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)

    model.eval()
    clips, labels = make_clips(2 * batch)
    with torch.no_grad(), torch.autocast(dev_type, dtype=torch.bfloat16):
        probs = model(clips).float().softmax(-1).view(batch, 2, n_classes).mean(1)
    print("swin3d video top1", float((probs.argmax(-1) == labels[:batch]).float().mean()))


def fixmatch_resnet18_cifar_stem_ema_bf16(device):
    """FixMatch semi-supervised training of a torchvision resnet18 (weights=None, 10 classes) with a CIFAR stem
    (3x3 stride-1 conv1, no max-pool) on synthetic 32x32 data held on the device (4000 labeled, 20000
    unlabeled). Each of 8 steps draws 64 labeled and 448 unlabeled images (mu=7), builds weak views (flip +
    reflect-pad-4 random crop by gather) and strong views (random brightness/contrast/saturation, solarize,
    posterize, 16x16 cutout), runs one concatenated forward of 960 images under bf16 autocast, and combines
    labeled CE with confidence-masked (0.95) pseudo-label CE. SGD nesterov (lr 0.03, momentum 0.9, wd 5e-4
    without bias/BN decay), FixMatch cosine LambdaLR, EMA teacher via AveragedModel(get_ema_multi_avg_fn(0.999),
    use_buffers=True). Then no-grad eval of the EMA model on 2000 test images in batches of 500."""
    import torchvision
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

    torch.manual_seed(3508)
    dev_type = torch.device(device).type
    n_labeled, n_unlabeled, n_test = 4000, 20000, 2000
    batch_l, mu, steps, threshold, lambda_u = 64, 7, 8, 0.95, 1.0

    model = torchvision.models.resnet18(weights=None, num_classes=10)
    model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    model = model.to(device)
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999), use_buffers=True)

    templates = F.interpolate(torch.rand(10, 3, 8, 8, device=device), size=32, mode="bilinear",
                              align_corners=False)

    def synth(n):
        y = torch.randint(0, 10, (n,), device=device)
        return templates[y] * 0.7 + 0.3 * torch.rand(n, 3, 32, 32, device=device), y

    x_lab, y_lab = synth(n_labeled)
    x_unl, _ = synth(n_unlabeled)
    x_test, y_test = synth(n_test)
    mean = torch.tensor([0.4914, 0.4822, 0.4465], device=device).view(1, 3, 1, 1)
    std = torch.tensor([0.2471, 0.2435, 0.2616], device=device).view(1, 3, 1, 1)
    grid = torch.arange(32, device=device)

    def weak(x):
        n = x.shape[0]
        x = torch.where(torch.rand(n, 1, 1, 1, device=device) < 0.5, x.flip(-1), x)
        padded = F.pad(x, (4, 4, 4, 4), mode="reflect").permute(0, 2, 3, 1)
        rows = torch.randint(0, 9, (n, 1), device=device) + grid
        cols = torch.randint(0, 9, (n, 1), device=device) + grid
        bidx = torch.arange(n, device=device)[:, None, None]
        return padded[bidx, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2).contiguous()

    def strong(x):
        x = weak(x)
        n = x.shape[0]

        def factor(lo, hi):
            return torch.empty(n, 1, 1, 1, device=device).uniform_(lo, hi)

        x = x * factor(0.5, 1.5)
        img_mean = x.mean(dim=(1, 2, 3), keepdim=True)
        x = (x - img_mean) * factor(0.5, 1.5) + img_mean
        gray = 0.299 * x[:, 0:1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:3]
        x = (gray + (x - gray) * factor(0.0, 2.0)).clamp(0, 1)
        x = torch.where((torch.rand(n, 1, 1, 1, device=device) < 0.3) & (x > factor(0.5, 1.0)), 1 - x, x)
        levels = 2 ** torch.randint(3, 8, (n, 1, 1, 1), device=device).float()
        x = torch.where(torch.rand(n, 1, 1, 1, device=device) < 0.3, torch.floor(x * levels) / levels, x)
        cy = torch.randint(0, 32, (n, 1, 1, 1), device=device)
        cx = torch.randint(0, 32, (n, 1, 1, 1), device=device)
        hole = ((grid.view(1, 1, 32, 1) - cy).abs() < 8) & ((grid.view(1, 1, 1, 32) - cx).abs() < 8)
        return x.masked_fill(hole, 0.5)

    def norm(x):
        return (x - mean) / std

    decay = [p for p in model.parameters() if p.ndim > 1]
    no_decay = [p for p in model.parameters() if p.ndim <= 1]
    opt = torch.optim.SGD([{"params": decay, "weight_decay": 5e-4}, {"params": no_decay, "weight_decay": 0.0}],
                          lr=0.03, momentum=0.9, nesterov=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: math.cos(7 * math.pi * k / (16 * steps)))

    model.train()
    for _ in range(steps):
        li = torch.randint(0, n_labeled, (batch_l,), device=device)
        ui = torch.randint(0, n_unlabeled, (batch_l * mu,), device=device)
        xu = x_unl[ui]
        inputs = norm(torch.cat([weak(x_lab[li]), weak(xu), strong(xu)]))
        with torch.autocast(dev_type, dtype=torch.bfloat16):
            logits = model(inputs)
        logits = logits.float()
        logits_x = logits[:batch_l]
        logits_uw, logits_us = logits[batch_l:].chunk(2)
        loss_x = F.cross_entropy(logits_x, y_lab[li])
        max_p, pseudo = torch.softmax(logits_uw.detach(), dim=-1).max(dim=-1)
        mask = (max_p >= threshold).float()
        loss_u = (F.cross_entropy(logits_us, pseudo, reduction="none") * mask).mean()
        loss = loss_x + lambda_u * loss_u
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        ema.update_parameters(model)

    ema.eval()
    correct = 0
    with torch.no_grad(), torch.autocast(dev_type, dtype=torch.bfloat16):
        for start in range(0, n_test, 500):
            pred = ema(norm(x_test[start:start + 500])).argmax(-1)
            correct += int((pred == y_test[start:start + 500]).sum())
    print("fixmatch ema accuracy", correct / n_test)


def crnn_ocr_vgg_bilstm_ctc_adadelta(device):
    """CRNN text-line OCR: VGG-style CNN (64-128-256-256-512-512 channels, BatchNorm on three convs, asymmetric
    (2,1) pools, final 2x2 conv collapsing height 32 to 1, giving 65 time steps for a 32x256 image), 2-layer
    bidirectional LSTM (hidden 256), linear to 36 characters + CTC blank. Synthetic text lines of 4-16 glyphs
    rendered on the CPU and moved to the device. Trains 10 steps at batch 128 in fp32 with F.ctc_loss
    (zero_infinity) on log-softmax outputs, Adadelta (lr 1.0, rho 0.9), grad clip 5.0. Then no-grad greedy CTC
    decoding (argmax, unique_consecutive, drop blanks) of 256 lines in 2 batches and sequence accuracy."""
    torch.manual_seed(3509)
    n_chars, img_h, img_w, batch, steps, min_chars, max_chars = 36, 32, 256, 128, 10, 4, 16
    glyphs = (F.avg_pool2d(torch.rand(n_chars, 1, 24, 12), 3, 1, 1) > 0.5).float()

    def render(n):
        imgs = torch.zeros(n, 1, img_h, img_w)
        targets, lengths = [], []
        for i in range(n):
            length = int(torch.randint(min_chars, max_chars + 1, ()))
            chars = torch.randint(0, n_chars, (length,))
            x = int(torch.randint(0, 8, ()))
            for c in chars.tolist():
                y = int(torch.randint(2, 7, ()))
                region = imgs[i, 0, y:y + 24, x:x + 12]
                imgs[i, 0, y:y + 24, x:x + 12] = torch.maximum(region, glyphs[c, 0])
                x += 12 + int(torch.randint(0, 3, ()))
            targets.append(chars + 1)
            lengths.append(length)
        imgs = imgs * torch.empty(n, 1, 1, 1).uniform_(0.5, 1.0) + 0.1 * torch.randn(n, 1, img_h, img_w)
        return (imgs * 2 - 1).to(device), torch.cat(targets).to(device), torch.tensor(lengths).to(device)

    def conv(cin, cout, bn):
        layers = [nn.Conv2d(cin, cout, 3, 1, 1)]
        if bn:
            layers.append(nn.BatchNorm2d(cout))
        return layers + [nn.ReLU(inplace=True)]

    class CRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.cnn = nn.Sequential(
                *conv(1, 64, False), nn.MaxPool2d(2, 2),
                *conv(64, 128, False), nn.MaxPool2d(2, 2),
                *conv(128, 256, True), *conv(256, 256, False), nn.MaxPool2d((2, 2), (2, 1), (0, 1)),
                *conv(256, 512, True), *conv(512, 512, False), nn.MaxPool2d((2, 2), (2, 1), (0, 1)),
                nn.Conv2d(512, 512, 2, 1, 0), nn.BatchNorm2d(512), nn.ReLU(inplace=True),
            )
            self.rnn = nn.LSTM(512, 256, num_layers=2, bidirectional=True)
            self.fc = nn.Linear(512, n_chars + 1)

        def forward(self, x):
            feats = self.cnn(x).squeeze(2).permute(2, 0, 1)
            out, _ = self.rnn(feats)
            return self.fc(out)

    model = CRNN().to(device)
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0, rho=0.9)
    model.train()
    for _ in range(steps):
        imgs, targets, lengths = render(batch)
        log_probs = model(imgs).log_softmax(2)
        input_lengths = torch.full((batch,), log_probs.shape[0], dtype=torch.long, device=device)
        loss = F.ctc_loss(log_probs, targets, input_lengths, lengths, blank=0, zero_infinity=True)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()

    model.eval()
    exact = 0
    with torch.no_grad():
        for _ in range(2):
            imgs, targets, lengths = render(batch)
            best = model(imgs).argmax(2).t().cpu()
            truth = targets.cpu().split(lengths.cpu().tolist())
            for seq, gold in zip(best, truth):
                decoded = torch.unique_consecutive(seq)
                decoded = decoded[decoded != 0]
                exact += int(decoded.numel() == gold.numel() and bool((decoded == gold).all()))
    print("crnn sequence accuracy", exact / (2 * batch))


def ft_transformer_tabular_reglu_cls_adamw(device):
    """FT-Transformer for tabular multiclass data (7 classes): per-feature numerical tokenizer for 60 numeric
    features (weight and bias per feature), categorical tokenizer for 16 categorical features (cardinalities
    3-1000) through one offset Embedding plus per-feature bias, prepended CLS token (77 tokens of width 256),
    6 pre-norm blocks (first block without attention norm) of 8-head SDPA attention with attention dropout 0.2
    and ReGLU FFN (hidden 342), final LayerNorm-ReLU-Linear head on CLS. Data generated on the CPU from a random
    teacher. Trains 12 steps at batch 2048 in fp32 with AdamW (lr 1e-4, wd 1e-5; no decay for tokenizers,
    norms and biases). Then inference_mode eval of 32768 rows in chunks of 8192."""
    torch.manual_seed(3510)
    n_num, n_classes, d_token, n_blocks, n_heads, ffn_hidden = 60, 7, 256, 6, 8, 342
    batch, steps, n_eval, eval_chunk = 2048, 12, 32768, 8192
    gen = torch.Generator().manual_seed(5)
    cards = torch.randint(3, 1001, (16,), generator=gen)
    teacher_num = torch.randn(n_num, n_classes, generator=gen)
    teacher_cat = [torch.randn(int(c), n_classes, generator=gen) for c in cards]

    def make_rows(n):
        x_num = torch.randn(n, n_num, generator=gen)
        x_cat = torch.stack([torch.randint(0, int(c), (n,), generator=gen) for c in cards], dim=1)
        score = torch.tanh(x_num) @ teacher_num
        for j, table in enumerate(teacher_cat):
            score = score + table[x_cat[:, j]]
        return x_num.to(device), x_cat.to(device), score.argmax(-1).to(device)

    class Block(nn.Module):
        def __init__(self, first):
            super().__init__()
            self.attn_norm = nn.Identity() if first else nn.LayerNorm(d_token)
            self.qkv = nn.Linear(d_token, 3 * d_token)
            self.out = nn.Linear(d_token, d_token)
            self.ffn_norm = nn.LayerNorm(d_token)
            self.ffn_in = nn.Linear(d_token, 2 * ffn_hidden)
            self.ffn_out = nn.Linear(ffn_hidden, d_token)
            self.drop = nn.Dropout(0.1)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.attn_norm(x)).view(b, t, 3, n_heads, -1).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.2 if self.training else 0.0)
            x = x + self.drop(self.out(a.transpose(1, 2).reshape(b, t, d_token)))
            h, gate = self.ffn_in(self.ffn_norm(x)).chunk(2, dim=-1)
            return x + self.drop(self.ffn_out(h * F.relu(gate)))

    class FTTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.num_weight = nn.Parameter(torch.randn(n_num, d_token) / math.sqrt(d_token))
            self.num_bias = nn.Parameter(torch.zeros(n_num, d_token))
            self.register_buffer("cat_offsets", torch.cat([torch.zeros(1, dtype=torch.long), cards.cumsum(0)[:-1]]))
            self.cat_embed = nn.Embedding(int(cards.sum()), d_token)
            self.cat_bias = nn.Parameter(torch.zeros(len(cards), d_token))
            self.cls = nn.Parameter(torch.randn(1, 1, d_token) / math.sqrt(d_token))
            self.blocks = nn.ModuleList(Block(i == 0) for i in range(n_blocks))
            self.head = nn.Sequential(nn.LayerNorm(d_token), nn.ReLU(), nn.Linear(d_token, n_classes))

        def forward(self, x_num, x_cat):
            num_tokens = x_num[:, :, None] * self.num_weight + self.num_bias
            cat_tokens = self.cat_embed(x_cat + self.cat_offsets) + self.cat_bias
            x = torch.cat([self.cls.expand(x_num.shape[0], -1, -1), num_tokens, cat_tokens], dim=1)
            for block in self.blocks:
                x = block(x)
            return self.head(x[:, 0])

    model = FTTransformer().to(device)
    no_decay_names = ("num_weight", "num_bias", "cat_embed", "cat_bias", "cls", "norm", "bias", "head.0")
    groups = {"decay": [], "no_decay": []}
    for name, p in model.named_parameters():
        groups["no_decay" if any(s in name for s in no_decay_names) else "decay"].append(p)
    opt = torch.optim.AdamW([{"params": groups["decay"], "weight_decay": 1e-5},
                             {"params": groups["no_decay"], "weight_decay": 0.0}], lr=1e-4)
    model.train()
    for _ in range(steps):
        x_num, x_cat, y = make_rows(batch)
        loss = F.cross_entropy(model(x_num, x_cat), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    model.eval()
    x_num, x_cat, y = make_rows(n_eval)
    correct = 0
    with torch.inference_mode():
        for start in range(0, n_eval, eval_chunk):
            pred = model(x_num[start:start + eval_chunk], x_cat[start:start + eval_chunk]).argmax(-1)
            correct += int((pred == y[start:start + eval_chunk]).sum())
    print("ft-transformer accuracy", correct / n_eval)


def flex_attention_packed_documents_sliding_window_lm(device):
    """Decoder-only LM on packed documents using torch.nn.attention.flex_attention compiled with torch.compile:
    a BlockMask from create_block_mask whose mask_mod is causal AND same-document AND within a 1024-token sliding
    window, plus a tanh soft-cap (30) score_mod. 6 pre-RMSNorm blocks (width 768, 12 heads of 64, rotary
    embeddings, SwiGLU FFN 2048), vocab 32000, untied head. Batches of 4 rows x 4096 tokens, each row packing
    random-length documents (64-1500 tokens). Trains 6 steps with bf16 autocast, AdamW (lr 6e-4, wd 0.1,
    betas 0.9/0.95), grad clip 1.0; the document-id buffer is refilled and the block mask rebuilt every batch."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    torch.manual_seed(3511)
    dev_type = torch.device(device).type
    batch, seq, vocab, d_model, n_heads, n_layers, ffn, window, steps = 4, 4096, 32000, 768, 12, 6, 2048, 1024, 6
    head_dim = d_model // n_heads
    flex = torch.compile(flex_attention, dynamic=False)

    inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    angles = torch.outer(torch.arange(seq, device=device).float(), inv_freq)
    cos, sin = angles.cos()[None, None], angles.sin()[None, None]

    def rope(x):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        c, s = cos.to(x.dtype), sin.to(x.dtype)
        return torch.stack([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).flatten(-2)

    def softcap(score, b, h, q_idx, kv_idx):
        return 30.0 * torch.tanh(score / 30.0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = nn.RMSNorm(d_model)
            self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
            self.proj = nn.Linear(d_model, d_model, bias=False)
            self.norm2 = nn.RMSNorm(d_model)
            self.gate_up = nn.Linear(d_model, 2 * ffn, bias=False)
            self.down = nn.Linear(ffn, d_model, bias=False)

        def forward(self, x, block_mask):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, n_heads, head_dim).permute(2, 0, 3, 1, 4)
            a = flex(rope(q), rope(k), v, score_mod=softcap, block_mask=block_mask)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d_model))
            gate, up = self.gate_up(self.norm2(x)).chunk(2, dim=-1)
            return x + self.down(F.silu(gate) * up)

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, d_model)
            self.blocks = nn.ModuleList(Block() for _ in range(n_layers))
            self.norm = nn.RMSNorm(d_model)
            self.head = nn.Linear(d_model, vocab, bias=False)

        def forward(self, ids, block_mask):
            x = self.embed(ids)
            for block in self.blocks:
                x = block(x, block_mask)
            return self.head(self.norm(x))

    def make_batch():
        doc_ids = torch.empty(batch, seq, dtype=torch.long)
        for row in range(batch):
            start, doc = 0, 0
            while start < seq:
                length = int(torch.randint(64, 1501, ()))
                doc_ids[row, start:start + length] = doc
                start += length
                doc += 1
        tokens = torch.randint(0, vocab, (batch, seq + 1))
        return tokens.to(device), doc_ids.to(device)

    doc_ids = torch.zeros(batch, seq, dtype=torch.long, device=device)

    def packed_window(b, h, q_idx, kv_idx):
        same_doc = doc_ids[b, q_idx] == doc_ids[b, kv_idx]
        return (q_idx >= kv_idx) & (q_idx - kv_idx < window) & same_doc

    model = LM().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)
    model.train()
    for _ in range(steps):
        tokens, new_doc_ids = make_batch()
        doc_ids.copy_(new_doc_ids)
        block_mask = create_block_mask(packed_window, batch, None, seq, seq, device=device)
        with torch.autocast(dev_type, dtype=torch.bfloat16):
            logits = model(tokens[:, :-1], block_mask)
        loss = F.cross_entropy(logits.float().view(-1, vocab), tokens[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    print("flex lm loss", loss.item())


def nested_jagged_encoder_variable_length_bf16(device):
    """Transformer encoder classifier over variable-length token sequences held as torch.nested jagged-layout
    tensors (nested_tensor_from_jagged over a flat embedding of all tokens, no padding): 6 pre-LN blocks of
    width 512 with separate q/k/v projections, 8-head scaled_dot_product_attention on jagged q/k/v (dropout
    0.1), GELU FFN 2048; mean-pooling of the jagged values per sequence with index_add_, 20-class head.
    Batches of 64 sequences with log-uniform lengths 16-2048 built on the device (positions from offsets via
    repeat_interleave). Trains 6 steps with bf16 autocast and AdamW (lr 3e-4, wd 0.01), clip 1.0; then an
    inference_mode eval batch."""
    torch.manual_seed(3512)
    dev_type = torch.device(device).type
    vocab, d_model, n_heads, n_layers, n_classes, max_pos = 16384, 512, 8, 6, 20, 2048
    batch, min_len, max_len, steps = 64, 16, 2048, 6
    head_dim = d_model // n_heads

    class JaggedBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d_model)
            self.q = nn.Linear(d_model, d_model)
            self.k = nn.Linear(d_model, d_model)
            self.v = nn.Linear(d_model, d_model)
            self.o = nn.Linear(d_model, d_model)
            self.ln2 = nn.LayerNorm(d_model)
            self.ff1 = nn.Linear(d_model, 4 * d_model)
            self.ff2 = nn.Linear(4 * d_model, d_model)

        def forward(self, x):
            h = self.ln1(x)
            q = self.q(h).unflatten(-1, (n_heads, head_dim)).transpose(1, 2)
            k = self.k(h).unflatten(-1, (n_heads, head_dim)).transpose(1, 2)
            v = self.v(h).unflatten(-1, (n_heads, head_dim)).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1 if self.training else 0.0)
            x = x + self.o(a.transpose(1, 2).flatten(-2))
            return x + self.ff2(F.gelu(self.ff1(self.ln2(x))))

    class JaggedClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d_model)
            self.pos = nn.Embedding(max_pos, d_model)
            self.blocks = nn.ModuleList(JaggedBlock() for _ in range(n_layers))
            self.norm = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, n_classes)

        def forward(self, flat_ids, offsets):
            lengths = offsets.diff()
            starts = torch.repeat_interleave(offsets[:-1], lengths)
            positions = torch.arange(flat_ids.numel(), device=flat_ids.device) - starts
            values = self.tok(flat_ids) + self.pos(positions)
            x = torch.nested.nested_tensor_from_jagged(values, offsets)
            for block in self.blocks:
                x = block(x)
            hidden = self.norm(x).values()
            segment = torch.repeat_interleave(torch.arange(lengths.numel(), device=hidden.device), lengths)
            pooled = hidden.new_zeros(lengths.numel(), d_model).index_add_(0, segment, hidden)
            return self.head(pooled / lengths[:, None].to(hidden.dtype))

    def make_batch():
        lengths = torch.exp(torch.empty(batch, device=device).uniform_(math.log(min_len), math.log(max_len)))
        lengths = lengths.long().clamp(min_len, max_len)
        offsets = torch.cat([torch.zeros(1, dtype=torch.long, device=device), lengths.cumsum(0)])
        flat_ids = torch.randint(0, vocab, (int(offsets[-1]),), device=device)
        labels = flat_ids[offsets[:-1]] % n_classes
        return flat_ids, offsets, labels

    model = JaggedClassifier().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    model.train()
    for _ in range(steps):
        flat_ids, offsets, labels = make_batch()
        with torch.autocast(dev_type, dtype=torch.bfloat16):
            logits = model(flat_ids, offsets)
        loss = F.cross_entropy(logits.float(), labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    model.eval()
    flat_ids, offsets, labels = make_batch()
    with torch.inference_mode(), torch.autocast(dev_type, dtype=torch.bfloat16):
        accuracy = (model(flat_ids, offsets).argmax(-1) == labels).float().mean()
    print("jagged encoder accuracy", float(accuracy))


def psmnet_stereo_concat_cost_volume_3d_hourglass(device):
    """PSMNet-style stereo disparity network in fp32: shared 2D feature extractor (stride-4 residual stages
    32/64/128 channels, spatial pyramid pooling at 3 scales, 32-channel output), concatenation cost volume
    (64 x 48 disparities x H/4 x W/4, filled by a per-disparity slice-assignment loop), 3D CNN with two stacked
    hourglasses (Conv3d/ConvTranspose3d + BatchNorm3d) and two classifiers, trilinear upsampling to 192
    disparities at full resolution and soft-argmin regression. Synthetic stereo pairs (right view warped from a
    planar disparity map by grid_sample) of 4 x 3 x 256 x 512 made on the device. Trains 4 steps with
    smooth-L1 on valid pixels (weights 0.5/1.0 on the two outputs), Adam (lr 1e-3). Then a no-grad eval of one
    384x768 pair and its end-point error."""
    torch.manual_seed(3513)
    batch, height, width, max_disp, steps = 4, 256, 512, 192, 4
    eval_h, eval_w = 384, 768

    def conv_bn(cin, cout, stride=1):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout))

    def conv_bn_3d(cin, cout, stride=1):
        return nn.Sequential(nn.Conv3d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm3d(cout))

    class ResBlock(nn.Module):
        def __init__(self, cin, cout, stride=1):
            super().__init__()
            self.c1 = conv_bn(cin, cout, stride)
            self.c2 = conv_bn(cout, cout)
            self.skip = None if (cin == cout and stride == 1) else nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            out = self.c2(F.relu(self.c1(x)))
            return F.relu(out + (x if self.skip is None else self.skip(x)))

    class FeatureNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.first = nn.Sequential(conv_bn(3, 32, 2), nn.ReLU(), conv_bn(32, 32), nn.ReLU(),
                                       conv_bn(32, 32), nn.ReLU())
            self.layer1 = nn.Sequential(*[ResBlock(32, 32) for _ in range(3)])
            self.layer2 = nn.Sequential(ResBlock(32, 64, 2), *[ResBlock(64, 64) for _ in range(3)])
            self.layer3 = nn.Sequential(ResBlock(64, 128), ResBlock(128, 128))
            self.branches = nn.ModuleList(
                nn.Sequential(nn.AvgPool2d(k, k), nn.Conv2d(128, 32, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
                for k in (16, 8, 4))
            self.last = nn.Sequential(conv_bn(64 + 128 + 96, 128), nn.ReLU(), nn.Conv2d(128, 32, 1, bias=False))

        def forward(self, x):
            l2 = self.layer2(self.layer1(self.first(x)))
            l3 = self.layer3(l2)
            pyramid = [F.interpolate(b(l3), size=l3.shape[-2:], mode="bilinear", align_corners=False)
                       for b in self.branches]
            return self.last(torch.cat([l2, l3] + pyramid, dim=1))

    class Hourglass(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv1 = nn.Sequential(conv_bn_3d(c, 2 * c, 2), nn.ReLU())
            self.conv2 = conv_bn_3d(2 * c, 2 * c)
            self.conv3 = nn.Sequential(conv_bn_3d(2 * c, 2 * c, 2), nn.ReLU())
            self.conv4 = nn.Sequential(conv_bn_3d(2 * c, 2 * c), nn.ReLU())
            self.conv5 = nn.Sequential(nn.ConvTranspose3d(2 * c, 2 * c, 3, 2, 1, output_padding=1, bias=False),
                                       nn.BatchNorm3d(2 * c))
            self.conv6 = nn.Sequential(nn.ConvTranspose3d(2 * c, c, 3, 2, 1, output_padding=1, bias=False),
                                       nn.BatchNorm3d(c))

        def forward(self, x, presqu=None, postsqu=None):
            out = self.conv1(x)
            pre = self.conv2(out)
            pre = F.relu(pre + postsqu) if postsqu is not None else F.relu(pre)
            out = self.conv4(self.conv3(pre))
            post = self.conv5(out)
            post = F.relu(post + presqu) if presqu is not None else F.relu(post + pre)
            return self.conv6(post), pre, post

    class PSMNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = FeatureNet()
            self.dres0 = nn.Sequential(conv_bn_3d(64, 32), nn.ReLU(), conv_bn_3d(32, 32), nn.ReLU())
            self.dres1 = nn.Sequential(conv_bn_3d(32, 32), nn.ReLU(), conv_bn_3d(32, 32))
            self.hg1 = Hourglass(32)
            self.hg2 = Hourglass(32)
            self.classif1 = nn.Sequential(conv_bn_3d(32, 32), nn.ReLU(), nn.Conv3d(32, 1, 3, 1, 1, bias=False))
            self.classif2 = nn.Sequential(conv_bn_3d(32, 32), nn.ReLU(), nn.Conv3d(32, 1, 3, 1, 1, bias=False))

        def regress(self, cost, h, w):
            cost = F.interpolate(cost, size=(max_disp, h, w), mode="trilinear", align_corners=False).squeeze(1)
            prob = F.softmax(cost, dim=1)
            disp = torch.arange(max_disp, device=cost.device, dtype=prob.dtype).view(1, max_disp, 1, 1)
            return (prob * disp).sum(dim=1)

        def forward(self, left, right):
            fl, fr = self.features(left), self.features(right)
            b, c, h4, w4 = fl.shape
            cost = fl.new_zeros(b, 2 * c, max_disp // 4, h4, w4)
            for d in range(max_disp // 4):
                if d > 0:
                    cost[:, :c, d, :, d:] = fl[:, :, :, d:]
                    cost[:, c:, d, :, d:] = fr[:, :, :, :-d]
                else:
                    cost[:, :c, d] = fl
                    cost[:, c:, d] = fr
            cost0 = self.dres0(cost)
            cost0 = self.dres1(cost0) + cost0
            out1, pre1, post1 = self.hg1(cost0)
            out1 = out1 + cost0
            out2, _, _ = self.hg2(out1, pre1, post1)
            out2 = out2 + cost0
            c1 = self.classif1(out1)
            c2 = self.classif2(out2) + c1
            h, w = left.shape[-2:]
            if self.training:
                return self.regress(c1, h, w), self.regress(c2, h, w)
            return self.regress(c2, h, w)

    def make_pair(n, h, w):
        left = F.interpolate(torch.rand(n, 3, h // 8, w // 8, device=device), size=(h, w), mode="bilinear",
                             align_corners=False) + 0.1 * torch.rand(n, 3, h, w, device=device)
        ys = torch.linspace(-1, 1, h, device=device).view(1, h, 1)
        xs = torch.linspace(-1, 1, w, device=device).view(1, 1, w)
        a = torch.empty(n, 1, 1, device=device).uniform_(10, 120)
        bx = torch.empty(n, 1, 1, device=device).uniform_(-30, 30)
        by = torch.empty(n, 1, 1, device=device).uniform_(-20, 20)
        disp = (a + bx * xs + by * ys).clamp(1, max_disp - 8)
        grid = torch.stack([(xs + 2 * disp / (w - 1)).expand(n, h, w), ys.expand(n, h, w)], dim=-1)
        right = F.grid_sample(left, grid, mode="bilinear", padding_mode="border", align_corners=True)
        return left, right, disp

    model = PSMNet().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999))
    model.train()
    for _ in range(steps):
        left, right, gt = make_pair(batch, height, width)
        valid = (gt > 0) & (gt < max_disp)
        pred1, pred2 = model(left, right)
        loss = 0.5 * F.smooth_l1_loss(pred1[valid], gt[valid]) + F.smooth_l1_loss(pred2[valid], gt[valid])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    model.eval()
    left, right, gt = make_pair(1, eval_h, eval_w)
    with torch.no_grad():
        epe = (model(left, right) - gt).abs().mean()
    print("psmnet eval epe", float(epe))


def evoformer_lite_msa_pair_triangle_updates_recycling_bf16(device):
    """AlphaFold-style Evoformer-lite trunk in plain PyTorch: 4 blocks of gated MSA row attention with pair bias,
    MSA column attention, MSA transition, outer-product-mean (32x32 -> pair), triangle multiplicative updates
    (outgoing and incoming, einsum), triangle attention around starting and ending nodes (pair bias), pair
    transition; MSA width 64, pair width 128, 8/4 heads. One target of 384 residues with a 128-sequence MSA
    (batch 1), made on the device from a random-walk backbone (distogram targets, 64 bins) and a mutated MSA
    with 15% masked tokens. Each of 4 steps runs one no-grad recycling pass, then a grad pass with recycled
    first-row MSA and pair embeddings, every block under torch.utils.checkpoint (use_reentrant=False), bf16
    autocast; loss = distogram CE + masked-MSA CE; Adam (lr 1e-3, eps 1e-6) with LambdaLR warmup, clip 0.1."""
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(3514)
    dev_type = torch.device(device).type
    batch, n_seq, n_res, c_m, c_z, n_blocks, steps = 1, 128, 384, 64, 128, 4, 4
    n_tokens, mask_token, gap_token, n_bins = 23, 22, 21, 64

    class GatedAttention(nn.Module):
        def __init__(self, c_in, heads, c_hidden):
            super().__init__()
            self.heads, self.c_hidden = heads, c_hidden
            self.q = nn.Linear(c_in, heads * c_hidden, bias=False)
            self.k = nn.Linear(c_in, heads * c_hidden, bias=False)
            self.v = nn.Linear(c_in, heads * c_hidden, bias=False)
            self.g = nn.Linear(c_in, heads * c_hidden)
            self.o = nn.Linear(heads * c_hidden, c_in)

        def forward(self, x, bias=None):
            def split(t):
                return t.unflatten(-1, (self.heads, self.c_hidden)).transpose(-2, -3)

            q = split(self.q(x)) * self.c_hidden ** -0.5
            logits = q @ split(self.k(x)).transpose(-1, -2)
            if bias is not None:
                logits = logits + bias
            out = (logits.softmax(dim=-1) @ split(self.v(x))).transpose(-2, -3).flatten(-2)
            return self.o(torch.sigmoid(self.g(x)) * out)

    class Transition(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.net = nn.Sequential(nn.LayerNorm(c), nn.Linear(c, 4 * c), nn.ReLU(), nn.Linear(4 * c, c))

        def forward(self, x):
            return self.net(x)

    class TriangleMultiplication(nn.Module):
        def __init__(self, outgoing, c_hidden=128):
            super().__init__()
            self.outgoing = outgoing
            self.norm_in = nn.LayerNorm(c_z)
            self.a_proj, self.a_gate = nn.Linear(c_z, c_hidden), nn.Linear(c_z, c_hidden)
            self.b_proj, self.b_gate = nn.Linear(c_z, c_hidden), nn.Linear(c_z, c_hidden)
            self.norm_out = nn.LayerNorm(c_hidden)
            self.out = nn.Linear(c_hidden, c_z)
            self.gate = nn.Linear(c_z, c_z)

        def forward(self, z):
            x = self.norm_in(z)
            a = torch.sigmoid(self.a_gate(x)) * self.a_proj(x)
            b = torch.sigmoid(self.b_gate(x)) * self.b_proj(x)
            if self.outgoing:
                t = torch.einsum("bikc,bjkc->bijc", a, b)
            else:
                t = torch.einsum("bkic,bkjc->bijc", a, b)
            return torch.sigmoid(self.gate(x)) * self.out(self.norm_out(t))

    class TriangleAttention(nn.Module):
        def __init__(self, starting, heads=4):
            super().__init__()
            self.starting = starting
            self.norm = nn.LayerNorm(c_z)
            self.bias = nn.Linear(c_z, heads, bias=False)
            self.attn = GatedAttention(c_z, heads, 32)

        def forward(self, z):
            if not self.starting:
                z = z.transpose(1, 2)
            x = self.norm(z)
            bias = self.bias(x).permute(0, 3, 1, 2).unsqueeze(1)
            out = self.attn(x, bias)
            return out if self.starting else out.transpose(1, 2)

    class EvoformerBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.row_norm, self.row_pair_norm = nn.LayerNorm(c_m), nn.LayerNorm(c_z)
            self.row_bias = nn.Linear(c_z, 8, bias=False)
            self.row_attn = GatedAttention(c_m, 8, 8)
            self.col_norm = nn.LayerNorm(c_m)
            self.col_attn = GatedAttention(c_m, 8, 8)
            self.msa_transition = Transition(c_m)
            self.opm_norm = nn.LayerNorm(c_m)
            self.opm_a, self.opm_b = nn.Linear(c_m, 32), nn.Linear(c_m, 32)
            self.opm_out = nn.Linear(32 * 32, c_z)
            self.tri_out, self.tri_in = TriangleMultiplication(True), TriangleMultiplication(False)
            self.tri_att_start, self.tri_att_end = TriangleAttention(True), TriangleAttention(False)
            self.pair_transition = Transition(c_z)

        def forward(self, m, z):
            pair_bias = self.row_bias(self.row_pair_norm(z)).permute(0, 3, 1, 2).unsqueeze(1)
            m = m + self.row_attn(self.row_norm(m), pair_bias)
            m = m + self.col_attn(self.col_norm(m).transpose(1, 2)).transpose(1, 2)
            m = m + self.msa_transition(m)
            x = self.opm_norm(m)
            outer = torch.einsum("bsic,bsjd->bijcd", self.opm_a(x), self.opm_b(x)).flatten(-2) / m.shape[1]
            z = z + self.opm_out(outer)
            z = z + self.tri_out(z)
            z = z + self.tri_in(z)
            z = z + self.tri_att_start(z)
            z = z + self.tri_att_end(z)
            return m, z + self.pair_transition(z)

    class EvoformerLite(nn.Module):
        def __init__(self):
            super().__init__()
            self.msa_embed = nn.Embedding(n_tokens, c_m)
            self.target_m = nn.Embedding(21, c_m)
            self.left, self.right = nn.Embedding(21, c_z), nn.Embedding(21, c_z)
            self.relpos = nn.Embedding(65, c_z)
            self.recycle_m, self.recycle_z = nn.LayerNorm(c_m), nn.LayerNorm(c_z)
            self.blocks = nn.ModuleList(EvoformerBlock() for _ in range(n_blocks))
            self.dist_head = nn.Linear(c_z, n_bins)
            self.msa_head = nn.Linear(c_m, n_tokens)

        def trunk(self, msa, target, prev_m0=None, prev_z=None):
            m = self.msa_embed(msa) + self.target_m(target)[:, None]
            idx = torch.arange(target.shape[1], device=target.device)
            rel = (idx[None, :] - idx[:, None]).clamp(-32, 32) + 32
            z = self.left(target)[:, :, None] + self.right(target)[:, None, :] + self.relpos(rel)
            if prev_m0 is not None:
                m = torch.cat([m[:, :1] + self.recycle_m(prev_m0)[:, None], m[:, 1:]], dim=1)
                z = z + self.recycle_z(prev_z)
            for block in self.blocks:
                if torch.is_grad_enabled():
                    m, z = checkpoint(block, m, z, use_reentrant=False)
                else:
                    m, z = block(m, z)
            return m, z

    def make_example():
        steps_3d = F.normalize(torch.randn(batch, n_res, 3, device=device), dim=-1) * 3.8
        coords = steps_3d.cumsum(dim=1)
        dist = torch.cdist(coords, coords)
        bins = torch.bucketize(dist, torch.linspace(2.0, 22.0, n_bins - 1, device=device))
        target = torch.randint(0, 20, (batch, n_res), device=device)
        msa = target[:, None].expand(batch, n_seq, n_res).clone()
        msa = torch.where(torch.rand(msa.shape, device=device) < 0.3, torch.randint_like(msa, 0, 20), msa)
        msa = torch.where(torch.rand(msa.shape, device=device) < 0.1, torch.full_like(msa, gap_token), msa)
        masked = torch.rand(msa.shape, device=device) < 0.15
        return msa.masked_fill(masked, mask_token), target, msa, masked, bins

    model = EvoformerLite().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-6)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: min(1.0, (k + 1) / 3))
    model.train()
    for _ in range(steps):
        msa_in, target, msa_true, masked, bins = make_example()
        with torch.autocast(dev_type, dtype=torch.bfloat16):
            with torch.no_grad():
                m_prev, z_prev = model.trunk(msa_in, target)
            m, z = model.trunk(msa_in, target, m_prev[:, 0].float(), z_prev.float())
            dist_logits = model.dist_head(z + z.transpose(1, 2))
            msa_logits = model.msa_head(m)
        loss = F.cross_entropy(dist_logits.float().flatten(0, 2), bins.flatten()) + \
            F.cross_entropy(msa_logits.float()[masked], msa_true[masked])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
    print("evoformer loss", loss.item())


def sac_twin_q_auto_entropy_batched_env(device):
    """Soft actor-critic on a synthetic batched continuous-control environment written in torch (512 parallel
    envs, 64-dim observations, 12-dim actions, tanh-linear dynamics, quadratic goal reward, 1% random resets),
    with a 1M-transition replay buffer preallocated on the device. Tanh-squashed Gaussian actor and twin Q
    critics (3-layer MLPs of width 1024) with a frozen deep-copied target critic updated by Polyak averaging
    (lerp_, tau 0.005), learned temperature log_alpha with target entropy -12; three Adam optimizers (lr 3e-4).
    40 warm-up env steps with uniform random actions, then 60 iterations of one env step plus one SAC update on
    a sampled batch of 4096, all fp32."""
    torch.manual_seed(3515)
    n_envs, obs_dim, act_dim, hidden = 512, 64, 12, 1024
    capacity, batch, warmup, iters, gamma, tau = 1_000_000, 4096, 40, 60, 0.99, 0.005

    dyn_a = torch.randn(obs_dim, obs_dim, device=device) * (0.9 / math.sqrt(obs_dim))
    dyn_b = torch.randn(act_dim, obs_dim, device=device) / math.sqrt(act_dim)
    goal = torch.randn(obs_dim, device=device) * 0.5

    def env_reset(n):
        return torch.randn(n, obs_dim, device=device) * 0.3

    def env_step(s, a):
        s2 = torch.tanh(s @ dyn_a + a @ dyn_b) + 0.01 * torch.randn_like(s)
        reward = -((s2 - goal) ** 2).mean(-1) - 0.01 * (a ** 2).sum(-1)
        done = (torch.rand(s.shape[0], device=device) < 0.01).float()
        return s2, reward, done

    def mlp(inp, out):
        return nn.Sequential(nn.Linear(inp, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                             nn.Linear(hidden, out))

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = mlp(obs_dim, 2 * act_dim)

        def forward(self, s):
            mu, log_std = self.net(s).chunk(2, dim=-1)
            std = log_std.clamp(-20, 2).exp()
            dist = torch.distributions.Normal(mu, std)
            u = dist.rsample()
            logp = dist.log_prob(u).sum(-1) - (2 * (math.log(2) - u - F.softplus(-2 * u))).sum(-1)
            return torch.tanh(u), logp

    class TwinQ(nn.Module):
        def __init__(self):
            super().__init__()
            self.q1, self.q2 = mlp(obs_dim + act_dim, 1), mlp(obs_dim + act_dim, 1)

        def forward(self, s, a):
            sa = torch.cat([s, a], dim=-1)
            return self.q1(sa).squeeze(-1), self.q2(sa).squeeze(-1)

    actor, critic = Actor().to(device), TwinQ().to(device)
    critic_targ = copy.deepcopy(critic).requires_grad_(False)
    log_alpha = torch.zeros((), device=device, requires_grad=True)
    target_entropy = -float(act_dim)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=3e-4)
    critic_opt = torch.optim.Adam(critic.parameters(), lr=3e-4)
    alpha_opt = torch.optim.Adam([log_alpha], lr=3e-4)

    obs_buf = torch.empty(capacity, obs_dim, device=device)
    next_buf = torch.empty(capacity, obs_dim, device=device)
    act_buf = torch.empty(capacity, act_dim, device=device)
    rew_buf = torch.empty(capacity, device=device)
    done_buf = torch.empty(capacity, device=device)
    ptr, size = 0, 0

    def update():
        idx = torch.randint(0, size, (batch,), device=device)
        o, a, r, o2, d = obs_buf[idx], act_buf[idx], rew_buf[idx], next_buf[idx], done_buf[idx]
        alpha = log_alpha.exp().detach()
        with torch.no_grad():
            a2, logp2 = actor(o2)
            q1_t, q2_t = critic_targ(o2, a2)
            y = r + gamma * (1 - d) * (torch.min(q1_t, q2_t) - alpha * logp2)
        q1, q2 = critic(o, a)
        critic_loss = F.mse_loss(q1, y) + F.mse_loss(q2, y)
        critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        critic_opt.step()

        critic.requires_grad_(False)
        a_pi, logp = actor(o)
        actor_loss = (alpha * logp - torch.min(*critic(o, a_pi))).mean()
        actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        actor_opt.step()
        critic.requires_grad_(True)

        alpha_loss = -(log_alpha * (logp.detach() + target_entropy)).mean()
        alpha_opt.zero_grad(set_to_none=True)
        alpha_loss.backward()
        alpha_opt.step()
        with torch.no_grad():
            for p_t, p in zip(critic_targ.parameters(), critic.parameters()):
                p_t.lerp_(p, tau)
        return critic_loss

    state = env_reset(n_envs)
    for t in range(warmup + iters):
        with torch.no_grad():
            if t < warmup:
                action = torch.rand(n_envs, act_dim, device=device) * 2 - 1
            else:
                action, _ = actor(state)
            next_state, reward, done = env_step(state, action)
        sl = slice(ptr, ptr + n_envs)
        obs_buf[sl], act_buf[sl], rew_buf[sl], next_buf[sl], done_buf[sl] = state, action, reward, next_state, done
        ptr, size = (ptr + n_envs) % capacity, min(size + n_envs, capacity)
        state = torch.where(done[:, None].bool(), env_reset(n_envs), next_state)
        if t >= warmup:
            critic_loss = update()
    print("sac critic loss", critic_loss.item(), "alpha", log_alpha.exp().item())


def jem_energy_classifier_sgld_replay_buffer(device):
    """Joint energy-based model (JEM) training in fp32: a norm-free residual CNN classifier (widths 128/256/512
    at 32/16/8 resolution, LeakyReLU, 10 classes) whose logsumexp is the negative energy. Each of 6 iterations
    draws 128 labeled synthetic 32x32 images, takes 128 samples from a 10000-image replay buffer on the device
    (5% re-initialised from uniform noise), runs 20 SGLD steps (torch.autograd.grad of the summed logsumexp
    w.r.t. the images, step 1.0, noise 0.01), writes them back to the buffer, and optimizes
    CE(labeled) - mean logsumexp(data) + mean logsumexp(samples) with Adam (lr 1e-4)."""
    torch.manual_seed(3516)
    batch, buffer_size, sgld_steps, iters, width, n_classes = 128, 10000, 20, 6, 128, 10

    class ResBlock(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, 1, 1)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1)
            self.skip = nn.Identity() if cin == cout else nn.Conv2d(cin, cout, 1)

        def forward(self, x):
            h = self.c2(F.leaky_relu(self.c1(F.leaky_relu(x, 0.2)), 0.2))
            return h + self.skip(x)

    model = nn.Sequential(
        nn.Conv2d(3, width, 3, 1, 1),
        ResBlock(width, width), ResBlock(width, width), nn.AvgPool2d(2),
        ResBlock(width, 2 * width), ResBlock(2 * width, 2 * width), nn.AvgPool2d(2),
        ResBlock(2 * width, 4 * width), ResBlock(4 * width, 4 * width),
        nn.LeakyReLU(0.2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * width, n_classes),
    ).to(device)

    templates = F.interpolate(torch.rand(n_classes, 3, 4, 4, device=device) * 2 - 1, size=32, mode="bicubic",
                              align_corners=False).clamp(-1, 1)
    buffer = torch.rand(buffer_size, 3, 32, 32, device=device) * 2 - 1
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.999))
    for _ in range(iters):
        y = torch.randint(0, n_classes, (batch,), device=device)
        x = (templates[y] + 0.3 * torch.randn(batch, 3, 32, 32, device=device)).clamp(-1, 1)
        idx = torch.randint(0, buffer_size, (batch,), device=device)
        reinit = torch.rand(batch, 1, 1, 1, device=device) < 0.05
        x_k = torch.where(reinit, torch.rand_like(buffer[idx]) * 2 - 1, buffer[idx])
        for _ in range(sgld_steps):
            x_k = x_k.detach().requires_grad_(True)
            neg_energy = model(x_k).logsumexp(dim=1).sum()
            grad, = torch.autograd.grad(neg_energy, x_k)
            x_k = x_k + 1.0 * grad + 0.01 * torch.randn_like(x_k)
        x_k = x_k.detach().clamp(-1, 1)
        buffer[idx] = x_k
        logits = model(x)
        loss = F.cross_entropy(logits, y) - logits.logsumexp(1).mean() + model(x_k).logsumexp(1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    print("jem loss", loss.item())


ISSUE35W = {f.__name__: f for f in [
    hf_esm2_protein_mlm_rotary_token_dropout_bf16,
    hf_clap_htsat_audio_text_contrastive_fp16_scaler,
    hf_bert2gpt2_encoder_decoder_summarization_bf16_greedy,
    hf_jamba_hybrid_mamba_attention_moe_bf16,
    peft_dora_qwen3_bf16_weights_merge_eval,
    timm_convnextv2_nano_grn_fp16_scaler_accumulate_nesterov,
    tv_swin3d_t_video_bf16_warmup_two_clip_eval,
    fixmatch_resnet18_cifar_stem_ema_bf16,
    crnn_ocr_vgg_bilstm_ctc_adadelta,
    ft_transformer_tabular_reglu_cls_adamw,
    flex_attention_packed_documents_sliding_window_lm,
    nested_jagged_encoder_variable_length_bf16,
    psmnet_stereo_concat_cost_volume_3d_hourglass,
    evoformer_lite_msa_pair_triangle_updates_recycling_bf16,
    sac_twin_q_auto_entropy_batched_env,
    jem_energy_classifier_sgld_replay_buffer,
]}
