"""Twenty-fifth held-out group of issue 35 (group ISSUE35Y): fourteen more programs of kinds no earlier group had (DAC neural audio codec with residual VQ, quantizer dropout and a multi-resolution STFT loss; BLIP-2 Q-Former trained between a frozen ViT-L and a frozen OPT-1.3B then captioning; Reformer byte-level LM with LSH attention, axial positions and reversible layers; RecurrentGemma (Griffin RG-LRU) LM with a 256k vocabulary then greedy generate; MusicGen decoder on delayed multi-codebook audio tokens with text conditioning then sampling; CANINE character-level classifier with fp16 GradScaler and accumulation; timm DLA-34 with AugMix-style JSD loss and split BatchNorm; torchvision Wide-ResNet-50-2 with sharpness-aware minimization; DANN domain adaptation with a gradient-reversal autograd.Function; K-FAC natural gradient through module hooks; top-k sparse autoencoder on a frozen Pythia's residual stream with AuxK; E2E-VarNet multi-coil MRI reconstruction with complex fft2 and SSIM; WaveNet mu-law vocoder with fp16 GradScaler and autoregressive sampling; TrigFlow continuous-time consistency training with forward-mode JVP), written by a helper that read no part of the tracer, committed before they were recorded on a GPU (an H200) or compared with anything.

Each is a function of the device, recorded by scripts/record_trace_workloads.py (VRAMLAB_HOLDOUT=issue35y).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def hf_dac_codec_multiscale_stft_quantizer_dropout(device):
    """DacModel built from a DacConfig (the 16 kHz DAC: encoder width 64, strides 2/4/8/8, decoder width
    1536, 12 residual codebooks of 1024 x 8, quantizer dropout 0.5), batch 8 clips of 16384 samples of
    synthetic audio, fp32, loss = 15 x multi-resolution log-STFT L1 (windows 2048..64) + waveform L1 +
    the model's commitment/codebook loss, AdamW lr 1e-4 betas (0.8, 0.99) with ExponentialLR, grad clip 1e3,
    5 steps with printed losses; then eval under no_grad: encode/decode with 4 codebooks, printed SI-SDR."""
    from transformers import DacConfig, DacModel

    torch.manual_seed(0)
    batch_size, num_samples, steps = 8, 16384, 5
    config = DacConfig(encoder_hidden_size=64, downsampling_ratios=[2, 4, 8, 8], decoder_hidden_size=1536,
                       n_codebooks=12, codebook_size=1024, codebook_dim=8, quantizer_dropout=0.5,
                       sampling_rate=16000)
    model = DacModel(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.8, 0.99))
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.999996)
    windows = [2048, 1024, 512, 256, 128, 64]
    hann = {w: torch.hann_window(w, device=device) for w in windows}

    def make_audio(n):
        t = torch.arange(num_samples) / config.sampling_rate
        freqs = torch.empty(n, 4, 1).uniform_(80.0, 2000.0)
        amps = torch.rand(n, 4, 1) * 0.3
        wave = (amps * torch.sin(2 * math.pi * freqs * t)).sum(1, keepdim=True)
        wave = wave + 0.01 * torch.randn(n, 1, num_samples)
        return wave.to(device)

    def stft_loss(pred, target):
        loss = 0.0
        for w in windows:
            p = torch.stft(pred.squeeze(1), n_fft=w, hop_length=w // 4, window=hann[w], return_complex=True).abs()
            q = torch.stft(target.squeeze(1), n_fft=w, hop_length=w // 4, window=hann[w], return_complex=True).abs()
            loss = loss + F.l1_loss(torch.log(p.clamp(min=1e-5)), torch.log(q.clamp(min=1e-5))) + F.l1_loss(p, q)
        return loss / len(windows)

    model.train()
    for step in range(steps):
        audio = make_audio(batch_size)
        out = model(audio)
        recon = out.audio_values
        spec = stft_loss(recon, audio)
        wav_l1 = F.l1_loss(recon, audio)
        vq = out.loss.mean()
        loss = 15.0 * spec + wav_l1 + vq
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e3)
        optimizer.step()
        scheduler.step()
        print(f"step {step} loss {loss.item():.4f} stft {spec.item():.4f} l1 {wav_l1.item():.4f} "
              f"vq {vq.item():.4f} grad norm {grad_norm.item():.2f}")

    model.eval()
    with torch.no_grad():
        audio = make_audio(4)
        enc = model.encode(audio, n_quantizers=4)
        recon = model.decode(enc.quantized_representation).audio_values[..., :num_samples]
        target = audio - audio.mean(-1, keepdim=True)
        est = recon - recon.mean(-1, keepdim=True)
        proj = (est * target).sum(-1, keepdim=True) / (target.pow(2).sum(-1, keepdim=True) + 1e-8) * target
        si_sdr = 10 * torch.log10(proj.pow(2).sum(-1) / ((est - proj).pow(2).sum(-1) + 1e-8))
    print("codes", tuple(enc.audio_codes.shape), "SI-SDR (4 codebooks)", si_sdr.mean().item())


def hf_blip2_qformer_frozen_vit_opt_captioning_bf16(device):
    """Blip2ForConditionalGeneration built from a Blip2Config: ViT-L/14 vision tower at 224px (24 layers,
    1024 wide), 12-layer 768-wide Q-Former with 32 query tokens and cross-attention every 2nd layer, OPT-1.3B
    language model (24 layers, 2048 wide, vocab 50272). The vision tower and OPT are frozen and cast to bf16
    weights; the Q-Former, query tokens and projection train in fp32 with AdamW lr 1e-4 (warmup then cosine)
    under bf16 autocast. Batch 16 images, input = 32 image placeholder tokens + BOS + 31 caption tokens
    (right padded, labels -100 on image and pad positions), 6 steps with printed loss and clip_grad_norm;
    then greedy generate() of exactly 20 new tokens (min_new_tokens=20) for 8 images under no_grad."""
    from transformers import Blip2Config, Blip2ForConditionalGeneration

    torch.manual_seed(0)
    batch_size, caption_len, steps, num_query = 16, 32, 6, 32
    image_token = 50265
    config = Blip2Config(
        vision_config=dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24,
                           num_attention_heads=16, image_size=224, patch_size=14),
        qformer_config=dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                            intermediate_size=3072, encoder_hidden_size=1024, cross_attention_frequency=2),
        text_config=dict(model_type="opt", vocab_size=50272, hidden_size=2048, num_hidden_layers=24,
                         ffn_dim=8192, num_attention_heads=32, word_embed_proj_dim=2048,
                         max_position_embeddings=2048, pad_token_id=1, bos_token_id=2, eos_token_id=2),
        num_query_tokens=num_query, image_token_index=image_token,
    )
    model = Blip2ForConditionalGeneration(config)
    for module in (model.vision_model, model.language_model):
        module.requires_grad_(False)
        module.to(torch.bfloat16)
    model.to(device)
    trainable = [p for p in model.parameters() if p.requires_grad]
    print("trainable params", sum(p.numel() for p in trainable))
    optimizer = torch.optim.AdamW(trainable, lr=1e-4, weight_decay=0.05)
    warmup = 2
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / warmup if s < warmup else 0.5 * (1 + math.cos(math.pi * (s - warmup) / (steps - warmup))))

    def make_batch():
        pixel_values = torch.randn(batch_size, 3, 224, 224)
        lengths = torch.randint(8, caption_len, (batch_size,))
        text = torch.randint(4, 50000, (batch_size, caption_len))
        text[:, 0] = config.text_config.bos_token_id
        pos = torch.arange(caption_len)[None, :]
        text_mask = pos < lengths[:, None]
        text[pos.expand(batch_size, -1) == lengths[:, None] - 1] = config.text_config.eos_token_id
        text = text.masked_fill(~text_mask, config.text_config.pad_token_id)
        input_ids = torch.cat([torch.full((batch_size, num_query), image_token), text], dim=1)
        attention_mask = torch.cat([torch.ones(batch_size, num_query, dtype=torch.long), text_mask.long()], dim=1)
        labels = input_ids.masked_fill(attention_mask == 0, -100)
        labels[:, :num_query] = -100
        return (pixel_values.to(device, torch.bfloat16), input_ids.to(device), attention_mask.to(device),
                labels.to(device))

    model.train()
    model.vision_model.eval()
    model.language_model.eval()
    for step in range(steps):
        pixel_values, input_ids, attention_mask, labels = make_batch()
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
            out = model(pixel_values=pixel_values, input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"step {step} loss {out.loss.item():.4f} lr {scheduler.get_last_lr()[0]:.2e}")

    model.eval()
    with torch.no_grad(), torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
        images = torch.randn(8, 3, 224, 224, device=device, dtype=torch.bfloat16)
        generated = model.generate(pixel_values=images, max_new_tokens=20, min_new_tokens=20, do_sample=False)
    print("generated", tuple(generated.shape), generated[0, -10:].tolist())


def hf_reformer_lsh_reversible_byte_lm(device):
    """ReformerModelWithLMHead built from a ReformerConfig (enwik8-like byte LM: 12 reversible layers
    alternating local and LSH attention, hidden 1024, 8 heads of 128, feed-forward 4096, 2 hashes, chunk
    length 128, axial position embeddings 128 x 128 with dims 256 + 768, vocab 258), batch 2 sequences of
    16384 bytes, fp32, AdamW lr 2e-4 with linear warmup, grad clip 1.0, 6 steps with printed loss and
    bits per byte; then eval under no_grad on a held-out batch of 2 x 16384 bytes."""
    from transformers import ReformerConfig, ReformerModelWithLMHead

    torch.manual_seed(0)
    batch_size, seq_len, steps = 2, 16384, 6
    config = ReformerConfig(
        vocab_size=258, hidden_size=1024, num_attention_heads=8, attention_head_size=128,
        feed_forward_size=4096, hidden_act="gelu", attn_layers=["local", "lsh"] * 6,
        axial_pos_embds=True, axial_pos_shape=[128, 128], axial_pos_embds_dim=[256, 768],
        max_position_embeddings=seq_len, local_attn_chunk_length=128, lsh_attn_chunk_length=128,
        local_num_chunks_before=1, local_num_chunks_after=0, lsh_num_chunks_before=1, lsh_num_chunks_after=0,
        num_hashes=2, num_buckets=[16, 16], is_decoder=True, pad_token_id=0, eos_token_id=1,
        hidden_dropout_prob=0.1, local_attention_probs_dropout_prob=0.1, lsh_attention_probs_dropout_prob=0.0,
    )
    model = ReformerModelWithLMHead(config).to(device)
    print("params", sum(p.numel() for p in model.parameters()))
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 3))

    def make_bytes(n):
        # byte text with some repeated structure so the LM has something to learn
        base = torch.randint(2, 258, (n, 512))
        reps = base.repeat(1, seq_len // 512)
        noise = torch.rand(n, seq_len) < 0.1
        return torch.where(noise, torch.randint(2, 258, (n, seq_len)), reps).to(device)

    model.train()
    for step in range(steps):
        input_ids = make_bytes(batch_size)
        out = model(input_ids=input_ids, labels=input_ids)
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        print(f"step {step} loss {out.loss.item():.4f} bpb {out.loss.item() / math.log(2):.3f}")

    model.eval()
    with torch.no_grad():
        held_out = make_bytes(batch_size)
        eval_loss = model(input_ids=held_out, labels=held_out).loss
    print(f"held-out bpb {eval_loss.item() / math.log(2):.3f}")


def hf_recurrent_gemma_griffin_rglru_bf16_generate(device):
    """RecurrentGemmaForCausalLM built from a RecurrentGemmaConfig (Griffin: 9 layers in the pattern
    recurrent, recurrent, local attention; hidden 1024, lru_width 1024, 8 heads, intermediate 6144,
    attention window 2048, Gemma vocabulary 256000 with tied embeddings and logit soft-cap 30), batch 4 x
    512 tokens with labels, bf16 autocast, AdamW lr 3e-4 with cosine decay, grad clip 1.0, 5 steps with
    printed loss; then eval: perplexity on a held-out batch and greedy generate() of 32 new tokens from
    4 prompts of 64 tokens, under no_grad."""
    from transformers import RecurrentGemmaConfig, RecurrentGemmaForCausalLM

    torch.manual_seed(0)
    batch_size, seq_len, steps = 4, 512, 5
    config = RecurrentGemmaConfig(
        num_hidden_layers=9, vocab_size=256000, hidden_size=1024, intermediate_size=6144,
        num_attention_heads=8, num_key_value_heads=1, lru_width=1024, attention_window_size=2048,
        conv1d_width=4, logits_soft_cap=30.0, block_types=["recurrent", "recurrent", "attention"],
    )
    model = RecurrentGemmaForCausalLM(config).to(device)
    print("params", sum(p.numel() for p in model.parameters()))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    amp = dict(device_type=torch.device(device).type, dtype=torch.bfloat16)

    model.train()
    for step in range(steps):
        input_ids = torch.randint(3, 256000, (batch_size, seq_len))
        input_ids[:, 0] = config.bos_token_id
        input_ids = input_ids.to(device)
        with torch.autocast(**amp):
            out = model(input_ids=input_ids, labels=input_ids, use_cache=False)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"step {step} loss {out.loss.item():.4f}")

    model.eval()
    with torch.no_grad(), torch.autocast(**amp):
        held_out = torch.randint(3, 256000, (batch_size, seq_len)).to(device)
        ppl = torch.exp(model(input_ids=held_out, labels=held_out, use_cache=False).loss)
        prompts = torch.randint(3, 256000, (4, 64)).to(device)
        generated = model.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts),
                                   max_new_tokens=32, min_new_tokens=32, do_sample=False)
    print(f"held-out perplexity {ppl.item():.1f}", "generated", tuple(generated.shape))


def hf_musicgen_delay_pattern_codebooks_text_conditioned_bf16(device):
    """MusicgenForCausalLM built from a MusicgenDecoderConfig (MusicGen-small decoder: 24 layers, hidden 1024,
    16 heads, ffn 4096, 4 EnCodec codebooks of 2048 with the delay pattern), conditioned through
    cross-attention on precomputed 768-d 'T5' text states (batch x 24) mapped by a trainable Linear to 1024.
    Batch 8 clips of 500 frames (10 s at 50 Hz) of random codes, BOS + delay pattern built with
    build_delay_pattern_mask, labels with pad positions ignored, bf16 autocast, AdamW lr 1e-4 with
    warmup, grad clip 1.0, 6 steps with printed per-step loss; then sampling generate() (top-k 250)
    of 100 frames for 2 prompts under no_grad."""
    from transformers import MusicgenForCausalLM
    from transformers.models.musicgen.configuration_musicgen import MusicgenDecoderConfig

    torch.manual_seed(0)
    batch_size, frames, steps, text_len = 8, 500, 6, 24
    config = MusicgenDecoderConfig(vocab_size=2048, num_hidden_layers=24, hidden_size=1024, ffn_dim=4096,
                                   num_attention_heads=16, num_codebooks=4, max_position_embeddings=2048,
                                   pad_token_id=2048, bos_token_id=2048, dropout=0.1)
    model = MusicgenForCausalLM(config).to(device)
    enc_to_dec = nn.Linear(768, 1024).to(device)
    params = list(model.parameters()) + list(enc_to_dec.parameters())
    optimizer = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.95), weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 3))
    K = config.num_codebooks
    amp = dict(device_type=torch.device(device).type, dtype=torch.bfloat16)

    def make_batch(n):
        codes = torch.randint(0, 2048, (n, K, frames))
        with_bos = torch.cat([torch.full((n, K, 1), config.bos_token_id), codes], dim=-1)
        _, delayed = model.build_delay_pattern_mask(with_bos.reshape(n * K, -1), pad_token_id=config.pad_token_id,
                                                    max_length=frames + K)
        delayed = delayed.reshape(n, K, -1)
        input_ids = delayed[..., :-1].reshape(n * K, -1)
        labels = delayed[..., 1:].transpose(1, 2).contiguous()
        text_states = torch.randn(n, text_len, 768)
        text_mask = (torch.arange(text_len)[None, :] < torch.randint(6, text_len + 1, (n, 1))).long()
        return input_ids.to(device), labels.to(device), text_states.to(device), text_mask.to(device)

    model.train()
    for step in range(steps):
        input_ids, labels, text_states, text_mask = make_batch(batch_size)
        with torch.autocast(**amp):
            encoder_hidden_states = enc_to_dec(text_states) * text_mask[..., None]
            out = model(input_ids=input_ids, encoder_hidden_states=encoder_hidden_states,
                        encoder_attention_mask=text_mask, labels=labels)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"step {step} loss {out.loss.item():.4f}")

    model.eval()
    with torch.no_grad(), torch.autocast(**amp):
        text_states = torch.randn(2, text_len, 768, device=device)
        encoder_hidden_states = enc_to_dec(text_states)
        start = torch.full((2 * K, 1), config.bos_token_id, device=device)
        audio_codes = model.generate(input_ids=start, encoder_hidden_states=encoder_hidden_states,
                                     encoder_attention_mask=torch.ones(2, text_len, dtype=torch.long, device=device),
                                     max_new_tokens=100, do_sample=True, top_k=250,
                                     pad_token_id=config.pad_token_id, decoder_start_token_id=config.bos_token_id,
                                     num_return_sequences=1)
    print("generated codes", tuple(audio_codes.shape))


def hf_canine_character_classifier_fp16_scaler_accumulate(device):
    """CanineForSequenceClassification built from a CanineConfig (CANINE-s shape: hash embeddings 8 x 16384
    buckets, local character transformer, downsampling rate 4, 12-layer 768-wide deep transformer, 5 labels),
    micro-batches of 12 texts padded to 2048 Unicode code points with CLS/SEP and attention masks,
    2-step gradient accumulation, fp16 autocast with GradScaler, AdamW lr 5e-5 with linear warmup/decay,
    grad clip 1.0 after unscale, 4 optimizer steps with printed loss; then eval accuracy on 2 batches of 24
    under no_grad."""
    from transformers import CanineConfig, CanineForSequenceClassification, get_linear_schedule_with_warmup

    torch.manual_seed(0)
    micro_batch, seq_len, accum, steps, num_labels = 12, 2048, 2, 4, 5
    config = CanineConfig(num_labels=num_labels)
    model = CanineForSequenceClassification(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01)
    scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=1, num_training_steps=steps)
    scaler = torch.amp.GradScaler(torch.device(device).type)
    amp = dict(device_type=torch.device(device).type, dtype=torch.float16)

    def make_batch(n):
        lengths = torch.randint(seq_len // 4, seq_len + 1, (n,))
        chars = torch.randint(32, 0x3000, (n, seq_len))
        chars[:, 0] = 0xE000
        pos = torch.arange(seq_len)[None, :]
        chars[pos.expand(n, -1) == lengths[:, None] - 1] = 0xE001
        mask = pos < lengths[:, None]
        chars = chars.masked_fill(~mask, 0)
        labels = (chars[:, 1:9].sum(1) // 7) % num_labels
        return chars.to(device), mask.long().to(device), labels.to(device)

    model.train()
    for step in range(steps):
        for micro in range(accum):
            input_ids, attention_mask, labels = make_batch(micro_batch)
            with torch.autocast(**amp):
                out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
                loss = out.loss / accum
            scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"step {step} loss {loss.item() * accum:.4f} scale {scaler.get_scale():.0f}")

    model.eval()
    correct = total = 0
    with torch.no_grad(), torch.autocast(**amp):
        for _ in range(2):
            input_ids, attention_mask, labels = make_batch(2 * micro_batch)
            logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
            correct += (logits.argmax(-1) == labels).sum().item()
            total += labels.numel()
    print(f"eval accuracy {correct / total:.3f}")


def timm_dla34_augmix_jsd_split_bn_bf16_channels_last(device):
    """timm dla34 (200 classes) converted to split BatchNorm with 3 splits (timm convert_splitbn_model), trained
    AugMix-style: each batch is 32 clean 224px images + 2 augmented views of them (96 images), loss =
    timm JsdCrossEntropy (alpha 12, label smoothing 0.1), channels_last, bf16 autocast, SGD nesterov lr 0.1
    wd 1e-4 with timm CosineLRScheduler (2 warmup steps), 6 steps with printed loss; then eval top-1/top-5
    on 64 clean images under no_grad (main BN)."""
    import timm
    from timm.layers import convert_splitbn_model
    from timm.loss import JsdCrossEntropy
    from timm.scheduler import CosineLRScheduler

    torch.manual_seed(0)
    batch_size, num_splits, steps, num_classes = 32, 3, 6, 200
    model = timm.create_model("dla34", num_classes=num_classes)
    model = convert_splitbn_model(model, num_splits=num_splits)
    model = model.to(device).to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
    scheduler = CosineLRScheduler(optimizer, t_initial=steps, warmup_t=2, warmup_lr_init=1e-4)
    criterion = JsdCrossEntropy(num_splits=num_splits, alpha=12, smoothing=0.1)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)

    def augment(x):
        # cheap stand-ins for AugMix chains: mixes of flips, brightness, contrast, shifts
        ws = torch.distributions.Dirichlet(torch.ones(3)).sample((x.shape[0],))
        m = torch.distributions.Beta(1.0, 1.0).sample((x.shape[0], 1, 1, 1))
        ops = [x.flip(-1), (x * 1.3).clamp(0, 1), torch.roll(x, shifts=(8, -8), dims=(2, 3)),
               ((x - x.mean((1, 2, 3), keepdim=True)) * 1.5 + 0.5).clamp(0, 1)]
        mix = sum(ws[:, i].view(-1, 1, 1, 1) * ops[(i + 1) % 4] for i in range(3))
        return m * x + (1 - m) * mix

    def make_batch(n):
        clean = torch.rand(n, 3, 224, 224)
        labels = torch.randint(0, num_classes, (n,))
        images = torch.cat([clean, augment(clean), augment(clean)])
        images = ((images - mean) / std).to(device).contiguous(memory_format=torch.channels_last)
        return images, labels.repeat(num_splits).to(device)

    model.train()
    for step in range(steps):
        images, labels = make_batch(batch_size)
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
            output = model(images)
        loss = criterion(output.float(), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step(step + 1)
        print(f"step {step} loss {loss.item():.4f} lr {optimizer.param_groups[0]['lr']:.4f}")

    model.eval()
    with torch.no_grad(), torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
        images = ((torch.rand(64, 3, 224, 224) - mean) / std).to(device).contiguous(memory_format=torch.channels_last)
        labels = torch.randint(0, num_classes, (64,)).to(device)
        top5 = model(images).topk(5, dim=1).indices
        top1_acc = (top5[:, 0] == labels).float().mean().item()
        top5_acc = (top5 == labels[:, None]).any(1).float().mean().item()
    print(f"eval top1 {top1_acc:.3f} top5 {top5_acc:.3f}")


def tv_wide_resnet50_2_sam_two_pass_bf16(device):
    """torchvision wide_resnet50_2 (100 classes) trained with sharpness-aware minimization (the common SAM
    optimizer wrapper: first_step perturbs weights by rho * g / ||g||, second_step restores them and runs the
    base SGD momentum 0.9 nesterov lr 0.05 wd 5e-4), two forward/backward passes per step with BatchNorm
    running stats frozen on the second pass, batch 64 at 176px, channels_last, bf16 autocast, label
    smoothing 0.1, cosine LR, 5 steps with printed loss and accuracy; then eval on 128 images under no_grad."""
    import torchvision

    torch.manual_seed(0)
    batch_size, image_size, steps, num_classes = 64, 176, 5, 100

    class SAM(torch.optim.Optimizer):
        def __init__(self, params, base_optimizer, rho=0.05, adaptive=False, **kwargs):
            defaults = dict(rho=rho, adaptive=adaptive, **kwargs)
            super().__init__(params, defaults)
            self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
            self.param_groups = self.base_optimizer.param_groups
            self.defaults.update(self.base_optimizer.defaults)

        @torch.no_grad()
        def first_step(self, zero_grad=False):
            grad_norm = self._grad_norm()
            for group in self.param_groups:
                scale = group["rho"] / (grad_norm + 1e-12)
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    self.state[p]["old_p"] = p.data.clone()
                    e_w = (torch.pow(p, 2) if group["adaptive"] else 1.0) * p.grad * scale.to(p)
                    p.add_(e_w)
            if zero_grad:
                self.zero_grad()

        @torch.no_grad()
        def second_step(self, zero_grad=False):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.data = self.state[p]["old_p"]
            self.base_optimizer.step()
            if zero_grad:
                self.zero_grad()

        def _grad_norm(self):
            shared_device = self.param_groups[0]["params"][0].device
            return torch.norm(torch.stack([
                ((torch.abs(p) if group["adaptive"] else 1.0) * p.grad).norm(p=2).to(shared_device)
                for group in self.param_groups for p in group["params"] if p.grad is not None]), p=2)

    def disable_running_stats(model):
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.backup_momentum = m.momentum
                m.momentum = 0

    def enable_running_stats(model):
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d) and hasattr(m, "backup_momentum"):
                m.momentum = m.backup_momentum

    model = torchvision.models.wide_resnet50_2(num_classes=num_classes).to(device).to(memory_format=torch.channels_last)
    optimizer = SAM(model.parameters(), torch.optim.SGD, rho=0.05, lr=0.05, momentum=0.9, nesterov=True,
                    weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer.base_optimizer, T_max=steps)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    amp = dict(device_type=torch.device(device).type, dtype=torch.bfloat16)

    model.train()
    for step in range(steps):
        images = torch.randn(batch_size, 3, image_size, image_size).to(device).contiguous(memory_format=torch.channels_last)
        labels = torch.randint(0, num_classes, (batch_size,)).to(device)
        enable_running_stats(model)
        with torch.autocast(**amp):
            outputs = model(images)
            loss = criterion(outputs, labels)
        loss.backward()
        optimizer.first_step(zero_grad=True)
        disable_running_stats(model)
        with torch.autocast(**amp):
            loss_adv = criterion(model(images), labels)
        loss_adv.backward()
        optimizer.second_step(zero_grad=True)
        scheduler.step()
        acc = (outputs.argmax(1) == labels).float().mean()
        print(f"step {step} loss {loss.item():.4f} sharp loss {loss_adv.item():.4f} acc {acc.item():.3f}")

    model.eval()
    correct = 0
    with torch.no_grad(), torch.autocast(**amp):
        for _ in range(2):
            images = torch.randn(batch_size, 3, image_size, image_size).to(device).contiguous(memory_format=torch.channels_last)
            labels = torch.randint(0, num_classes, (batch_size,)).to(device)
            correct += (model(images).argmax(1) == labels).sum().item()
    print(f"eval accuracy {correct / (2 * batch_size):.3f}")


def dann_gradient_reversal_resnet50_domain_adaptation_bf16(device):
    """DANN unsupervised domain adaptation: torchvision resnet50 feature extractor + 256-d bottleneck
    (Linear, BatchNorm1d, ReLU) + 31-class label head, and a domain discriminator (1024-1024-1 MLP) behind a
    custom GradientReversal torch.autograd.Function whose coefficient ramps 2/(1+exp(-10p))-1. Each step:
    48 labeled source + 48 unlabeled target images at 224px, bf16 autocast, loss = CE(source) +
    BCEWithLogits(domain), SGD momentum 0.9 nesterov with 10x lr on the new layers and the DANN annealing
    lr0/(1+10p)^0.75, 6 steps with printed losses and domain accuracy; then target accuracy on 96 images under
    no_grad."""
    import torchvision

    torch.manual_seed(0)
    batch_size, steps, num_classes = 48, 6, 31

    class GradientReverseFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, coeff):
            ctx.coeff = coeff
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output.neg() * ctx.coeff, None

    class GradientReverseLayer(nn.Module):
        def forward(self, x, coeff):
            return GradientReverseFunction.apply(x, coeff)

    backbone = torchvision.models.resnet50()
    backbone.fc = nn.Identity()
    bottleneck = nn.Sequential(nn.Linear(2048, 256), nn.BatchNorm1d(256), nn.ReLU())
    head = nn.Linear(256, num_classes)
    discriminator = nn.Sequential(nn.Linear(256, 1024), nn.BatchNorm1d(1024), nn.ReLU(), nn.Dropout(0.5),
                                  nn.Linear(1024, 1024), nn.BatchNorm1d(1024), nn.ReLU(), nn.Dropout(0.5),
                                  nn.Linear(1024, 1))
    grl = GradientReverseLayer()
    for m in (backbone, bottleneck, head, discriminator):
        m.to(device)
    lr0 = 0.01
    optimizer = torch.optim.SGD([
        {"params": backbone.parameters(), "lr": lr0 * 0.1},
        {"params": list(bottleneck.parameters()) + list(head.parameters()) + list(discriminator.parameters()),
         "lr": lr0},
    ], lr=lr0, momentum=0.9, weight_decay=1e-3, nesterov=True)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: (1 + 10 * s / steps) ** (-0.75))
    amp = dict(device_type=torch.device(device).type, dtype=torch.bfloat16)

    for m in (backbone, bottleneck, head, discriminator):
        m.train()
    for step in range(steps):
        p = step / steps
        coeff = 2.0 / (1.0 + math.exp(-10 * p)) - 1.0
        x_s = torch.randn(batch_size, 3, 224, 224).to(device)
        y_s = torch.randint(0, num_classes, (batch_size,)).to(device)
        x_t = (torch.randn(batch_size, 3, 224, 224) * 1.2 + 0.3).to(device)
        with torch.autocast(**amp):
            f = bottleneck(backbone(torch.cat([x_s, x_t])))
            f_s, _ = f.chunk(2)
            cls_loss = F.cross_entropy(head(f_s), y_s)
            d_logits = discriminator(grl(f, coeff)).squeeze(1)
        d_labels = torch.cat([torch.ones(batch_size), torch.zeros(batch_size)]).to(device)
        transfer_loss = F.binary_cross_entropy_with_logits(d_logits.float(), d_labels)
        loss = cls_loss + transfer_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        domain_acc = ((d_logits > 0).float() == d_labels).float().mean()
        print(f"step {step} cls {cls_loss.item():.4f} transfer {transfer_loss.item():.4f} "
              f"domain acc {domain_acc.item():.3f} coeff {coeff:.3f}")

    for m in (backbone, bottleneck, head, discriminator):
        m.eval()
    correct = 0
    with torch.no_grad(), torch.autocast(**amp):
        for _ in range(2):
            x_t = (torch.randn(batch_size, 3, 224, 224) * 1.2 + 0.3).to(device)
            y_t = torch.randint(0, num_classes, (batch_size,)).to(device)
            correct += (head(bottleneck(backbone(x_t))).argmax(1) == y_t).sum().item()
    print(f"target accuracy {correct / (2 * batch_size):.3f}")


def kfac_natural_gradient_mlp_module_hooks(device):
    """K-FAC natural-gradient training of a 5-layer MLP (3072-4096-4096-4096-4096-1000, ReLU) in fp32, written
    the way K-FAC repos do it: forward-pre hooks record layer inputs and full backward hooks record output
    gradients; every 2nd step a sampled-Fisher backward (labels drawn from the model's softmax,
    retain_graph=True) updates running Kronecker factors A (inputs, with bias column) and G (output grads);
    every 4th step damped Cholesky inverses are recomputed; gradients are preconditioned G^-1 grad A^-1,
    KL-clipped, then SGD momentum 0.9 lr 0.05. Batch 8192 flattened 32x32x3 inputs with labels from a
    fixed random teacher, 12 steps with printed loss/accuracy; then eval accuracy under no_grad."""
    torch.manual_seed(0)
    batch_size, steps, in_dim, hidden, num_classes = 8192, 12, 3072, 4096, 1000
    stat_decay, damping, kl_clip, t_cov, t_inv = 0.95, 1e-2, 1e-3, 2, 4

    model = nn.Sequential(
        nn.Linear(in_dim, hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, num_classes),
    ).to(device)
    teacher = torch.randn(in_dim, num_classes).to(device) / math.sqrt(in_dim)
    layers = [m for m in model.modules() if isinstance(m, nn.Linear)]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-5)
    state = {m: {} for m in layers}
    collect = {"on": False}

    def save_input(module, inputs):
        if collect["on"] and torch.is_grad_enabled():
            a = inputs[0].detach()
            a = torch.cat([a, a.new_ones(a.shape[0], 1)], dim=1)
            aa = a.t() @ (a / a.shape[0])
            st = state[module]
            st["A"] = aa if "A" not in st else st["A"].mul_(stat_decay).add_(aa, alpha=1 - stat_decay)

    def save_grad_output(module, grad_input, grad_output):
        if collect["on"]:
            g = grad_output[0].detach()
            gg = g.t() @ (g * g.shape[0])
            st = state[module]
            st["G"] = gg if "G" not in st else st["G"].mul_(stat_decay).add_(gg, alpha=1 - stat_decay)

    for m in layers:
        m.register_forward_pre_hook(save_input)
        m.register_full_backward_hook(save_grad_output)

    def damped_inverse(mat, damp):
        eye = torch.eye(mat.shape[0], device=mat.device, dtype=mat.dtype)
        return torch.cholesky_inverse(torch.linalg.cholesky(mat + damp * eye))

    def make_batch(n):
        x = torch.randn(n, in_dim).to(device)
        y = (x @ teacher).argmax(1)
        return x, y

    model.train()
    for step in range(steps):
        x, y = make_batch(batch_size)
        collect["on"] = step % t_cov == 0
        logits = model(x)
        if collect["on"]:
            with torch.no_grad():
                sampled_y = torch.multinomial(F.softmax(logits.detach(), dim=1), 1).squeeze(1)
            optimizer.zero_grad()
            F.cross_entropy(logits, sampled_y).backward(retain_graph=True)
            collect["on"] = False
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()

        if step % t_inv == 0:
            for m in layers:
                st = state[m]
                pi = torch.sqrt((st["A"].trace() / st["A"].shape[0]) / (st["G"].trace() / st["G"].shape[0]))
                st["A_inv"] = damped_inverse(st["A"], (math.sqrt(damping) * pi).item())
                st["G_inv"] = damped_inverse(st["G"], (math.sqrt(damping) / pi).item())
        updates, vg_sum = {}, 0.0
        lr = optimizer.param_groups[0]["lr"]
        for m in layers:
            grad = torch.cat([m.weight.grad, m.bias.grad[:, None]], dim=1)
            v = state[m]["G_inv"] @ grad @ state[m]["A_inv"]
            updates[m] = v
            vg_sum = vg_sum + (v * grad * lr ** 2).sum()
        nu = torch.clamp(torch.sqrt(kl_clip / vg_sum), max=1.0)
        for m in layers:
            v = updates[m]
            m.weight.grad.copy_(v[:, :-1] * nu)
            m.bias.grad.copy_(v[:, -1] * nu)
        optimizer.step()
        acc = (logits.argmax(1) == y).float().mean()
        print(f"step {step} loss {loss.item():.4f} acc {acc.item():.3f} nu {nu.item():.3f}")

    model.eval()
    with torch.no_grad():
        x, y = make_batch(batch_size)
        print(f"eval accuracy {(model(x).argmax(1) == y).float().mean().item():.3f}")


def topk_sparse_autoencoder_frozen_pythia_residual_auxk(device):
    """Top-k sparse autoencoder (OpenAI-style: pre-encoder bias, k=32, 32768 latents = 32 x 1024, AuxK loss
    with k_aux 512 on latents dead for the last 2 steps, unit-norm decoder rows with the parallel gradient
    component removed) trained in fp32 on residual-stream activations of a frozen GPTNeoXForCausalLM built
    from a Pythia-410M-shaped config (24 layers, hidden 1024, bf16 weights, eval, no_grad), read by a forward
    hook on layer 12. Each step: 2 LM batches of 16 x 256 tokens -> 8192 activation vectors, normalized;
    Adam lr 2e-4 eps 6.25e-10, 8 steps with printed normalized MSE, aux loss and dead fraction; then eval
    normalized MSE and L0 on a fresh batch under no_grad."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(0)
    lm_batch, seq_len, lm_batches, steps = 16, 256, 2, 8
    d_in, n_latents, k, k_aux, dead_steps = 1024, 32768, 32, 512, 2
    lm_config = GPTNeoXConfig(vocab_size=50304, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                              intermediate_size=4096, rotary_pct=0.25, max_position_embeddings=2048)
    lm = GPTNeoXForCausalLM(lm_config).to(device=device, dtype=torch.bfloat16).eval()
    lm.requires_grad_(False)
    captured = {}

    def hook(module, inputs, output):
        captured["resid"] = output[0] if isinstance(output, tuple) else output

    lm.gpt_neox.layers[12].register_forward_hook(hook)

    class TopKSAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.b_dec = nn.Parameter(torch.zeros(d_in))
            self.encoder = nn.Linear(d_in, n_latents)
            self.W_dec = nn.Parameter(self.encoder.weight.detach().clone())  # (n_latents, d_in), tied init
            self.normalize_decoder()
            nn.init.zeros_(self.encoder.bias)

        @torch.no_grad()
        def normalize_decoder(self):
            self.W_dec.div_(self.W_dec.norm(dim=1, keepdim=True) + 1e-8)

        @torch.no_grad()
        def remove_parallel_grad(self):
            parallel = (self.W_dec.grad * self.W_dec).sum(1, keepdim=True)
            self.W_dec.grad.sub_(parallel * self.W_dec)

        def forward(self, x):
            pre = F.relu(self.encoder(x - self.b_dec))
            values, indices = pre.topk(k, dim=-1)
            latents = torch.zeros_like(pre).scatter_(-1, indices, values)
            recon = latents @ self.W_dec + self.b_dec
            return recon, pre, indices

    sae = TopKSAE().to(device)
    optimizer = torch.optim.Adam(sae.parameters(), lr=2e-4, eps=6.25e-10)
    steps_since_fired = torch.zeros(n_latents, dtype=torch.long, device=device)

    def get_activations():
        chunks = []
        with torch.no_grad():
            for _ in range(lm_batches):
                ids = torch.randint(0, 50000, (lm_batch, seq_len)).to(device)
                lm(input_ids=ids)
                chunks.append(captured["resid"].reshape(-1, d_in).float())
        return torch.cat(chunks)

    x = get_activations()
    scale = math.sqrt(d_in) / x.norm(dim=1).mean().item()
    for step in range(steps):
        if step > 0:
            x = get_activations()
        x = x * scale
        recon, pre, indices = sae(x)
        err = x - recon
        nmse = err.pow(2).sum(-1).mean() / (x - x.mean(0)).pow(2).sum(-1).mean()
        fired = torch.zeros(n_latents, dtype=torch.bool, device=device)
        fired[indices.flatten()] = True
        steps_since_fired = torch.where(fired, torch.zeros_like(steps_since_fired), steps_since_fired + 1)
        dead = steps_since_fired >= dead_steps
        aux_vals, aux_idx = (pre * dead).topk(k_aux, dim=-1)
        aux_latents = torch.zeros_like(pre).scatter_(-1, aux_idx, aux_vals)
        aux_recon = aux_latents @ sae.W_dec
        aux_loss = (aux_recon - err.detach()).pow(2).sum(-1).mean() / err.detach().pow(2).sum(-1).mean()
        loss = nmse + aux_loss / 32
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        sae.remove_parallel_grad()
        torch.nn.utils.clip_grad_norm_(sae.parameters(), 1.0)
        optimizer.step()
        sae.normalize_decoder()
        print(f"step {step} nmse {nmse.item():.4f} aux {aux_loss.item():.4f} "
              f"dead frac {dead.float().mean().item():.3f}")

    with torch.no_grad():
        x = get_activations() * scale
        recon, pre, indices = sae(x)
        nmse = (x - recon).pow(2).sum(-1).mean() / (x - x.mean(0)).pow(2).sum(-1).mean()
        l0 = (pre.gather(-1, indices) > 0).sum(-1).float().mean()
    print(f"eval nmse {nmse.item():.4f} L0 {l0.item():.1f}")


def mri_e2e_varnet_complex_kspace_fft2_ssim_checkpointed(device):
    """End-to-end VarNet (fastMRI-style) for 4x accelerated multi-coil knee MRI: complex64 k-space of batch 2 x
    15 coils x 640 x 368, equispaced column mask with 8% centre lines, a sensitivity-map U-Net (8 channels,
    4 pools, run per coil on the ACS image) and 12 unrolled cascades, each a normalized U-Net (18 channels,
    4 pools) on the coil-combined image plus soft data consistency, using orthonormal centred
    torch.fft.fft2/ifft2 with view_as_real/view_as_complex; every cascade wrapped in torch.utils.checkpoint
    (non-reentrant). fp32, SSIM loss on the 320x320 centre-cropped RSS image, Adam lr 3e-4, grad clip 1.0,
    4 steps with printed loss; then eval NMSE/PSNR under no_grad."""
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    batch_size, coils, height, width, steps = 2, 15, 640, 368, 4
    num_cascades, chans, sens_chans, pools, crop = 12, 18, 8, 4, 320

    def fft2c(x):
        return torch.fft.fftshift(torch.fft.fft2(torch.fft.ifftshift(x, dim=(-2, -1)), norm="ortho"), dim=(-2, -1))

    def ifft2c(x):
        return torch.fft.fftshift(torch.fft.ifft2(torch.fft.ifftshift(x, dim=(-2, -1)), norm="ortho"), dim=(-2, -1))

    def conv_block(cin, cout):
        return nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.InstanceNorm2d(cout), nn.LeakyReLU(0.2, True),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.InstanceNorm2d(cout), nn.LeakyReLU(0.2, True))

    class Unet(nn.Module):
        def __init__(self, cin, cout, ch, num_pools):
            super().__init__()
            self.down = nn.ModuleList([conv_block(cin, ch)])
            c = ch
            for _ in range(num_pools - 1):
                self.down.append(conv_block(c, c * 2))
                c *= 2
            self.bottom = conv_block(c, c * 2)
            self.up_t, self.up_c = nn.ModuleList(), nn.ModuleList()
            for _ in range(num_pools):
                self.up_t.append(nn.Sequential(nn.ConvTranspose2d(c * 2, c, 2, stride=2, bias=False),
                                               nn.InstanceNorm2d(c), nn.LeakyReLU(0.2, True)))
                self.up_c.append(conv_block(c * 2, c))
                c //= 2
            self.out = nn.Conv2d(ch, cout, 1)

        def forward(self, x):
            stack = []
            for layer in self.down:
                x = layer(x)
                stack.append(x)
                x = F.avg_pool2d(x, 2)
            x = self.bottom(x)
            for t, c in zip(self.up_t, self.up_c):
                skip = stack.pop()
                x = t(x)
                x = c(torch.cat([x, skip], dim=1))
            return self.out(x)

    class NormUnet(nn.Module):
        def __init__(self, ch, num_pools):
            super().__init__()
            self.unet = Unet(2, 2, ch, num_pools)

        def forward(self, x):  # complex (N, H, W)
            x = torch.view_as_real(x).permute(0, 3, 1, 2)
            mean = x.mean(dim=(2, 3), keepdim=True)
            std = x.std(dim=(2, 3), keepdim=True)
            x = self.unet((x - mean) / std) * std + mean
            return torch.view_as_complex(x.permute(0, 2, 3, 1).contiguous())

    class SensitivityModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm_unet = NormUnet(sens_chans, pools)

        def forward(self, masked_kspace, acs_mask):
            b, c, h, w = masked_kspace.shape
            images = ifft2c(masked_kspace * acs_mask)
            maps = self.norm_unet(images.reshape(b * c, h, w)).reshape(b, c, h, w)
            return maps / torch.sqrt((maps.abs() ** 2).sum(1, keepdim=True) + 1e-12)

    class VarNetBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = NormUnet(chans, pools)
            self.dc_weight = nn.Parameter(torch.ones(1))

        def forward(self, current_kspace, ref_kspace, mask, sens_maps):
            image = (ifft2c(current_kspace) * sens_maps.conj()).sum(1)
            refined = fft2c(self.model(image)[:, None] * sens_maps)
            soft_dc = torch.where(mask, current_kspace - ref_kspace, torch.zeros_like(current_kspace)) * self.dc_weight
            return current_kspace - soft_dc - refined

    class VarNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.sens_net = SensitivityModel()
            self.cascades = nn.ModuleList([VarNetBlock() for _ in range(num_cascades)])

        def forward(self, masked_kspace, mask, acs_mask):
            sens_maps = self.sens_net(masked_kspace, acs_mask)
            kspace_pred = masked_kspace.clone()
            for cascade in self.cascades:
                kspace_pred = checkpoint(cascade, kspace_pred, masked_kspace, mask, sens_maps, use_reentrant=False)
            return torch.sqrt((ifft2c(kspace_pred).abs() ** 2).sum(1))

    def center_crop(x, size):
        h0, w0 = (x.shape[-2] - size) // 2, (x.shape[-1] - size) // 2
        return x[..., h0:h0 + size, w0:w0 + size]

    def ssim_loss(x, y, data_range, win=7, k1=0.01, k2=0.03):
        x, y = x[:, None], y[:, None]
        w = torch.ones(1, 1, win, win, device=x.device) / win ** 2
        np_ = win * win
        cov_norm = np_ / (np_ - 1)
        ux, uy = F.conv2d(x, w), F.conv2d(y, w)
        uxx, uyy, uxy = F.conv2d(x * x, w), F.conv2d(y * y, w), F.conv2d(x * y, w)
        vx, vy, vxy = cov_norm * (uxx - ux * ux), cov_norm * (uyy - uy * uy), cov_norm * (uxy - ux * uy)
        c1 = (k1 * data_range[:, None, None, None]) ** 2
        c2 = (k2 * data_range[:, None, None, None]) ** 2
        s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux ** 2 + uy ** 2 + c1) * (vx + vy + c2))
        return 1 - s.mean()

    gen = torch.Generator().manual_seed(0)
    center = round(width * 0.08)
    acs = torch.zeros(width, dtype=torch.bool)
    acs[(width - center) // 2:(width - center) // 2 + center] = True
    cols = acs.clone()
    offset = int(torch.randint(0, 4, (1,), generator=gen))
    cols[offset::4] = True
    mask = cols.view(1, 1, 1, width).to(device)
    acs_mask = acs.view(1, 1, 1, width).to(device)

    def make_example():
        # smooth random complex "anatomy" times smooth coil sensitivities
        low = torch.randn(batch_size, 2, height // 16, width // 16)
        img = F.interpolate(low, size=(height, width), mode="bicubic", align_corners=False)
        img = torch.view_as_complex(img.permute(0, 2, 3, 1).contiguous()).to(device)
        sl = torch.randn(batch_size, coils, 2, 5, 5)
        sens = F.interpolate(sl.view(batch_size, coils * 2, 5, 5), size=(height, width), mode="bilinear",
                             align_corners=False).view(batch_size, coils, 2, height, width)
        sens = torch.view_as_complex(sens.permute(0, 1, 3, 4, 2).contiguous()).to(device)
        full_kspace = fft2c(img[:, None] * sens)
        target = center_crop(torch.sqrt((ifft2c(full_kspace).abs() ** 2).sum(1)), crop)
        masked = torch.where(mask, full_kspace, torch.zeros_like(full_kspace))
        return masked, target

    model = VarNet().to(device)
    print("params", sum(p.numel() for p in model.parameters()))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)

    model.train()
    for step in range(steps):
        masked, target = make_example()
        output = center_crop(model(masked, mask, acs_mask), crop)
        loss = ssim_loss(output, target, data_range=target.amax(dim=(1, 2)))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        print(f"step {step} ssim loss {loss.item():.4f}")

    model.eval()
    with torch.no_grad():
        masked, target = make_example()
        output = center_crop(model(masked, mask, acs_mask), crop)
        nmse = ((output - target).norm() ** 2 / target.norm() ** 2).item()
        mse = F.mse_loss(output, target)
        psnr = 10 * torch.log10(target.max() ** 2 / mse)
    print(f"eval nmse {nmse:.4f} psnr {psnr.item():.2f}")


def wavenet_mulaw_dilated_causal_fp16_scaler_generate(device):
    """WaveNet vocoder: 30 gated residual layers (3 stacks of dilations 1..512, kernel 2, causal left
    padding), 128 residual / 256 gate / 256 skip channels, local conditioning on an 80-bin mel spectrogram
    upsampled 256x by two ConvTranspose1d layers, 256-way mu-law output. Batch 12 segments of 7680 samples
    (30 mel frames), fp16 autocast with GradScaler, Adam lr 1e-3 with StepLR, grad clip after unscale,
    6 steps with printed loss and accuracy; then autoregressive sampling under no_grad of 400 samples for 2
    utterances, re-running the 3070-sample receptive field each step, and mu-law decoding."""
    torch.manual_seed(0)
    batch_size, frames, hop, steps = 12, 30, 256, 6
    n_mels, res_ch, gate_ch, skip_ch, q = 80, 128, 256, 256, 256
    dilations = [2 ** i for i in range(10)] * 3
    receptive_field = sum(dilations) + 1

    def mu_law_encode(x):
        mu = q - 1
        y = torch.sign(x) * torch.log1p(mu * x.abs()) / math.log1p(mu)
        return ((y + 1) / 2 * mu + 0.5).long()

    def mu_law_decode(idx):
        mu = q - 1
        y = 2 * idx.float() / mu - 1
        return torch.sign(y) * ((1 + mu) ** y.abs() - 1) / mu

    class ResidualLayer(nn.Module):
        def __init__(self, dilation):
            super().__init__()
            self.dilation = dilation
            self.conv = nn.Conv1d(res_ch, gate_ch, 2, dilation=dilation)
            self.cond = nn.Conv1d(n_mels, gate_ch, 1, bias=False)
            self.res = nn.Conv1d(gate_ch // 2, res_ch, 1)
            self.skip = nn.Conv1d(gate_ch // 2, skip_ch, 1)

        def forward(self, x, c):
            h = self.conv(F.pad(x, (self.dilation, 0))) + self.cond(c)
            a, b = h.chunk(2, dim=1)
            z = torch.tanh(a) * torch.sigmoid(b)
            return (x + self.res(z)) * math.sqrt(0.5), self.skip(z)

    class WaveNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.upsample = nn.Sequential(
                nn.ConvTranspose1d(n_mels, n_mels, 32, stride=16, padding=8), nn.LeakyReLU(0.4),
                nn.ConvTranspose1d(n_mels, n_mels, 32, stride=16, padding=8), nn.LeakyReLU(0.4))
            self.embed = nn.Embedding(q, res_ch)
            self.layers = nn.ModuleList([ResidualLayer(d) for d in dilations])
            self.out = nn.Sequential(nn.ReLU(), nn.Conv1d(skip_ch, skip_ch, 1), nn.ReLU(), nn.Conv1d(skip_ch, q, 1))

        def forward(self, tokens, c_up):
            x = self.embed(tokens).transpose(1, 2)
            skips = 0
            for layer in self.layers:
                x, s = layer(x, c_up)
                skips = skips + s
            return self.out(skips * math.sqrt(1.0 / len(self.layers)))

    model = WaveNet().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
    scaler = torch.amp.GradScaler(torch.device(device).type)
    amp = dict(device_type=torch.device(device).type, dtype=torch.float16)
    num_samples = frames * hop

    def make_batch(n):
        t = torch.arange(num_samples) / 16000
        f0 = torch.empty(n, 1).uniform_(100, 300)
        audio = 0.5 * torch.sin(2 * math.pi * f0 * t) * torch.rand(n, 1) + 0.02 * torch.randn(n, num_samples)
        mel = torch.randn(n, n_mels, frames)
        tokens = mu_law_encode(audio.clamp(-1, 1))
        return tokens.to(device), mel.to(device)

    model.train()
    for step in range(steps):
        tokens, mel = make_batch(batch_size)
        inputs = F.pad(tokens[:, :-1], (1, 0), value=q // 2)
        with torch.autocast(**amp):
            c_up = model.upsample(mel)[..., :num_samples]
            logits = model(inputs, c_up)
            loss = F.cross_entropy(logits.float(), tokens)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        acc = (logits.argmax(1) == tokens).float().mean()
        print(f"step {step} loss {loss.item():.4f} acc {acc.item():.3f} scale {scaler.get_scale():.0f}")

    model.eval()
    gen_len = 400
    with torch.no_grad(), torch.autocast(**amp):
        _, mel = make_batch(2)
        c_up = model.upsample(mel)[..., :num_samples]
        c_up = F.pad(c_up, (receptive_field, 0))
        generated = torch.full((2, receptive_field), q // 2, dtype=torch.long, device=device)
        for i in range(gen_len):
            window = generated[:, -receptive_field:]
            cond = c_up[..., i + 1:i + 1 + receptive_field]
            logits = model(window, cond)[:, :, -1].float()
            nxt = torch.multinomial(F.softmax(logits, dim=-1), 1)
            generated = torch.cat([generated, nxt], dim=1)
        audio = mu_law_decode(generated[:, receptive_field:])
    print("generated audio", tuple(audio.shape), f"rms {audio.pow(2).mean().sqrt().item():.4f}")


def trigflow_consistency_training_forward_mode_jvp(device):
    """Continuous-time consistency training (sCM, TrigFlow parameterization) of a 32x32 image U-Net
    (channels 128/256/256, GroupNorm+SiLU res blocks, 2 per level down and 3 up, hand-written softmax
    self-attention at 8x8 so forward-mode AD works, Fourier time embedding) with an adaptive-weighting MLP. Each step: batch 64,
    t from a log-normal proposal, x_t = cos t x0 + sin t z; torch.func.jvp through the model with tangents
    (cos t sin t dx_t/dt / sigma_d, cos t sin t) gives F and dF/dt in one pass; the tangent is normalized and
    detached, loss = adaptive-weighted MSE against F^- - g. fp32, Adam lr 1e-4 with tangent warmup, grad clip
    1.0, EMA 0.999 via torch._foreach_lerp_, 6 steps with printed loss; then 1- and 2-step sampling with the
    EMA model under no_grad."""
    torch.manual_seed(0)
    batch_size, steps, sigma_d, p_mean, p_std = 64, 6, 0.5, -1.0, 1.4

    class TimeEmbed(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.register_buffer("freqs", torch.randn(dim // 2) * 16.0)
            self.mlp = nn.Sequential(nn.Linear(dim, dim * 4), nn.SiLU(), nn.Linear(dim * 4, dim * 4))

        def forward(self, t):
            arg = 2 * math.pi * t[:, None] * self.freqs[None, :]
            return self.mlp(torch.cat([torch.cos(arg), torch.sin(arg)], dim=1))

    class ResBlock(nn.Module):
        def __init__(self, cin, cout, emb_dim):
            super().__init__()
            self.norm1, self.conv1 = nn.GroupNorm(32, cin), nn.Conv2d(cin, cout, 3, padding=1)
            self.emb = nn.Linear(emb_dim, cout)
            self.norm2, self.conv2 = nn.GroupNorm(32, cout), nn.Conv2d(cout, cout, 3, padding=1)
            self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(self, x, emb):
            h = self.conv1(F.silu(self.norm1(x)))
            h = h + self.emb(emb)[:, :, None, None]
            h = self.conv2(F.silu(self.norm2(h)))
            return self.skip(x) + h

    class Attention(nn.Module):
        def __init__(self, ch, heads=4):
            super().__init__()
            self.heads = heads
            self.norm = nn.GroupNorm(32, ch)
            self.qkv = nn.Conv2d(ch, ch * 3, 1)
            self.proj = nn.Conv2d(ch, ch, 1)

        def forward(self, x):
            b, c, h, w = x.shape
            q, k, v = self.qkv(self.norm(x)).reshape(b, 3, self.heads, c // self.heads, h * w).unbind(1)
            attn = torch.softmax(q.transpose(-1, -2) @ k / math.sqrt(c // self.heads), dim=-1)
            out = (v @ attn.transpose(-1, -2)).reshape(b, c, h, w)
            return x + self.proj(out)

    class UNet(nn.Module):
        def __init__(self, chs=(128, 256, 256)):
            super().__init__()
            emb_dim = chs[0] * 4
            self.time = TimeEmbed(chs[0])
            self.inp = nn.Conv2d(3, chs[0], 3, padding=1)
            self.down = nn.ModuleList()
            skips, c = [chs[0]], chs[0]
            for i, ch in enumerate(chs):
                for _ in range(2):
                    self.down.append(ResBlock(c, ch, emb_dim))
                    c = ch
                    skips.append(c)
                if i < len(chs) - 1:
                    self.down.append(nn.Conv2d(c, c, 3, stride=2, padding=1))
                    skips.append(c)
            self.mid1, self.mid_attn, self.mid2 = ResBlock(c, c, emb_dim), Attention(c), ResBlock(c, c, emb_dim)
            self.up = nn.ModuleList()
            for i, ch in reversed(list(enumerate(chs))):
                for _ in range(3):
                    self.up.append(ResBlock(c + skips.pop(), ch, emb_dim))
                    c = ch
                if i > 0:
                    self.up.append(nn.Upsample(scale_factor=2, mode="nearest"))
            self.out = nn.Sequential(nn.GroupNorm(32, c), nn.SiLU(), nn.Conv2d(c, 3, 3, padding=1))

        def forward(self, x, t):
            emb = F.silu(self.time(t))
            h = self.inp(x)
            hs = [h]
            for layer in self.down:
                h = layer(h, emb) if isinstance(layer, ResBlock) else layer(h)
                hs.append(h)
            h = self.mid2(self.mid_attn(self.mid1(h, emb)), emb)
            for layer in self.up:
                if isinstance(layer, ResBlock):
                    h = layer(torch.cat([h, hs.pop()], dim=1), emb)
                else:
                    h = layer(h)
            return self.out(h)

    model = UNet().to(device)
    ema = [p.detach().clone() for p in model.parameters()]
    weight_net = nn.Sequential(nn.Linear(1, 128), nn.SiLU(), nn.Linear(128, 1)).to(device)
    params = list(model.parameters()) + list(weight_net.parameters())
    optimizer = torch.optim.Adam(params, lr=1e-4, betas=(0.9, 0.99))
    print("params", sum(p.numel() for p in model.parameters()))

    def make_images(n):
        low = torch.rand(n, 3, 8, 8) * 2 - 1
        return (F.interpolate(low, size=32, mode="bilinear", align_corners=False) * sigma_d / 0.5).to(device)

    model.train()
    for step in range(steps):
        x0 = make_images(batch_size)
        z = (torch.randn(batch_size, 3, 32, 32) * sigma_d).to(device)
        tau = torch.randn(batch_size) * p_std + p_mean
        t = torch.atan(torch.exp(tau) / sigma_d).to(device)
        cos_t, sin_t = torch.cos(t).view(-1, 1, 1, 1), torch.sin(t).view(-1, 1, 1, 1)
        x_t = cos_t * x0 + sin_t * z
        dxt_dt = cos_t * z - sin_t * x0
        v_x = cos_t * sin_t * dxt_dt / sigma_d
        v_t = (torch.cos(t) * torch.sin(t))
        F_theta, F_theta_grad = torch.func.jvp(lambda x, tt: model(x, tt), (x_t / sigma_d, t), (v_x, v_t))
        F_theta_grad = F_theta_grad.detach()
        F_theta_minus = F_theta.detach()
        r = min(1.0, (step + 1) / 4)  # tangent warmup
        g = -cos_t ** 2 * (sigma_d * F_theta_minus - dxt_dt) - r * (cos_t * sin_t * x_t + sigma_d * F_theta_grad)
        g_norm = g.flatten(1).norm(dim=1).view(-1, 1, 1, 1)
        g = g / (g_norm + 0.1)
        log_w = weight_net(t[:, None]).view(-1, 1, 1, 1)
        per_sample = (F_theta - F_theta_minus - g).pow(2).flatten(1).mean(1, keepdim=True).view(-1, 1, 1, 1)
        loss = (torch.exp(-log_w) * per_sample - log_w).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        with torch.no_grad():
            torch._foreach_lerp_(ema, [p.detach() for p in model.parameters()], 1 - 0.999)
        print(f"step {step} loss {loss.item():.4f} tangent norm {g_norm.mean().item():.3f}")

    model.eval()
    with torch.no_grad():
        for p, e in zip(model.parameters(), ema):
            p.copy_(e)
        t_max, t_mid = math.atan(80.0 / sigma_d), 1.1
        x = (torch.randn(64, 3, 32, 32) * sigma_d).to(device)
        one_step = math.cos(t_max) * x - math.sin(t_max) * sigma_d * model(x / sigma_d, torch.full((64,), t_max, device=device))
        x_mid = math.cos(t_mid) * one_step + math.sin(t_mid) * (torch.randn(64, 3, 32, 32) * sigma_d).to(device)
        two_step = (math.cos(t_mid) * x_mid
                    - math.sin(t_mid) * sigma_d * model(x_mid / sigma_d, torch.full((64,), t_mid, device=device)))
    print(f"1-step sample std {one_step.std().item():.3f} 2-step sample std {two_step.std().item():.3f}")


ISSUE35Y = {f.__name__: f for f in [
    hf_dac_codec_multiscale_stft_quantizer_dropout,
    hf_blip2_qformer_frozen_vit_opt_captioning_bf16,
    hf_reformer_lsh_reversible_byte_lm,
    hf_recurrent_gemma_griffin_rglru_bf16_generate,
    hf_musicgen_delay_pattern_codebooks_text_conditioned_bf16,
    hf_canine_character_classifier_fp16_scaler_accumulate,
    timm_dla34_augmix_jsd_split_bn_bf16_channels_last,
    tv_wide_resnet50_2_sam_two_pass_bf16,
    dann_gradient_reversal_resnet50_domain_adaptation_bf16,
    kfac_natural_gradient_mlp_module_hooks,
    topk_sparse_autoencoder_frozen_pythia_residual_auxk,
    mri_e2e_varnet_complex_kspace_fft2_ssim_checkpointed,
    wavenet_mulaw_dilated_causal_fp16_scaler_generate,
    trigflow_consistency_training_forward_mode_jvp,
]}
