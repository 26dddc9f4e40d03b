"""Twentieth held-out group of issue 35 (group ISSUE35T): sixteen more programs of kinds no earlier group had (a Hugging Face Switch Transformers sparse-MoE seq2seq model trained with router losses under bf16 and then generating, a Hugging Face XLNet permutation language model trained with perm_mask/target_mapping under fp16 with a GradScaler, a Hugging Face LayoutLMv3 document token classifier on text, word boxes and page images under bf16, a Hugging Face Pegasus summariser trained with a hand-computed label-smoothed loss and then beam-searching, a Hugging Face PatchTST multivariate time-series forecaster in fp32, a Hugging Face SAM whose mask decoder is fine-tuned on point prompts over a frozen ViT-B image encoder, a torchvision FCOS ResNet-50-FPN detector trained then run for detection, a torchvision S3D video classifier under bf16, a timm EVA-02 small ViT fine-tuned with layer-wise learning-rate decay under bf16, a timm Sequencer2D-S BiLSTM vision model under fp16 with a GradScaler, a hand-written HiFi-GAN vocoder with multi-period and multi-scale discriminators, a hand-written DPO step with a policy LM and a frozen bf16 reference copy, hand-written greedy speculative decoding with a 1.4B target and a small draft sharing preallocated KV caches, global magnitude pruning with torch.nn.utils.prune on a VGG-style CNN, hand-written Barlow Twins with an 8192-wide projector and a LARS optimizer under fp16, and a hand-written Slot Attention autoencoder with a spatial-broadcast decoder), written by a helper that read no part of the tracer, committed before they were recorded on a GPU (an H200) or compared with anything.

Each is a function of the device, recorded by scripts/record_trace_workloads.py (VRAMLAB_HOLDOUT=issue35t).
"""
import copy
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def hf_switch_transformers_moe_seq2seq_bf16(device):
    """Hugging Face SwitchTransformersForConditionalGeneration built from a config (no download): d_model 768,
    12 heads, d_ff 2048, 6 encoder + 6 decoder layers of which 3 + 3 are sparse MoE layers with 8 top-1 experts
    each (about 237M parameters, fp32 weights), vocabulary 32128.  Three AdamW steps (lr 3e-4, cosine schedule with
    one warmup step) under bf16 autocast on batches of 16 source sequences of 512 tokens (padded, attention mask)
    and 128-token targets (padding labels -100).  The Switch router z-loss and load-balancing loss (coefficients
    1e-3) are computed by hand from the router logits captured with forward hooks on every router's classifier
    (the library's output_router_logits path fails in this transformers version); gradient clipping at 1.0; then
    greedy model.generate of exactly 32 new tokens for 4 sources under inference_mode."""
    from transformers import (SwitchTransformersConfig, SwitchTransformersForConditionalGeneration,
                              get_cosine_schedule_with_warmup)
    torch.manual_seed(0)
    config = SwitchTransformersConfig(
        vocab_size=32128, d_model=768, d_kv=64, d_ff=2048, num_heads=12,
        num_layers=6, num_decoder_layers=6, num_sparse_encoder_layers=3, num_sparse_decoder_layers=3,
        num_experts=8, expert_capacity=1280, router_z_loss_coef=0.001, router_aux_loss_coef=0.001,
        dropout_rate=0.1, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
    )
    model = SwitchTransformersForConditionalGeneration(config).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"switch-transformers params: {n_params / 1e6:.1f}M")

    batch, src_len, tgt_len, steps = 16, 512, 128, 3
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    scheduler = get_cosine_schedule_with_warmup(optimizer, num_warmup_steps=1, num_training_steps=steps)
    src_lengths = torch.tensor([src_len - 24 * (i % 6) for i in range(batch)])
    tgt_lengths = torch.tensor([tgt_len - 10 * (i % 4) for i in range(batch)])

    router_logits = []

    def keep_router_logits(module, inputs, output):
        if module.training:
            router_logits.append(output)

    for name, module in model.named_modules():
        if name.endswith("router.classifier"):
            module.register_forward_hook(keep_router_logits)

    def router_losses():
        z_loss, aux_loss = 0.0, 0.0
        for logits in router_logits:  # (tokens, experts) in fp32
            z_loss = z_loss + torch.logsumexp(logits, dim=-1).pow(2).mean()
            probs = logits.softmax(dim=-1)
            frac = F.one_hot(probs.argmax(-1), config.num_experts).float().mean(0)
            aux_loss = aux_loss + config.num_experts * (frac * probs.mean(0)).sum()
        n = len(router_logits)
        router_logits.clear()
        return z_loss / n, aux_loss / n

    model.train()
    for step in range(steps):
        input_ids = torch.randint(2, config.vocab_size, (batch, src_len))
        attention_mask = (torch.arange(src_len)[None, :] < src_lengths[:, None]).long()
        input_ids = input_ids.masked_fill(attention_mask == 0, config.pad_token_id)
        labels = torch.randint(2, config.vocab_size, (batch, tgt_len))
        labels[torch.arange(batch), tgt_lengths - 1] = config.eos_token_id
        labels = labels.masked_fill(torch.arange(tgt_len)[None, :] >= tgt_lengths[:, None], -100)
        input_ids, attention_mask, labels = input_ids.to(device), attention_mask.to(device), labels.to(device)

        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        z_loss, aux_loss = router_losses()
        loss = out.loss + config.router_z_loss_coef * z_loss + config.router_aux_loss_coef * aux_loss
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        print(f"step {step} loss {loss.item():.4f} lm {out.loss.item():.4f} z {z_loss.item():.3f} "
              f"aux {aux_loss.item():.3f} grad_norm {grad_norm.item():.2f}")

    model.eval()
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
        generated = model.generate(input_ids=input_ids[:4], attention_mask=attention_mask[:4],
                                   max_new_tokens=32, min_new_tokens=32, do_sample=False, num_beams=1)
    print(f"generated shape {tuple(generated.shape)}")


def hf_xlnet_permutation_lm_fp16_scaler(device):
    """Hugging Face XLNetLMHeadModel built from a config (no download): d_model 768, 12 layers, 12 heads, d_inner
    3072, vocabulary 32000, bidirectional relative attention, no memory (about 117M parameters, fp32 weights).
    Permutation language modelling as in XLNet pre-training: for each of 8 sequences of 512 tokens, 85 target
    positions are chosen, a random factorisation order over the targets is turned into a perm_mask of shape
    (8, 512, 512) and a one-hot target_mapping of shape (8, 85, 512), and labels are the 85 target tokens.  Three
    AdamW steps (lr 1e-4, linear warmup/decay) under fp16 autocast with a GradScaler, unscale + gradient clipping at
    1.0; then an evaluation pass under inference_mode that reports target-token accuracy."""
    from transformers import XLNetConfig, XLNetLMHeadModel, get_linear_schedule_with_warmup
    torch.manual_seed(0)
    config = XLNetConfig(vocab_size=32000, d_model=768, n_layer=12, n_head=12, d_inner=3072,
                         ff_activation="gelu", attn_type="bi", mem_len=None, dropout=0.1)
    model = XLNetLMHeadModel(config).to(device)
    print(f"xlnet params: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M")

    batch, seq_len, num_predict, steps = 8, 512, 85, 3

    def make_batch():
        input_ids = torch.randint(5, config.vocab_size, (batch, seq_len))
        # choose the same number of targets in every row so that shapes are fixed
        targets = torch.stack([torch.randperm(seq_len)[:num_predict].sort().values for _ in range(batch)])
        is_target = torch.zeros(batch, seq_len, dtype=torch.bool)
        is_target.scatter_(1, targets, True)
        # factorisation order among targets: context tokens have rank -1 and never see targets
        rank = torch.full((batch, seq_len), -1, dtype=torch.long)
        order = torch.stack([torch.randperm(num_predict) for _ in range(batch)])
        rank.scatter_(1, targets, order)
        perm_mask = (is_target[:, None, :] & (rank[:, None, :] >= rank[:, :, None])).float()
        target_mapping = torch.zeros(batch, num_predict, seq_len)
        target_mapping.scatter_(2, targets[:, :, None], 1.0)
        labels = torch.gather(input_ids, 1, targets)
        return (input_ids.to(device), perm_mask.to(device), target_mapping.to(device), labels.to(device))

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, eps=1e-6)
    scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=1, num_training_steps=steps)
    scaler = torch.amp.GradScaler("cuda")
    model.train()
    for step in range(steps):
        input_ids, perm_mask, target_mapping, labels = make_batch()
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16):
            out = model(input_ids=input_ids, perm_mask=perm_mask, target_mapping=target_mapping, labels=labels)
        scaler.scale(out.loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        print(f"step {step} plm loss {out.loss.item():.4f} scale {scaler.get_scale():.0f}")

    model.eval()
    input_ids, perm_mask, target_mapping, labels = make_batch()
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.float16):
        logits = model(input_ids=input_ids, perm_mask=perm_mask, target_mapping=target_mapping).logits
    acc = (logits.argmax(-1) == labels).float().mean()
    print(f"eval target accuracy {acc.item():.4f}")


def hf_layoutlmv3_token_classification_bf16(device):
    """Hugging Face LayoutLMv3ForTokenClassification built from a config (no download): base size (hidden 768,
    12 layers, 12 heads, vocabulary 50265, max_position_embeddings 514), 1-D and 2-D relative attention biases, a
    16x16 patch embedding of 224x224 page images (197 visual tokens appended to the text), 7 labels (about 125M
    parameters).  Document NER fine-tuning on synthetic pages: batch 8 of 512 word-piece tokens with word boxes in
    0..1000 coordinates, per-document padding lengths, labels -100 on padding.  Three AdamW steps (lr 2e-5, linear
    warmup) under bf16 autocast with clipping at 1.0; then a torch.no_grad evaluation of token accuracy."""
    from transformers import LayoutLMv3Config, LayoutLMv3ForTokenClassification, get_linear_schedule_with_warmup
    torch.manual_seed(0)
    config = LayoutLMv3Config(max_position_embeddings=514, num_labels=7)
    model = LayoutLMv3ForTokenClassification(config).to(device)
    print(f"layoutlmv3 params: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M")

    batch, seq_len, steps = 8, 512, 3
    lengths = torch.tensor([512, 430, 512, 377, 298, 512, 460, 341])

    def make_batch():
        input_ids = torch.randint(3, config.vocab_size, (batch, seq_len))
        input_ids[:, 0] = 0  # <s>
        mask = torch.arange(seq_len)[None, :] < lengths[:, None]
        input_ids = input_ids.masked_fill(~mask, config.pad_token_id)
        x0 = torch.randint(0, 900, (batch, seq_len))
        y0 = torch.randint(0, 960, (batch, seq_len))
        w = torch.randint(10, 100, (batch, seq_len))
        h = torch.randint(8, 40, (batch, seq_len))
        bbox = torch.stack([x0, y0, (x0 + w).clamp(max=1000), (y0 + h).clamp(max=1000)], dim=-1)
        bbox = bbox.masked_fill(~mask[..., None], 0)
        pixel_values = torch.randn(batch, 3, 224, 224)
        labels = torch.randint(0, config.num_labels, (batch, seq_len)).masked_fill(~mask, -100)
        return {"input_ids": input_ids.to(device), "attention_mask": mask.long().to(device),
                "bbox": bbox.to(device), "pixel_values": pixel_values.to(device), "labels": labels.to(device)}

    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)
    scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=1, num_training_steps=steps)
    model.train()
    for step in range(steps):
        inputs = make_batch()
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(**inputs)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        print(f"step {step} loss {out.loss.item():.4f} lr {scheduler.get_last_lr()[0]:.2e}")

    model.eval()
    inputs = make_batch()
    labels = inputs.pop("labels")
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(**inputs).logits
    valid = labels != -100
    acc = (logits.argmax(-1)[valid] == labels[valid]).float().mean()
    print(f"eval token accuracy {acc.item():.4f}")


def hf_pegasus_summarization_beam_generate_bf16(device):
    """Hugging Face PegasusForConditionalGeneration built from a config (no download): d_model 768, 6 encoder +
    6 decoder layers, 12 heads, FFN 3072, vocabulary 96103 with tied embeddings, sinusoidal positions up to 1024
    (about 175M parameters, fp32 weights).  Summarisation fine-tuning: batch 8 of 1024-token documents (padded,
    attention mask) with 128-token summaries; decoder inputs made with shift_tokens_right; the loss is computed by
    hand from the logits with label smoothing 0.1.  Three AdamW steps (lr 5e-5, linear warmup) under bf16 autocast
    with clipping at 1.0; then beam search (4 beams) generating exactly 64 new tokens for 4 documents under
    inference_mode."""
    from transformers import PegasusConfig, PegasusForConditionalGeneration, get_linear_schedule_with_warmup
    from transformers.models.pegasus.modeling_pegasus import shift_tokens_right
    torch.manual_seed(0)
    config = PegasusConfig(vocab_size=96103, d_model=768, encoder_layers=6, decoder_layers=6,
                           encoder_attention_heads=12, decoder_attention_heads=12, encoder_ffn_dim=3072,
                           decoder_ffn_dim=3072, max_position_embeddings=1024, pad_token_id=0, eos_token_id=1,
                           decoder_start_token_id=0, forced_eos_token_id=1)
    model = PegasusForConditionalGeneration(config).to(device)
    print(f"pegasus params: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M")

    batch, src_len, tgt_len, steps = 8, 1024, 128, 3
    doc_lengths = torch.tensor([1024, 1024, 870, 1024, 655, 990, 1024, 512])
    sum_lengths = torch.tensor([128, 97, 128, 64, 110, 128, 83, 120])

    def make_batch():
        src_mask = torch.arange(src_len)[None, :] < doc_lengths[:, None]
        input_ids = torch.randint(2, config.vocab_size, (batch, src_len)).masked_fill(~src_mask, 0)
        input_ids[torch.arange(batch), doc_lengths - 1] = 1
        tgt_mask = torch.arange(tgt_len)[None, :] < sum_lengths[:, None]
        labels = torch.randint(2, config.vocab_size, (batch, tgt_len))
        labels[torch.arange(batch), sum_lengths - 1] = 1
        labels = labels.masked_fill(~tgt_mask, -100)
        return input_ids.to(device), src_mask.long().to(device), labels.to(device)

    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01)
    scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=1, num_training_steps=steps)
    model.train()
    for step in range(steps):
        input_ids, attention_mask, labels = make_batch()
        decoder_input_ids = shift_tokens_right(labels, config.pad_token_id, config.decoder_start_token_id)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=input_ids, attention_mask=attention_mask,
                           decoder_input_ids=decoder_input_ids).logits
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), labels.view(-1),
                               ignore_index=-100, label_smoothing=0.1)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        print(f"step {step} loss {loss.item():.4f}")

    model.eval()
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
        summaries = model.generate(input_ids=input_ids[:4], attention_mask=attention_mask[:4], num_beams=4,
                                   max_new_tokens=64, min_new_tokens=64, length_penalty=0.8)
    print(f"summaries shape {tuple(summaries.shape)}")


def hf_patchtst_multivariate_forecasting(device):
    """Hugging Face PatchTSTForPrediction built from a config (no download): 21 input channels (channel-
    independent), context 512, prediction horizon 96, patches of length 16 with stride 8 (63 patches), d_model 128,
    16 heads, 3 layers, FFN 256, batch norm, dropout 0.2, std scaling, MSE loss (about 1.2M parameters, fp32).
    Data: a synthetic 21-channel series of 20000 steps (sums of sines plus noise) built on the CPU, windows cut at
    random starts into batches of 128 (past 512, future 96) and moved to the device.  Four AdamW steps (lr 1e-3,
    OneCycleLR) in fp32 with clipping at 1.0; then an inference_mode evaluation of MSE/MAE on 256 windows."""
    from transformers import PatchTSTConfig, PatchTSTForPrediction
    torch.manual_seed(0)
    channels, context, horizon = 21, 512, 96
    config = PatchTSTConfig(num_input_channels=channels, context_length=context, prediction_length=horizon,
                            patch_length=16, patch_stride=8, d_model=128, num_attention_heads=16,
                            num_hidden_layers=3, ffn_dim=256, dropout=0.2, attention_dropout=0.0,
                            ff_dropout=0.2, head_dropout=0.2, scaling="std", loss="mse", pooling_type=None)
    model = PatchTSTForPrediction(config).to(device)
    print(f"patchtst params: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M")

    total = 20000
    t = torch.arange(total, dtype=torch.float32)[:, None]
    periods = torch.tensor([24.0, 168.0, 12.0, 50.0])
    phase = torch.rand(channels) * 6.28
    amp = torch.rand(4, channels) + 0.2
    series = sum(amp[i] * torch.sin(2 * math.pi * t / periods[i] + phase) for i in range(4))
    series = series + 0.1 * torch.randn(total, channels) + torch.linspace(0, 2, total)[:, None]

    def windows(n):
        starts = torch.randint(0, total - context - horizon, (n,))
        idx = starts[:, None] + torch.arange(context + horizon)[None, :]
        w = series[idx]  # (n, context + horizon, channels)
        return w[:, :context].to(device), w[:, context:].to(device)

    batch, steps = 128, 4
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-3, total_steps=steps, pct_start=0.3)
    model.train()
    for step in range(steps):
        past, future = windows(batch)
        optimizer.zero_grad()
        out = model(past_values=past, future_values=future)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        print(f"step {step} mse {out.loss.item():.4f}")

    model.eval()
    past, future = windows(256)
    with torch.inference_mode():
        pred = model(past_values=past).prediction_outputs
    print(f"eval mse {F.mse_loss(pred, future).item():.4f} mae {F.l1_loss(pred, future).item():.4f}")


def hf_sam_mask_decoder_finetune_frozen_encoder(device):
    """Hugging Face SamModel built from the default config (no download): ViT-B image encoder (hidden 768, 12
    layers, windowed attention with window 14 and global attention in layers 2/5/8/11, 1024x1024 input, 64x64
    embedding grid), prompt encoder and two-way-transformer mask decoder (about 94M parameters, fp32).  The image
    encoder is frozen; image embeddings for each batch of 4 images are computed with get_image_embeddings under
    torch.no_grad and bf16 autocast.  The prompt encoder and mask decoder are fine-tuned on 4 objects per image,
    each prompted by one foreground point, against synthetic 256x256 disc masks with BCE + dice loss plus an MSE
    loss on the predicted IoU; three AdamW steps (lr 1e-4) under bf16 autocast; then an inference_mode evaluation
    with multimask_output=True that keeps the best of 3 masks by predicted IoU and reports mean IoU."""
    from transformers import SamConfig, SamModel
    torch.manual_seed(0)
    model = SamModel(SamConfig()).to(device)
    model.vision_encoder.requires_grad_(False)
    trainable = [p for p in model.parameters() if p.requires_grad]
    print(f"sam params {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M, "
          f"trainable {sum(p.numel() for p in trainable) / 1e6:.2f}M")

    batch, objects, steps = 4, 4, 3
    mean = torch.tensor([123.675, 116.28, 103.53], device=device).view(1, 3, 1, 1)
    std = torch.tensor([58.395, 57.12, 57.375], device=device).view(1, 3, 1, 1)
    yy, xx = torch.meshgrid(torch.arange(256, device=device), torch.arange(256, device=device), indexing="ij")

    def make_batch():
        images = torch.randint(0, 256, (batch, 3, 1024, 1024), dtype=torch.uint8).to(device)
        pixel_values = (images.float() - mean) / std
        centers = torch.randint(40, 216, (batch, objects, 2), device=device)
        radii = torch.randint(12, 40, (batch, objects, 1, 1), device=device)
        d2 = (xx - centers[..., 0, None, None]) ** 2 + (yy - centers[..., 1, None, None]) ** 2
        gt = (d2 <= radii ** 2).float()  # (batch, objects, 256, 256)
        points = (centers.float() * 4.0 + 2.0)[:, :, None, :]  # low-res grid -> 1024 input frame
        labels = torch.ones(batch, objects, 1, dtype=torch.long, device=device)
        return pixel_values, points, labels, gt

    def dice_loss(logits, target):
        prob = logits.sigmoid().flatten(-2)
        target = target.flatten(-2)
        inter = (prob * target).sum(-1)
        return (1 - (2 * inter + 1) / (prob.sum(-1) + target.sum(-1) + 1)).mean()

    optimizer = torch.optim.AdamW(trainable, lr=1e-4, weight_decay=1e-4)
    model.train()
    for step in range(steps):
        pixel_values, points, labels, gt = make_batch()
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            embeddings = model.get_image_embeddings(pixel_values)
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(image_embeddings=embeddings, input_points=points, input_labels=labels,
                        multimask_output=False)
        logits = out.pred_masks[:, :, 0].float()  # (batch, objects, 256, 256)
        with torch.no_grad():
            pred = logits > 0
            iou = (pred & (gt > 0)).sum((-1, -2)) / ((pred | (gt > 0)).sum((-1, -2)) + 1e-6)
        loss = (F.binary_cross_entropy_with_logits(logits, gt) + dice_loss(logits, gt)
                + F.mse_loss(out.iou_scores[:, :, 0].float(), iou))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f} mIoU {iou.mean().item():.3f}")

    model.eval()
    pixel_values, points, labels, gt = make_batch()
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(pixel_values=pixel_values, input_points=points, input_labels=labels, multimask_output=True)
    best = out.iou_scores.float().argmax(-1)  # (batch, objects)
    masks = out.pred_masks.gather(2, best[:, :, None, None, None].expand(-1, -1, 1, 256, 256))[:, :, 0] > 0
    iou = (masks & (gt > 0)).sum((-1, -2)) / ((masks | (gt > 0)).sum((-1, -2)) + 1e-6)
    print(f"eval mIoU {iou.mean().item():.4f}")


def tv_fcos_resnet50_fpn_train_then_detect(device):
    """torchvision fcos_resnet50_fpn(weights=None, weights_backbone=None, num_classes=21): ResNet-50 with ordinary
    BatchNorm (nothing frozen since no weights), FPN P3-P7 and the FCOS head with GroupNorm (about 32M parameters,
    fp32).  Batches of 4 images of 3x480x640, each with 5 ground-truth boxes and labels; the model's transform
    resizes them to 800x1066 (padded to a multiple of 32).  Three SGD steps (lr 0.01, momentum 0.9, weight decay
    1e-4, LinearLR warmup) in fp32 summing the classification (focal), box (GIoU) and centerness losses; then
    model.eval() detection on 2 images under inference_mode."""
    from torchvision.models.detection import fcos_resnet50_fpn
    torch.manual_seed(0)
    model = fcos_resnet50_fpn(weights=None, weights_backbone=None, num_classes=21).to(device)
    print(f"fcos params: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M")

    batch, boxes_per_image, steps = 4, 5, 3

    def make_batch():
        images, targets = [], []
        for _ in range(batch):
            images.append(torch.rand(3, 480, 640, device=device))
            xy = torch.rand(boxes_per_image, 2) * torch.tensor([540.0, 400.0])
            wh = torch.rand(boxes_per_image, 2) * torch.tensor([200.0, 150.0]) + 20.0
            boxes = torch.cat([xy, (xy + wh).minimum(torch.tensor([640.0, 480.0]))], dim=1)
            labels = torch.randint(1, 21, (boxes_per_image,))
            targets.append({"boxes": boxes.to(device), "labels": labels.to(device)})
        return images, targets

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=0.01, momentum=0.9, weight_decay=1e-4)
    warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.001, total_iters=steps)
    model.train()
    for step in range(steps):
        images, targets = make_batch()
        loss_dict = model(images, targets)
        losses = sum(loss for loss in loss_dict.values())
        optimizer.zero_grad()
        losses.backward()
        optimizer.step()
        warmup.step()
        parts = " ".join(f"{k} {v.item():.4f}" for k, v in loss_dict.items())
        print(f"step {step} loss {losses.item():.4f} ({parts})")

    model.eval()
    images, _ = make_batch()
    with torch.inference_mode():
        detections = model(images[:2])
    print(f"detections per image: {[len(d['boxes']) for d in detections]}")


def tv_s3d_video_classification_bf16(device):
    """torchvision s3d(weights=None, num_classes=400): separable 3-D Inception video network (about 8.3M
    parameters, fp32 weights).  Batches of 16 clips of 16 frames at 224x224 (uint8 clips made on the CPU,
    normalised on the device), three SGD steps (lr 0.05, momentum 0.9, nesterov, weight decay 1e-4, linear warmup
    then cosine via SequentialLR) under bf16 autocast with label-smoothed (0.1) cross-entropy and clipping at 5.0;
    then an evaluation of top-1/top-5 accuracy on 8 clips under inference_mode."""
    from torchvision.models.video import s3d
    torch.manual_seed(0)
    model = s3d(weights=None, num_classes=400).to(device)
    print(f"s3d params: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M")

    batch, frames, steps = 16, 16, 3
    mean = torch.tensor([0.43216, 0.394666, 0.37645], device=device).view(1, 3, 1, 1, 1)
    std = torch.tensor([0.22803, 0.22145, 0.216989], device=device).view(1, 3, 1, 1, 1)

    def make_clips(n):
        clips = torch.randint(0, 256, (n, frames, 224, 224, 3), dtype=torch.uint8)
        clips = clips.to(device).permute(0, 4, 1, 2, 3).float().div_(255)  # (n, C, T, H, W)
        return (clips - mean) / std, torch.randint(0, 400, (n,), device=device)

    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.SequentialLR(
        optimizer,
        [torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=1),
         torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps - 1)],
        milestones=[1])
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    model.train()
    for step in range(steps):
        clips, target = make_clips(batch)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(clips)
            loss = criterion(logits, target)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        scheduler.step()
        print(f"step {step} loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.4f}")

    model.eval()
    clips, target = make_clips(8)
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(clips)
    top5 = logits.topk(5, dim=1).indices
    top1_acc = (top5[:, 0] == target).float().mean()
    top5_acc = (top5 == target[:, None]).any(1).float().mean()
    print(f"eval top1 {top1_acc.item():.3f} top5 {top5_acc.item():.3f}")


def timm_eva02_small_layer_decay_bf16(device):
    """timm eva02_small_patch14_224 (pretrained=False, num_classes=100, drop_path_rate=0.1): EVA-02 ViT-S/14
    with rotary position embeddings and SwiGLU MLPs (about 22M parameters, fp32 weights), 224x224 inputs (256
    patches + class token).  Fine-tuning recipe as in timm: create_optimizer_v2 AdamW (lr 5e-4, weight decay 0.05,
    layer_decay 0.65), CosineLRScheduler with one warmup step stepped per update, LabelSmoothingCrossEntropy(0.1),
    bf16 autocast, clipping at 1.0, batch 128, three steps; then top-1/top-5 evaluation (timm.utils.accuracy) on
    64 images under inference_mode."""
    import timm
    from timm.loss import LabelSmoothingCrossEntropy
    from timm.optim import create_optimizer_v2
    from timm.scheduler import CosineLRScheduler
    from timm.utils import accuracy
    torch.manual_seed(0)
    model = timm.create_model("eva02_small_patch14_224", pretrained=False, num_classes=100,
                              drop_path_rate=0.1).to(device)
    print(f"eva02 params: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M")

    batch, steps = 128, 3
    optimizer = create_optimizer_v2(model, opt="adamw", lr=5e-4, weight_decay=0.05, layer_decay=0.65)
    scheduler = CosineLRScheduler(optimizer, t_initial=steps, warmup_t=1, warmup_lr_init=1e-6,
                                  t_in_epochs=False)
    criterion = LabelSmoothingCrossEntropy(smoothing=0.1)
    data_cfg = timm.data.resolve_data_config({}, model=model)
    mean = torch.tensor(data_cfg["mean"], device=device).view(1, 3, 1, 1)
    std = torch.tensor(data_cfg["std"], device=device).view(1, 3, 1, 1)

    model.train()
    num_updates = 0
    for step in range(steps):
        images = (torch.rand(batch, 3, 224, 224, device=device) - mean) / std
        target = torch.randint(0, 100, (batch,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            output = model(images)
            loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        num_updates += 1
        scheduler.step_update(num_updates=num_updates)
        print(f"step {step} loss {loss.item():.4f} lr {optimizer.param_groups[-1]['lr']:.2e}")

    model.eval()
    images = (torch.rand(64, 3, 224, 224, device=device) - mean) / std
    target = torch.randint(0, 100, (64,), device=device)
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
        output = model(images)
    acc1, acc5 = accuracy(output, target, topk=(1, 5))
    print(f"eval acc1 {acc1.item():.2f} acc5 {acc5.item():.2f}")


def timm_sequencer2d_s_bilstm_fp16_scaler(device):
    """timm sequencer2d_s (pretrained=False, num_classes=1000): Sequencer2D-S, a vision model whose token mixing is
    done by bidirectional LSTMs run along rows and along columns of the 32x32 and 16x16 patch grids (about 28M
    parameters, fp32 weights).  Batch 64 of 224x224 images, three AdamW steps (lr 1e-3, weight decay 0.05, warmup
    then cosine via LambdaLR) under fp16 autocast with a GradScaler, unscale + clipping at 1.0; then a torch.no_grad
    evaluation pass with accuracy on 32 images."""
    import timm
    torch.manual_seed(0)
    model = timm.create_model("sequencer2d_s", pretrained=False, num_classes=1000).to(device)
    print(f"sequencer2d_s params: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M")

    batch, steps, warmup = 64, 3, 1
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim <= 1 else decay).append(p)
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=1e-3)

    def lr_lambda(i):
        if i < warmup:
            return (i + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (i - warmup) / max(1, steps - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
    scaler = torch.amp.GradScaler("cuda")
    criterion = nn.CrossEntropyLoss()
    model.train()
    for step in range(steps):
        images = torch.randn(batch, 3, 224, 224, device=device)
        target = torch.randint(0, 1000, (batch,), device=device)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(images), target)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        print(f"step {step} loss {loss.item():.4f} grad_norm {grad_norm.item():.3f}")

    model.eval()
    correct = 0
    with torch.no_grad():
        images = torch.randn(32, 3, 224, 224, device=device)
        target = torch.randint(0, 1000, (32,), device=device)
        with torch.autocast("cuda", dtype=torch.float16):
            correct += (model(images).argmax(1) == target).sum().item()
    print(f"eval accuracy {correct / 32:.4f}")


def hifigan_generator_multi_period_scale_gan(device):
    """HiFi-GAN V1 vocoder written by hand: a generator (mel 80 channels -> conv 512 -> transposed-conv
    upsampling x8, x8, x2, x2 with 256/128/64/32 channels, multi-receptive-field ResBlock1s with kernels 3/7/11 and
    dilations 1/3/5, tanh output; about 14M parameters) and the two discriminators (multi-period with periods
    2/3/5/7/11 using (5,1) Conv2d stacks up to 1024 channels, and multi-scale with 3 scales of grouped Conv1d
    stacks, the first with spectral norm), all convolutions weight-normalised through torch.nn.utils.parametrizations.
    Log-mel spectrograms (n_fft 1024, hop 256, 80 mels, filterbank built by hand) are computed with torch.stft from
    batches of 16 random 8192-sample audio segments.  Two training steps in fp32, each: generator forward,
    discriminator step (LSGAN loss on detached fakes, AdamW lr 2e-4 betas (0.8, 0.99)), then generator step (LSGAN +
    2 x feature matching + 45 x mel L1), ExponentialLR(0.999) on both optimizers."""
    from torch.nn.utils.parametrizations import spectral_norm, weight_norm
    torch.manual_seed(0)
    sr, n_fft, hop, n_mels, segment, batch = 22050, 1024, 256, 80, 8192, 16

    def mel_filterbank():
        def hz_to_mel(f):
            return 2595.0 * math.log10(1.0 + f / 700.0)
        mels = torch.linspace(hz_to_mel(0.0), hz_to_mel(8000.0), n_mels + 2)
        hz = 700.0 * (10 ** (mels / 2595.0) - 1.0)
        freqs = torch.linspace(0, sr / 2, n_fft // 2 + 1)
        lower, center, upper = hz[:-2, None], hz[1:-1, None], hz[2:, None]
        up = (freqs[None, :] - lower) / (center - lower)
        down = (upper - freqs[None, :]) / (upper - center)
        fb = torch.clamp(torch.minimum(up, down), min=0.0)
        return fb * (2.0 / (upper - lower))  # slaney-style area normalisation

    mel_basis = mel_filterbank().to(device)
    window = torch.hann_window(n_fft, device=device)

    def mel_spectrogram(y):
        y = F.pad(y[:, None], ((n_fft - hop) // 2, (n_fft - hop) // 2), mode="reflect")[:, 0]
        spec = torch.stft(y, n_fft, hop_length=hop, win_length=n_fft, window=window, center=False,
                          return_complex=True)
        mag = torch.sqrt(spec.real ** 2 + spec.imag ** 2 + 1e-9)
        return torch.log(torch.clamp(mel_basis @ mag, min=1e-5))

    class ResBlock1(nn.Module):
        def __init__(self, ch, k, dilations=(1, 3, 5)):
            super().__init__()
            self.convs1 = nn.ModuleList(weight_norm(nn.Conv1d(ch, ch, k, 1, dilation=d, padding=d * (k - 1) // 2))
                                        for d in dilations)
            self.convs2 = nn.ModuleList(weight_norm(nn.Conv1d(ch, ch, k, 1, padding=(k - 1) // 2))
                                        for _ in dilations)

        def forward(self, x):
            for c1, c2 in zip(self.convs1, self.convs2):
                xt = c2(F.leaky_relu(c1(F.leaky_relu(x, 0.1)), 0.1))
                x = x + xt
            return x

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            rates, kernels, ch = (8, 8, 2, 2), (16, 16, 4, 4), 512
            self.conv_pre = weight_norm(nn.Conv1d(n_mels, ch, 7, 1, padding=3))
            self.ups = nn.ModuleList()
            self.resblocks = nn.ModuleList()
            for i, (u, k) in enumerate(zip(rates, kernels)):
                self.ups.append(weight_norm(nn.ConvTranspose1d(ch // 2 ** i, ch // 2 ** (i + 1), k, u,
                                                               padding=(k - u) // 2)))
                for rk in (3, 7, 11):
                    self.resblocks.append(ResBlock1(ch // 2 ** (i + 1), rk))
            self.conv_post = weight_norm(nn.Conv1d(ch // 2 ** len(rates), 1, 7, 1, padding=3))
            self.num_kernels = 3

        def forward(self, x):
            x = self.conv_pre(x)
            for i, up in enumerate(self.ups):
                x = up(F.leaky_relu(x, 0.1))
                xs = sum(self.resblocks[i * self.num_kernels + j](x) for j in range(self.num_kernels))
                x = xs / self.num_kernels
            return torch.tanh(self.conv_post(F.leaky_relu(x)))

    class DiscriminatorP(nn.Module):
        def __init__(self, period):
            super().__init__()
            self.period = period
            chans = [1, 32, 128, 512, 1024]
            self.convs = nn.ModuleList(
                [weight_norm(nn.Conv2d(chans[i], chans[i + 1], (5, 1), (3, 1), padding=(2, 0))) for i in range(4)]
                + [weight_norm(nn.Conv2d(1024, 1024, (5, 1), 1, padding=(2, 0)))])
            self.conv_post = weight_norm(nn.Conv2d(1024, 1, (3, 1), 1, padding=(1, 0)))

        def forward(self, x):
            fmap = []
            b, c, t = x.shape
            if t % self.period:
                pad = self.period - t % self.period
                x = F.pad(x, (0, pad), "reflect")
                t = t + pad
            x = x.view(b, c, t // self.period, self.period)
            for conv in self.convs:
                x = F.leaky_relu(conv(x), 0.1)
                fmap.append(x)
            x = self.conv_post(x)
            fmap.append(x)
            return torch.flatten(x, 1, -1), fmap

    class DiscriminatorS(nn.Module):
        def __init__(self, use_spectral_norm=False):
            super().__init__()
            norm = spectral_norm if use_spectral_norm else weight_norm
            self.convs = nn.ModuleList([
                norm(nn.Conv1d(1, 128, 15, 1, padding=7)),
                norm(nn.Conv1d(128, 128, 41, 2, groups=4, padding=20)),
                norm(nn.Conv1d(128, 256, 41, 2, groups=16, padding=20)),
                norm(nn.Conv1d(256, 512, 41, 4, groups=16, padding=20)),
                norm(nn.Conv1d(512, 1024, 41, 4, groups=16, padding=20)),
                norm(nn.Conv1d(1024, 1024, 41, 1, groups=16, padding=20)),
                norm(nn.Conv1d(1024, 1024, 5, 1, padding=2)),
            ])
            self.conv_post = norm(nn.Conv1d(1024, 1, 3, 1, padding=1))

        def forward(self, x):
            fmap = []
            for conv in self.convs:
                x = F.leaky_relu(conv(x), 0.1)
                fmap.append(x)
            x = self.conv_post(x)
            fmap.append(x)
            return torch.flatten(x, 1, -1), fmap

    class MultiDiscriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.mpd = nn.ModuleList(DiscriminatorP(p) for p in (2, 3, 5, 7, 11))
            self.msd = nn.ModuleList([DiscriminatorS(True), DiscriminatorS(), DiscriminatorS()])
            self.pool = nn.AvgPool1d(4, 2, padding=2)

        def forward(self, y):
            outs, fmaps = [], []
            for d in self.mpd:
                o, f = d(y)
                outs.append(o)
                fmaps.append(f)
            for i, d in enumerate(self.msd):
                if i > 0:
                    y = self.pool(y)
                o, f = d(y)
                outs.append(o)
                fmaps.append(f)
            return outs, fmaps

    generator = Generator().to(device)
    discriminator = MultiDiscriminator().to(device)
    print(f"generator {sum(p.numel() for p in generator.parameters()) / 1e6:.1f}M, "
          f"discriminators {sum(p.numel() for p in discriminator.parameters()) / 1e6:.1f}M params")
    optim_g = torch.optim.AdamW(generator.parameters(), lr=2e-4, betas=(0.8, 0.99))
    optim_d = torch.optim.AdamW(discriminator.parameters(), lr=2e-4, betas=(0.8, 0.99))
    sched_g = torch.optim.lr_scheduler.ExponentialLR(optim_g, gamma=0.999)
    sched_d = torch.optim.lr_scheduler.ExponentialLR(optim_d, gamma=0.999)

    generator.train()
    discriminator.train()
    for step in range(2):
        audio = (0.5 * torch.randn(batch, segment, device=device)).clamp(-1, 1)
        mel = mel_spectrogram(audio)  # (batch, 80, 32)
        y = audio[:, None]
        y_hat = generator(mel)
        y_hat_mel = mel_spectrogram(y_hat[:, 0])

        optim_d.zero_grad()
        real_out, _ = discriminator(y)
        fake_out, _ = discriminator(y_hat.detach())
        loss_d = sum(torch.mean((1 - r) ** 2) + torch.mean(f ** 2) for r, f in zip(real_out, fake_out))
        loss_d.backward()
        optim_d.step()

        optim_g.zero_grad()
        _, real_fmaps = discriminator(y)
        fake_out, fake_fmaps = discriminator(y_hat)
        loss_mel = F.l1_loss(y_hat_mel, mel) * 45
        loss_fm = 2 * sum(F.l1_loss(g, r.detach()) for rf, gf in zip(real_fmaps, fake_fmaps)
                          for r, g in zip(rf, gf))
        loss_adv = sum(torch.mean((1 - f) ** 2) for f in fake_out)
        loss_g = loss_adv + loss_fm + loss_mel
        loss_g.backward()
        optim_g.step()
        sched_g.step()
        sched_d.step()
        print(f"step {step} loss_d {loss_d.item():.4f} loss_g {loss_g.item():.4f} mel {loss_mel.item():.4f}")


def dpo_policy_frozen_reference_bf16(device):
    """Direct Preference Optimisation written by hand: a GPT-style causal LM (vocabulary 32000, d_model 1024, 16
    pre-LN blocks with 16 heads, GELU MLP 4096, learned positions up to 512, tied output head, SDPA causal
    attention; about 235M parameters) as the policy in fp32 weights, and a frozen reference copy made with
    copy.deepcopy, cast to bf16, eval() and requires_grad_(False).  Each step takes 8 preference pairs of 512 tokens
    (128-token prompt, chosen and rejected responses padded to 384 with per-example lengths), concatenates chosen and
    rejected into one batch of 16, computes summed response log-probabilities from log_softmax of the logits for
    the policy (bf16 autocast) and, under torch.no_grad, the reference, and applies the DPO loss with beta 0.1.
    Three AdamW steps (lr 5e-6 with linear warmup via LambdaLR, clipping at 1.0), printing loss, reward accuracy and
    margin."""
    torch.manual_seed(0)
    vocab, dim, n_layers, n_heads, max_len = 32000, 1024, 16, 16, 512

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(dim)
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)
            self.ln2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim))

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, n_heads, dim // n_heads).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, dim))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, dim)
            self.pos = nn.Embedding(max_len, dim)
            self.blocks = nn.ModuleList(Block() for _ in range(n_layers))
            self.ln_f = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, vocab, bias=False)
            self.head.weight = self.tok.weight
            self.apply(self._init)

        @staticmethod
        def _init(m):
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.size(1), device=idx.device))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    policy = GPT().to(device)
    reference = copy.deepcopy(policy).to(torch.bfloat16).eval().requires_grad_(False)
    print(f"policy params {sum(p.numel() for p in policy.parameters()) / 1e6:.1f}M")

    pairs, prompt_len, resp_len, beta, steps = 8, 128, 384, 0.1, 3

    def sequence_logps(logits, tokens, mask):
        logps = torch.log_softmax(logits[:, :-1].float(), dim=-1)
        token_logps = torch.gather(logps, 2, tokens[:, 1:, None]).squeeze(2)
        return (token_logps * mask[:, 1:]).sum(-1)

    def make_pairs():
        prompt = torch.randint(0, vocab, (pairs, prompt_len))
        chosen = torch.randint(0, vocab, (pairs, resp_len))
        rejected = torch.randint(0, vocab, (pairs, resp_len))
        chosen_len = torch.randint(64, resp_len + 1, (pairs,))
        rejected_len = torch.randint(64, resp_len + 1, (pairs,))
        tokens = torch.cat([torch.cat([prompt, chosen], 1), torch.cat([prompt, rejected], 1)], 0)
        lens = torch.cat([chosen_len, rejected_len])
        pos = torch.arange(prompt_len + resp_len)[None, :]
        mask = ((pos >= prompt_len) & (pos < prompt_len + lens[:, None])).float()
        tokens = tokens.masked_fill(pos >= prompt_len + lens[:, None], 0)
        return tokens.to(device), mask.to(device)

    optimizer = torch.optim.AdamW(policy.parameters(), lr=5e-6, weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: min(1.0, (i + 1) / 2))
    policy.train()
    for step in range(steps):
        tokens, mask = make_pairs()
        with torch.no_grad():
            ref_logps = sequence_logps(reference(tokens), tokens, mask)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = policy(tokens)
        pol_logps = sequence_logps(logits, tokens, mask)
        pol_chosen, pol_rejected = pol_logps.chunk(2)
        ref_chosen, ref_rejected = ref_logps.float().chunk(2)
        chosen_rewards = beta * (pol_chosen - ref_chosen)
        rejected_rewards = beta * (pol_rejected - ref_rejected)
        loss = -F.logsigmoid(chosen_rewards - rejected_rewards).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        acc = (chosen_rewards > rejected_rewards).float().mean()
        margin = (chosen_rewards - rejected_rewards).mean()
        print(f"step {step} dpo loss {loss.item():.4f} reward acc {acc.item():.3f} margin {margin.item():.4f}")


def speculative_decoding_draft_target_bf16(device):
    """Greedy speculative decoding written by hand with two decoder-only LMs in bf16 weights sharing a 32000-token
    vocabulary: a target (d_model 2048, 24 pre-RMSNorm blocks, 16 heads, SwiGLU MLP 5632; about 1.37B parameters,
    built under `with torch.device(device)` in fp32 and cast to bf16) and a draft (d_model 512, 4 blocks, 8 heads,
    MLP 1408; about 46M parameters).  Each model keeps a preallocated key/value cache of 640 positions for batch 1
    and attends with SDPA over the cached prefix and a boolean causal mask for the new block.  A 256-token prompt is
    prefilled into both caches; then rounds of 4 draft tokens verified by one target forward of 5 tokens, accepting
    the longest matching prefix plus the target's token and rolling both caches back, until 128 new tokens are
    produced, all under torch.inference_mode.  Plain greedy decoding with the target alone is run afterwards for
    comparison, with tokens/s and acceptance statistics printed."""
    torch.manual_seed(0)
    vocab, max_len = 32000, 640

    class RMSNorm(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            x32 = x.float()
            return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * self.weight

    class Block(nn.Module):
        def __init__(self, dim, heads, hidden):
            super().__init__()
            self.heads, self.hd = heads, dim // heads
            self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
            self.wqkv = nn.Linear(dim, 3 * dim, bias=False)
            self.wo = nn.Linear(dim, dim, bias=False)
            self.w1 = nn.Linear(dim, hidden, bias=False)
            self.w3 = nn.Linear(dim, hidden, bias=False)
            self.w2 = nn.Linear(hidden, dim, bias=False)

        def forward(self, x, k_cache, v_cache, start, mask):
            b, t, d = x.shape
            q, k, v = self.wqkv(self.norm1(x)).view(b, t, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
            k_cache[:, :, start:start + t] = k
            v_cache[:, :, start:start + t] = v
            y = F.scaled_dot_product_attention(q, k_cache[:, :, :start + t], v_cache[:, :, :start + t],
                                               attn_mask=mask)
            x = x + self.wo(y.transpose(1, 2).reshape(b, t, d))
            h = self.norm2(x)
            return x + self.w2(F.silu(self.w1(h)) * self.w3(h))

    class Decoder(nn.Module):
        def __init__(self, dim, layers, heads, hidden):
            super().__init__()
            self.dim, self.heads = dim, heads
            self.tok = nn.Embedding(vocab, dim)
            self.pos = nn.Embedding(max_len, dim)
            self.blocks = nn.ModuleList(Block(dim, heads, hidden) for _ in range(layers))
            self.norm = RMSNorm(dim)
            self.head = nn.Linear(dim, vocab, bias=False)
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, std=0.02)

        def allocate_cache(self, batch):
            shape = (len(self.blocks), batch, self.heads, max_len, self.dim // self.heads)
            p = self.head.weight
            self.k_cache = torch.zeros(shape, dtype=p.dtype, device=p.device)
            self.v_cache = torch.zeros(shape, dtype=p.dtype, device=p.device)

        def forward(self, tokens, start):
            t = tokens.size(1)
            positions = torch.arange(start, start + t, device=tokens.device)
            mask = torch.arange(start + t, device=tokens.device)[None, :] <= positions[:, None]
            x = self.tok(tokens) + self.pos(positions)
            for i, block in enumerate(self.blocks):
                x = block(x, self.k_cache[i], self.v_cache[i], start, mask)
            return self.head(self.norm(x))

    with torch.device(device):
        target = Decoder(2048, 24, 16, 5632)
    target = target.to(torch.bfloat16).eval()
    draft = Decoder(512, 4, 8, 1408).to(device=device, dtype=torch.bfloat16).eval()
    print(f"target {sum(p.numel() for p in target.parameters()) / 1e9:.2f}B params, "
          f"draft {sum(p.numel() for p in draft.parameters()) / 1e6:.1f}M params")

    prompt_len, new_tokens, gamma = 256, 128, 4
    prompt = torch.randint(0, vocab, (1, prompt_len), device=device)

    def sync():
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize()

    with torch.inference_mode():
        target.allocate_cache(1)
        draft.allocate_cache(1)
        sync()
        t0 = time.perf_counter()
        nxt = target(prompt, 0)[:, -1].argmax(-1, keepdim=True)
        draft(prompt, 0)
        out, pos, rounds, accepted_total = [nxt], prompt_len, 0, 0
        while sum(o.size(1) for o in out) < new_tokens:
            cur, drafts = nxt, []
            for i in range(gamma):
                cur = draft(cur, pos + i)[:, -1].argmax(-1, keepdim=True)
                drafts.append(cur)
            drafts = torch.cat(drafts, 1)  # (1, gamma)
            verify = target(torch.cat([nxt, drafts], 1), pos).argmax(-1)  # (1, gamma + 1)
            n = int(torch.cumprod((verify[:, :gamma] == drafts).int(), dim=1).sum().item())
            if n == gamma:  # the draft never saw its own last token: put it in the draft cache
                draft(drafts[:, -1:], pos + gamma)
            bonus = verify[:, n:n + 1]
            out.append(torch.cat([drafts[:, :n], bonus], 1))
            pos += 1 + n
            nxt = bonus
            rounds += 1
            accepted_total += n
        spec = torch.cat(out, 1)[:, :new_tokens]
        sync()
        t_spec = time.perf_counter() - t0

        target.allocate_cache(1)
        t0 = time.perf_counter()
        tok = target(prompt, 0)[:, -1].argmax(-1, keepdim=True)
        greedy = [tok]
        for i in range(new_tokens - 1):
            tok = target(tok, prompt_len + i)[:, -1].argmax(-1, keepdim=True)
            greedy.append(tok)
        greedy = torch.cat(greedy, 1)
        sync()
        t_greedy = time.perf_counter() - t0

    agree = (spec == greedy).float().mean()
    print(f"speculative: {rounds} rounds, mean accepted {accepted_total / rounds:.2f}, "
          f"{new_tokens / t_spec:.1f} tok/s; greedy {new_tokens / t_greedy:.1f} tok/s; agreement {agree.item():.3f}")


def global_magnitude_pruning_finetune(device):
    """Global magnitude pruning with torch.nn.utils.prune on a hand-written VGG-style CIFAR network (conv3x3 + BN +
    ReLU stacks of 128-128 / 256-256 / 512-512 channels with max-pooling, then 512*4*4 -> 1024 -> 10 linear layers;
    about 13.0M parameters, fp32) on batches of 512 images of 3x32x32.  Three dense SGD steps (lr 0.01, momentum 0.9,
    nesterov, weight decay 5e-4), a torch.no_grad evaluation, then prune.global_unstructured with L1Unstructured at
    50% over all conv and linear weights (weight_orig parameters and weight_mask buffers, mask applied by forward
    pre-hooks), three fine-tuning steps with the same optimizer, evaluation, prune.remove to make it permanent,
    and a report of the global sparsity and a final evaluation."""
    import torch.nn.utils.prune as prune
    torch.manual_seed(0)

    def conv_bn(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]

    model = nn.Sequential(
        *conv_bn(3, 128), *conv_bn(128, 128), nn.MaxPool2d(2),
        *conv_bn(128, 256), *conv_bn(256, 256), nn.MaxPool2d(2),
        *conv_bn(256, 512), *conv_bn(512, 512), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(512 * 4 * 4, 1024), nn.ReLU(inplace=True), nn.Dropout(0.3), nn.Linear(1024, 10),
    ).to(device)
    print(f"params {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M")

    batch = 512
    mean = torch.tensor([0.4914, 0.4822, 0.4465], device=device).view(1, 3, 1, 1)
    std = torch.tensor([0.2470, 0.2435, 0.2616], device=device).view(1, 3, 1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True, weight_decay=5e-4)
    criterion = nn.CrossEntropyLoss()

    def get_batch(n):
        x = torch.rand(n, 3, 32, 32)
        y = torch.randint(0, 10, (n,))
        x, y = x.to(device), y.to(device)
        flip = torch.rand(n, device=device) < 0.5
        x = torch.where(flip[:, None, None, None], x.flip(-1), x)
        return (x - mean) / std, y

    def train(steps, tag):
        model.train()
        for step in range(steps):
            x, y = get_batch(batch)
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            print(f"{tag} step {step} loss {loss.item():.4f}")

    def evaluate(tag):
        model.eval()
        correct = 0
        with torch.no_grad():
            for _ in range(2):
                x, y = get_batch(1024)
                correct += (model(x).argmax(1) == y).sum().item()
        print(f"{tag} accuracy {correct / 2048:.4f}")

    train(3, "dense")
    evaluate("dense")
    to_prune = [(m, "weight") for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    prune.global_unstructured(to_prune, pruning_method=prune.L1Unstructured, amount=0.5)
    train(3, "pruned finetune")
    evaluate("pruned")
    for m, name in to_prune:
        prune.remove(m, name)
    zeros = sum((m.weight == 0).sum().item() for m, _ in to_prune)
    total = sum(m.weight.numel() for m, _ in to_prune)
    print(f"global sparsity {zeros / total:.3f}")
    evaluate("final")


def barlow_twins_lars_fp16_scaler(device):
    """Barlow Twins self-supervised pre-training written by hand: a ResNet-18 (BasicBlocks 64/128/256/512, CIFAR-
    style 3x3 stem without max-pool) on 96x96 images and the paper's projector 512 -> 8192 -> 8192 -> 8192 (Linear +
    BatchNorm1d + ReLU, final BatchNorm1d without affine), about 150M parameters in fp32.  Each step takes 256
    uint8 images of 3x112x112 from the CPU, makes two views on the device (random resized crop and flip through
    affine_grid/grid_sample to 96x96, brightness/contrast jitter, random grayscale), and computes the 8192x8192
    cross-correlation loss (lambda 0.0051) in fp32.  Three steps of a hand-written LARS optimizer (momentum 0.9,
    eta 0.001, weight decay 1.5e-6, biases and BatchNorm parameters excluded from decay and adaptation) with cosine
    learning rate, under fp16 autocast with a GradScaler."""
    torch.manual_seed(0)

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.short = nn.Sequential()
            if stride != 1 or cin != cout:
                self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return F.relu(out + self.short(x))

    class ResNet18(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU())
            layers, cin = [], 64
            for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
                layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
                cin = cout
            self.layers = nn.Sequential(*layers)

        def forward(self, x):
            return torch.flatten(F.adaptive_avg_pool2d(self.layers(self.stem(x)), 1), 1)

    class BarlowTwins(nn.Module):
        def __init__(self, proj=8192, lambd=0.0051):
            super().__init__()
            self.backbone = ResNet18()
            self.projector = nn.Sequential(
                nn.Linear(512, proj, bias=False), nn.BatchNorm1d(proj), nn.ReLU(inplace=True),
                nn.Linear(proj, proj, bias=False), nn.BatchNorm1d(proj), nn.ReLU(inplace=True),
                nn.Linear(proj, proj, bias=False))
            self.bn = nn.BatchNorm1d(proj, affine=False)
            self.lambd = lambd

        def forward(self, y1, y2):
            z1 = self.projector(self.backbone(y1))
            z2 = self.projector(self.backbone(y2))
            with torch.autocast("cuda", enabled=False):
                c = self.bn(z1.float()).T @ self.bn(z2.float()) / z1.size(0)
                on_diag = (torch.diagonal(c) - 1).pow(2).sum()
                n = c.size(0)
                off_diag = c.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten().pow(2).sum()
            return on_diag + self.lambd * off_diag

    class LARS(torch.optim.Optimizer):
        def __init__(self, params, lr, weight_decay=0, momentum=0.9, eta=0.001):
            super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum, eta=eta,
                                          exclude=False))

        @torch.no_grad()
        def step(self):
            for g in self.param_groups:
                for p in g["params"]:
                    if p.grad is None:
                        continue
                    dp = p.grad
                    if not g["exclude"]:
                        dp = dp.add(p, alpha=g["weight_decay"])
                        param_norm, update_norm = torch.norm(p), torch.norm(dp)
                        one = torch.ones_like(param_norm)
                        q = torch.where(param_norm > 0.0,
                                        torch.where(update_norm > 0, g["eta"] * param_norm / update_norm, one), one)
                        dp = dp.mul(q)
                    state = self.state[p]
                    if "mu" not in state:
                        state["mu"] = torch.zeros_like(p)
                    mu = state["mu"]
                    mu.mul_(g["momentum"]).add_(dp)
                    p.add_(mu, alpha=-g["lr"])

    model = BarlowTwins().to(device)
    print(f"barlow twins params {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M")
    weights = [p for p in model.parameters() if p.ndim > 1]
    others = [p for p in model.parameters() if p.ndim <= 1]
    base_lr, batch, steps = 0.2 * 256 / 256, 256, 3
    optimizer = LARS([{"params": weights}, {"params": others, "exclude": True}], lr=base_lr,
                     weight_decay=1.5e-6)
    scaler = torch.amp.GradScaler("cuda")

    def augment(x):
        n = x.size(0)
        scale = torch.empty(n, device=device).uniform_(0.3, 1.0).sqrt()
        tx = (torch.rand(n, device=device) * 2 - 1) * (1 - scale)
        ty = (torch.rand(n, device=device) * 2 - 1) * (1 - scale)
        flip = torch.where(torch.rand(n, device=device) < 0.5, -1.0, 1.0)
        theta = torch.zeros(n, 2, 3, device=device)
        theta[:, 0, 0], theta[:, 0, 2] = scale * flip, tx
        theta[:, 1, 1], theta[:, 1, 2] = scale, ty
        grid = F.affine_grid(theta, (n, 3, 96, 96), align_corners=False)
        v = F.grid_sample(x, grid, mode="bilinear", padding_mode="reflection", align_corners=False)
        bright = torch.empty(n, 1, 1, 1, device=device).uniform_(0.6, 1.4)
        contrast = torch.empty(n, 1, 1, 1, device=device).uniform_(0.6, 1.4)
        m = v.mean(dim=(1, 2, 3), keepdim=True)
        v = ((v * bright - m) * contrast + m).clamp(0, 1)
        gray = v.mul(torch.tensor([0.299, 0.587, 0.114], device=device).view(1, 3, 1, 1)).sum(1, keepdim=True)
        use_gray = (torch.rand(n, 1, 1, 1, device=device) < 0.2).float()
        v = use_gray * gray.expand_as(v) + (1 - use_gray) * v
        return (v - 0.45) / 0.225

    model.train()
    for step in range(steps):
        lr = base_lr * 0.5 * (1 + math.cos(math.pi * step / steps))
        optimizer.param_groups[0]["lr"] = lr
        optimizer.param_groups[1]["lr"] = lr * 0.0048
        images = torch.randint(0, 256, (batch, 3, 112, 112), dtype=torch.uint8)
        images = images.to(device, non_blocking=True).float() / 255
        y1, y2 = augment(images), augment(images)
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(y1, y2)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        print(f"step {step} barlow loss {loss.item():.2f} lr {lr:.4f}")


def slot_attention_object_discovery(device):
    """Slot Attention object discovery (Locatello et al. 2020) written by hand: a CNN encoder of four 5x5 conv
    layers with 64 channels on 128x128 images, a soft position embedding, LayerNorm + MLP, slot attention with 7
    slots of size 64, 3 iterations, GRUCell update and residual MLP; a spatial-broadcast decoder that tiles each slot
    on an 8x8 grid and upsamples with four stride-2 5x5 ConvTranspose2d layers to 128x128, producing RGB and an
    alpha mask per slot (softmax over slots).  Batch 32 (so the decoder runs on 224 slot images), fp32, MSE
    reconstruction loss, three Adam steps (lr 4e-4 with LambdaLR warmup and exponential decay) with clipping at 1.0;
    then an inference_mode evaluation reporting reconstruction MSE and the mean mask entropy."""
    torch.manual_seed(0)
    res, slots_n, slot_dim, hid = 128, 7, 64, 64

    def build_grid(h, w):
        ys, xs = torch.linspace(0, 1, h), torch.linspace(0, 1, w)
        gy, gx = torch.meshgrid(ys, xs, indexing="ij")
        grid = torch.stack([gy, gx], -1)
        return torch.cat([grid, 1 - grid], -1)[None]  # (1, h, w, 4)

    class SoftPositionEmbed(nn.Module):
        def __init__(self, h, w):
            super().__init__()
            self.dense = nn.Linear(4, hid)
            self.register_buffer("grid", build_grid(h, w))

        def forward(self, x):  # x: (b, h, w, c)
            return x + self.dense(self.grid)

    class SlotAttention(nn.Module):
        def __init__(self, iters=3, eps=1e-8):
            super().__init__()
            self.iters, self.eps, self.scale = iters, eps, slot_dim ** -0.5
            self.mu = nn.Parameter(torch.randn(1, 1, slot_dim))
            self.log_sigma = nn.Parameter(torch.zeros(1, 1, slot_dim))
            self.norm_inputs, self.norm_slots, self.norm_mlp = (nn.LayerNorm(hid), nn.LayerNorm(slot_dim),
                                                                nn.LayerNorm(slot_dim))
            self.to_q = nn.Linear(slot_dim, slot_dim, bias=False)
            self.to_k = nn.Linear(hid, slot_dim, bias=False)
            self.to_v = nn.Linear(hid, slot_dim, bias=False)
            self.gru = nn.GRUCell(slot_dim, slot_dim)
            self.mlp = nn.Sequential(nn.Linear(slot_dim, 128), nn.ReLU(), nn.Linear(128, slot_dim))

        def forward(self, inputs):
            b, n, _ = inputs.shape
            slots = self.mu + self.log_sigma.exp() * torch.randn(b, slots_n, slot_dim, device=inputs.device)
            inputs = self.norm_inputs(inputs)
            k, v = self.to_k(inputs), self.to_v(inputs)
            for _ in range(self.iters):
                prev = slots
                q = self.to_q(self.norm_slots(slots))
                attn = torch.einsum("bid,bjd->bij", q, k).mul(self.scale).softmax(dim=1) + self.eps
                attn = attn / attn.sum(dim=-1, keepdim=True)
                updates = torch.einsum("bjd,bij->bid", v, attn)
                slots = self.gru(updates.reshape(-1, slot_dim), prev.reshape(-1, slot_dim)).view(b, -1, slot_dim)
                slots = slots + self.mlp(self.norm_mlp(slots))
            return slots

    class SlotAttentionAutoEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(
                nn.Conv2d(3, hid, 5, padding=2), nn.ReLU(), nn.Conv2d(hid, hid, 5, padding=2), nn.ReLU(),
                nn.Conv2d(hid, hid, 5, padding=2), nn.ReLU(), nn.Conv2d(hid, hid, 5, padding=2), nn.ReLU())
            self.enc_pos = SoftPositionEmbed(res, res)
            self.mlp = nn.Sequential(nn.LayerNorm(hid), nn.Linear(hid, hid), nn.ReLU(), nn.Linear(hid, hid))
            self.slot_attention = SlotAttention()
            self.dec_pos = SoftPositionEmbed(8, 8)
            ups = []
            for _ in range(4):
                ups += [nn.ConvTranspose2d(hid, hid, 5, stride=2, padding=2, output_padding=1), nn.ReLU()]
            self.decoder = nn.Sequential(*ups, nn.ConvTranspose2d(hid, hid, 5, stride=1, padding=2), nn.ReLU(),
                                         nn.ConvTranspose2d(hid, 4, 3, stride=1, padding=1))

        def forward(self, image):
            b = image.size(0)
            x = self.encoder(image).permute(0, 2, 3, 1)
            x = self.mlp(self.enc_pos(x).flatten(1, 2))
            slots = self.slot_attention(x)
            z = slots.reshape(b * slots_n, 1, 1, slot_dim).expand(-1, 8, 8, -1)
            z = self.dec_pos(z).permute(0, 3, 1, 2)
            out = self.decoder(z).view(b, slots_n, 4, res, res)
            rgb, masks = out[:, :, :3], out[:, :, 3:].softmax(dim=1)
            return (rgb * masks).sum(1), masks

    model = SlotAttentionAutoEncoder().to(device)
    print(f"slot attention params {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M")
    batch, steps, warmup = 32, 3, 2
    optimizer = torch.optim.Adam(model.parameters(), lr=4e-4)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda i: min(1.0, (i + 1) / warmup) * 0.5 ** (i / 100000))

    def scenes(n):
        # coloured discs on a grey background, in [-1, 1] like the CLEVR pipeline
        yy, xx = torch.meshgrid(torch.arange(res), torch.arange(res), indexing="ij")
        img = torch.full((n, 3, res, res), 0.4)
        for _ in range(4):
            c = torch.randint(16, res - 16, (n, 2))
            r = torch.randint(6, 16, (n,))
            disc = ((yy[None] - c[:, 0, None, None]) ** 2 + (xx[None] - c[:, 1, None, None]) ** 2) <= r[:, None, None] ** 2
            img = torch.where(disc[:, None], torch.rand(n, 3, 1, 1), img)
        return (img * 2 - 1).to(device)

    model.train()
    for step in range(steps):
        images = scenes(batch)
        recon, _ = model(images)
        loss = F.mse_loss(recon, images)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        print(f"step {step} recon mse {loss.item():.4f}")

    model.eval()
    with torch.inference_mode():
        images = scenes(batch)
        recon, masks = model(images)
        entropy = -(masks * masks.clamp_min(1e-8).log()).sum(1).mean()
    print(f"eval mse {F.mse_loss(recon, images).item():.4f} mask entropy {entropy.item():.3f}")


ISSUE35T = {f.__name__: f for f in [
    hf_switch_transformers_moe_seq2seq_bf16,
    hf_xlnet_permutation_lm_fp16_scaler,
    hf_layoutlmv3_token_classification_bf16,
    hf_pegasus_summarization_beam_generate_bf16,
    hf_patchtst_multivariate_forecasting,
    hf_sam_mask_decoder_finetune_frozen_encoder,
    tv_fcos_resnet50_fpn_train_then_detect,
    tv_s3d_video_classification_bf16,
    timm_eva02_small_layer_decay_bf16,
    timm_sequencer2d_s_bilstm_fp16_scaler,
    hifigan_generator_multi_period_scale_gan,
    dpo_policy_frozen_reference_bf16,
    speculative_decoding_draft_target_bf16,
    global_magnitude_pruning_finetune,
    barlow_twins_lars_fp16_scaler,
    slot_attention_object_discovery,
]}
