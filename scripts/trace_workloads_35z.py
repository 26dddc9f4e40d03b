"""Twenty-sixth held-out group of issue 35 (group ISSUE35Z): fourteen more programs of kinds no earlier group had (Nystromformer 4096-token document classifier with landmark attention; ConvBERT span-dynamic-convolution NER tagger with fp16 GradScaler; MPNet sentence embeddings with hard-negative multiple-negatives ranking loss then chunked retrieval eval; Speech2Text conv-subsampled ASR with SpecAugment-style masking then beam search; Informer ProbSparse distilling forecaster with sampled generate; Data2Vec-vision UperNet semantic segmentation with auxiliary FCN head; TimeSformer divided space-time video classifier with SGD and multi-view eval; torchvision R(2+1)D-18 video in channels_last_3d; timm HaloNet-26t local self-attention with timm SGD and cosine warmup; binarized VGG with a sign straight-through custom autograd.Function; FFJORD continuous normalizing flow with Hutchinson trace and fixed-step RK4; byte-level LSTM LM with truncated BPTT; ragged micro-batch accumulation with token-normalized loss on a hand GPT; ViT with expert-choice mixture-of-experts routing), written by a helper that read no part of the tracer, committed before they were recorded on a GPU (an H200) or compared with anything.

Each is a function of the device, recorded by scripts/record_trace_workloads.py (VRAMLAB_HOLDOUT=issue35z).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def hf_nystromformer_4096_token_document_classifier_bf16(device):
    """NystromformerForSequenceClassification from a NystromformerConfig (12 layers, 768 wide, 12 heads,
    3072 FFN, 64 landmarks, depthwise conv of kernel 65 over values), long documents truncated to exactly
    4096 tokens with [CLS]/[SEP] and an all-ones attention mask (the landmark attention of this
    transformers version takes no padding mask), 20 classes, batch 4,
    bf16 autocast, AdamW lr 3e-5 with 2 warmup steps then linear decay over 8 steps, grad clipping 1.0,
    printed loss and batch accuracy, then eval on 3 batches of 4 under no_grad with accuracy."""
    from transformers import NystromformerConfig, NystromformerForSequenceClassification

    torch.manual_seed(0)
    batch_size, seq_len, num_labels, steps, warmup = 4, 4096, 20, 8, 2
    config = NystromformerConfig(
        vocab_size=30000, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
        intermediate_size=3072, max_position_embeddings=seq_len, segment_means_seq_len=seq_len,
        num_landmarks=64, conv_kernel_size=65, num_labels=num_labels,
    )
    model = NystromformerForSequenceClassification(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / warmup if s < warmup else max(0.0, (steps - s) / (steps - warmup)))
    amp_dtype = torch.bfloat16

    def make_batch(n):
        input_ids = torch.randint(5, config.vocab_size, (n, seq_len))  # truncation=True, max_length=4096
        input_ids[:, 0] = config.bos_token_id
        input_ids[:, -1] = config.eos_token_id
        attention_mask = torch.ones(n, seq_len, dtype=torch.long)
        labels = torch.randint(0, num_labels, (n,))
        return input_ids.to(device), attention_mask.to(device), labels.to(device)

    model.train()
    for step in range(steps):
        input_ids, attention_mask, labels = make_batch(batch_size)
        with torch.autocast(device_type=torch.device(device).type, dtype=amp_dtype):
            out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        out.loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        acc = (out.logits.argmax(-1) == labels).float().mean().item()
        print(f"step {step} loss {out.loss.item():.4f} acc {acc:.2f} grad_norm {grad_norm.item():.2f}")

    model.eval()
    correct = total = 0
    with torch.no_grad():
        for _ in range(3):
            input_ids, attention_mask, labels = make_batch(batch_size)
            with torch.autocast(device_type=torch.device(device).type, dtype=amp_dtype):
                logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
            correct += (logits.argmax(-1) == labels).sum().item()
            total += labels.numel()
    print(f"eval accuracy {correct / total:.3f}")


def hf_convbert_ner_token_classification_fp16_scaler(device):
    """ConvBertForTokenClassification from a ConvBertConfig (base: 12 layers, 768 wide, 12 heads with
    head_ratio 2, span-based dynamic convolution kernel 9), 9 BIO tags, batch 48 sentences padded to 256
    word pieces with only the first piece of each word labeled (others and padding -100), fp16 autocast
    with GradScaler (unscale then clip 1.0), AdamW lr 5e-5 (no decay on biases and LayerNorm) with 2 linear
    warmup steps and linear decay over 10 steps, printed loss and token accuracy, then eval on 2 batches of
    48 under no_grad with token accuracy and a per-tag confusion matrix from bincount."""
    from transformers import ConvBertConfig, ConvBertForTokenClassification

    torch.manual_seed(0)
    batch_size, seq_len, num_tags, steps, warmup = 48, 256, 9, 10, 2
    config = ConvBertConfig(
        vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
        intermediate_size=3072, head_ratio=2, conv_kernel_size=9, num_groups=1,
        max_position_embeddings=512, num_labels=num_tags,
    )
    model = ConvBertForTokenClassification(config).to(device)
    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not n.endswith(no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if n.endswith(no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=5e-5)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / warmup if s < warmup else max(0.0, (steps - s) / (steps - warmup)))
    scaler = torch.amp.GradScaler(torch.device(device).type)

    def make_batch(n):
        lengths = torch.randint(24, seq_len + 1, (n,))
        input_ids = torch.randint(1000, config.vocab_size, (n, seq_len))
        input_ids[:, 0] = 101
        positions = torch.arange(seq_len)[None, :]
        attention_mask = (positions < lengths[:, None]).long()
        input_ids[positions.expand(n, -1) == (lengths[:, None] - 1)] = 102
        input_ids = input_ids.masked_fill(attention_mask == 0, 0)
        tags = torch.randint(0, num_tags, (n, seq_len))
        tags[torch.rand(n, seq_len) < 0.7] = 0  # most words are "O"
        first_piece = torch.rand(n, seq_len) < 0.75
        labels = tags.masked_fill(~first_piece, -100)
        labels[:, 0] = -100
        labels[positions.expand(n, -1) >= (lengths[:, None] - 1)] = -100
        return input_ids.to(device), attention_mask.to(device), labels.to(device)

    model.train()
    for step in range(steps):
        input_ids, attention_mask, labels = make_batch(batch_size)
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.float16):
            out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        scaler.scale(out.loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        keep = labels != -100
        acc = (out.logits.argmax(-1)[keep] == labels[keep]).float().mean().item()
        print(f"step {step} loss {out.loss.item():.4f} token acc {acc:.3f} scale {scaler.get_scale():.0f}")

    model.eval()
    confusion = torch.zeros(num_tags, num_tags, dtype=torch.long, device=device)
    with torch.no_grad():
        for _ in range(2):
            input_ids, attention_mask, labels = make_batch(batch_size)
            with torch.autocast(device_type=torch.device(device).type, dtype=torch.float16):
                logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
            keep = labels != -100
            pred, gold = logits.argmax(-1)[keep], labels[keep]
            confusion += torch.bincount(gold * num_tags + pred, minlength=num_tags * num_tags).view(num_tags, num_tags)
    print(f"eval token accuracy {(confusion.diag().sum() / confusion.sum()).item():.3f}",
          "per-tag recall", [round(v, 2) for v in (confusion.diag() / confusion.sum(1).clamp(min=1)).tolist()])


def hf_mpnet_sentence_embeddings_hard_negative_mnrl_fp16_scaler(device):
    """Sentence-transformers-style bi-encoder: MPNetModel from an MPNetConfig (base: 12 layers, 768 wide,
    relative position buckets) with attention-masked mean pooling and L2 normalization, trained with the
    multiple-negatives ranking loss on (query, positive, hard negative) triples: batch 48 queries padded
    to 48 tokens and 48 positive + 48 hard-negative passages padded to 160 tokens, scores are scaled
    cosine similarities (x20) of 48 queries against all 96 passages, cross entropy to the diagonal.
    fp16 autocast with GradScaler, AdamW lr 2e-5 with warmup 2 of 8 steps, clip 1.0, printed loss and
    in-batch accuracy. Then eval under inference_mode: encode 2048 passages in chunks of 256 and 512
    queries in chunks of 128, cosine matrix 512 x 2048, recall@1 and recall@10 with topk."""
    from transformers import MPNetConfig, MPNetModel

    torch.manual_seed(0)
    batch_size, query_len, passage_len, steps, warmup = 48, 48, 160, 8, 2
    config = MPNetConfig(vocab_size=30527, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                         intermediate_size=3072, max_position_embeddings=514)
    model = MPNetModel(config, add_pooling_layer=False).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / warmup if s < warmup else max(0.0, (steps - s) / (steps - warmup)))
    scaler = torch.amp.GradScaler(torch.device(device).type)
    amp = dict(device_type=torch.device(device).type, dtype=torch.float16)

    def tokenize(n, max_len, min_len):
        lengths = torch.randint(min_len, max_len + 1, (n,))
        ids = torch.randint(5, config.vocab_size, (n, max_len))
        ids[:, 0] = config.bos_token_id
        positions = torch.arange(max_len)[None, :]
        mask = (positions < lengths[:, None]).long()
        ids[positions.expand(n, -1) == (lengths[:, None] - 1)] = config.eos_token_id
        ids = ids.masked_fill(mask == 0, config.pad_token_id)
        return ids.to(device), mask.to(device)

    def encode(ids, mask):
        hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
        m = mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return F.normalize(pooled.float(), dim=-1)

    model.train()
    for step in range(steps):
        q_ids, q_mask = tokenize(batch_size, query_len, 8)
        p_ids, p_mask = tokenize(2 * batch_size, passage_len, 40)  # positives then hard negatives
        with torch.autocast(**amp):
            q = encode(q_ids, q_mask)
            p = encode(p_ids, p_mask)
        scores = q @ p.t() * 20.0
        labels = torch.arange(batch_size, device=device)
        loss = F.cross_entropy(scores, labels)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        acc = (scores.argmax(1) == labels).float().mean().item()
        print(f"step {step} mnrl loss {loss.item():.4f} in-batch acc {acc:.3f}")

    model.eval()
    with torch.inference_mode(), torch.autocast(**amp):
        corpus = torch.cat([encode(*tokenize(256, passage_len, 40)) for _ in range(8)])
        queries = torch.cat([encode(*tokenize(128, query_len, 8)) for _ in range(4)])
        sim = queries @ corpus.t()
        gold = torch.arange(queries.shape[0], device=device)  # query i's positive is passage i
        top10 = sim.topk(10, dim=1).indices
        r1 = (top10[:, 0] == gold).float().mean().item()
        r10 = (top10 == gold[:, None]).any(1).float().mean().item()
    print(f"corpus {tuple(corpus.shape)} queries {tuple(queries.shape)} recall@1 {r1:.3f} recall@10 {r10:.3f}")


def hf_speech2text_asr_specaugment_train_then_beam_generate_bf16(device):
    """Speech2TextForConditionalGeneration from a Speech2TextConfig (two stride-2 conv subsampling layers
    with 1024 channels and GLU, 12-layer encoder and 6-layer decoder, 512 wide, 8 heads, FFN 2048,
    vocab 10000, eager attention), 80-dim log-mel features, batch 24 utterances of 600..1600 frames padded
    to 1600 with a feature attention mask, SpecAugment-style time and frequency masks applied on the CPU,
    targets of 12..80 tokens padded with -100, bf16 autocast, AdamW lr 5e-4 with inverse-sqrt warmup
    (3 warmup steps), clip 5.0, 8 steps with printed loss; then eval: beam search generate (4 beams, exactly
    40 new tokens via min_new_tokens) for 6 utterances under no_grad."""
    from transformers import Speech2TextConfig, Speech2TextForConditionalGeneration

    torch.manual_seed(0)
    batch_size, max_frames, max_tgt, steps, warmup = 24, 1600, 80, 8, 3
    config = Speech2TextConfig(
        vocab_size=10000, d_model=512, encoder_layers=12, decoder_layers=6, encoder_attention_heads=8,
        decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048, conv_channels=1024,
        conv_kernel_sizes=[5, 5], input_feat_per_channel=80, max_source_positions=6000,
        max_target_positions=1024, dropout=0.1,
    )
    model = Speech2TextForConditionalGeneration(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, betas=(0.9, 0.98), weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, math.sqrt(warmup / (s + 1))))

    def make_batch(n, augment):
        frame_lens = torch.randint(600, max_frames + 1, (n,))
        feats = torch.randn(n, max_frames, 80)
        frame_mask = (torch.arange(max_frames)[None, :] < frame_lens[:, None])
        if augment:
            for i in range(n):
                for _ in range(2):
                    t0 = int(torch.randint(0, int(frame_lens[i]) - 40, (1,)))
                    feats[i, t0:t0 + int(torch.randint(0, 41, (1,))), :] = 0.0
                    f0 = int(torch.randint(0, 80 - 27, (1,)))
                    feats[i, :, f0:f0 + int(torch.randint(0, 28, (1,)))] = 0.0
        feats = feats * frame_mask[..., None]
        tgt_lens = torch.randint(12, max_tgt + 1, (n,))
        labels = torch.randint(4, config.vocab_size, (n, max_tgt))
        positions = torch.arange(max_tgt)[None, :]
        labels[positions.expand(n, -1) == (tgt_lens[:, None] - 1)] = config.eos_token_id
        labels = labels.masked_fill(positions >= tgt_lens[:, None], -100)
        return feats.to(device), frame_mask.long().to(device), labels.to(device)

    model.train()
    for step in range(steps):
        feats, frame_mask, labels = make_batch(batch_size, augment=True)
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
            out = model(input_features=feats, attention_mask=frame_mask, labels=labels)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        ntok = (labels != -100).sum().item()
        print(f"step {step} loss {out.loss.item():.4f} target tokens {ntok} lr {scheduler.get_last_lr()[0]:.2e}")

    model.eval()
    feats, frame_mask, _ = make_batch(6, augment=False)
    with torch.no_grad(), torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
        hyps = model.generate(input_features=feats, attention_mask=frame_mask, num_beams=4,
                              max_new_tokens=40, min_new_tokens=40, early_stopping=True)
    print("beam hypotheses", tuple(hyps.shape), "first", hyps[0, :10].tolist())


def hf_informer_probsparse_distil_forecast_sampling(device):
    """InformerForPrediction from an InformerConfig (ProbSparse self-attention with sampling factor 5,
    distilling conv layers between encoder layers, 3 encoder + 2 decoder layers, d_model 512, 8 heads,
    FFN 2048, Student-t output), 7 variates, context 168 + lags up to 24, prediction 48, 4 time features,
    mean scaling; batch 128 windows with ~5% missing observations, AdamW lr 1e-4, clip 1.0, 8 steps with
    printed NLL; then eval: validation NLL on 128 windows under no_grad and generate() with 100 parallel
    sample paths for 32 series, reporting the mean absolute error of the sample median."""
    from transformers import InformerConfig, InformerForPrediction

    torch.manual_seed(0)
    batch_size, context, horizon, variates, steps = 128, 168, 48, 7, 8
    lags = [1, 2, 3, 4, 5, 6, 7, 24]
    config = InformerConfig(
        prediction_length=horizon, context_length=context, input_size=variates, lags_sequence=lags,
        num_time_features=4, d_model=512, encoder_layers=3, decoder_layers=2, encoder_attention_heads=8,
        decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048, attention_type="prob",
        sampling_factor=5, distil=True, dropout=0.05, num_parallel_samples=100, scaling="mean",
    )
    model = InformerForPrediction(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=1e-2)
    past_len = context + max(lags)

    def make_windows(n):
        total = past_len + horizon
        t = torch.arange(total, dtype=torch.float32)
        phase = torch.rand(n, 1, variates) * 2 * math.pi
        level = 5 + 5 * torch.rand(n, 1, variates)
        series = level + torch.sin(2 * math.pi * t[None, :, None] / 24 + phase) \
            + 0.5 * torch.sin(2 * math.pi * t[None, :, None] / 168 + phase) + 0.2 * torch.randn(n, total, variates)
        start = torch.randint(0, 24 * 365, (n, 1)).float()
        hours = start + t[None, :]
        time_feats = torch.stack([(hours % 24) / 23 - 0.5, ((hours // 24) % 7) / 6 - 0.5,
                                  ((hours // 24) % 30) / 29 - 0.5, ((hours // 24) % 365) / 364 - 0.5], dim=-1)
        observed = (torch.rand(n, past_len, variates) > 0.05).float()
        past = series[:, :past_len] * observed
        return (past.to(device), time_feats[:, :past_len].to(device), observed.to(device),
                series[:, past_len:].to(device), time_feats[:, past_len:].to(device))

    model.train()
    for step in range(steps):
        past, past_tf, observed, future, future_tf = make_windows(batch_size)
        out = model(past_values=past, past_time_features=past_tf, past_observed_mask=observed,
                    future_values=future, future_time_features=future_tf)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"step {step} nll {out.loss.item():.4f}")

    model.eval()
    with torch.no_grad():
        past, past_tf, observed, future, future_tf = make_windows(batch_size)
        val = model(past_values=past, past_time_features=past_tf, past_observed_mask=observed,
                    future_values=future, future_time_features=future_tf).loss
        print(f"validation nll {val.item():.4f}")
        past, past_tf, observed, future, future_tf = make_windows(32)
        samples = model.generate(past_values=past, past_time_features=past_tf, past_observed_mask=observed,
                                 future_time_features=future_tf).sequences
        median = samples.median(dim=1).values
        print("samples", tuple(samples.shape), f"median MAE {(median - future).abs().mean().item():.4f}")


def hf_data2vec_vision_upernet_semantic_segmentation_bf16(device):
    """Data2VecVisionForSemanticSegmentation from a Data2VecVisionConfig (ViT-B/16 at 512x512: 12 layers,
    768 wide, relative position bias, layer scale 0.1, drop path 0.1; features from layers 3/5/7/11 through
    multi-scale FPN necks into a UperNet head with pyramid pooling 1/2/3/6, plus an auxiliary FCN head of
    weight 0.4), 150 classes with ignore index 255, batch 4 images with random masks, bf16 autocast, AdamW
    lr 6e-5 with a poly (power 1.0) schedule over 6 steps, printed loss and pixel accuracy; then eval on
    2 images under no_grad: logits upsampled to 512x512, confusion matrix by bincount, mIoU."""
    from transformers import Data2VecVisionConfig, Data2VecVisionForSemanticSegmentation

    torch.manual_seed(0)
    batch_size, size, num_classes, steps = 4, 512, 150, 6
    config = Data2VecVisionConfig(
        image_size=size, patch_size=16, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
        intermediate_size=3072, use_relative_position_bias=True, use_absolute_position_embeddings=False,
        layer_scale_init_value=0.1, drop_path_rate=0.1, out_indices=[3, 5, 7, 11], pool_scales=[1, 2, 3, 6],
        use_auxiliary_head=True, auxiliary_loss_weight=0.4, num_labels=num_classes,
        semantic_loss_ignore_index=255,
    )
    model = Data2VecVisionForSemanticSegmentation(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-5, betas=(0.9, 0.999), weight_decay=0.05)
    scheduler = torch.optim.lr_scheduler.PolynomialLR(optimizer, total_iters=steps, power=1.0)

    def make_batch(n):
        images = torch.randn(n, 3, size, size)
        coarse = torch.randint(0, num_classes, (n, 1, size // 32, size // 32)).float()
        masks = F.interpolate(coarse, size=(size, size), mode="nearest").squeeze(1).long()
        masks[:, :8, :] = 255  # padded border is ignored
        return images.to(device), masks.to(device)

    model.train()
    for step in range(steps):
        images, masks = make_batch(batch_size)
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
            out = model(pixel_values=images, labels=masks)
        out.loss.backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            pred = F.interpolate(out.logits.float(), size=(size, size), mode="bilinear", align_corners=False).argmax(1)
            valid = masks != 255
            pix_acc = (pred[valid] == masks[valid]).float().mean().item()
        print(f"step {step} loss {out.loss.item():.4f} pixel acc {pix_acc:.3f}")

    model.eval()
    confusion = torch.zeros(num_classes * num_classes, dtype=torch.long, device=device)
    with torch.no_grad(), torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
        images, masks = make_batch(2)
        logits = model(pixel_values=images).logits
        pred = F.interpolate(logits.float(), size=(size, size), mode="bilinear", align_corners=False).argmax(1)
        valid = masks != 255
        confusion += torch.bincount(masks[valid] * num_classes + pred[valid], minlength=num_classes ** 2)
    confusion = confusion.view(num_classes, num_classes).float()
    iou = confusion.diag() / (confusion.sum(0) + confusion.sum(1) - confusion.diag()).clamp(min=1)
    present = confusion.sum(1) > 0
    print(f"eval mIoU {iou[present].mean().item():.4f} over {int(present.sum())} classes")


def hf_timesformer_divided_space_time_sgd_fp16_scaler_multiview_eval(device):
    """TimesformerForVideoClassification from a TimesformerConfig (divided space-time attention, 8 frames
    at 224x224, patch 16, 12 layers, 768 wide, 400 classes), batch 8 clips of shape
    (8, 3, 224, 224), fp16 autocast with GradScaler, SGD momentum 0.9 nesterov lr 0.005 weight decay 1e-4
    with cosine annealing over 6 steps, unscale then clip 1.0, printed loss; then multi-view eval under
    no_grad: 4 videos x 3 spatial crops, softmax averaged over views, top-1/top-5 hits."""
    from transformers import TimesformerConfig, TimesformerForVideoClassification

    torch.manual_seed(0)
    batch_size, frames, size, num_classes, steps = 8, 8, 224, 400, 6
    config = TimesformerConfig(image_size=size, patch_size=16, num_frames=frames, hidden_size=768,
                               num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                               attention_type="divided_space_time", num_labels=num_classes)
    model = TimesformerForVideoClassification(config).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.005, momentum=0.9, nesterov=True, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    scaler = torch.amp.GradScaler(torch.device(device).type)
    mean = torch.tensor([0.45, 0.45, 0.45], device=device).view(1, 1, 3, 1, 1)
    std = torch.tensor([0.225, 0.225, 0.225], device=device).view(1, 1, 3, 1, 1)

    model.train()
    for step in range(steps):
        clips = torch.randint(0, 256, (batch_size, frames, 3, size, size), dtype=torch.uint8).to(device)
        clips = (clips.float() / 255.0 - mean) / std
        labels = torch.randint(0, num_classes, (batch_size,)).to(device)
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.float16):
            out = model(pixel_values=clips, labels=labels)
        scaler.scale(out.loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"step {step} loss {out.loss.item():.4f} lr {scheduler.get_last_lr()[0]:.5f}")

    model.eval()
    num_videos, views = 4, 3
    top1 = top5 = 0
    with torch.no_grad(), torch.autocast(device_type=torch.device(device).type, dtype=torch.float16):
        labels = torch.randint(0, num_classes, (num_videos,)).to(device)
        full = torch.rand(num_videos, frames, 3, size, 320).to(device)
        probs = 0
        for v in range(views):
            offset = v * (320 - size) // (views - 1)
            crop = (full[..., offset:offset + size] - mean) / std
            probs = probs + model(pixel_values=crop).logits.float().softmax(-1)
        probs = probs / views
        top = probs.topk(5, dim=-1).indices
        top1 += (top[:, 0] == labels).sum().item()
        top5 += (top == labels[:, None]).any(-1).sum().item()
    print(f"multi-view eval top1 {top1}/{num_videos} top5 {top5}/{num_videos}")


def tv_r2plus1d_18_channels_last_3d_bf16_warmup_label_smoothing(device):
    """torchvision.models.video.r2plus1d_18 (random init, 400 classes) in channels_last_3d, batch 16 clips
    of 16 frames at 112x112 normalized with the Kinetics mean/std, bf16 autocast, SGD momentum 0.9 lr 0.02
    weight decay 1e-4 with 2 linear warmup steps then cosine over 8 steps, cross entropy with label smoothing
    0.1, printed loss and batch accuracy; then clip-level eval under inference_mode on 40 clips in batches
    of 16, 16 and 8 with top-1 accuracy."""
    import torchvision

    torch.manual_seed(0)
    batch_size, frames, size, num_classes, steps, warmup = 16, 16, 112, 400, 8, 2
    model = torchvision.models.video.r2plus1d_18(weights=None, num_classes=num_classes)
    model = model.to(device, memory_format=torch.channels_last_3d)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [
        torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=warmup),
        torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps - warmup),
    ], milestones=[warmup])
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    mean = torch.tensor([0.43216, 0.394666, 0.37645], device=device).view(1, 3, 1, 1, 1)
    std = torch.tensor([0.22803, 0.22145, 0.216989], device=device).view(1, 3, 1, 1, 1)

    def make_clips(n):
        raw = torch.randint(0, 256, (n, frames, size, size, 3), dtype=torch.uint8).to(device)
        clips = raw.permute(0, 4, 1, 2, 3).float().div_(255.0)
        clips = ((clips - mean) / std).contiguous(memory_format=torch.channels_last_3d)
        return clips, torch.randint(0, num_classes, (n,)).to(device)

    model.train()
    for step in range(steps):
        clips, labels = make_clips(batch_size)
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
            logits = model(clips)
            loss = criterion(logits, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        acc = (logits.argmax(1) == labels).float().mean().item()
        print(f"step {step} loss {loss.item():.4f} acc {acc:.3f} lr {scheduler.get_last_lr()[0]:.4f}")

    model.eval()
    correct = seen = 0
    with torch.inference_mode(), torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
        for n in (16, 16, 8):
            clips, labels = make_clips(n)
            correct += (model(clips).argmax(1) == labels).sum().item()
            seen += n
    print(f"clip accuracy {correct}/{seen}")


def timm_halonet26t_sgd_cosine_warmup_bf16_channels_last_top5(device):
    """timm halonet26t (ResNet-26-T stem and bottlenecks with blocked local self-attention, halo 2) built
    with timm.create_model (random init, 1000 classes, drop path 0.05) at 256x256 in channels_last, batch 48,
    bf16 autocast, timm create_optimizer_v2 'sgd' (nesterov momentum 0.9, lr 0.1, weight decay 5e-5) with
    timm CosineLRScheduler (2 warmup steps) over 8 steps, timm LabelSmoothingCrossEntropy 0.1, printed loss;
    then eval under no_grad on 2 batches of 48 with timm.utils.accuracy top-1/top-5."""
    import timm
    from timm.loss import LabelSmoothingCrossEntropy
    from timm.optim import create_optimizer_v2
    from timm.scheduler import CosineLRScheduler
    from timm.utils import accuracy

    torch.manual_seed(0)
    batch_size, size, steps = 48, 256, 8
    model = timm.create_model("halonet26t", pretrained=False, num_classes=1000, drop_path_rate=0.05)
    model = model.to(device, memory_format=torch.channels_last)
    optimizer = create_optimizer_v2(model, opt="sgd", lr=0.1, weight_decay=5e-5, momentum=0.9)
    scheduler = CosineLRScheduler(optimizer, t_initial=steps, warmup_t=2, warmup_lr_init=1e-4, lr_min=1e-5,
                                  t_in_epochs=False)
    criterion = LabelSmoothingCrossEntropy(smoothing=0.1)

    def make_batch(n):
        images = torch.randn(n, 3, size, size).to(device).contiguous(memory_format=torch.channels_last)
        return images, torch.randint(0, 1000, (n,)).to(device)

    model.train()
    for step in range(steps):
        images, targets = make_batch(batch_size)
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
            loss = criterion(model(images), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step_update(num_updates=step + 1)
        print(f"step {step} loss {loss.item():.4f} lr {optimizer.param_groups[0]['lr']:.4f}")

    model.eval()
    with torch.no_grad():
        top1_sum = top5_sum = 0.0
        for _ in range(2):
            images, targets = make_batch(batch_size)
            with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
                output = model(images)
            top1, top5 = accuracy(output, targets, topk=(1, 5))
            top1_sum += top1.item()
            top5_sum += top5.item()
    print(f"eval top1 {top1_sum / 2:.2f} top5 {top5_sum / 2:.2f}")


class _SignSTE(torch.autograd.Function):
    """sign() forward; straight-through (hard-tanh) gradient backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.where(x >= 0, torch.ones_like(x), -torch.ones_like(x))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (x.abs() <= 1).to(grad_output.dtype)


class _BinaryConv2d(nn.Conv2d):
    def __init__(self, *args, binarize_input=True, **kwargs):
        super().__init__(*args, **kwargs)
        self.binarize_input = binarize_input

    def forward(self, x):
        if self.binarize_input:
            x = _SignSTE.apply(x)
        return F.conv2d(x, _SignSTE.apply(self.weight), self.bias, self.stride, self.padding)


class _BinaryLinear(nn.Linear):
    def forward(self, x):
        return F.linear(_SignSTE.apply(x), _SignSTE.apply(self.weight), self.bias)


def binarized_vgg_sign_ste_autograd_function_adam_clamp(device):
    """Binarized neural network (Courbariaux/Hubara BNN) for 32x32 CIFAR-like images: VGG-style
    128C3-128C3-MP-256C3-256C3-MP-512C3-512C3-MP-1024FC-1024FC-10 whose weights and activations are
    binarized by a custom torch.autograd.Function (sign forward, hard-tanh straight-through backward that
    saves its input), BatchNorm + Hardtanh after every layer, fp32, batch 512, Adam lr 5e-3 with exponential
    decay (gamma 0.9), latent real weights clamped to [-1, 1] after each of 10 steps, printed loss and accuracy;
    then eval on 2 batches of 1000 under no_grad."""
    torch.manual_seed(0)
    batch_size, steps = 512, 10

    def conv_block(cin, cout, pool, first=False):
        layers = [_BinaryConv2d(cin, cout, 3, padding=1, bias=False, binarize_input=not first)]
        if pool:
            layers.append(nn.MaxPool2d(2))
        layers += [nn.BatchNorm2d(cout), nn.Hardtanh()]
        return layers

    model = nn.Sequential(
        *conv_block(3, 128, False, first=True), *conv_block(128, 128, True),
        *conv_block(128, 256, False), *conv_block(256, 256, True),
        *conv_block(256, 512, False), *conv_block(512, 512, True),
        nn.Flatten(),
        _BinaryLinear(512 * 4 * 4, 1024, bias=False), nn.BatchNorm1d(1024), nn.Hardtanh(),
        _BinaryLinear(1024, 1024, bias=False), nn.BatchNorm1d(1024), nn.Hardtanh(),
        _BinaryLinear(1024, 10, bias=False), nn.BatchNorm1d(10),
    ).to(device)
    binary_params = [m.weight for m in model.modules() if isinstance(m, (_BinaryConv2d, _BinaryLinear))]
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.9)
    mean = torch.tensor([0.4914, 0.4822, 0.4465], device=device).view(1, 3, 1, 1)
    std = torch.tensor([0.247, 0.243, 0.261], device=device).view(1, 3, 1, 1)

    def make_batch(n):
        images = torch.rand(n, 3, 32, 32)
        flip = torch.rand(n) < 0.5
        images[flip] = images[flip].flip(-1)
        return (images.to(device) - mean) / std, torch.randint(0, 10, (n,)).to(device)

    model.train()
    for step in range(steps):
        images, labels = make_batch(batch_size)
        logits = model(images)
        loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        with torch.no_grad():
            for p in binary_params:
                p.clamp_(-1.0, 1.0)
        acc = (logits.argmax(1) == labels).float().mean().item()
        print(f"step {step} loss {loss.item():.4f} acc {acc:.3f}")

    model.eval()
    correct = 0
    with torch.no_grad():
        for _ in range(2):
            images, labels = make_batch(1000)
            correct += (model(images).argmax(1) == labels).sum().item()
    print(f"eval accuracy {correct / 2000:.4f}")


def ffjord_cnf_hutchinson_trace_fixed_step_rk4(device):
    """FFJORD-style continuous normalizing flow on 64-dim tabular data (a mixture of 16 Gaussians drawn on
    the CPU): the ODE net is 4 ConcatSquash linear layers (hidden 1024, softplus, gated and shifted by t),
    the log-density change is -e^T (df/dz) e with one Rademacher probe per sample via autograd.grad with
    create_graph=True, integrated from t=0 to 1 with 6 fixed RK4 steps (24 function evaluations kept for
    backprop), batch 2048, fp32, Adam lr 1e-3, clip 10, 8 steps with printed NLL in nats and bits per dim;
    then eval NLL on 2048 held-out points (graph only for the trace, no create_graph) and sample 4096 points
    by integrating the ODE backward under no_grad."""
    torch.manual_seed(0)
    dim, hidden, batch_size, steps, ode_steps = 64, 1024, 2048, 8, 6
    centers = 3.0 * torch.randn(16, dim)

    def sample_data(n):
        idx = torch.randint(0, 16, (n,))
        return (centers[idx] + 0.5 * torch.randn(n, dim)).to(device)

    class ConcatSquashLinear(nn.Module):
        def __init__(self, din, dout):
            super().__init__()
            self.layer = nn.Linear(din, dout)
            self.hyper_gate = nn.Linear(1, dout)
            self.hyper_bias = nn.Linear(1, dout, bias=False)

        def forward(self, t, x):
            tt = t.view(1, 1)
            return self.layer(x) * torch.sigmoid(self.hyper_gate(tt)) + self.hyper_bias(tt)

    class ODEFunc(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([ConcatSquashLinear(dim, hidden), ConcatSquashLinear(hidden, hidden),
                                         ConcatSquashLinear(hidden, hidden), ConcatSquashLinear(hidden, dim)])

        def forward(self, t, z):
            h = z
            for i, layer in enumerate(self.layers):
                h = layer(t, h)
                if i < len(self.layers) - 1:
                    h = F.softplus(h)
            return h

    func = ODEFunc().to(device)

    def augmented_dynamics(t, z, e, create_graph):
        with torch.enable_grad():
            if not z.requires_grad:
                z = z.requires_grad_(True)
            dz = func(t, z)
            vjp = torch.autograd.grad(dz, z, e, create_graph=create_graph)[0]
        div = (vjp * e).sum(1)
        return dz, -div

    def integrate(z, create_graph):
        e = (torch.randint(0, 2, z.shape).float() * 2 - 1).to(device)
        logdet = torch.zeros(z.shape[0], device=device)
        h = 1.0 / ode_steps
        for k in range(ode_steps):
            t0 = torch.tensor(k * h, device=device)
            k1z, k1l = augmented_dynamics(t0, z, e, create_graph)
            k2z, k2l = augmented_dynamics(t0 + h / 2, z + h / 2 * k1z, e, create_graph)
            k3z, k3l = augmented_dynamics(t0 + h / 2, z + h / 2 * k2z, e, create_graph)
            k4z, k4l = augmented_dynamics(t0 + h, z + h * k3z, e, create_graph)
            z = z + h / 6 * (k1z + 2 * k2z + 2 * k3z + k4z)
            logdet = logdet + h / 6 * (k1l + 2 * k2l + 2 * k3l + k4l)
        return z, logdet

    def nll(x, create_graph):
        z, delta_logp = integrate(x, create_graph)
        logpz = -0.5 * (z ** 2).sum(1) - 0.5 * dim * math.log(2 * math.pi)
        return -(logpz - delta_logp).mean()

    optimizer = torch.optim.Adam(func.parameters(), lr=1e-3)
    for step in range(steps):
        x = sample_data(batch_size)
        loss = nll(x, create_graph=True)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(func.parameters(), 10.0)
        optimizer.step()
        print(f"step {step} nll {loss.item():.3f} nats bpd {loss.item() / (dim * math.log(2)):.4f}")

    held_out = nll(sample_data(batch_size), create_graph=False)
    print(f"held-out nll {held_out.item():.3f}")

    with torch.no_grad():
        z = torch.randn(4096, dim, device=device)
        h = 1.0 / ode_steps
        for k in reversed(range(ode_steps)):
            t1 = torch.tensor((k + 1) * h, device=device)
            k1 = func(t1, z)
            k2 = func(t1 - h / 2, z - h / 2 * k1)
            k3 = func(t1 - h / 2, z - h / 2 * k2)
            k4 = func(t1 - h, z - h * k3)
            z = z - h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    print("samples", tuple(z.shape), f"mean norm {z.norm(dim=1).mean().item():.3f}")


def byte_lstm_lm_truncated_bptt_detached_hidden_sgd_clip(device):
    """Byte-level language model (embedding 256 -> 3-layer nn.LSTM with 1536 hidden units and dropout 0.2
    -> linear to 256 bytes), trained PyTorch-word_language_model style with truncated BPTT: a synthetic byte
    stream batchified into 128 columns, 8 consecutive segments of 256 time steps, hidden state carried
    between segments and detached each time, fp32 cuDNN, SGD lr 1.0 with clip_grad_norm 0.25, printed loss
    and bits per byte; then eval under no_grad over 4 segments of a 16-column validation stream with the
    hidden state carried."""
    torch.manual_seed(0)
    vocab, emb, hidden, layers = 256, 256, 1536, 3
    batch_size, bptt, segments = 128, 256, 8

    class ByteLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(0.2)
            self.encoder = nn.Embedding(vocab, emb)
            self.rnn = nn.LSTM(emb, hidden, layers, dropout=0.2)
            self.decoder = nn.Linear(hidden, vocab)

        def forward(self, x, state):
            out, state = self.rnn(self.drop(self.encoder(x)), state)
            return self.decoder(self.drop(out)), state

        def init_hidden(self, bsz):
            w = next(self.parameters())
            return (w.new_zeros(layers, bsz, hidden), w.new_zeros(layers, bsz, hidden))

    def batchify(n_cols, n_steps):
        # a repetitive "text" stream: random words from a small lexicon separated by spaces
        lexicon = [torch.randint(97, 123, (int(torch.randint(2, 9, (1,))),)) for _ in range(500)]
        pieces, total = [], 0
        need = n_cols * (n_steps + 1)
        while total < need:
            w = lexicon[int(torch.randint(0, 500, (1,)))]
            pieces += [w, torch.tensor([32])]
            total += w.numel() + 1
        stream = torch.cat(pieces)[:need]
        return stream.view(n_cols, -1).t().contiguous().to(device)  # (time, columns)

    def repackage(state):
        return tuple(s.detach() for s in state)

    model = ByteLSTM().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    train_data = batchify(batch_size, segments * bptt)
    state = model.init_hidden(batch_size)
    model.train()
    for seg in range(segments):
        i = seg * bptt
        x, y = train_data[i:i + bptt], train_data[i + 1:i + 1 + bptt]
        state = repackage(state)
        optimizer.zero_grad()
        logits, state = model(x, state)
        loss = F.cross_entropy(logits.view(-1, vocab), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        optimizer.step()
        print(f"segment {seg} loss {loss.item():.4f} bpb {loss.item() / math.log(2):.3f}")

    model.eval()
    val_data = batchify(16, 4 * bptt)
    state = model.init_hidden(16)
    total_loss = 0.0
    with torch.no_grad():
        for seg in range(4):
            i = seg * bptt
            logits, state = model(val_data[i:i + bptt], state)
            total_loss += F.cross_entropy(logits.view(-1, vocab), val_data[i + 1:i + 1 + bptt].reshape(-1)).item()
    print(f"validation bpb {total_loss / 4 / math.log(2):.3f}")


def ragged_microbatch_accumulation_token_normalized_gpt_bf16(device):
    """Hand-written GPT (12 pre-LN blocks, 1024 wide, 16 heads, GELU MLP 4096, F.scaled_dot_product_attention
    causal, vocab 32000 with tied embeddings, dropout 0.1 also inside SDPA, ~188M params) trained with
    length-bucketed gradient accumulation: each optimizer step accumulates 4 micro-batches of different
    shapes (16x512, 8x1024, 4x2048, 2x4096 tokens), sequences right-padded with labels -100, summed cross
    entropy divided by the number of real target tokens in the whole global batch (counted on the CPU
    first), bf16 autocast, AdamW lr 3e-4 (betas 0.9/0.95, weight decay 0.1 on matrices only) with 1 warmup
    step and cosine decay to 10% over 4 steps, clip 1.0, printed loss and tokens; then eval perplexity on
    8x1024 under no_grad."""
    torch.manual_seed(0)
    vocab, d_model, n_heads, n_layers, max_len = 32000, 1024, 16, 12, 4096
    buckets = [(16, 512), (8, 1024), (4, 2048), (2, 4096)]
    steps, warmup = 4, 1

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d_model)
            self.qkv = nn.Linear(d_model, 3 * d_model)
            self.proj = nn.Linear(d_model, d_model)
            self.ln2 = nn.LayerNorm(d_model)
            self.fc = nn.Linear(d_model, 4 * d_model)
            self.out = nn.Linear(4 * d_model, d_model)
            self.drop = nn.Dropout(0.1)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, n_heads, -1).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.1 if self.training else 0.0)
            x = x + self.drop(self.proj(a.transpose(1, 2).reshape(b, t, d_model)))
            return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, d_model)
            self.wpe = nn.Embedding(max_len, d_model)
            self.blocks = nn.ModuleList([Block() for _ in range(n_layers)])
            self.ln_f = nn.LayerNorm(d_model)
            self.apply(self._init)

        @staticmethod
        def _init(m):
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

        def forward(self, idx):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.blocks:
                x = blk(x)
            return F.linear(self.ln_f(x), self.wte.weight)

    model = GPT().to(device)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=3e-4, betas=(0.9, 0.95))
    def lr_lambda(s):
        if s < warmup:
            return (s + 1) / warmup
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (s - warmup) / (steps - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)

    def make_micro(n, length):
        lengths = torch.randint(length // 2, length + 1, (n,))
        tokens = torch.randint(0, vocab, (n, length + 1))
        positions = torch.arange(length + 1)[None, :]
        tokens = tokens.masked_fill(positions > lengths[:, None], 0)
        inputs, labels = tokens[:, :-1].clone(), tokens[:, 1:].clone()
        labels = labels.masked_fill(positions[:, 1:] > lengths[:, None], -100)
        return inputs, labels

    model.train()
    for step in range(steps):
        micros = [make_micro(n, length) for n, length in buckets]
        total_tokens = sum(int((labels != -100).sum()) for _, labels in micros)
        loss_sum = 0.0
        for inputs, labels in micros:
            inputs, labels = inputs.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
                logits = model(inputs)
            loss = F.cross_entropy(logits.float().view(-1, vocab), labels.view(-1), ignore_index=-100,
                                   reduction="sum") / total_tokens
            loss.backward()
            loss_sum += loss.item()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"step {step} loss {loss_sum:.4f} tokens {total_tokens} grad_norm {grad_norm.item():.3f}")

    model.eval()
    inputs, labels = make_micro(8, 1024)
    with torch.no_grad(), torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
        logits = model(inputs.to(device))
        val = F.cross_entropy(logits.float().view(-1, vocab), labels.to(device).view(-1), ignore_index=-100)
    print(f"eval ppl {math.exp(val.item()):.1f}")


def vit_expert_choice_moe_routing_fp16_scaler(device):
    """ViT (patch 16 at 224x224, 8 blocks, 512 wide, 8 heads, class token) whose every second MLP is a
    mixture of 8 experts (512 -> 2048 -> 512 GELU, expert weights batched with torch.bmm) with expert-choice
    routing: token-to-expert softmax scores over all 96x197 tokens of the batch, each expert picks its
    top-k tokens (capacity factor 2, k = 2 * tokens / 8) with topk over the token axis, gathers them, and
    outputs are scattered back with index_add_ weighted by the gate; batch 96, fp16 autocast with GradScaler,
    AdamW lr 1e-3 weight decay 0.05 with cosine over 8 steps, label smoothing 0.1, printed loss and how
    many tokens no expert picked; then eval top-1 on 2 batches of 96 under no_grad."""
    torch.manual_seed(0)
    img, patch, dim, depth, heads, num_experts, capacity_factor = 224, 16, 512, 8, 8, 8, 2.0
    batch_size, num_classes, steps = 96, 1000, 8

    class ExpertChoiceMoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.router = nn.Linear(dim, num_experts, bias=False)
            self.w1 = nn.Parameter(torch.randn(num_experts, dim, 4 * dim) * dim ** -0.5)
            self.b1 = nn.Parameter(torch.zeros(num_experts, 1, 4 * dim))
            self.w2 = nn.Parameter(torch.randn(num_experts, 4 * dim, dim) * (4 * dim) ** -0.5)
            self.b2 = nn.Parameter(torch.zeros(num_experts, 1, dim))
            self.last_unrouted = 0

        def forward(self, x):
            b, t, d = x.shape
            tokens = x.reshape(b * t, d)
            n = tokens.shape[0]
            k = int(capacity_factor * n / num_experts)
            scores = self.router(tokens).float().softmax(dim=-1)  # (n, e)
            gates, idx = scores.t().topk(k, dim=1)  # (e, k): each expert chooses tokens
            picked = tokens[idx.reshape(-1)].view(num_experts, k, d)
            h = F.gelu(torch.bmm(picked, self.w1.to(picked.dtype)) + self.b1.to(picked.dtype))
            y = torch.bmm(h, self.w2.to(h.dtype)) + self.b2.to(h.dtype)
            y = y * gates.unsqueeze(-1).to(y.dtype)
            out = torch.zeros_like(tokens, dtype=y.dtype).index_add_(0, idx.reshape(-1), y.reshape(-1, d))
            with torch.no_grad():
                self.last_unrouted = n - torch.unique(idx).numel()
            return out.view(b, t, d).to(x.dtype)

    class Block(nn.Module):
        def __init__(self, moe):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim)
            self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
            self.norm2 = nn.LayerNorm(dim)
            self.mlp = ExpertChoiceMoE() if moe else nn.Sequential(
                nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def forward(self, x):
            h = self.norm1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.mlp(self.norm2(x))

    class MoEViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
            self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos_embed = nn.Parameter(torch.randn(1, (img // patch) ** 2 + 1, dim) * 0.02)
            self.blocks = nn.ModuleList([Block(moe=(i % 2 == 1)) for i in range(depth)])
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, num_classes)

        def forward(self, x):
            x = self.patch_embed(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.norm(x)[:, 0])

    model = MoEViT().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    scaler = torch.amp.GradScaler(torch.device(device).type)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    moe_layers = [m for m in model.modules() if isinstance(m, ExpertChoiceMoE)]

    model.train()
    for step in range(steps):
        images = torch.randn(batch_size, 3, img, img).to(device)
        labels = torch.randint(0, num_classes, (batch_size,)).to(device)
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.float16):
            loss = criterion(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        unrouted = [m.last_unrouted for m in moe_layers]
        print(f"step {step} loss {loss.item():.4f} unrouted tokens per MoE layer {unrouted}")

    model.eval()
    correct = 0
    with torch.no_grad(), torch.autocast(device_type=torch.device(device).type, dtype=torch.float16):
        for _ in range(2):
            images = torch.randn(batch_size, 3, img, img).to(device)
            labels = torch.randint(0, num_classes, (batch_size,)).to(device)
            correct += (model(images).argmax(1) == labels).sum().item()
    print(f"eval top1 {correct / (2 * batch_size):.4f}")


ISSUE35Z = {f.__name__: f for f in [
    hf_nystromformer_4096_token_document_classifier_bf16,
    hf_convbert_ner_token_classification_fp16_scaler,
    hf_mpnet_sentence_embeddings_hard_negative_mnrl_fp16_scaler,
    hf_speech2text_asr_specaugment_train_then_beam_generate_bf16,
    hf_informer_probsparse_distil_forecast_sampling,
    hf_data2vec_vision_upernet_semantic_segmentation_bf16,
    hf_timesformer_divided_space_time_sgd_fp16_scaler_multiview_eval,
    tv_r2plus1d_18_channels_last_3d_bf16_warmup_label_smoothing,
    timm_halonet26t_sgd_cosine_warmup_bf16_channels_last_top5,
    binarized_vgg_sign_ste_autograd_function_adam_clamp,
    ffjord_cnf_hutchinson_trace_fixed_step_rk4,
    byte_lstm_lm_truncated_bptt_detached_hidden_sgd_clip,
    ragged_microbatch_accumulation_token_normalized_gpt_bf16,
    vit_expert_choice_moe_routing_fp16_scaler,
]}
