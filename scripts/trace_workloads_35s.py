"""Nineteenth held-out group of issue 35 (group ISSUE35S): sixteen more programs of kinds no earlier
group had (a Donut-like Hugging Face VisionEncoderDecoder of a Donut-Swin encoder on 640 x 480
document images and a BART causal decoder with cross attention, trained and then asked for a short
greedy generate; SpeechT5 text-to-speech trained on padded mel targets with its L1, stop-token and
guided-attention losses; VideoMAE pre-training with 90% tube masking under a GradScaler;
Wav2Vec2-Conformer self-supervised pre-training with span masks, sampled negatives and a Gumbel
quantizer; DPT monocular depth estimation trained on a scale-invariant log loss with a lower
backbone learning rate; ProphetNet future-n-gram seq2seq training with label smoothing; torchvision's
Keypoint R-CNN in train mode with boxes and keypoints under a GradScaler and then in inference,
RAFT-small optical flow with the sequence loss and OneCycleLR, and MViT-v2-S video classification;
timm's CoAtNet-0 with timm's Lion and a per-update cosine schedule plus an evaluation pass, and
BEiT-base with layer-wise learning-rate decay under timm's NativeScaler; a hand-written PointNet++
with farthest-point sampling and ball-query grouping, an RNN-Transducer whose loss is written with
logcumsumexp over the full joint lattice, DINO self-distillation with multi-crop views, a momentum
teacher and a 65,536-way weight-normalised head, a full-batch GCN over a sparse COO adjacency with
torch.sparse.mm, and a deep-equilibrium convolutional model solved by Anderson acceleration with an
implicit backward hook), written by a helper that read no part of the tracer, committed before they
were recorded on a GPU (an H200) or compared with anything.

Each is a function of the device, recorded by scripts/record_trace_workloads.py
(VRAMLAB_HOLDOUT=issue35s). Traced on the CPU before recording only to see that each program is
itself valid."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def hf_donut_swin_bart_vision_encoder_decoder_bf16(device):
    """A Donut-like Hugging Face VisionEncoderDecoderModel built from configs: a DonutSwin encoder
    (embed 96, depths 2-2-6-2, heads 3-6-12-24, window 10) on 640 x 480 document images and a BART
    causal decoder (4 layers, d_model 512, 8 heads, cross attention, vocabulary 32,000) behind the
    automatic encoder-to-decoder projection; batch 8 with 256-token label sequences whose padded
    tails are -100, bf16 autocast, AdamW with a linear warm-up schedule, gradients clipped to 1.0, two
    steps; then in eval mode a greedy generate of exactly 32 new tokens for 2 images."""
    from transformers import (BartConfig, DonutSwinConfig, VisionEncoderDecoderConfig, VisionEncoderDecoderModel,
                              get_linear_schedule_with_warmup)

    torch.manual_seed(0)
    encoder = DonutSwinConfig(image_size=[640, 480], patch_size=4, embed_dim=96, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24],
                              window_size=10, drop_path_rate=0.1)
    decoder = BartConfig(vocab_size=32000, d_model=512, decoder_layers=4, decoder_attention_heads=8, decoder_ffn_dim=2048,
                         encoder_layers=4, max_position_embeddings=512, is_decoder=True, add_cross_attention=True,
                         pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=0)
    config = VisionEncoderDecoderConfig.from_encoder_decoder_configs(encoder, decoder)
    config.decoder_start_token_id = 0
    config.pad_token_id = 1
    config.eos_token_id = 2
    model = VisionEncoderDecoderModel(config=config).to(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-5, weight_decay=0.01)
    sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=300, num_training_steps=30000)
    lengths = torch.tensor([256, 240, 200, 180, 150, 128, 96, 64])
    for _ in range(2):
        pixel_values = torch.randn(8, 3, 640, 480, device=device)
        labels = torch.randint(3, 32000, (8, 256))
        labels[:, 0] = 0
        labels[torch.arange(256)[None, :] >= lengths[:, None]] = -100
        labels = labels.to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(pixel_values=pixel_values, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        print(f"loss {loss.item():.4f}")
    model.eval()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        tokens = model.generate(pixel_values=pixel_values[:2], max_new_tokens=32, min_new_tokens=32, do_sample=False, num_beams=1)
    assert tokens.shape[0] == 2


def hf_speecht5_tts_guided_attention_fp32(device):
    """Hugging Face SpeechT5 for text-to-speech from a small config (6 + 6 layers, hidden 384, 6 heads,
    feed-forward 1,536, 80 mel bins, reduction factor 2, 512-d speaker embeddings, guided attention
    loss on): batch 8 of right-padded character ids up to 160 with an attention mask, mel targets of
    up to 800 frames padded with -100, x-vector speaker embeddings, in float32; the model's own loss
    (L1 before and after the postnet, stop-token BCE, guided attention on cross attentions), AdamW
    with a linear warm-up, gradients clipped to 1.0, two steps."""
    from transformers import SpeechT5Config, SpeechT5ForTextToSpeech, get_linear_schedule_with_warmup

    torch.manual_seed(0)
    config = SpeechT5Config(vocab_size=81, hidden_size=384, encoder_layers=6, encoder_attention_heads=6, encoder_ffn_dim=1536,
                            decoder_layers=6, decoder_attention_heads=6, decoder_ffn_dim=1536, num_mel_bins=80,
                            reduction_factor=2, speech_decoder_prenet_units=256, speaker_embedding_dim=512,
                            max_text_positions=600, max_speech_positions=1876, use_guided_attention_loss=True)
    model = SpeechT5ForTextToSpeech(config).to(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=500, num_training_steps=4000)
    text_lengths = torch.tensor([160, 150, 142, 131, 120, 111, 97, 80])
    mel_lengths = torch.tensor([800, 760, 712, 660, 600, 556, 490, 400])
    for _ in range(2):
        input_ids = torch.randint(4, 81, (8, 160))
        attention_mask = (torch.arange(160)[None, :] < text_lengths[:, None]).long()
        input_ids = input_ids.masked_fill(attention_mask == 0, 1)
        labels = torch.randn(8, 800, 80)
        labels[torch.arange(800)[None, :] >= mel_lengths[:, None]] = -100.0
        speaker = F.normalize(torch.randn(8, 512), dim=-1)
        input_ids, attention_mask, labels, speaker = (t.to(device) for t in (input_ids, attention_mask, labels, speaker))
        loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, speaker_embeddings=speaker).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        print(f"loss {loss.item():.4f}")


def hf_videomae_tube_masking_pretraining_fp16(device):
    """Hugging Face VideoMAE pre-training (VideoMAEForPreTraining) from a ViT-S-like config (12 layers,
    hidden 384, 6 heads; decoder 4 layers of 192) on clips of 16 frames at 224 x 224 with tubelets
    of 2 x 16 x 16 (1,568 tokens), a 90% tube mask (the same 176 of 196 patches hidden in all 8 time
    slices, a different set per clip), normalised-pixel reconstruction loss, batch 8, fp16 autocast
    with a GradScaler, AdamW (betas 0.9, 0.95) with weight decay off for biases and norms, two steps."""
    from transformers import VideoMAEConfig, VideoMAEForPreTraining

    torch.manual_seed(0)
    config = VideoMAEConfig(image_size=224, patch_size=16, num_frames=16, tubelet_size=2, hidden_size=384, num_hidden_layers=12,
                            num_attention_heads=6, intermediate_size=1536, decoder_hidden_size=192, decoder_num_hidden_layers=4,
                            decoder_num_attention_heads=3, decoder_intermediate_size=768, norm_pix_loss=True)
    model = VideoMAEForPreTraining(config).to(device)
    model.train()
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "position" not in n]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2 or "position" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}], lr=1.5e-4,
                            betas=(0.9, 0.95))
    scaler = torch.amp.GradScaler("cuda")
    batch, spatial, time_slices = 8, 196, 8
    num_masked = int(0.9 * spatial)
    for _ in range(2):
        video = torch.randn(batch, 16, 3, 224, 224, device=device)
        noise = torch.rand(batch, spatial, device=device)
        ranks = noise.argsort(dim=1).argsort(dim=1)
        spatial_mask = ranks < num_masked
        bool_masked_pos = spatial_mask.repeat(1, time_slices)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(pixel_values=video, bool_masked_pos=bool_masked_pos).loss
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        print(f"loss {loss.item():.4f}")


def hf_wav2vec2_conformer_contrastive_pretraining(device):
    """Hugging Face Wav2Vec2-Conformer self-supervised pre-training (Wav2Vec2ConformerForPreTraining)
    from a small config (7-layer convolutional feature encoder of 512 channels, 6 conformer layers of
    hidden 512 with 8 heads, rotary position embeddings, depthwise convolution kernel 31; Gumbel
    product quantizer of 2 groups x 320 codevectors, 100 sampled negatives): batch 6 clips of 10 s
    raw 16 kHz audio, span masks (probability 0.65, length 10) and negatives drawn by transformers'
    _compute_mask_indices / _sample_negative_indices on the host, the Gumbel temperature set each
    step, contrastive plus diversity loss divided by the masked count, float32, AdamW with a linear
    warm-up, gradients clipped to 1.0, two steps."""
    from transformers import Wav2Vec2ConformerConfig, Wav2Vec2ConformerForPreTraining, get_linear_schedule_with_warmup
    from transformers.models.wav2vec2.modeling_wav2vec2 import _compute_mask_indices, _sample_negative_indices

    torch.manual_seed(0)
    config = Wav2Vec2ConformerConfig(hidden_size=512, num_hidden_layers=6, num_attention_heads=8, intermediate_size=2048,
                                     position_embeddings_type="rotary", conv_depthwise_kernel_size=31, layerdrop=0.0,
                                     num_codevectors_per_group=320, num_codevector_groups=2, codevector_dim=256,
                                     proj_codevector_dim=256, num_negatives=100, mask_time_prob=0.65, mask_time_length=10,
                                     diversity_loss_weight=0.1, feat_quantizer_dropout=0.0)
    model = Wav2Vec2ConformerForPreTraining(config).to(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.01)
    sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=1000, num_training_steps=20000)
    batch, samples = 6, 160000
    seq_len = int(model._get_feat_extract_output_lengths(samples))
    for step in range(2):
        audio = torch.randn(batch, samples, device=device)
        audio = (audio - audio.mean(-1, keepdim=True)) / (audio.std(-1, keepdim=True) + 1e-7)
        mask = _compute_mask_indices((batch, seq_len), mask_prob=config.mask_time_prob, mask_length=config.mask_time_length,
                                     min_masks=2)
        negatives = _sample_negative_indices((batch, seq_len), config.num_negatives, mask_time_indices=mask)
        mask_time_indices = torch.tensor(mask, dtype=torch.long, device=device)
        sampled_negative_indices = torch.tensor(negatives, dtype=torch.long, device=device)
        model.set_gumbel_temperature(max(2.0 * 0.999995 ** step, 0.5))
        outputs = model(audio, mask_time_indices=mask_time_indices, sampled_negative_indices=sampled_negative_indices)
        num_losses = mask_time_indices.sum()
        loss = outputs.loss / num_losses
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        print(f"loss {loss.item():.4f} contrastive {outputs.contrastive_loss.item() / num_losses.item():.4f}")


def hf_dpt_depth_silog_backbone_lr_bf16(device):
    """Hugging Face DPT for monocular depth estimation (DPTForDepthEstimation) from a ViT-B-like config
    (12 layers, hidden 768, 12 heads, 384 x 384 input, features read out after layers 3, 6, 9 and
    12 with the 'project' readout, reassembled at 4x, 2x, 1x and 0.5x, fusion width 256, head
    upsampled to the input): batch 8, the model's predicted depth trained on a scale-invariant log
    (SiLog) loss computed by hand over valid ground-truth pixels, bf16 autocast, AdamW with the
    backbone at a tenth of the head's learning rate, a polynomial schedule, two steps; then an
    evaluation pass on 4 images under torch.no_grad."""
    from transformers import DPTConfig, DPTForDepthEstimation

    torch.manual_seed(0)
    config = DPTConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072, image_size=384,
                       patch_size=16, backbone_out_indices=[2, 5, 8, 11], readout_type="project",
                       reassemble_factors=[4, 2, 1, 0.5], neck_hidden_sizes=[96, 192, 384, 768], fusion_hidden_size=256)
    model = DPTForDepthEstimation(config).to(device)
    backbone = [p for n, p in model.named_parameters() if n.startswith("dpt.")]
    rest = [p for n, p in model.named_parameters() if not n.startswith("dpt.")]
    opt = torch.optim.AdamW([{"params": backbone, "lr": 5e-6}, {"params": rest, "lr": 5e-5}], weight_decay=0.01)
    sched = torch.optim.lr_scheduler.PolynomialLR(opt, total_iters=20000, power=0.9)

    def silog_loss(pred, target, valid, lam=0.85):
        d = torch.log(pred[valid].clamp_min(1e-3)) - torch.log(target[valid])
        return torch.sqrt((d ** 2).mean() - lam * d.mean() ** 2) * 10.0

    model.train()
    for _ in range(2):
        images = torch.randn(8, 3, 384, 384, device=device)
        depth = torch.rand(8, 384, 384, device=device) * 9.0 + 0.5
        valid = torch.rand(8, 384, 384, device=device) > 0.2
        with torch.autocast("cuda", dtype=torch.bfloat16):
            pred = model(pixel_values=images).predicted_depth
        loss = silog_loss(pred.float(), depth, valid)
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        print(f"silog {loss.item():.4f}")
    model.eval()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        pred = model(pixel_values=torch.randn(4, 3, 384, 384, device=device)).predicted_depth
    abs_rel = ((pred.float() - depth[:4]).abs() / depth[:4]).mean().item()
    print(f"abs rel {abs_rel:.4f}")


def hf_prophetnet_ngram_label_smoothing_bf16(device):
    """Hugging Face ProphetNet (ProphetNetForConditionalGeneration) from a small config (4 encoder and 4
    decoder layers, hidden 512, 8 heads, feed-forward 2,048, vocabulary 30,522, future n-gram 2 with
    its main and predict streams and 32 relative-position buckets, label smoothing eps 0.1 in its own
    n-gram loss): batch 8 of 512-token source articles with an attention mask padding their tails and
    128-token target summaries whose pads are -100, bf16 autocast, AdamW with an inverse-square-root
    warm-up schedule, gradients clipped to 0.1, two steps."""
    from transformers import ProphetNetConfig, ProphetNetForConditionalGeneration, get_inverse_sqrt_schedule

    torch.manual_seed(0)
    config = ProphetNetConfig(vocab_size=30522, hidden_size=512, encoder_ffn_dim=2048, decoder_ffn_dim=2048, num_encoder_layers=4,
                              num_decoder_layers=4, num_encoder_attention_heads=8, num_decoder_attention_heads=8,
                              max_position_embeddings=512, ngram=2, num_buckets=32, relative_max_distance=128, eps=0.1,
                              pad_token_id=0, bos_token_id=102, eos_token_id=102, decoder_start_token_id=102)
    model = ProphetNetForConditionalGeneration(config).to(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.999), weight_decay=0.01)
    sched = get_inverse_sqrt_schedule(opt, num_warmup_steps=1000)
    src_lengths = torch.tensor([512, 480, 450, 400, 384, 350, 300, 256])
    tgt_lengths = torch.tensor([128, 120, 110, 100, 90, 80, 70, 60])
    for _ in range(2):
        src = torch.randint(1000, 30522, (8, 512))
        attention_mask = (torch.arange(512)[None, :] < src_lengths[:, None]).long()
        src = src.masked_fill(attention_mask == 0, 0)
        labels = torch.randint(1000, 30522, (8, 128))
        labels[torch.arange(128)[None, :] >= tgt_lengths[:, None]] = -100
        src, attention_mask, labels = src.to(device), attention_mask.to(device), labels.to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=src, attention_mask=attention_mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        print(f"loss {loss.item():.4f}")


def tv_keypointrcnn_train_targets_fp16_then_inference(device):
    """torchvision Keypoint R-CNN with a ResNet-50 FPN backbone (no weights, so ordinary BatchNorm and
    all layers trainable; 2 classes, 17 keypoints, images resized to a 512 shortest side, at most
    800) in train mode on a list of 4 images of different sizes (480x640, 512x512, 640x427, 427x640)
    with targets of 1 to 4 person boxes each and their 17 keypoints (visibility 0 or 2), the five
    losses summed, fp16 autocast with a GradScaler, SGD (momentum 0.9, weight decay 1e-4) with a
    linear warm-up, two steps; then eval mode inference on 2 of the images under torch.inference_mode."""
    from torchvision.models.detection import keypointrcnn_resnet50_fpn

    torch.manual_seed(0)
    model = keypointrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=2, num_keypoints=17, min_size=512,
                                      max_size=800).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.02, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.001, total_iters=1000)
    scaler = torch.amp.GradScaler("cuda")
    sizes = [(480, 640), (512, 512), (640, 427), (427, 640)]
    people = [3, 2, 4, 1]

    def make_target(h, w, n):
        x1 = torch.rand(n) * w * 0.5
        y1 = torch.rand(n) * h * 0.5
        bw = 32 + torch.rand(n) * (w * 0.45)
        bh = 48 + torch.rand(n) * (h * 0.45)
        boxes = torch.stack([x1, y1, x1 + bw, y1 + bh], dim=1)
        kx = x1[:, None] + torch.rand(n, 17) * bw[:, None]
        ky = y1[:, None] + torch.rand(n, 17) * bh[:, None]
        vis = (torch.rand(n, 17) > 0.3).float() * 2
        keypoints = torch.stack([kx, ky, vis], dim=2)
        return {"boxes": boxes.to(device), "labels": torch.ones(n, dtype=torch.int64, device=device),
                "keypoints": keypoints.to(device)}

    model.train()
    for _ in range(2):
        images = [torch.rand(3, h, w, device=device) for h, w in sizes]
        targets = [make_target(h, w, n) for (h, w), n in zip(sizes, people)]
        with torch.autocast("cuda", dtype=torch.float16):
            loss_dict = model(images, targets)
            losses = sum(loss for loss in loss_dict.values())
        scaler.scale(losses).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        sched.step()
        print({k: round(v.item(), 4) for k, v in loss_dict.items()})
    model.eval()
    with torch.inference_mode():
        detections = model(images[:2])
    print([d["keypoints"].shape for d in detections])


def tv_raft_small_sequence_loss_onecycle(device):
    """torchvision RAFT-small optical flow (no weights) trained as torchvision's reference does: batch
    6 image pairs of 368 x 496 scaled to [-1, 1], 12 recurrent flow updates whose predictions are all
    kept, the exponentially weighted sequence L1 loss (gamma 0.8) over valid pixels with flow under
    400, float32, AdamW (weight decay 1e-4, eps 1e-8) with OneCycleLR (linear anneal, 5% warm-up),
    gradients clipped to 1.0, two steps; then evaluation of 2 pairs with 32 flow updates under
    torch.no_grad."""
    from torchvision.models.optical_flow import raft_small

    torch.manual_seed(0)
    model = raft_small(weights=None, progress=False).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=4e-4, weight_decay=1e-4, eps=1e-8)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=4e-4, total_steps=100100, pct_start=0.05, cycle_momentum=False,
                                                anneal_strategy="linear")

    def sequence_loss(flow_preds, flow_gt, valid_flow_mask, gamma=0.8, max_flow=400):
        flow_norm = torch.sum(flow_gt ** 2, dim=1).sqrt()
        valid_flow_mask = (valid_flow_mask & (flow_norm < max_flow))[:, None, :, :]
        flow_preds = torch.stack(flow_preds)
        abs_diff = (flow_preds - flow_gt).abs()
        abs_diff = (abs_diff * valid_flow_mask).mean(dim=(1, 2, 3, 4))
        weights = gamma ** torch.arange(len(flow_preds) - 1, -1, -1, device=flow_gt.device)
        return (abs_diff * weights).sum()

    model.train()
    for _ in range(2):
        img1 = torch.rand(6, 3, 368, 496, device=device) * 2 - 1
        img2 = torch.rand(6, 3, 368, 496, device=device) * 2 - 1
        flow_gt = torch.randn(6, 2, 368, 496, device=device) * 8
        valid = torch.rand(6, 368, 496, device=device) > 0.05
        flow_preds = model(img1, img2, num_flow_updates=12)
        loss = sequence_loss(flow_preds, flow_gt, valid)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        print(f"loss {loss.item():.4f}")
    model.eval()
    with torch.no_grad():
        flow = model(img1[:2], img2[:2], num_flow_updates=32)[-1]
    epe = torch.linalg.vector_norm(flow - flow_gt[:2], dim=1).mean().item()
    print(f"epe {epe:.3f}")


def tv_mvit_v2_s_video_bf16_warmup_cosine(device):
    """torchvision MViT-v2-S video classifier (multiscale pooling attention with relative positions,
    no weights, 400 classes, stochastic depth 0.2) on batch 4 clips of 16 frames at 224 x 224, bf16
    autocast, label smoothing 0.1, AdamW (weight decay 0.05) with a linear warm-up followed by cosine
    annealing through SequentialLR, gradients clipped to 1.0, two steps."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.video.mvit_v2_s(weights=None, num_classes=400, stochastic_depth_prob=0.2).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1.6e-3, weight_decay=0.05)
    warmup = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.01, total_iters=30)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=170, eta_min=1e-5)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [warmup, cosine], milestones=[30])
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    model.train()
    for _ in range(2):
        clips = torch.randn(4, 3, 16, 224, 224, device=device)
        y = torch.randint(0, 400, (4,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = criterion(model(clips), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        print(f"loss {loss.item():.4f}")


def timm_coatnet_0_lion_cosine_updates_bf16(device):
    """timm CoAtNet-0 (coatnet_0_rw_224: MBConv then relative-position transformer stages, 100
    classes, drop path 0.1, no pretrained weights) at batch 48 of 224 x 224, bf16 autocast, timm's
    Lion optimizer made by timm.optim.create_optimizer_v2 (weight decay 0.05, none on biases and
    norms), timm's CosineLRScheduler with warm-up stepped per update (t_in_epochs False), two steps;
    then an evaluation pass on 64 images under torch.no_grad with timm.utils.accuracy (top-1, top-5)."""
    import timm
    from timm.optim import create_optimizer_v2
    from timm.scheduler import CosineLRScheduler
    from timm.utils import accuracy

    torch.manual_seed(0)
    model = timm.create_model("coatnet_0_rw_224", pretrained=False, num_classes=100, drop_path_rate=0.1).to(device)
    opt = create_optimizer_v2(model, opt="lion", lr=1e-4, weight_decay=0.05)
    sched = CosineLRScheduler(opt, t_initial=5000, lr_min=1e-6, warmup_t=200, warmup_lr_init=1e-7, t_in_epochs=False)
    num_updates = 0
    model.train()
    for _ in range(2):
        x = torch.randn(48, 3, 224, 224, device=device)
        y = torch.randint(0, 100, (48,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        num_updates += 1
        sched.step_update(num_updates=num_updates)
        print(f"loss {loss.item():.4f} lr {opt.param_groups[0]['lr']:.2e}")
    sched.step(1)
    model.eval()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        x = torch.randn(64, 3, 224, 224, device=device)
        y = torch.randint(0, 100, (64,), device=device)
        top1, top5 = accuracy(model(x), y, topk=(1, 5))
    print(f"top1 {top1.item():.2f} top5 {top5.item():.2f}")


def timm_beit_base_layer_decay_native_scaler_fp16(device):
    """timm BEiT-base/16 (relative position bias per block, layer scale, 100 classes, drop path 0.1,
    no pretrained weights) fine-tuned at batch 24 of 224 x 224 with layer-wise learning-rate decay
    0.65 (create_optimizer_v2 with layer_decay: one AdamW param group per depth and decay class,
    each with its lr_scale), timm's CosineLRScheduler applying those scales per update, label
    smoothing 0.1, fp16 autocast through timm.utils.NativeScaler (a GradScaler) clipping gradients to
    5.0, two steps."""
    import timm
    from timm.optim import create_optimizer_v2
    from timm.scheduler import CosineLRScheduler
    from timm.utils import NativeScaler

    torch.manual_seed(0)
    model = timm.create_model("beit_base_patch16_224", pretrained=False, num_classes=100, drop_path_rate=0.1).to(device)
    opt = create_optimizer_v2(model, opt="adamw", lr=4e-3, weight_decay=0.05, layer_decay=0.65)
    sched = CosineLRScheduler(opt, t_initial=10000, lr_min=1e-6, warmup_t=500, warmup_lr_init=1e-6, t_in_epochs=False)
    loss_scaler = NativeScaler()
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    model.train()
    for step in range(2):
        x = torch.randn(24, 3, 224, 224, device=device)
        y = torch.randint(0, 100, (24,), device=device)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(x), y)
        loss_scaler(loss, opt, clip_grad=5.0, parameters=model.parameters())
        opt.zero_grad(set_to_none=True)
        sched.step_update(num_updates=step + 1)
        print(f"loss {loss.item():.4f}")


def pointnet2_fps_ball_query_classifier(device):
    """A hand-written PointNet++ (single-scale grouping) classifier: batch 48 clouds of 2,048 points
    (xyz), set abstraction 1 by farthest-point sampling of 512 centroids (a Python loop of 512
    argmax steps), ball query of radius 0.2 taking 32 neighbours (torch.cdist, masking and a sort),
    grouped relative coordinates through a shared 1x1 Conv2d-BatchNorm MLP (64, 64, 128) and a max
    over each group; set abstraction 2 of 128 centroids, radius 0.4, 64 neighbours, MLP (128, 128,
    256); a global abstraction MLP (256, 512, 1,024); a 512-256-40 head with BatchNorm and dropout
    0.4; float32, Adam with StepLR, two steps; then an evaluation pass under torch.no_grad."""
    torch.manual_seed(0)

    def farthest_point_sample(xyz, npoint):
        b, n, _ = xyz.shape
        centroids = torch.zeros(b, npoint, dtype=torch.long, device=xyz.device)
        distance = torch.full((b, n), 1e10, device=xyz.device)
        farthest = torch.randint(0, n, (b,), device=xyz.device)
        batch_idx = torch.arange(b, device=xyz.device)
        for i in range(npoint):
            centroids[:, i] = farthest
            centroid = xyz[batch_idx, farthest].unsqueeze(1)
            distance = torch.minimum(distance, ((xyz - centroid) ** 2).sum(-1))
            farthest = distance.argmax(-1)
        return centroids

    def index_points(points, idx):
        b = points.shape[0]
        batch_idx = torch.arange(b, device=points.device).view(b, *([1] * (idx.dim() - 1))).expand_as(idx)
        return points[batch_idx, idx]

    def ball_query(radius, nsample, xyz, new_xyz):
        b, n, _ = xyz.shape
        s = new_xyz.shape[1]
        sqrdists = torch.cdist(new_xyz, xyz) ** 2
        group_idx = torch.arange(n, device=xyz.device).view(1, 1, n).repeat(b, s, 1)
        group_idx[sqrdists > radius ** 2] = n
        group_idx = group_idx.sort(dim=-1)[0][:, :, :nsample]
        first = group_idx[:, :, :1].expand(-1, -1, nsample)
        return torch.where(group_idx == n, first, group_idx)

    class SetAbstraction(nn.Module):
        def __init__(self, npoint, radius, nsample, in_ch, mlp, group_all=False):
            super().__init__()
            self.npoint, self.radius, self.nsample, self.group_all = npoint, radius, nsample, group_all
            layers, last = [], in_ch + 3
            for out in mlp:
                layers += [nn.Conv2d(last, out, 1), nn.BatchNorm2d(out), nn.ReLU(inplace=True)]
                last = out
            self.mlp = nn.Sequential(*layers)

        def forward(self, xyz, points):
            if self.group_all:
                new_xyz = xyz.mean(1, keepdim=True)
                grouped = torch.cat([xyz, points], -1).unsqueeze(1)
            else:
                new_xyz = index_points(xyz, farthest_point_sample(xyz, self.npoint))
                idx = ball_query(self.radius, self.nsample, xyz, new_xyz)
                grouped_xyz = index_points(xyz, idx) - new_xyz.unsqueeze(2)
                grouped = grouped_xyz if points is None else torch.cat([grouped_xyz, index_points(points, idx)], -1)
            feats = self.mlp(grouped.permute(0, 3, 2, 1))
            return new_xyz, feats.max(2)[0].transpose(1, 2)

    class PointNet2(nn.Module):
        def __init__(self, classes=40):
            super().__init__()
            self.sa1 = SetAbstraction(512, 0.2, 32, 0, [64, 64, 128])
            self.sa2 = SetAbstraction(128, 0.4, 64, 128, [128, 128, 256])
            self.sa3 = SetAbstraction(None, None, None, 256, [256, 512, 1024], group_all=True)
            self.head = nn.Sequential(nn.Linear(1024, 512), nn.BatchNorm1d(512), nn.ReLU(inplace=True), nn.Dropout(0.4),
                                      nn.Linear(512, 256), nn.BatchNorm1d(256), nn.ReLU(inplace=True), nn.Dropout(0.4),
                                      nn.Linear(256, classes))

        def forward(self, xyz):
            l1_xyz, l1 = self.sa1(xyz, None)
            l2_xyz, l2 = self.sa2(l1_xyz, l1)
            _, l3 = self.sa3(l2_xyz, l2)
            return self.head(l3.squeeze(1))

    model = PointNet2().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=20, gamma=0.7)
    model.train()
    for _ in range(2):
        pts = torch.randn(48, 2048, 3, device=device)
        pts = pts / pts.norm(dim=-1, keepdim=True).amax(dim=1, keepdim=True)
        y = torch.randint(0, 40, (48,), device=device)
        loss = F.cross_entropy(model(pts), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"loss {loss.item():.4f}")
    sched.step()
    model.eval()
    with torch.no_grad():
        acc = (model(pts).argmax(-1) == y).float().mean().item()
    print(f"acc {acc:.3f}")


def rnnt_transducer_logcumsumexp_loss(device):
    """A hand-written RNN-Transducer speech recognizer: 80-d log-mel features of 1,000 frames (batch
    16, per-utterance lengths) subsampled x4 by two stride-2 Conv2d layers, a 4-layer unidirectional
    LSTM encoder of 640, a prediction network (embedding 320 and a 1-layer LSTM of 640) over the
    blank-prefixed transcripts of up to 60 tokens, an additive joint network of 512 with tanh over
    the full (batch, 249, 61, 1,024-token vocabulary) lattice, log_softmax, and the transducer loss
    written by hand: the forward variables over time steps, each time step's label recursion solved
    at once by logcumsumexp, gathered at each utterance's last frame and label; bf16 autocast for
    the networks (lattice log-probabilities in float32), AdamW, gradients clipped to 5.0, two steps."""
    torch.manual_seed(0)
    vocab, blank, batch, frames, max_u = 1024, 0, 16, 1000, 60

    class Transducer(nn.Module):
        def __init__(self):
            super().__init__()
            self.subsample = nn.Sequential(nn.Conv2d(1, 64, 3, stride=2), nn.ReLU(), nn.Conv2d(64, 64, 3, stride=2), nn.ReLU())
            self.enc_in = nn.Linear(64 * 19, 640)
            self.encoder = nn.LSTM(640, 640, num_layers=4, batch_first=True, dropout=0.1)
            self.embed = nn.Embedding(vocab, 320)
            self.predictor = nn.LSTM(320, 640, num_layers=1, batch_first=True)
            self.enc_proj = nn.Linear(640, 512)
            self.pred_proj = nn.Linear(640, 512)
            self.out = nn.Linear(512, vocab)

        def forward(self, feats, labels):
            x = self.subsample(feats.unsqueeze(1))
            x = self.enc_in(x.permute(0, 2, 1, 3).flatten(2))
            enc, _ = self.encoder(x)
            pred_in = F.pad(labels, (1, 0), value=blank)
            pred, _ = self.predictor(self.embed(pred_in))
            joint = torch.tanh(self.enc_proj(enc).unsqueeze(2) + self.pred_proj(pred).unsqueeze(1))
            return self.out(joint)

    def transducer_loss(logits, labels, t_lengths, u_lengths):
        logp = logits.float().log_softmax(dim=-1)
        b, t_max, u1, _ = logp.shape
        blank_lp = logp[..., blank]
        emit_lp = logp[:, :, :-1, :].gather(-1, labels[:, None, :, None].expand(b, t_max, u1 - 1, 1)).squeeze(-1)
        zero = blank_lp.new_zeros(b, 1)
        alpha = torch.cat([zero, emit_lp[:, 0].cumsum(-1)], dim=-1)
        alphas = [alpha]
        for t in range(1, t_max):
            a = alphas[-1] + blank_lp[:, t - 1]
            c = torch.cat([zero, emit_lp[:, t].cumsum(-1)], dim=-1)
            alphas.append(c + torch.logcumsumexp(a - c, dim=-1))
        alphas = torch.stack(alphas, dim=1)
        idx = torch.arange(b, device=logits.device)
        loglik = alphas[idx, t_lengths - 1, u_lengths] + blank_lp[idx, t_lengths - 1, u_lengths]
        return -(loglik / u_lengths).mean()

    model = Transducer().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.98), weight_decay=1e-3)
    frame_lengths = torch.linspace(frames, 700, batch).long()
    t_lengths = ((frame_lengths - 3) // 2 + 1 - 3) // 2 + 1
    u_lengths = torch.linspace(max_u, 25, batch).long()
    model.train()
    for _ in range(2):
        feats = torch.randn(batch, frames, 80, device=device)
        feats = feats.masked_fill((torch.arange(frames)[None, :] >= frame_lengths[:, None]).to(device)[..., None], 0.0)
        labels = torch.randint(1, vocab, (batch, max_u), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(feats, labels)
        loss = transducer_loss(logits, labels, t_lengths.to(device), u_lengths.to(device))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"loss {loss.item():.4f}")


def dino_multicrop_momentum_teacher_fp16(device):
    """DINO self-distillation written by hand: a ViT-S-like backbone (patch 16, width 384, 6 blocks, 6
    heads, scaled_dot_product_attention, position embeddings interpolated bicubically for the crop
    size) with a DINO head (MLP 2,048-2,048-256, L2 normalisation, a weight-normalised 65,536-way last
    layer whose norm is frozen) as student, and a deep copy as momentum teacher (no gradients, EMA
    0.996); from batch 48 of 256 x 256 images, 2 global crops resized to 224 and 6 local crops to 96
    (random boxes, flips), the student run once per resolution, the teacher on the global crops only;
    the cross-entropy between the teacher's centred, sharpened (0.04) softmax and the student's (0.1)
    over all pairs of different views, the centre updated by EMA; fp16 autocast with a GradScaler,
    AdamW with no weight decay on biases and norms, gradients unscaled and clipped to 3.0, the last
    layer's gradients dropped in the first step; two steps."""
    import copy

    torch.manual_seed(0)
    dim, depth, heads, out_dim = 384, 6, 6, 65536

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.qkv, self.proj = nn.LayerNorm(dim), nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.norm2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def forward(self, x):
            b, n, d = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            x = x + self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, d))
            return x + self.mlp(self.norm2(x))

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch = nn.Conv2d(3, dim, 16, 16)
            self.cls = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos = nn.Parameter(torch.randn(1, 1 + 14 * 14, dim) * 0.02)
            self.blocks = nn.ModuleList(Block() for _ in range(depth))
            self.norm = nn.LayerNorm(dim)

        def pos_for(self, h, w):
            if h == 14 and w == 14:
                return self.pos
            grid = self.pos[:, 1:].reshape(1, 14, 14, dim).permute(0, 3, 1, 2)
            grid = F.interpolate(grid, size=(h, w), mode="bicubic", align_corners=False)
            return torch.cat([self.pos[:, :1], grid.flatten(2).transpose(1, 2)], dim=1)

        def forward(self, x):
            x = self.patch(x)
            h, w = x.shape[-2:]
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x.flatten(2).transpose(1, 2)], dim=1) + self.pos_for(h, w)
            for blk in self.blocks:
                x = blk(x)
            return self.norm(x)[:, 0]

    class DINOHead(nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(dim, 2048), nn.GELU(), nn.Linear(2048, 2048), nn.GELU(), nn.Linear(2048, 256))
            self.last_layer = torch.nn.utils.parametrizations.weight_norm(nn.Linear(256, out_dim, bias=False))
            self.last_layer.parametrizations.weight.original0.data.fill_(1)
            self.last_layer.parametrizations.weight.original0.requires_grad = False

        def forward(self, x):
            return self.last_layer(F.normalize(self.mlp(x), dim=-1, p=2))

    class MultiCropWrapper(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone, self.head = ViT(), DINOHead()

        def forward(self, crops):
            sizes = torch.tensor([c.shape[-1] for c in crops])
            idx_crops = torch.cumsum(torch.unique_consecutive(sizes, return_counts=True)[1], 0)
            start, outputs = 0, []
            for end in idx_crops.tolist():
                outputs.append(self.backbone(torch.cat(crops[start:end])))
                start = end
            return self.head(torch.cat(outputs))

    student = MultiCropWrapper().to(device)
    teacher = copy.deepcopy(student)
    for p in teacher.parameters():
        p.requires_grad = False
    center = torch.zeros(1, out_dim, device=device)
    params = [p for p in student.parameters() if p.requires_grad]
    regularized = [p for p in params if p.ndim > 1]
    not_regularized = [p for p in params if p.ndim <= 1]
    opt = torch.optim.AdamW([{"params": regularized, "weight_decay": 0.04}, {"params": not_regularized, "weight_decay": 0.0}],
                            lr=5e-4)
    scaler = torch.amp.GradScaler("cuda")
    batch, n_global, n_local = 48, 2, 6

    def random_resized_crop(images, size, scale):
        side = images.shape[-1]
        crop = int(side * (scale[0] + torch.rand(1).item() * (scale[1] - scale[0])) ** 0.5)
        top = torch.randint(0, side - crop + 1, (1,)).item()
        left = torch.randint(0, side - crop + 1, (1,)).item()
        out = F.interpolate(images[:, :, top:top + crop, left:left + crop], size=(size, size), mode="bilinear",
                            align_corners=False, antialias=True)
        flip = torch.rand(images.shape[0], device=images.device) < 0.5
        return torch.where(flip[:, None, None, None], out.flip(-1), out)

    for step in range(2):
        images = torch.rand(batch, 3, 256, 256, device=device)
        crops = [random_resized_crop(images, 224, (0.4, 1.0)) for _ in range(n_global)]
        crops += [random_resized_crop(images, 96, (0.05, 0.4)) for _ in range(n_local)]
        with torch.autocast("cuda", dtype=torch.float16):
            with torch.no_grad():
                teacher_out = teacher(crops[:n_global])
            student_out = student(crops)
            s_chunks = (student_out.float() / 0.1).chunk(n_global + n_local)
            t_soft = F.softmax((teacher_out.float() - center) / 0.04, dim=-1).chunk(n_global)
            total, n_terms = 0.0, 0
            for iq, q in enumerate(t_soft):
                for v, s in enumerate(s_chunks):
                    if v == iq:
                        continue
                    total = total + torch.sum(-q * F.log_softmax(s, dim=-1), dim=-1).mean()
                    n_terms += 1
            loss = total / n_terms
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(params, 3.0)
        if step == 0:
            for p in student.head.last_layer.parameters():
                p.grad = None
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            for ps, pt in zip(student.parameters(), teacher.parameters()):
                pt.mul_(0.996).add_(ps.detach(), alpha=0.004)
            center = center * 0.9 + teacher_out.float().mean(dim=0, keepdim=True) * 0.1
        print(f"loss {loss.item():.4f}")


def gcn_sparse_coo_spmm_full_batch(device):
    """A hand-written 3-layer graph convolutional network trained full-batch on a random graph of
    150,000 nodes and 3,000,000 undirected edges: the symmetric-normalised adjacency with self loops
    (D^-1/2 (A + I) D^-1/2) built once as a coalesced torch.sparse_coo_tensor and applied with
    torch.sparse.mm after each layer's Linear (128 input features, hidden 256, BatchNorm, ReLU,
    dropout 0.5, 47 classes), cross entropy on a 10% training mask, float32, Adam (weight decay
    5e-4), three epochs, each followed by an evaluation on the validation mask under torch.no_grad."""
    torch.manual_seed(0)
    n, e, in_dim, hidden, classes = 150_000, 3_000_000, 128, 256, 47
    src = torch.randint(0, n, (e,), device=device)
    dst = torch.randint(0, n, (e,), device=device)
    loops = torch.arange(n, device=device)
    row = torch.cat([src, dst, loops])
    col = torch.cat([dst, src, loops])
    deg = torch.zeros(n, device=device).index_add_(0, row, torch.ones_like(row, dtype=torch.float32))
    dinv = deg.pow(-0.5)
    values = dinv[row] * dinv[col]
    adj = torch.sparse_coo_tensor(torch.stack([row, col]), values, (n, n)).coalesce()
    del src, dst, row, col, values, deg, dinv

    class GCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.lins = nn.ModuleList([nn.Linear(in_dim, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, classes)])
            self.norms = nn.ModuleList([nn.BatchNorm1d(hidden), nn.BatchNorm1d(hidden)])

        def forward(self, x, adj):
            for i, lin in enumerate(self.lins):
                x = torch.sparse.mm(adj, lin(x))
                if i < len(self.norms):
                    x = F.dropout(F.relu(self.norms[i](x)), p=0.5, training=self.training)
            return x

    x = torch.randn(n, in_dim, device=device)
    y = torch.randint(0, classes, (n,), device=device)
    split = torch.rand(n, device=device)
    train_mask, val_mask = split < 0.1, (split >= 0.1) & (split < 0.15)
    model = GCN().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    for epoch in range(3):
        model.train()
        out = model(x, adj)
        loss = F.cross_entropy(out[train_mask], y[train_mask])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        model.eval()
        with torch.no_grad():
            pred = model(x, adj).argmax(-1)
            val_acc = (pred[val_mask] == y[val_mask]).float().mean().item()
        print(f"epoch {epoch} loss {loss.item():.4f} val {val_acc:.3f}")


def deq_anderson_implicit_backward_hook(device):
    """A deep-equilibrium image classifier written after the implicit-layers tutorial: a Conv2d-
    BatchNorm stem to 48 channels on batch 256 of 3 x 32 x 32, a fixed point z = f(z, x) of a residual
    cell (3x3 convolutions 48-96-48 with GroupNorm and ReLU) found under torch.no_grad by Anderson
    acceleration (memory 5, 20 iterations, the mixing weights from torch.linalg.solve on batched
    bordered Gram matrices, a residual .item() per iteration), one more f call with gradients, and a
    tensor hook on the output that solves the backward fixed point with autograd.grad (retain_graph)
    through the same Anderson solver; BatchNorm, average pooling and a 10-way head; float32, Adam,
    two steps; then an evaluation pass under torch.no_grad (the hook skipped)."""
    torch.manual_seed(0)

    def anderson(f, x0, m=5, lam=1e-4, max_iter=20, tol=1e-3, beta=1.0):
        bsz = x0.shape[0]
        X = torch.zeros(bsz, m, x0[0].numel(), dtype=x0.dtype, device=x0.device)
        Fx = torch.zeros(bsz, m, x0[0].numel(), dtype=x0.dtype, device=x0.device)
        X[:, 0], Fx[:, 0] = x0.reshape(bsz, -1), f(x0).reshape(bsz, -1)
        X[:, 1], Fx[:, 1] = Fx[:, 0], f(Fx[:, 0].view_as(x0)).reshape(bsz, -1)
        H = torch.zeros(bsz, m + 1, m + 1, dtype=x0.dtype, device=x0.device)
        H[:, 0, 1:] = H[:, 1:, 0] = 1
        y = torch.zeros(bsz, m + 1, 1, dtype=x0.dtype, device=x0.device)
        y[:, 0] = 1
        res = []
        k = 1
        for k in range(2, max_iter):
            n = min(k, m)
            G = Fx[:, :n] - X[:, :n]
            H[:, 1:n + 1, 1:n + 1] = torch.bmm(G, G.transpose(1, 2)) + lam * torch.eye(n, dtype=x0.dtype, device=x0.device)[None]
            alpha = torch.linalg.solve(H[:, :n + 1, :n + 1], y[:, :n + 1])[:, 1:n + 1, 0]
            X[:, k % m] = beta * (alpha[:, None] @ Fx[:, :n])[:, 0] + (1 - beta) * (alpha[:, None] @ X[:, :n])[:, 0]
            Fx[:, k % m] = f(X[:, k % m].view_as(x0)).reshape(bsz, -1)
            res.append((Fx[:, k % m] - X[:, k % m]).norm().item() / (1e-5 + Fx[:, k % m].norm().item()))
            if res[-1] < tol:
                break
        return X[:, k % m].view_as(x0), res

    class ResNetCell(nn.Module):
        def __init__(self, channels=48, inner=96, groups=8):
            super().__init__()
            self.conv1 = nn.Conv2d(channels, inner, 3, padding=1, bias=False)
            self.conv2 = nn.Conv2d(inner, channels, 3, padding=1, bias=False)
            self.norm1, self.norm2, self.norm3 = nn.GroupNorm(groups, inner), nn.GroupNorm(groups, channels), nn.GroupNorm(groups, channels)
            self.conv1.weight.data.normal_(0, 0.01)
            self.conv2.weight.data.normal_(0, 0.01)

        def forward(self, z, x):
            y = self.norm1(F.relu(self.conv1(z)))
            return self.norm3(F.relu(z + self.norm2(x + self.conv2(y))))

    class DEQFixedPoint(nn.Module):
        def __init__(self, f, solver, **kwargs):
            super().__init__()
            self.f, self.solver, self.kwargs = f, solver, kwargs

        def forward(self, x):
            with torch.no_grad():
                z, self.forward_res = self.solver(lambda z: self.f(z, x), torch.zeros_like(x), **self.kwargs)
            z = self.f(z, x)
            if not z.requires_grad:
                return z
            z0 = z.clone().detach().requires_grad_()
            f0 = self.f(z0, x)

            def backward_hook(grad):
                g, self.backward_res = self.solver(lambda y: torch.autograd.grad(f0, z0, y, retain_graph=True)[0] + grad, grad,
                                                   **self.kwargs)
                return g

            z.register_hook(backward_hook)
            return z

    model = nn.Sequential(nn.Conv2d(3, 48, 3, padding=1, bias=True), nn.BatchNorm2d(48),
                          DEQFixedPoint(ResNetCell(48, 96), anderson, tol=1e-3, max_iter=20, m=5),
                          nn.BatchNorm2d(48), nn.AvgPool2d(8, 8), nn.Flatten(), nn.Linear(48 * 4 * 4, 10)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    for _ in range(2):
        x = torch.randn(256, 3, 32, 32, device=device)
        y = torch.randint(0, 10, (256,), device=device)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        deq = model[2]
        print(f"loss {loss.item():.4f} fwd res {deq.forward_res[-1]:.2e} bwd res {deq.backward_res[-1]:.2e}")
    model.eval()
    with torch.no_grad():
        acc = (model(x).argmax(-1) == y).float().mean().item()
    print(f"acc {acc:.3f}")


ISSUE35S = {
    f.__name__: f
    for f in [
        hf_donut_swin_bart_vision_encoder_decoder_bf16, hf_speecht5_tts_guided_attention_fp32,
        hf_videomae_tube_masking_pretraining_fp16, hf_wav2vec2_conformer_contrastive_pretraining,
        hf_dpt_depth_silog_backbone_lr_bf16, hf_prophetnet_ngram_label_smoothing_bf16,
        tv_keypointrcnn_train_targets_fp16_then_inference, tv_raft_small_sequence_loss_onecycle,
        tv_mvit_v2_s_video_bf16_warmup_cosine, timm_coatnet_0_lion_cosine_updates_bf16,
        timm_beit_base_layer_decay_native_scaler_fp16, pointnet2_fps_ball_query_classifier,
        rnnt_transducer_logcumsumexp_loss, dino_multicrop_momentum_teacher_fp16, gcn_sparse_coo_spmm_full_batch,
        deq_anderson_implicit_backward_hook,
    ]
}
