"""Twenty-seventh held-out group of issue 35 (group ISSUE35AA): fourteen more programs of kinds no earlier group had (FNet Fourier token-mixing MLM in fp32 with warmup and clipping; CenterNet ResNet-18 with deconvolution heads, Gaussian heatmap focal loss and max-pool top-k decoding; Pegasus-X staggered block-local attention with global tokens summarizing 4096-token documents with accumulation then greedy generate; CodeGen prompt-masked code completion with gradient checkpointing then nucleus sampling; PatchTSMixer mix-channel forecaster with gated attention and OneCycle; PEFT AdaLoRA on a DeBERTa-v3 pair classifier with SVD rank allocation; timm ResNeSt-50d split attention with a Lookahead AdamW optimizer and cosine warmup; BYOL ResNet-50 with roi_align crop views, predictor and EMA target; hand-written fp16 master weights with dynamic loss scaling on a GPT; ResNet-50 with DCNv2 modulated deformable convolutions from torchvision.ops; float64 Burgers PINN with second derivatives, Adam then L-BFGS; Soft-MoE ViT with token-to-slot dispatch and combine; S4D complex diagonal state-space kernels with FFT convolution over 4096 bytes; NAFNet SimpleGate image denoiser with PSNR loss), written by a helper that read no part of the tracer, committed before they were recorded on a GPU (an H200) or compared with anything.

Each is a function of the device, recorded by scripts/record_trace_workloads.py (VRAMLAB_HOLDOUT=issue35aa).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def hf_fnet_fourier_token_mixing_mlm_fp32_warmup_clip(device):
    """FNetForMaskedLM from an FNetConfig (base: 12 layers, 768 wide, 3072 FFN, 32000 vocab, 512 positions,
    use_tpu_fourier_optimizations off so every layer mixes tokens with torch.fft.fftn over sequence and
    hidden and keeps the real part), in plain fp32 (cuFFT has no bf16 and fp16 needs powers of two),
    batch 16 sequences of 512 tokens with [CLS]/[SEP], 15% MLM masking done on the CPU with 80/10/10
    replacement, AdamW lr 1e-4 (no decay on biases and LayerNorm) with 2 linear warmup steps then linear
    decay over 10 steps, grad clipping 1.0, printed loss and masked-token accuracy, then eval on 2 batches
    of 16 under no_grad with masked accuracy and perplexity."""
    from transformers import FNetConfig, FNetForMaskedLM

    torch.manual_seed(0)
    batch_size, seq_len, steps, warmup = 16, 512, 10, 2
    config = FNetConfig(vocab_size=32000, hidden_size=768, num_hidden_layers=12, intermediate_size=3072,
                        max_position_embeddings=seq_len, use_tpu_fourier_optimizations=False)
    mask_token_id, first_normal_id = 6, 7
    model = FNetForMaskedLM(config).to(device)
    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=1e-4)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / warmup if s < warmup else max(0.0, (steps - s) / (steps - warmup)))

    def make_batch(n):
        input_ids = torch.randint(first_normal_id, config.vocab_size, (n, seq_len))
        input_ids[:, 0] = config.bos_token_id
        input_ids[:, -1] = config.eos_token_id
        labels = input_ids.clone()
        special = torch.zeros_like(input_ids, dtype=torch.bool)
        special[:, 0] = special[:, -1] = True
        prob = torch.full(input_ids.shape, 0.15).masked_fill(special, 0.0)
        masked = torch.bernoulli(prob).bool()
        labels[~masked] = -100
        replace = torch.bernoulli(torch.full(input_ids.shape, 0.8)).bool() & masked
        input_ids[replace] = mask_token_id
        rand = torch.bernoulli(torch.full(input_ids.shape, 0.5)).bool() & masked & ~replace
        input_ids[rand] = torch.randint(first_normal_id, config.vocab_size, (int(rand.sum()),))
        token_type_ids = torch.zeros_like(input_ids)
        return input_ids.to(device), token_type_ids.to(device), labels.to(device)

    model.train()
    for step in range(steps):
        input_ids, token_type_ids, labels = make_batch(batch_size)
        out = model(input_ids=input_ids, token_type_ids=token_type_ids, labels=labels)
        out.loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            sel = labels != -100
            acc = (out.logits.argmax(-1)[sel] == labels[sel]).float().mean().item()
        print(f"step {step} loss {out.loss.item():.4f} masked acc {acc:.4f} grad_norm {grad_norm.item():.2f}")

    model.eval()
    correct = total = 0
    nll = 0.0
    with torch.no_grad():
        for _ in range(2):
            input_ids, token_type_ids, labels = make_batch(batch_size)
            out = model(input_ids=input_ids, token_type_ids=token_type_ids, labels=labels)
            sel = labels != -100
            correct += (out.logits.argmax(-1)[sel] == labels[sel]).sum().item()
            total += sel.sum().item()
            nll += out.loss.item()
    print(f"eval masked acc {correct / total:.4f} ppl {math.exp(nll / 2):.1f}")


def centernet_resnet18_heatmap_focal_topk_decode_bf16_channels_last(device):
    """CenterNet (objects as points) on a torchvision resnet18 (weights=None) trunk with three
    conv3x3 + ConvTranspose2d(4, stride 2) upsampling stages (256/128/64 channels) to stride 4, and three
    heads (80-class center heatmap with bias -2.19, box size, sub-pixel offset), batch 32 images of
    512x512 in channels_last with bf16 autocast; per image 1-24 random boxes turned on the CPU into
    Gaussian heatmaps (CenterNet gaussian_radius, min overlap 0.7) plus gathered size/offset targets
    over up to 64 objects; penalty-reduced focal loss on the sigmoid heatmap in fp32 plus 0.1 x L1 size
    loss and L1 offset loss gathered at center indices; Adam lr 1.25e-4 with 2 warmup steps, 10 steps,
    printed losses; then eval on 2 batches of 16 under no_grad decoding with 3x3 max-pool NMS, top-100
    over class x position, gathered sizes/offsets into boxes, printed detections above 0.3."""
    import torchvision

    torch.manual_seed(0)
    batch_size, img, stride, num_classes, max_objs, steps, warmup = 32, 512, 4, 80, 64, 10, 2
    out_size = img // stride
    amp_dtype = torch.bfloat16
    dev_type = torch.device(device).type

    class CenterNet(nn.Module):
        def __init__(self):
            super().__init__()
            r = torchvision.models.resnet18(weights=None)
            self.backbone = nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool, r.layer1, r.layer2, r.layer3, r.layer4)
            layers, in_ch = [], 512
            for out_ch in (256, 128, 64):
                layers += [
                    nn.Conv2d(in_ch, out_ch, 3, padding=1, bias=False), nn.BatchNorm2d(out_ch), nn.ReLU(inplace=True),
                    nn.ConvTranspose2d(out_ch, out_ch, 4, stride=2, padding=1, bias=False),
                    nn.BatchNorm2d(out_ch), nn.ReLU(inplace=True),
                ]
                in_ch = out_ch
            self.deconv = nn.Sequential(*layers)

            def head(n_out):
                return nn.Sequential(nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(inplace=True), nn.Conv2d(64, n_out, 1))

            self.hm, self.wh, self.reg = head(num_classes), head(2), head(2)
            nn.init.constant_(self.hm[-1].bias, -2.19)

        def forward(self, x):
            f = self.deconv(self.backbone(x))
            return self.hm(f), self.wh(f), self.reg(f)

    def gaussian_radius(h, w, min_overlap=0.7):
        b1 = h + w
        c1 = w * h * (1 - min_overlap) / (1 + min_overlap)
        r1 = (b1 + math.sqrt(b1 ** 2 - 4 * c1)) / 2
        b2 = 2 * (h + w)
        c2 = (1 - min_overlap) * w * h
        r2 = (b2 + math.sqrt(b2 ** 2 - 16 * c2)) / 2
        a3 = 4 * min_overlap
        b3 = -2 * min_overlap * (h + w)
        c3 = (min_overlap - 1) * w * h
        r3 = (b3 + math.sqrt(b3 ** 2 - 4 * a3 * c3)) / 2
        return min(r1, r2, r3)

    def draw_gaussian(heatmap, cx, cy, radius):
        diameter = 2 * radius + 1
        sigma = diameter / 6
        ys = torch.arange(-radius, radius + 1, dtype=torch.float32).view(-1, 1)
        xs = torch.arange(-radius, radius + 1, dtype=torch.float32).view(1, -1)
        gaussian = torch.exp(-(xs * xs + ys * ys) / (2 * sigma * sigma))
        h, w = heatmap.shape
        left, right = min(cx, radius), min(w - cx, radius + 1)
        top, bottom = min(cy, radius), min(h - cy, radius + 1)
        region = heatmap[cy - top:cy + bottom, cx - left:cx + right]
        g = gaussian[radius - top:radius + bottom, radius - left:radius + right]
        torch.maximum(region, g, out=region)

    def make_batch(n):
        images = torch.randn(n, 3, img, img)
        hm = torch.zeros(n, num_classes, out_size, out_size)
        wh = torch.zeros(n, max_objs, 2)
        reg = torch.zeros(n, max_objs, 2)
        ind = torch.zeros(n, max_objs, dtype=torch.long)
        mask = torch.zeros(n, max_objs)
        for i in range(n):
            k = int(torch.randint(1, 25, ()))
            for j in range(k):
                cls = int(torch.randint(0, num_classes, ()))
                bw, bh = (torch.rand(2) * 44 + 4).tolist()
                cx, cy = (torch.rand(2) * (out_size - 1)).tolist()
                ix, iy = int(cx), int(cy)
                radius = max(0, int(gaussian_radius(math.ceil(bh), math.ceil(bw))))
                draw_gaussian(hm[i, cls], ix, iy, radius)
                wh[i, j] = torch.tensor([bw, bh])
                reg[i, j] = torch.tensor([cx - ix, cy - iy])
                ind[i, j] = iy * out_size + ix
                mask[i, j] = 1
        images = images.to(device).contiguous(memory_format=torch.channels_last)
        return images, hm.to(device), wh.to(device), reg.to(device), ind.to(device), mask.to(device)

    def gather_feat(out, ind):
        b, c = out.shape[:2]
        feat = out.permute(0, 2, 3, 1).reshape(b, -1, c)
        return feat.gather(1, ind.unsqueeze(2).expand(-1, -1, c))

    def focal_loss(logits, gt):
        pred = logits.float().sigmoid().clamp(1e-4, 1 - 1e-4)
        pos = gt.eq(1).float()
        neg_weights = torch.pow(1 - gt, 4)
        pos_loss = torch.log(pred) * torch.pow(1 - pred, 2) * pos
        neg_loss = torch.log(1 - pred) * torch.pow(pred, 2) * neg_weights * (1 - pos)
        return -(pos_loss.sum() + neg_loss.sum()) / pos.sum().clamp(min=1)

    def reg_l1(out, mask, ind, target):
        pred = gather_feat(out, ind).float()
        m = mask.unsqueeze(2).expand_as(pred)
        return F.l1_loss(pred * m, target * m, reduction="sum") / (m.sum() + 1e-4)

    model = CenterNet().to(device).to(memory_format=torch.channels_last)
    optimizer = torch.optim.Adam(model.parameters(), lr=1.25e-4)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup))

    model.train()
    for step in range(steps):
        images, hm_t, wh_t, reg_t, ind, mask = make_batch(batch_size)
        with torch.autocast(device_type=dev_type, dtype=amp_dtype):
            hm, wh, reg = model(images)
        hm_loss = focal_loss(hm, hm_t)
        wh_loss = reg_l1(wh, mask, ind, wh_t)
        off_loss = reg_l1(reg, mask, ind, reg_t)
        loss = hm_loss + 0.1 * wh_loss + off_loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        print(f"step {step} loss {loss.item():.4f} hm {hm_loss.item():.4f} wh {wh_loss.item():.4f} "
              f"off {off_loss.item():.4f}")

    model.eval()
    top_k = 100
    with torch.no_grad():
        for b in range(2):
            images = make_batch(16)[0]
            with torch.autocast(device_type=dev_type, dtype=amp_dtype):
                hm, wh, reg = model(images)
            heat = hm.float().sigmoid()
            hmax = F.max_pool2d(heat, 3, stride=1, padding=1)
            heat = heat * (hmax == heat).float()
            n, c, h, w = heat.shape
            scores, inds = heat.reshape(n, -1).topk(top_k)
            classes = inds // (h * w)
            pix = inds % (h * w)
            ys = (pix // w).float()
            xs = (pix % w).float()
            sizes = gather_feat(wh.float(), pix)
            offs = gather_feat(reg.float(), pix)
            xs = xs + offs[..., 0]
            ys = ys + offs[..., 1]
            boxes = torch.stack([xs - sizes[..., 0] / 2, ys - sizes[..., 1] / 2,
                                 xs + sizes[..., 0] / 2, ys + sizes[..., 1] / 2], dim=-1) * stride
            keep = scores > 0.3
            print(f"eval batch {b}: {keep.sum().item()} detections above 0.3, "
                  f"top score {scores.max().item():.3f}, classes seen {classes[keep].unique().numel()}, "
                  f"mean box width {(boxes[..., 2] - boxes[..., 0]).mean().item():.1f}")


def hf_pegasus_x_block_local_global_tokens_4096_summarization_accumulate_bf16_greedy(device):
    """PegasusXForConditionalGeneration from a PegasusXConfig (96103 vocab, d_model 768, 12 encoder and 12
    decoder layers, 12 heads, FFN 3072, staggered block-local encoder attention with block_size 512 and 128
    global tokens), source documents of 3000-4096 tokens padded to 4096 with an attention mask, summaries of
    up to 256 tokens with padding labels -100, micro-batch 2 with 2-step gradient accumulation (4 docs per
    update), bf16 autocast, AdamW lr 2e-4 with 1 warmup update then cosine over 5 updates, grad clipping 1.0,
    printed loss, then greedy generate of exactly 48 new tokens (min_new_tokens=max_new_tokens) for 2
    documents under eval."""
    from transformers import PegasusXConfig, PegasusXForConditionalGeneration, get_cosine_schedule_with_warmup

    torch.manual_seed(0)
    micro_batch, accum, src_len, tgt_len, updates = 2, 2, 4096, 256, 5
    config = PegasusXConfig(
        vocab_size=96103, d_model=768, encoder_layers=12, decoder_layers=12, encoder_attention_heads=12,
        decoder_attention_heads=12, encoder_ffn_dim=3072, decoder_ffn_dim=3072, block_size=512,
        num_global_tokens=128, stagger_local_blocks=True, max_position_embeddings=16384,
    )
    model = PegasusXForConditionalGeneration(config).to(device)
    model.config.use_cache = False
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=0.01)
    scheduler = get_cosine_schedule_with_warmup(optimizer, num_warmup_steps=1, num_training_steps=updates)
    dev_type = torch.device(device).type
    pad_id, eos_id = config.pad_token_id, config.eos_token_id

    def make_batch(n):
        input_ids = torch.full((n, src_len), pad_id, dtype=torch.long)
        attention_mask = torch.zeros(n, src_len, dtype=torch.long)
        labels = torch.full((n, tgt_len), -100, dtype=torch.long)
        for i in range(n):
            length = int(torch.randint(3000, src_len + 1, ()))
            input_ids[i, :length] = torch.randint(2, config.vocab_size, (length,))
            input_ids[i, length - 1] = eos_id
            attention_mask[i, :length] = 1
            tl = int(torch.randint(96, tgt_len + 1, ()))
            labels[i, :tl] = torch.randint(2, config.vocab_size, (tl,))
            labels[i, tl - 1] = eos_id
        return input_ids.to(device), attention_mask.to(device), labels.to(device)

    model.train()
    for update in range(updates):
        total = 0.0
        for _ in range(accum):
            input_ids, attention_mask, labels = make_batch(micro_batch)
            with torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
                loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
            (loss / accum).backward()
            total += loss.item() / accum
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"update {update} loss {total:.4f} grad_norm {grad_norm.item():.2f} lr {scheduler.get_last_lr()[0]:.2e}")

    model.eval()
    input_ids, attention_mask, _ = make_batch(2)
    with torch.no_grad(), torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
        summary = model.generate(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=48,
                                 min_new_tokens=48, num_beams=1, do_sample=False, use_cache=True)
    print(f"generated summaries of shape {tuple(summary.shape)}, first ids {summary[0, :8].tolist()}")


def hf_codegen_prompt_masked_code_completion_checkpointing_bf16_nucleus_generate(device):
    """CodeGenForCausalLM from a CodeGenConfig (350M-mono-like: 20 layers, 1024 wide, 16 heads, rotary_dim 32,
    51200 vocab, 2048 positions, untied head) with gradient checkpointing, batch 8 prompt+completion
    sequences right-padded to 1024 tokens (prompt 128-512 tokens, total 600-1024) whose prompt and padding
    labels are -100, bf16 autocast, AdamW lr 5e-5 betas (0.9, 0.95) wd 0.1 with 2 warmup steps then linear
    decay over 8 steps, grad clipping 1.0, printed loss and completion-token accuracy; then eval with
    checkpointing off: nucleus sampling (top_p 0.95, temperature 0.2) of exactly 64 new tokens for 4
    left-padded prompts of up to 256 tokens."""
    from transformers import CodeGenConfig, CodeGenForCausalLM, get_linear_schedule_with_warmup

    torch.manual_seed(0)
    batch_size, seq_len, steps = 8, 1024, 8
    config = CodeGenConfig(vocab_size=51200, n_positions=2048, n_ctx=2048, n_embd=1024, n_layer=20, n_head=16,
                           rotary_dim=32, tie_word_embeddings=False, use_cache=False)
    eos_id = config.eos_token_id
    model = CodeGenForCausalLM(config).to(device)
    model.gradient_checkpointing_enable()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=5e-5, betas=(0.9, 0.95))
    scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=2, num_training_steps=steps)
    dev_type = torch.device(device).type

    def make_batch(n):
        input_ids = torch.full((n, seq_len), eos_id, dtype=torch.long)
        attention_mask = torch.zeros(n, seq_len, dtype=torch.long)
        labels = torch.full((n, seq_len), -100, dtype=torch.long)
        for i in range(n):
            prompt_len = int(torch.randint(128, 513, ()))
            total = int(torch.randint(600, seq_len + 1, ()))
            input_ids[i, :total] = torch.randint(0, 50000, (total,))
            input_ids[i, total - 1] = eos_id
            attention_mask[i, :total] = 1
            labels[i, prompt_len:total] = input_ids[i, prompt_len:total]
        return input_ids.to(device), attention_mask.to(device), labels.to(device)

    model.train()
    for step in range(steps):
        input_ids, attention_mask, labels = make_batch(batch_size)
        with torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
            out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        out.loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            pred = out.logits[:, :-1].argmax(-1)
            tgt = labels[:, 1:]
            sel = tgt != -100
            acc = (pred[sel] == tgt[sel]).float().mean().item()
        print(f"step {step} loss {out.loss.item():.4f} completion acc {acc:.4f} grad_norm {grad_norm.item():.2f}")

    model.gradient_checkpointing_disable()
    model.eval()
    prompt_len = 256
    prompts = torch.full((4, prompt_len), eos_id, dtype=torch.long)
    prompt_mask = torch.zeros(4, prompt_len, dtype=torch.long)
    for i in range(4):
        length = int(torch.randint(100, prompt_len + 1, ()))
        prompts[i, prompt_len - length:] = torch.randint(0, 50000, (length,))
        prompt_mask[i, prompt_len - length:] = 1
    with torch.no_grad(), torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
        gen = model.generate(input_ids=prompts.to(device), attention_mask=prompt_mask.to(device), do_sample=True,
                             top_p=0.95, temperature=0.2, max_new_tokens=64, min_new_tokens=64,
                             pad_token_id=eos_id, use_cache=True)
    print(f"generated {tuple(gen.shape)}; completion of sample 0 starts {gen[0, prompt_len:prompt_len + 8].tolist()}")


def hf_patchtsmixer_mix_channel_gated_self_attn_forecast_onecycle(device):
    """PatchTSMixerForPrediction from a PatchTSMixerConfig (context 512, patch length 16 stride 8 -> 63
    patches, 321 input channels like the electricity data set, d_model 64, expansion 2, 4 mixer layers in
    mix_channel mode with gated attention and 4-head self-attention over patches, std scaling, MSE loss,
    horizon 96), synthetic daily+weekly seasonal series with trends and noise cut into random windows on
    the CPU, batch 8 windows, fp32, Adam lr 1e-3 with OneCycleLR over 10 steps, grad clipping 1.0,
    printed loss, then eval on 2 batches of 8 under no_grad with MSE and MAE of the forecast."""
    from transformers import PatchTSMixerConfig, PatchTSMixerForPrediction

    torch.manual_seed(0)
    batch_size, context, horizon, channels, steps = 8, 512, 96, 321, 10
    config = PatchTSMixerConfig(
        context_length=context, patch_length=16, patch_stride=8, num_input_channels=channels, d_model=64,
        expansion_factor=2, num_layers=4, dropout=0.2, mode="mix_channel", gated_attn=True, self_attn=True,
        self_attn_heads=4, scaling="std", loss="mse", prediction_length=horizon, head_dropout=0.2,
    )
    model = PatchTSMixerForPrediction(config).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-3, total_steps=steps, pct_start=0.3)

    total_len = 24 * 7 * 40
    t = torch.arange(total_len, dtype=torch.float32)
    level = torch.rand(channels, 1) * 50 + 10
    daily = torch.rand(channels, 1) * 10 * torch.sin(2 * math.pi * t / 24 + torch.rand(channels, 1) * 6.28)
    weekly = torch.rand(channels, 1) * 5 * torch.sin(2 * math.pi * t / (24 * 7) + torch.rand(channels, 1) * 6.28)
    trend = torch.randn(channels, 1) * 0.002 * t
    series = (level + daily + weekly + trend + torch.randn(channels, total_len)).T.contiguous()  # (T, C)
    split = int(total_len * 0.8)

    def make_batch(n, train=True):
        lo, hi = (0, split - context - horizon) if train else (split - context, total_len - context - horizon)
        starts = torch.randint(lo, hi, (n,)).tolist()
        windows = torch.stack([series[s:s + context + horizon] for s in starts])
        return windows[:, :context].to(device), windows[:, context:].to(device)

    model.train()
    for step in range(steps):
        past, future = make_batch(batch_size)
        out = model(past_values=past, future_values=future)
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        print(f"step {step} mse loss {out.loss.item():.4f} lr {scheduler.get_last_lr()[0]:.2e}")

    model.eval()
    mse = mae = 0.0
    with torch.no_grad():
        for _ in range(2):
            past, future = make_batch(batch_size, train=False)
            pred = model(past_values=past).prediction_outputs
            mse += F.mse_loss(pred, future).item() / 2
            mae += F.l1_loss(pred, future).item() / 2
    print(f"eval mse {mse:.4f} mae {mae:.4f}")


def peft_adalora_deberta_v3_pair_classifier_rank_allocation_bf16(device):
    """PEFT AdaLoRA (init_r 12 -> target_r 4, lora_alpha 32, tinit 2, tfinal 2, deltaT 2, total_step 12,
    orth_reg_weight 0.1, on query/key/value projections and both FFN/attention-output dense layers) over a
    DebertaV2ForSequenceClassification from a DebertaV2Config (deberta-v3-base-like: 12 layers, 768 wide,
    12 heads, 128100 vocab, relative attention with 256 log buckets, c2p+p2c, shared attention keys,
    layer-norm relative embeddings), 3 labels (NLI), batch 32 premise/hypothesis pairs padded to 256 with an
    attention mask, bf16 autocast, AdamW lr 5e-4 with 2 warmup steps, 12 steps, each followed by
    update_and_allocate (SVD-importance EMA, budget masking by kthvalue), printed loss, accuracy and
    remaining rank budget, then eval on 2 batches of 32 under no_grad with accuracy."""
    from peft import AdaLoraConfig, get_peft_model
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification

    torch.manual_seed(0)
    batch_size, seq_len, num_labels, steps = 32, 256, 3, 12
    config = DebertaV2Config(
        vocab_size=128100, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
        max_position_embeddings=512, relative_attention=True, position_buckets=256, norm_rel_ebd="layer_norm",
        share_att_key=True, pos_att_type=["p2c", "c2p"], position_biased_input=False, max_relative_positions=-1,
        type_vocab_size=0, layer_norm_eps=1e-7, num_labels=num_labels,
    )
    base = DebertaV2ForSequenceClassification(config)
    peft_config = AdaLoraConfig(
        task_type="SEQ_CLS", init_r=12, target_r=4, lora_alpha=32, lora_dropout=0.1, tinit=2, tfinal=2, deltaT=2,
        total_step=steps, orth_reg_weight=0.1,
        target_modules=["query_proj", "key_proj", "value_proj", "intermediate.dense", "output.dense"],
    )
    model = get_peft_model(base, peft_config).to(device)
    model.print_trainable_parameters()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=5e-4, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 2))
    dev_type = torch.device(device).type
    cls_id, sep_id, pad_id = 1, 2, 0

    def make_batch(n):
        input_ids = torch.full((n, seq_len), pad_id, dtype=torch.long)
        attention_mask = torch.zeros(n, seq_len, dtype=torch.long)
        for i in range(n):
            a = int(torch.randint(30, 150, ()))
            b = int(torch.randint(10, seq_len - a - 3, ()))
            ids = torch.cat([torch.tensor([cls_id]), torch.randint(3, config.vocab_size, (a,)), torch.tensor([sep_id]),
                             torch.randint(3, config.vocab_size, (b,)), torch.tensor([sep_id])])
            input_ids[i, :ids.numel()] = ids
            attention_mask[i, :ids.numel()] = 1
        labels = torch.randint(0, num_labels, (n,))
        return input_ids.to(device), attention_mask.to(device), labels.to(device)

    model.train()
    for step in range(steps):
        input_ids, attention_mask, labels = make_batch(batch_size)
        with torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
            out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        out.loss.backward()
        optimizer.step()
        scheduler.step()
        model.base_model.update_and_allocate(step)
        optimizer.zero_grad(set_to_none=True)
        acc = (out.logits.argmax(-1) == labels).float().mean().item()
        pattern = model.peft_config["default"].rank_pattern
        budget = sum(int(sum(v)) for v in pattern.values()) if pattern else None
        print(f"step {step} loss {out.loss.item():.4f} acc {acc:.3f} rank budget {budget}")

    model.eval()
    correct = 0
    with torch.no_grad():
        for _ in range(2):
            input_ids, attention_mask, labels = make_batch(batch_size)
            with torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
                logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
            correct += (logits.argmax(-1) == labels).sum().item()
    print(f"eval accuracy {correct / (2 * batch_size):.3f}")


def timm_resnest50d_lookahead_adamw_cosine_warmup_bf16_channels_last(device):
    """timm resnest50d (split-attention ResNeSt with radix 2, deep stem, avg-down; 1000 classes,
    drop_path 0.05) in channels_last, batch 64 at 224x224, bf16 autocast, optimizer from
    timm.optim.create_optimizer_v2(opt='lookahead_adamw', lr 1e-3, wd 0.05: AdamW wrapped in Lookahead
    with slow weights every 6 steps), timm CosineLRScheduler stepped per update (3 warmup updates from
    1e-5, 12 updates), timm LabelSmoothingCrossEntropy 0.1, grad clipping 5.0, printed loss, then eval on
    2 batches of 64 under no_grad with timm.utils.accuracy top-1/top-5."""
    import timm
    from timm.loss import LabelSmoothingCrossEntropy
    from timm.optim import create_optimizer_v2
    from timm.scheduler import CosineLRScheduler
    from timm.utils import accuracy

    torch.manual_seed(0)
    batch_size, img, num_classes, steps = 64, 224, 1000, 12
    model = timm.create_model("resnest50d", pretrained=False, num_classes=num_classes, drop_path_rate=0.05)
    model = model.to(device).to(memory_format=torch.channels_last)
    optimizer = create_optimizer_v2(model, opt="lookahead_adamw", lr=1e-3, weight_decay=0.05)
    scheduler = CosineLRScheduler(optimizer, t_initial=steps, warmup_t=3, warmup_lr_init=1e-5, lr_min=1e-6,
                                  t_in_epochs=False)
    criterion = LabelSmoothingCrossEntropy(smoothing=0.1)
    dev_type = torch.device(device).type

    def make_batch(n):
        images = torch.randn(n, 3, img, img).to(device).contiguous(memory_format=torch.channels_last)
        return images, torch.randint(0, num_classes, (n,)).to(device)

    model.train()
    for step in range(steps):
        images, targets = make_batch(batch_size)
        with torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
            output = model(images)
            loss = criterion(output, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        scheduler.step_update(num_updates=step + 1)
        print(f"step {step} loss {loss.item():.4f} lr {optimizer.param_groups[0]['lr']:.2e}")

    if hasattr(optimizer, "sync_lookahead"):
        optimizer.sync_lookahead()
    model.eval()
    top1 = top5 = 0.0
    with torch.no_grad():
        for _ in range(2):
            images, targets = make_batch(batch_size)
            with torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
                output = model(images)
            a1, a5 = accuracy(output.float(), targets, topk=(1, 5))
            top1 += a1.item() / 2
            top5 += a5.item() / 2
    print(f"eval top1 {top1:.2f} top5 {top5:.2f}")


def byol_resnet50_roi_align_views_predictor_ema_target_bf16(device):
    """BYOL self-supervised pretraining: online torchvision resnet50 (weights=None, fc removed) + projector
    MLP 2048-4096-256 with BatchNorm + predictor MLP 256-4096-256, target network a deepcopy of
    encoder+projector without grads updated by EMA (tau 0.99 rising to 1 by cosine) with buffers copied;
    each step 64 source images of 288x288 give two views made on the GPU with torchvision.ops.roi_align
    random-resized crops to 224 (scale 0.08-1, ratio 3/4-4/3, boxes drawn on the CPU), flips, brightness/
    contrast jitter and random grayscale; both views concatenated (128 images) through online and (no_grad)
    target nets in channels_last under bf16 autocast; symmetric 2-2cos loss in fp32; SGD momentum 0.9 lr 0.05
    wd 1.5e-6 with 2 warmup steps then cosine, 10 steps, printed loss and tau; then kNN (k 20, cosine,
    temperature-weighted) eval of the target encoder: a 256-image bank and 128 queries under no_grad."""
    import copy

    import torchvision
    from torchvision.ops import roi_align

    torch.manual_seed(0)
    batch_size, src, crop, steps, warmup, base_tau = 64, 288, 224, 10, 2, 0.99
    dev_type = torch.device(device).type
    mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225], device=device).view(1, 3, 1, 1)

    def mlp(i, h, o):
        return nn.Sequential(nn.Linear(i, h), nn.BatchNorm1d(h), nn.ReLU(inplace=True), nn.Linear(h, o))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = torchvision.models.resnet50(weights=None)
            self.encoder.fc = nn.Identity()
            self.projector = mlp(2048, 4096, 256)

        def forward(self, x):
            return self.projector(self.encoder(x))

    online = Net().to(device).to(memory_format=torch.channels_last)
    predictor = mlp(256, 4096, 256).to(device)
    target = copy.deepcopy(online)
    for p in target.parameters():
        p.requires_grad_(False)
    optimizer = torch.optim.SGD(list(online.parameters()) + list(predictor.parameters()), lr=0.05, momentum=0.9,
                                weight_decay=1.5e-6)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: (s + 1) / warmup if s < warmup else 0.5 * (1 + math.cos(math.pi * (s - warmup) / (steps - warmup))))

    def random_views(images):
        n = images.shape[0]
        area = torch.empty(n).uniform_(0.08, 1.0) * src * src
        ratio = torch.exp(torch.empty(n).uniform_(math.log(3 / 4), math.log(4 / 3)))
        w = (area * ratio).sqrt().clamp(max=src)
        h = (area / ratio).sqrt().clamp(max=src)
        x0 = torch.rand(n) * (src - w)
        y0 = torch.rand(n) * (src - h)
        boxes = torch.stack([torch.arange(n, dtype=torch.float32), x0, y0, x0 + w, y0 + h], dim=1).to(device)
        v = roi_align(images, boxes, output_size=crop, spatial_scale=1.0, sampling_ratio=2, aligned=True)
        flip = (torch.rand(n) < 0.5).to(device).view(n, 1, 1, 1)
        v = torch.where(flip, v.flip(3), v)
        jitter = (torch.rand(n) < 0.8).float().to(device).view(n, 1, 1, 1)
        brightness = (1 + (torch.rand(n) * 0.8 - 0.4)).to(device).view(n, 1, 1, 1)
        contrast = (1 + (torch.rand(n) * 0.8 - 0.4)).to(device).view(n, 1, 1, 1)
        jittered = v * brightness
        m = jittered.mean(dim=(1, 2, 3), keepdim=True)
        jittered = ((jittered - m) * contrast + m).clamp(0, 1)
        v = jitter * jittered + (1 - jitter) * v
        gray = (torch.rand(n) < 0.2).to(device).view(n, 1, 1, 1)
        v = torch.where(gray, v.mean(dim=1, keepdim=True).expand_as(v), v)
        return ((v - mean) / std).contiguous(memory_format=torch.channels_last)

    def byol_loss(p, z):
        return 2 - 2 * F.cosine_similarity(p, z.detach(), dim=-1)

    online.train()
    predictor.train()
    target.train()
    for step in range(steps):
        images = torch.rand(batch_size, 3, src, src).to(device)
        v1, v2 = random_views(images), random_views(images)
        views = torch.cat([v1, v2])
        with torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
            p = predictor(online(views))
            with torch.no_grad():
                z = target(views)
        p1, p2 = p.float().chunk(2)
        z1, z2 = z.float().chunk(2)
        loss = (byol_loss(p1, z2) + byol_loss(p2, z1)).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        tau = 1 - (1 - base_tau) * (math.cos(math.pi * step / steps) + 1) / 2
        with torch.no_grad():
            for po, pt in zip(online.parameters(), target.parameters()):
                pt.mul_(tau).add_(po.detach(), alpha=1 - tau)
            for bo, bt in zip(online.buffers(), target.buffers()):
                bt.copy_(bo)
        print(f"step {step} byol loss {loss.item():.4f} tau {tau:.4f}")

    encoder = target.encoder.eval()
    num_classes, k, temp = 10, 20, 0.07

    def embed(n):
        feats = []
        for i in range(0, n, 64):
            x = ((torch.rand(64, 3, crop, crop).to(device) - mean) / std).contiguous(memory_format=torch.channels_last)
            with torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
                feats.append(F.normalize(encoder(x).float(), dim=1))
        return torch.cat(feats)

    with torch.no_grad():
        bank = embed(256)
        bank_labels = torch.randint(0, num_classes, (256,)).to(device)
        queries = embed(128)
        query_labels = torch.randint(0, num_classes, (128,)).to(device)
        sim = queries @ bank.T
        top_sim, top_idx = sim.topk(k, dim=1)
        weights = (top_sim / temp).exp()
        votes = torch.zeros(128, num_classes, device=device).scatter_add_(1, bank_labels[top_idx], weights)
        acc = (votes.argmax(1) == query_labels).float().mean().item()
    print(f"kNN accuracy {acc:.3f}")


def hand_fp16_master_weights_dynamic_loss_scaling_gpt(device):
    """Old-style (apex O2-like) mixed precision written by hand: a GPT-2-small-like decoder (12 layers, 768
    wide, 12 heads, 1024 context, 50304 vocab, tied embeddings, causal SDPA) converted to fp16 with .half(),
    an fp32 master copy of every parameter and hand-written AdamW state (exp_avg, exp_avg_sq allocated up
    front; lr 6e-4, betas 0.9/0.95, wd 0.1 on matrices, 2 warmup steps then cosine), loss in fp32 from
    upcast fp16 logits, backward of loss x scale (2**16 initially, halved and step skipped on inf/nan grad
    norm, doubled after every 4 good steps), unscale + global clip to 1.0 into fp32, master update and copy
    back to fp16; batch 8 x 1024 tokens, 12 steps, printed loss, scale and grad norm; then eval on 2 batches
    under no_grad with perplexity."""
    torch.manual_seed(0)
    n_layer, n_embd, n_head, block, vocab = 12, 768, 12, 1024, 50304
    batch_size, steps, warmup = 8, 12, 2
    max_lr, wd, beta1, beta2, eps, clip = 6e-4, 0.1, 0.9, 0.95, 1e-8, 1.0

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(n_embd)
            self.qkv = nn.Linear(n_embd, 3 * n_embd)
            self.proj = nn.Linear(n_embd, n_embd)
            self.ln2 = nn.LayerNorm(n_embd)
            self.fc = nn.Linear(n_embd, 4 * n_embd)
            self.fc2 = nn.Linear(4 * n_embd, n_embd)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, n_head, c // n_head).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, n_embd)
            self.wpe = nn.Embedding(block, n_embd)
            self.blocks = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab, bias=False)
            self.lm_head.weight = self.wte.weight
            for name, p in self.named_parameters():
                if p.dim() >= 2:
                    std = 0.02 / math.sqrt(2 * n_layer) if name.endswith(("proj.weight", "fc2.weight")) else 0.02
                    nn.init.normal_(p, std=std)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)

        def forward(self, idx):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.blocks:
                x = blk(x)
            return self.lm_head(self.ln_f(x))

    model = GPT().to(device).half()
    params = list(model.parameters())
    master = [p.detach().float().clone() for p in params]
    exp_avg = [torch.zeros_like(m) for m in master]
    exp_avg_sq = [torch.zeros_like(m) for m in master]
    decays = [p.dim() >= 2 for p in params]
    loss_scale, growth_interval, good_steps, applied = 2.0 ** 16, 4, 0, 0

    def lr_at(s):
        if s < warmup:
            return max_lr * (s + 1) / warmup
        return max_lr * 0.5 * (1 + math.cos(math.pi * (s - warmup) / (steps - warmup)))

    def make_batch(n):
        data = torch.randint(0, 50257, (n, block + 1))
        return data[:, :-1].to(device), data[:, 1:].to(device)

    model.train()
    for step in range(steps):
        x, y = make_batch(batch_size)
        logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, vocab), y.reshape(-1))
        (loss * loss_scale).backward()
        grad_norm = torch.stack([p.grad.float().norm(2) for p in params]).norm(2)
        if not torch.isfinite(grad_norm).item():
            loss_scale /= 2
            good_steps = 0
            for p in params:
                p.grad = None
            print(f"step {step} overflow, skipping; loss scale now {loss_scale:.0f}")
            continue
        grad_norm = grad_norm.item() / loss_scale
        coef = min(1.0, clip / (grad_norm + 1e-6)) / loss_scale
        applied += 1
        lr = lr_at(step)
        bc1, bc2 = 1 - beta1 ** applied, 1 - beta2 ** applied
        with torch.no_grad():
            for i, p in enumerate(params):
                g = p.grad.float().mul_(coef)
                exp_avg[i].mul_(beta1).add_(g, alpha=1 - beta1)
                exp_avg_sq[i].mul_(beta2).addcmul_(g, g, value=1 - beta2)
                if decays[i]:
                    master[i].mul_(1 - lr * wd)
                denom = (exp_avg_sq[i] / bc2).sqrt_().add_(eps)
                master[i].addcdiv_(exp_avg[i], denom, value=-lr / bc1)
                p.copy_(master[i])
                p.grad = None
        good_steps += 1
        if good_steps % growth_interval == 0:
            loss_scale *= 2
        print(f"step {step} loss {loss.item():.4f} grad_norm {grad_norm:.3f} scale {loss_scale:.0f} lr {lr:.2e}")

    model.eval()
    total = 0.0
    with torch.no_grad():
        for _ in range(2):
            x, y = make_batch(batch_size)
            total += F.cross_entropy(model(x).float().view(-1, vocab), y.reshape(-1)).item() / 2
    print(f"eval loss {total:.4f} ppl {math.exp(total):.1f}")


def tv_resnet50_dcnv2_modulated_deformable_conv_stages_2_to_4_bf16(device):
    """torchvision resnet50 (weights=None, 1000 classes) whose 3x3 conv2 in every bottleneck of layer2-layer4
    (13 blocks) is replaced by a DCNv2 modulated deformable convolution: a zero-initialized 3x3 conv
    predicting 18 offsets + 9 mask logits (sigmoid) feeding torchvision.ops.DeformConv2d that copies the
    original weights; batch 64 at 224x224, bf16 autocast (deform_conv2d itself autocasts to fp32), SGD
    nesterov momentum 0.9 lr 0.025 wd 1e-4 with offset convs at 0.1x lr, 2 warmup steps then cosine, label
    smoothing 0.1, 8 steps, printed loss and mean |offset| of layer3's first block via a forward hook, then
    eval on 2 batches of 64 under no_grad with top-1/top-5."""
    import torchvision
    from torchvision.ops import DeformConv2d

    torch.manual_seed(0)
    batch_size, img, num_classes, steps, warmup = 64, 224, 1000, 8, 2
    dev_type = torch.device(device).type

    class ModulatedDeformConv(nn.Module):
        def __init__(self, conv):
            super().__init__()
            k = conv.kernel_size[0]
            self.conv_offset = nn.Conv2d(conv.in_channels, 3 * k * k, k, stride=conv.stride, padding=conv.padding,
                                         dilation=conv.dilation, bias=True)
            nn.init.zeros_(self.conv_offset.weight)
            nn.init.zeros_(self.conv_offset.bias)
            self.dcn = DeformConv2d(conv.in_channels, conv.out_channels, k, stride=conv.stride, padding=conv.padding,
                                    dilation=conv.dilation, groups=conv.groups, bias=False)
            with torch.no_grad():
                self.dcn.weight.copy_(conv.weight)

        def forward(self, x):
            o1, o2, m = self.conv_offset(x).chunk(3, dim=1)
            offset = torch.cat([o1, o2], dim=1)
            return self.dcn(x, offset, torch.sigmoid(m))

    model = torchvision.models.resnet50(weights=None, num_classes=num_classes)
    for layer in (model.layer2, model.layer3, model.layer4):
        for blk in layer:
            blk.conv2 = ModulatedDeformConv(blk.conv2)
    model = model.to(device)

    offset_stats = {}

    def hook(module, inputs, output):
        offset_stats["mean_abs"] = output.detach()[:, :18].abs().mean()

    model.layer3[0].conv2.conv_offset.register_forward_hook(hook)

    offset_params = [p for n, p in model.named_parameters() if "conv_offset" in n]
    decay = [p for n, p in model.named_parameters() if "conv_offset" not in n and p.dim() > 1]
    no_decay = [p for n, p in model.named_parameters() if "conv_offset" not in n and p.dim() <= 1]
    base_lr = 0.1 * batch_size / 256
    optimizer = torch.optim.SGD([
        {"params": decay, "weight_decay": 1e-4},
        {"params": no_decay, "weight_decay": 0.0},
        {"params": offset_params, "weight_decay": 0.0, "lr": base_lr * 0.1},
    ], lr=base_lr, momentum=0.9, nesterov=True)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: (s + 1) / warmup if s < warmup else 0.5 * (1 + math.cos(math.pi * (s - warmup) / (steps - warmup))))
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

    def make_batch(n):
        return torch.randn(n, 3, img, img).to(device), torch.randint(0, num_classes, (n,)).to(device)

    model.train()
    for step in range(steps):
        images, labels = make_batch(batch_size)
        with torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
            logits = model(images)
            loss = criterion(logits, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        print(f"step {step} loss {loss.item():.4f} layer3.0 mean |offset| {offset_stats['mean_abs'].item():.5f}")

    model.eval()
    top1 = top5 = 0
    with torch.no_grad():
        for _ in range(2):
            images, labels = make_batch(batch_size)
            with torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
                logits = model(images)
            top = logits.topk(5, dim=1).indices
            top1 += (top[:, 0] == labels).sum().item()
            top5 += (top == labels[:, None]).any(dim=1).sum().item()
    print(f"eval top1 {top1 / (2 * batch_size):.4f} top5 {top5 / (2 * batch_size):.4f}")


def pinn_burgers_float64_second_derivatives_adam_then_lbfgs(device):
    """Physics-informed neural network for the viscous Burgers equation u_t + u u_x = (0.01/pi) u_xx on
    x in [-1, 1], t in [0, 1] with u(0, x) = -sin(pi x) and u(t, +-1) = 0, entirely in float64: a tanh MLP
    2 -> 8 x 128 -> 1 (Xavier init, inputs scaled to [-1, 1]), 65536 collocation points drawn on the CPU
    (redrawn every 50 steps) whose residual uses torch.autograd.grad with create_graph=True for u_t, u_x
    and then u_xx, plus 2048 initial and 2048 boundary points; Adam lr 1e-3 for 150 steps (loss printed
    every 25), then torch.optim.LBFGS (lr 0.1, history 50, no line search, zero tolerances so each call runs
    its full 15 iterations) for 2 calls of a closure; then eval: the initial-condition error on a
    256 x 101 grid under no_grad and the mean |residual| on 16384 grid points under enable_grad nested in
    no_grad."""
    torch.manual_seed(0)
    dtype = torch.float64
    n_colloc, n_init, n_bound, width, depth = 65536, 2048, 2048, 128, 8
    adam_steps, nu = 150, 0.01 / math.pi

    layers = [nn.Linear(2, width), nn.Tanh()]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.Tanh()]
    layers.append(nn.Linear(width, 1))
    model = nn.Sequential(*layers)
    for m in model:
        if isinstance(m, nn.Linear):
            nn.init.xavier_normal_(m.weight)
            nn.init.zeros_(m.bias)
    model = model.to(device=device, dtype=dtype)
    lb = torch.tensor([0.0, -1.0], dtype=dtype, device=device)
    ub = torch.tensor([1.0, 1.0], dtype=dtype, device=device)

    def net(tx):
        return model(2.0 * (tx - lb) / (ub - lb) - 1.0)

    def sample_collocation():
        tx = torch.rand(n_colloc, 2, dtype=dtype) * torch.tensor([1.0, 2.0], dtype=dtype) + torch.tensor(
            [0.0, -1.0], dtype=dtype)
        return tx.to(device).requires_grad_(True)

    x0 = torch.rand(n_init, 1, dtype=dtype) * 2 - 1
    tx0 = torch.cat([torch.zeros_like(x0), x0], dim=1).to(device)
    u0 = -torch.sin(math.pi * x0).to(device)
    tb = torch.rand(n_bound, 1, dtype=dtype)
    xb = torch.where(torch.rand(n_bound, 1) < 0.5, -1.0, 1.0).to(dtype)
    txb = torch.cat([tb, xb], dim=1).to(device)

    def residual(tx):
        u = net(tx)
        du = torch.autograd.grad(u, tx, torch.ones_like(u), create_graph=True)[0]
        u_t, u_x = du[:, 0:1], du[:, 1:2]
        u_xx = torch.autograd.grad(u_x, tx, torch.ones_like(u_x), create_graph=True)[0][:, 1:2]
        return u_t + u * u_x - nu * u_xx

    def losses(tx_c):
        loss_f = residual(tx_c).pow(2).mean()
        loss_0 = (net(tx0) - u0).pow(2).mean()
        loss_b = net(txb).pow(2).mean()
        return loss_f + loss_0 + loss_b, loss_f, loss_0, loss_b

    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    tx_c = sample_collocation()
    for step in range(adam_steps):
        if step > 0 and step % 50 == 0:
            tx_c = sample_collocation()
        loss, loss_f, loss_0, loss_b = losses(tx_c)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 25 == 0:
            print(f"adam step {step} loss {loss.item():.3e} pde {loss_f.item():.3e} ic {loss_0.item():.3e} "
                  f"bc {loss_b.item():.3e}")

    lbfgs = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=15, history_size=50, tolerance_grad=0.0,
                              tolerance_change=0.0, line_search_fn=None)

    def closure():
        lbfgs.zero_grad()
        total = losses(tx_c)[0]
        total.backward()
        return total

    for it in range(2):
        loss = lbfgs.step(closure)
        print(f"lbfgs call {it} loss {loss.item():.3e}")

    with torch.no_grad():
        t = torch.linspace(0, 1, 101, dtype=dtype, device=device)
        x = torch.linspace(-1, 1, 256, dtype=dtype, device=device)
        grid = torch.stack(torch.meshgrid(t, x, indexing="ij"), dim=-1).reshape(-1, 2)
        u = net(grid).view(101, 256)
        ic_err = (u[0] + torch.sin(math.pi * x)).abs().max().item()
        with torch.enable_grad():
            pts = grid[::2][:16384].clone().requires_grad_(True)
            res = residual(pts).abs().mean().item()
    print(f"eval max initial-condition error {ic_err:.3e} mean |residual| {res:.3e}")


def soft_moe_vit_s16_token_slot_dispatch_combine_bf16(device):
    """ViT-S/16-like classifier (384 wide, 12 blocks, 6 heads, MLP 1536, global average pooling, 1000
    classes) whose last 6 MLPs are Soft MoE layers (Puigcerver et al.): 32 experts x 2 slots, dispatch
    weights softmax over the 196 tokens and combine weights softmax over the 64 slots from l2-normalized
    tokens and slot parameters with a learned scale, expert MLPs 384-1536-384 run as batched baddbmm over
    per-expert weight tensors; batch 192 at 224x224, bf16 autocast, AdamW lr 1e-3 wd 0.05 (none on 1-d
    params) with 2 warmup steps then cosine over 10 steps, grad clipping 1.0, printed loss and mean max
    combine weight, then eval on 2 batches of 192 under no_grad with top-1."""
    torch.manual_seed(0)
    batch_size, img, patch, dim, depth, heads, mlp_dim, num_classes = 192, 224, 16, 384, 12, 6, 1536, 1000
    num_experts, slots_per_expert, moe_from, steps, warmup = 32, 2, 6, 10, 2
    dev_type = torch.device(device).type

    class SoftMoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.num_slots = num_experts * slots_per_expert
            self.phi = nn.Parameter(torch.randn(dim, self.num_slots) * dim ** -0.5)
            self.scale = nn.Parameter(torch.ones(1))
            self.w1 = nn.Parameter(torch.randn(num_experts, dim, mlp_dim) * dim ** -0.5)
            self.b1 = nn.Parameter(torch.zeros(num_experts, 1, mlp_dim))
            self.w2 = nn.Parameter(torch.randn(num_experts, mlp_dim, dim) * mlp_dim ** -0.5)
            self.b2 = nn.Parameter(torch.zeros(num_experts, 1, dim))
            self.last_combine_max = None

        def forward(self, x):
            b, n, d = x.shape
            logits = torch.einsum("bnd,ds->bns", F.normalize(x, dim=-1), self.scale * F.normalize(self.phi, dim=0))
            dispatch = logits.softmax(dim=1)
            combine = logits.softmax(dim=2)
            slots = torch.einsum("bns,bnd->bsd", dispatch, x)
            slots = slots.view(b, num_experts, slots_per_expert, d).transpose(0, 1).reshape(num_experts, -1, d)
            h = F.gelu(torch.baddbmm(self.b1, slots, self.w1))
            y = torch.baddbmm(self.b2, h, self.w2)
            y = y.view(num_experts, b, slots_per_expert, d).transpose(0, 1).reshape(b, self.num_slots, d)
            self.last_combine_max = combine.detach().amax(dim=-1).mean()
            return torch.einsum("bns,bsd->bnd", combine, y)

    class Block(nn.Module):
        def __init__(self, moe):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim)
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)
            self.norm2 = nn.LayerNorm(dim)
            self.mlp = SoftMoE() if moe else nn.Sequential(nn.Linear(dim, mlp_dim), nn.GELU(), nn.Linear(mlp_dim, dim))

        def forward(self, x):
            b, n, c = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v)
            x = x + self.proj(y.transpose(1, 2).reshape(b, n, c))
            return x + self.mlp(self.norm2(x))

    class SoftMoEViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
            self.pos_embed = nn.Parameter(torch.randn(1, (img // patch) ** 2, dim) * 0.02)
            self.blocks = nn.ModuleList([Block(i >= moe_from) for i in range(depth)])
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, num_classes)

        def forward(self, x):
            x = self.patch_embed(x).flatten(2).transpose(1, 2) + self.pos_embed
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.norm(x).mean(dim=1))

    model = SoftMoEViT().to(device)
    moe_layers = [blk.mlp for blk in model.blocks if isinstance(blk.mlp, SoftMoE)]
    decay = [p for p in model.parameters() if p.dim() > 1]
    no_decay = [p for p in model.parameters() if p.dim() <= 1]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: (s + 1) / warmup if s < warmup else 0.5 * (1 + math.cos(math.pi * (s - warmup) / (steps - warmup))))

    def make_batch(n):
        return torch.randn(n, 3, img, img).to(device), torch.randint(0, num_classes, (n,)).to(device)

    model.train()
    for step in range(steps):
        images, labels = make_batch(batch_size)
        with torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        combine_max = torch.stack([m.last_combine_max for m in moe_layers]).mean().item()
        print(f"step {step} loss {loss.item():.4f} mean max combine weight {combine_max:.4f}")

    model.eval()
    correct = 0
    with torch.no_grad(), torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
        for _ in range(2):
            images, labels = make_batch(batch_size)
            correct += (model(images).argmax(1) == labels).sum().item()
    print(f"eval top1 {correct / (2 * batch_size):.4f}")


def s4d_complex_diagonal_ssm_vandermonde_fft_conv_byte_classifier(device):
    """S4D (diagonal state-space model, S4D-Lin init) byte-level long-text classifier like LRA Text: byte
    embedding to 256 channels, 6 pre-LayerNorm residual S4D blocks each computing its length-4096
    convolution kernel from complex parameters (C stored as a view_as_real parameter, A = -exp(log_A_real)
    + i*A_imag, ZOH discretization with a learned log_dt; Vandermonde exp(dtA * arange(L)) of shape
    256 x 32 x 4096 in complex64 contracted by einsum), then rfft/irfft convolution with n = 2L, D skip,
    GELU, dropout 0.1 and a 1x1 Conv1d + GLU output; mean pooling, 2 classes; batch 16 sequences of 4096
    bytes, fp32, AdamW with SSM parameters (log_dt, A, C) at lr 1e-3 and no weight decay and the rest at lr
    4e-3 wd 0.05, 1 warmup step then cosine over 10 steps, grad clipping 1.0, printed loss and accuracy,
    then eval on 2 batches of 16 under no_grad."""
    torch.manual_seed(0)
    batch_size, seq_len, d_model, d_state, n_layers, num_classes, steps = 16, 4096, 256, 64, 6, 2, 10

    class S4DKernel(nn.Module):
        def __init__(self, h, n, dt_min=0.001, dt_max=0.1):
            super().__init__()
            log_dt = torch.rand(h) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)
            c = torch.randn(h, n // 2, dtype=torch.cfloat)
            self.C = nn.Parameter(torch.view_as_real(c))
            self.log_dt = nn.Parameter(log_dt)
            self.log_A_real = nn.Parameter(torch.log(0.5 * torch.ones(h, n // 2)))
            self.A_imag = nn.Parameter(math.pi * torch.arange(n // 2, dtype=torch.float32).repeat(h, 1))

        def forward(self, length):
            dt = torch.exp(self.log_dt)
            c = torch.view_as_complex(self.C)
            a = -torch.exp(self.log_A_real) + 1j * self.A_imag
            dta = a * dt.unsqueeze(-1)
            k = dta.unsqueeze(-1) * torch.arange(length, device=a.device)
            c = c * (torch.exp(dta) - 1.0) / a
            return 2 * torch.einsum("hn,hnl->hl", c, torch.exp(k)).real

    class S4D(nn.Module):
        def __init__(self, h, n, dropout=0.1):
            super().__init__()
            self.D = nn.Parameter(torch.randn(h))
            self.kernel = S4DKernel(h, n)
            self.activation = nn.GELU()
            self.dropout = nn.Dropout(dropout)
            self.output_linear = nn.Sequential(nn.Conv1d(h, 2 * h, kernel_size=1), nn.GLU(dim=-2))

        def forward(self, u):
            length = u.size(-1)
            k = self.kernel(length)
            k_f = torch.fft.rfft(k, n=2 * length)
            u_f = torch.fft.rfft(u, n=2 * length)
            y = torch.fft.irfft(u_f * k_f, n=2 * length)[..., :length]
            y = y + u * self.D.unsqueeze(-1)
            return self.output_linear(self.dropout(self.activation(y)))

    class S4DClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(256, d_model)
            self.norms = nn.ModuleList([nn.LayerNorm(d_model) for _ in range(n_layers)])
            self.layers = nn.ModuleList([S4D(d_model, d_state) for _ in range(n_layers)])
            self.dropouts = nn.ModuleList([nn.Dropout(0.1) for _ in range(n_layers)])
            self.decoder = nn.Linear(d_model, num_classes)

        def forward(self, x):
            x = self.encoder(x).transpose(-1, -2)  # (B, H, L)
            for layer, norm, dropout in zip(self.layers, self.norms, self.dropouts):
                z = norm(x.transpose(-1, -2)).transpose(-1, -2)
                x = x + dropout(layer(z))
            return self.decoder(x.mean(dim=-1))

    model = S4DClassifier().to(device)
    ssm_names = ("log_dt", "log_A_real", "A_imag", "kernel.C")
    ssm = [p for n, p in model.named_parameters() if n.endswith(ssm_names)]
    rest = [p for n, p in model.named_parameters() if not n.endswith(ssm_names)]
    optimizer = torch.optim.AdamW([{"params": rest, "lr": 4e-3, "weight_decay": 0.05},
                                   {"params": ssm, "lr": 1e-3, "weight_decay": 0.0}])
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) if s < 1 else 0.5 * (1 + math.cos(math.pi * (s - 1) / (steps - 1))))

    def make_batch(n):
        return torch.randint(0, 256, (n, seq_len)).to(device), torch.randint(0, num_classes, (n,)).to(device)

    model.train()
    for step in range(steps):
        x, y = make_batch(batch_size)
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        acc = (logits.argmax(-1) == y).float().mean().item()
        print(f"step {step} loss {loss.item():.4f} acc {acc:.3f}")

    model.eval()
    correct = 0
    with torch.no_grad():
        for _ in range(2):
            x, y = make_batch(batch_size)
            correct += (model(x).argmax(-1) == y).sum().item()
    print(f"eval accuracy {correct / (2 * batch_size):.3f}")


def nafnet_width32_simplegate_denoising_psnr_loss(device):
    """NAFNet image denoiser as in the official SIDD config (width 32, encoder blocks [2, 2, 4, 8], 12 middle
    blocks, decoder blocks [2, 2, 2, 2]; NAFBlocks with a channel LayerNorm2d, 1x1 expand, 3x3 depthwise conv,
    SimpleGate, simplified channel attention, gated FFN and learned beta/gamma residual scales; PixelShuffle
    upsampling), synthetic smooth images (bicubic-upsampled low-res noise plus random rectangles) with
    Gaussian noise of per-image sigma 5-50/255, batch 8 crops of 256x256 in fp32, PSNR loss, AdamW lr 1e-3
    betas (0.9, 0.9) wd 0, CosineAnnealingLR over 10 steps, grad clipping 0.01, printed loss and PSNR;
    then eval on 2 full 512x512 images under no_grad with PSNR."""
    torch.manual_seed(0)
    batch_size, crop, steps, width = 8, 256, 10, 32
    enc_blk_nums, middle_blk_num, dec_blk_nums = [2, 2, 4, 8], 12, [2, 2, 2, 2]

    class LayerNorm2d(nn.Module):
        def __init__(self, c, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(c))
            self.bias = nn.Parameter(torch.zeros(c))
            self.eps = eps

        def forward(self, x):
            mu = x.mean(1, keepdim=True)
            var = (x - mu).pow(2).mean(1, keepdim=True)
            y = (x - mu) / (var + self.eps).sqrt()
            return self.weight.view(1, -1, 1, 1) * y + self.bias.view(1, -1, 1, 1)

    class SimpleGate(nn.Module):
        def forward(self, x):
            x1, x2 = x.chunk(2, dim=1)
            return x1 * x2

    class NAFBlock(nn.Module):
        def __init__(self, c, dw_expand=2, ffn_expand=2):
            super().__init__()
            dw = c * dw_expand
            self.conv1 = nn.Conv2d(c, dw, 1)
            self.conv2 = nn.Conv2d(dw, dw, 3, padding=1, groups=dw)
            self.conv3 = nn.Conv2d(dw // 2, c, 1)
            self.sca = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(dw // 2, dw // 2, 1))
            self.sg = SimpleGate()
            ffn = ffn_expand * c
            self.conv4 = nn.Conv2d(c, ffn, 1)
            self.conv5 = nn.Conv2d(ffn // 2, c, 1)
            self.norm1 = LayerNorm2d(c)
            self.norm2 = LayerNorm2d(c)
            self.beta = nn.Parameter(torch.zeros(1, c, 1, 1))
            self.gamma = nn.Parameter(torch.zeros(1, c, 1, 1))

        def forward(self, inp):
            x = self.sg(self.conv2(self.conv1(self.norm1(inp))))
            x = self.conv3(x * self.sca(x))
            y = inp + x * self.beta
            x = self.conv5(self.sg(self.conv4(self.norm2(y))))
            return y + x * self.gamma

    class NAFNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.intro = nn.Conv2d(3, width, 3, padding=1)
            self.ending = nn.Conv2d(width, 3, 3, padding=1)
            self.encoders, self.downs, self.ups, self.decoders = (nn.ModuleList() for _ in range(4))
            chan = width
            for num in enc_blk_nums:
                self.encoders.append(nn.Sequential(*[NAFBlock(chan) for _ in range(num)]))
                self.downs.append(nn.Conv2d(chan, 2 * chan, 2, 2))
                chan *= 2
            self.middle = nn.Sequential(*[NAFBlock(chan) for _ in range(middle_blk_num)])
            for num in dec_blk_nums:
                self.ups.append(nn.Sequential(nn.Conv2d(chan, chan * 2, 1, bias=False), nn.PixelShuffle(2)))
                chan //= 2
                self.decoders.append(nn.Sequential(*[NAFBlock(chan) for _ in range(num)]))

        def forward(self, inp):
            x = self.intro(inp)
            skips = []
            for encoder, down in zip(self.encoders, self.downs):
                x = encoder(x)
                skips.append(x)
                x = down(x)
            x = self.middle(x)
            for decoder, up, skip in zip(self.decoders, self.ups, skips[::-1]):
                x = decoder(up(x) + skip)
            return self.ending(x) + inp

    def psnr(pred, target):
        mse = (pred - target).pow(2).mean(dim=(1, 2, 3))
        return 10 * torch.log10(1.0 / (mse + 1e-8))

    def make_batch(n, size):
        low = torch.rand(n, 3, size // 16, size // 16)
        clean = F.interpolate(low, size=(size, size), mode="bicubic", align_corners=False)
        for i in range(n):
            for _ in range(6):
                x0, y0 = torch.randint(0, size - 32, (2,)).tolist()
                w, h = torch.randint(16, size // 3, (2,)).tolist()
                clean[i, :, y0:y0 + h, x0:x0 + w] = torch.rand(3, 1, 1)
        clean = clean.clamp(0, 1)
        sigma = (torch.rand(n, 1, 1, 1) * 45 + 5) / 255
        noisy = clean + torch.randn_like(clean) * sigma
        return noisy.to(device), clean.to(device)

    model = NAFNet().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.9), weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps, eta_min=1e-7)

    model.train()
    for step in range(steps):
        noisy, clean = make_batch(batch_size, crop)
        restored = model(noisy)
        p = psnr(restored, clean)
        loss = -p.mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.01)
        optimizer.step()
        scheduler.step()
        print(f"step {step} psnr loss {loss.item():.4f} input psnr {psnr(noisy, clean).mean().item():.2f}")

    model.eval()
    with torch.no_grad():
        noisy, clean = make_batch(2, 512)
        restored = model(noisy).clamp(0, 1)
        print(f"eval psnr noisy {psnr(noisy, clean).mean().item():.2f} restored {psnr(restored, clean).mean().item():.2f}")


ISSUE35AA = {f.__name__: f for f in [
    hf_fnet_fourier_token_mixing_mlm_fp32_warmup_clip,
    centernet_resnet18_heatmap_focal_topk_decode_bf16_channels_last,
    hf_pegasus_x_block_local_global_tokens_4096_summarization_accumulate_bf16_greedy,
    hf_codegen_prompt_masked_code_completion_checkpointing_bf16_nucleus_generate,
    hf_patchtsmixer_mix_channel_gated_self_attn_forecast_onecycle,
    peft_adalora_deberta_v3_pair_classifier_rank_allocation_bf16,
    timm_resnest50d_lookahead_adamw_cosine_warmup_bf16_channels_last,
    byol_resnet50_roi_align_views_predictor_ema_target_bf16,
    hand_fp16_master_weights_dynamic_loss_scaling_gpt,
    tv_resnet50_dcnv2_modulated_deformable_conv_stages_2_to_4_bf16,
    pinn_burgers_float64_second_derivatives_adam_then_lbfgs,
    soft_moe_vit_s16_token_slot_dispatch_combine_bf16,
    s4d_complex_diagonal_ssm_vandermonde_fft_conv_byte_classifier,
    nafnet_width32_simplegate_denoising_psnr_loss,
]}
