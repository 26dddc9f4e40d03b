"""Eighteenth held-out group of issue 35 (group ISSUE35R): sixteen more programs of kinds no earlier
group had (Hugging Face Gemma-2 with eager soft-capped attention and alternating sliding windows,
OLMo-2 with non-reentrant gradient checkpointing and a cosine warm-up schedule, GPT-J under a
GradScaler with gradient accumulation and clipping, LED on long documents with global attention,
BigBird masked language modelling with block-sparse attention, a HuBERT keyword classifier with its
feature encoder frozen under a GradScaler, a T5 encoder trained as a two-tower retriever with in-batch
negatives and then used to encode an index; torchvision's memory-efficient DenseNet-169 with RMSprop,
ViT-B/16 at 384 pixels with decay groups, warm-up and an evaluation pass, and GoogLeNet with its two
auxiliary heads in channels_last; timm's CAFormer-S18 with RAdam and a model EMA evaluated afterwards,
and PVT-v2-B1 on non-square images with Adamax under a GradScaler; a hand-written video transformer
with divided space-time attention over checkpointed blocks, a speech enhancement net with a complex
ratio mask between STFT and ISTFT trained on SI-SDR and a multi-resolution spectral loss, a DCN-v2
recommender with cross layers, and a RetinaNet-style detector with a feature pyramid and focal loss
over dense anchor targets), written after ISSUE35Q's figures and committed before they were recorded
on a GPU (an H200) or compared with anything.

Each is a function of the device, recorded by scripts/record_trace_workloads.py
(VRAMLAB_HOLDOUT=issue35r). Traced on the CPU before recording only to see that each program is
itself valid."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def hf_gemma2_softcap_eager_bf16(device):
    """Hugging Face Gemma-2 from a small config (4 layers alternating sliding-window 256 and global
    attention, hidden 640, 8 query over 4 key-value heads of 80, vocabulary 64,000, attention-logit
    soft-capping 50 and final-logit soft-capping 30) built by AutoModelForCausalLM.from_config with
    eager attention, as recommended for soft-capping, batch 4 of 512 tokens, bf16 autocast, AdamW,
    two steps."""
    from transformers import AutoModelForCausalLM, Gemma2Config

    torch.manual_seed(0)
    config = Gemma2Config(vocab_size=64000, hidden_size=640, intermediate_size=2560, num_hidden_layers=4, num_attention_heads=8,
                          num_key_value_heads=4, head_dim=80, query_pre_attn_scalar=80, sliding_window=256, max_position_embeddings=2048,
                          attn_logit_softcapping=50.0, final_logit_softcapping=30.0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=0.01)
    for _ in range(2):
        ids = torch.randint(0, 64000, (4, 512), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_olmo2_gradient_checkpointing_cosine_warmup(device):
    """Hugging Face OLMo-2 from a small config (6 layers, hidden 768, 12 heads with QK-norm, vocabulary
    50,304, untied output layer) with non-reentrant gradient checkpointing and use_cache off, batch 8
    of 512 tokens, bf16 autocast, AdamW (foreach) with weight decay only on matrices, a cosine schedule
    with warm-up, gradients clipped to 1.0, three steps."""
    from transformers import Olmo2Config, Olmo2ForCausalLM, get_cosine_schedule_with_warmup

    torch.manual_seed(0)
    config = Olmo2Config(vocab_size=50304, hidden_size=768, intermediate_size=3072, num_hidden_layers=6, num_attention_heads=12,
                         num_key_value_heads=12, max_position_embeddings=2048)
    model = Olmo2ForCausalLM(config).to(device)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    model.train()
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}], lr=4e-4,
                            betas=(0.9, 0.95), foreach=True)
    sched = get_cosine_schedule_with_warmup(opt, num_warmup_steps=100, num_training_steps=5000)
    for _ in range(3):
        ids = torch.randint(0, 50304, (8, 512), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)


def hf_gptj_fp16_scaler_accumulate_clip(device):
    """Hugging Face GPT-J from a small config (4 layers, hidden 512, 8 heads with rotary dimension 32,
    vocabulary 50,400) in fp32 weights, fp16 autocast with a GradScaler, four micro-batches of 4 x 384
    tokens accumulated per step (loss divided by 4), gradients unscaled and clipped to 1.0, AdamW,
    two steps."""
    from transformers import GPTJConfig, GPTJForCausalLM

    torch.manual_seed(0)
    config = GPTJConfig(vocab_size=50400, n_positions=1024, n_embd=512, n_layer=4, n_head=8, rotary_dim=32)
    model = GPTJForCausalLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    scaler = torch.amp.GradScaler("cuda")
    accum = 4
    for _ in range(2):
        for _ in range(accum):
            ids = torch.randint(0, 50400, (4, 384), device=device)
            with torch.autocast("cuda", dtype=torch.float16):
                loss = model(input_ids=ids, labels=ids).loss / accum
            scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)


def hf_led_long_document_global_attention_bf16(device):
    """Hugging Face LED (Longformer encoder-decoder) from a small config (3 + 3 layers, d_model 512,
    8 heads, local attention window 256, vocabulary 50,265) summarizing batch 4 of 4,096-token
    documents (padded tails of varied fixed lengths) with global attention on the first token, into
    256-token summaries whose padded tails are ignored (-100), bf16 autocast, AdamW, two steps."""
    from transformers import LEDConfig, LEDForConditionalGeneration

    torch.manual_seed(0)
    config = LEDConfig(vocab_size=50265, d_model=512, encoder_layers=3, decoder_layers=3, encoder_attention_heads=8, decoder_attention_heads=8,
                       encoder_ffn_dim=2048, decoder_ffn_dim=2048, attention_window=256, max_encoder_position_embeddings=4096,
                       max_decoder_position_embeddings=512, pad_token_id=1, decoder_start_token_id=2)
    model = LEDForConditionalGeneration(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-5)
    src_len, tgt_len = 4096, 256
    src_lengths = torch.tensor([4096, 3500, 2900, 2048])
    tgt_lengths = torch.tensor([256, 230, 190, 150])
    src_mask = (torch.arange(src_len)[None, :] < src_lengths[:, None]).long().to(device)
    tgt_pad = (torch.arange(tgt_len)[None, :] >= tgt_lengths[:, None]).to(device)
    global_mask = torch.zeros_like(src_mask)
    global_mask[:, 0] = 1
    for _ in range(2):
        ids = torch.randint(3, 50265, (4, src_len), device=device).masked_fill(src_mask == 0, 1)
        labels = torch.randint(3, 50265, (4, tgt_len), device=device).masked_fill(tgt_pad, -100)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, attention_mask=src_mask, global_attention_mask=global_mask, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_bigbird_block_sparse_mlm(device):
    """Hugging Face BigBird for masked language modelling from a small config (4 layers, hidden 512,
    8 heads, vocabulary 32,000, block-sparse attention with blocks of 64 and 3 random blocks), batch 4
    of 2,048 tokens with 15% of positions replaced by the mask token and only those labelled, fp32,
    AdamW, two steps, then one evaluation batch under no_grad with its predictions moved to the CPU."""
    from transformers import BigBirdConfig, BigBirdForMaskedLM

    torch.manual_seed(0)
    config = BigBirdConfig(vocab_size=32000, hidden_size=512, num_hidden_layers=4, num_attention_heads=8, intermediate_size=2048,
                           max_position_embeddings=4096, attention_type="block_sparse", block_size=64, num_random_blocks=3)
    model = BigBirdForMaskedLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    mask_id = 4
    for _ in range(2):
        ids = torch.randint(5, 32000, (4, 2048), device=device)
        masked = torch.rand(ids.shape, device=device) < 0.15
        loss = model(input_ids=ids.masked_fill(masked, mask_id), attention_mask=torch.ones_like(ids), labels=ids.masked_fill(~masked, -100)).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    model.eval()
    with torch.no_grad():
        ids = torch.randint(5, 32000, (4, 2048), device=device)
        preds = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits.argmax(-1).cpu()
    assert preds.shape == (4, 2048)


def hf_hubert_keyword_classifier_frozen_encoder_fp16(device):
    """Hugging Face HuBERT for sequence classification from a small config (6 layers, hidden 512,
    8 heads, the default 7-layer convolutional feature encoder frozen, weighted layer sum, projection
    256, 12 keyword classes, SpecAugment time masking and LayerDrop off) on batch 16 of 4-second
    16 kHz waveforms, fp16 autocast with a GradScaler, AdamW over the trainable parameters, two steps."""
    from transformers import HubertConfig, HubertForSequenceClassification

    torch.manual_seed(0)
    config = HubertConfig(hidden_size=512, num_hidden_layers=6, num_attention_heads=8, intermediate_size=2048, num_labels=12,
                          use_weighted_layer_sum=True, classifier_proj_size=256, mask_time_prob=0.0, layerdrop=0.0)
    model = HubertForSequenceClassification(config).to(device)
    model.freeze_feature_encoder()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=5e-5)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(2):
        wav = torch.randn(16, 64000, device=device)
        y = torch.randint(0, 12, (16,), device=device)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(input_values=wav, labels=y).loss
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)


def hf_t5_encoder_two_tower_inbatch_negatives(device):
    """Hugging Face T5 encoder alone (T5EncoderModel, 6 layers, d_model 512, gated-GELU feed-forward of
    1024, vocabulary 32,128) shared by a query tower (batch 96 of 32 tokens) and a document tower
    (batch 96 of 256 tokens), both padded to varied fixed lengths and mean-pooled under their masks,
    L2-normalized, scored against every other pair in the batch with temperature 0.05 and a symmetric
    cross entropy, bf16 autocast, AdamW, two steps; then the encoder indexes 512 documents in chunks of
    128 under inference_mode, the embeddings moved to the CPU."""
    from transformers import T5Config, T5EncoderModel

    torch.manual_seed(0)
    config = T5Config(vocab_size=32128, d_model=512, d_kv=64, d_ff=1024, num_layers=6, num_heads=8, feed_forward_proj="gated-gelu")
    encoder = T5EncoderModel(config).to(device)
    opt = torch.optim.AdamW(encoder.parameters(), lr=1e-4, weight_decay=0.01)
    batch, q_len, d_len = 96, 32, 256

    def embed(ids, mask):
        hidden = encoder(input_ids=ids, attention_mask=mask).last_hidden_state
        pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        return F.normalize(pooled.float(), dim=-1)

    q_mask = (torch.arange(q_len)[None, :] < torch.tensor([32 - (i % 8) * 3 for i in range(batch)])[:, None]).long().to(device)
    d_mask = (torch.arange(d_len)[None, :] < torch.tensor([256 - (i % 16) * 12 for i in range(batch)])[:, None]).long().to(device)
    labels = torch.arange(batch, device=device)
    for _ in range(2):
        q_ids = torch.randint(1, 32128, (batch, q_len), device=device).masked_fill(q_mask == 0, 0)
        d_ids = torch.randint(1, 32128, (batch, d_len), device=device).masked_fill(d_mask == 0, 0)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            q = embed(q_ids, q_mask)
            d = embed(d_ids, d_mask)
            logits = q @ d.T / 0.05
            loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    encoder.eval()
    index = []
    with torch.inference_mode():
        for _ in range(4):
            ids = torch.randint(1, 32128, (128, d_len), device=device)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                index.append(embed(ids, torch.ones_like(ids)).cpu())
    index = torch.cat(index)
    assert index.shape == (512, 512)


def tv_densenet169_memory_efficient_rmsprop(device):
    """torchvision DenseNet-169 (200 classes) with memory_efficient=True, so each dense layer's
    concatenation and bottleneck are recomputed in the backward pass, batch 32 at 224 x 224, fp32,
    RMSprop (alpha 0.9, eps 1.0, momentum 0.9, weight decay 1e-5), two steps, then evaluated on a
    batch of 64 under no_grad."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.densenet169(num_classes=200, memory_efficient=True).to(device)
    opt = torch.optim.RMSprop(model.parameters(), lr=0.016, alpha=0.9, eps=1.0, momentum=0.9, weight_decay=1e-5)
    for _ in range(2):
        x = torch.randn(32, 3, 224, 224, device=device)
        y = torch.randint(0, 200, (32,), device=device)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    model.eval()
    with torch.no_grad():
        probs = model(torch.randn(64, 3, 224, 224, device=device)).softmax(1).cpu()
    assert probs.shape == (64, 200)


def tv_vit_b_16_384_bf16_decay_groups_warmup(device):
    """torchvision ViT-B/16 built for 384 x 384 images (577 tokens, 100 classes, dropout 0.1), batch 8,
    bf16 autocast, label smoothing 0.1, AdamW with weight decay 0.05 only on matrices, a linear warm-up
    by LambdaLR, gradients clipped to 1.0, two steps; then two evaluation batches of 16 under
    inference_mode with their predictions moved to the CPU."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.vit_b_16(image_size=384, num_classes=100, dropout=0.1).to(device)
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / 500))
    for _ in range(2):
        x = torch.randn(8, 3, 384, 384, device=device)
        y = torch.randint(0, 100, (8,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
    model.eval()
    preds = []
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
        for _ in range(2):
            preds.append(model(torch.randn(16, 3, 384, 384, device=device)).argmax(1).cpu())
    assert torch.cat(preds).shape == (32,)


def tv_googlenet_aux_heads_channels_last_sgd(device):
    """torchvision GoogLeNet (1,000 classes) with both auxiliary classifiers, in channels_last, batch 48
    at 224 x 224, fp32, loss = main + 0.3 x each auxiliary cross entropy, SGD with Nesterov momentum
    0.9 and weight decay 1e-4, StepLR, two steps; then evaluated (main head only) on a batch of 96
    under no_grad."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.googlenet(num_classes=1000, aux_logits=True, init_weights=True).to(device, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=8, gamma=0.96)
    for _ in range(2):
        x = torch.randn(48, 3, 224, 224, device=device).contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (48,), device=device)
        out = model(x)
        loss = F.cross_entropy(out.logits, y) + 0.3 * (F.cross_entropy(out.aux_logits1, y) + F.cross_entropy(out.aux_logits2, y))
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
    model.eval()
    with torch.no_grad():
        top5 = model(torch.randn(96, 3, 224, 224, device=device).contiguous(memory_format=torch.channels_last)).topk(5, 1).indices.cpu()
    assert top5.shape == (96, 5)


def timm_caformer_s18_radam_ema_bf16(device):
    """timm CAFormer-S18 (convolutional then attention MetaFormer stages, 100 classes, drop path 0.15),
    batch 24 at 224 x 224, bf16 autocast, RAdam with decoupled weight decay 0.05, a ModelEmaV3 copy
    updated after each step, two steps; then the EMA copy evaluated on a batch of 48 under no_grad and
    its float logits moved to the CPU."""
    import timm
    import timm.utils

    torch.manual_seed(0)
    model = timm.create_model("caformer_s18", num_classes=100, drop_path_rate=0.15).to(device)
    ema = timm.utils.ModelEmaV3(model, decay=0.9998)
    opt = torch.optim.RAdam(model.parameters(), lr=1e-3, weight_decay=0.05, decoupled_weight_decay=True)
    for _ in range(2):
        x = torch.randn(24, 3, 224, 224, device=device)
        y = torch.randint(0, 100, (24,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        ema.update(model)
    ema.module.eval()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        logits = ema.module(torch.randn(48, 3, 224, 224, device=device)).float().cpu()
    assert logits.shape == (48, 100)


def timm_pvt_v2_b1_nonsquare_adamax_fp16(device):
    """timm PVT-v2-B1 (overlapping patch embeddings, spatial-reduction attention, 10 classes) on
    non-square 288 x 416 images, batch 16, fp16 autocast with a GradScaler, Adamax, gradients unscaled
    and clipped to 5.0, two steps."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("pvt_v2_b1", num_classes=10).to(device)
    opt = torch.optim.Adamax(model.parameters(), lr=2e-3, weight_decay=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(2):
        x = torch.randn(16, 3, 288, 416, device=device)
        y = torch.randint(0, 10, (16,), device=device)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)


def video_transformer_divided_space_time(device):
    """A hand-written TimeSformer-like video transformer: 8 frames of 224 x 224 cut into 16 x 16 tubelets
    of one frame by a Conv3d (196 patches a frame), learned space and time position embeddings, 8
    blocks of width 512 and 8 heads that attend over time (per patch) then over space (per frame) with
    scaled_dot_product_attention before an MLP, each block under non-reentrant torch.utils.checkpoint,
    mean pooled into 174 classes; batch 6 clips, bf16 autocast, AdamW, two steps."""
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    frames, patches, dim, heads = 8, 196, 512, 8

    class DividedBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm_t, self.qkv_t, self.proj_t = nn.LayerNorm(dim), nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.norm_s, self.qkv_s, self.proj_s = nn.LayerNorm(dim), nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.norm_m = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        @staticmethod
        def attend(x, qkv, proj):
            b, n, d = x.shape
            q, k, v = qkv(x).view(b, n, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            out = F.scaled_dot_product_attention(q, k, v)
            return proj(out.transpose(1, 2).reshape(b, n, d))

        def forward(self, x):
            b = x.shape[0]
            xt = x.view(b, frames, patches, dim).transpose(1, 2).reshape(b * patches, frames, dim)
            xt = xt + self.attend(self.norm_t(xt), self.qkv_t, self.proj_t)
            xs = xt.view(b, patches, frames, dim).transpose(1, 2).reshape(b * frames, patches, dim)
            xs = xs + self.attend(self.norm_s(xs), self.qkv_s, self.proj_s)
            x = xs.view(b, frames * patches, dim)
            return x + self.mlp(self.norm_m(x))

    class VideoTransformer(nn.Module):
        def __init__(self, depth=8, classes=174):
            super().__init__()
            self.embed = nn.Conv3d(3, dim, kernel_size=(1, 16, 16), stride=(1, 16, 16))
            self.pos_space = nn.Parameter(torch.zeros(1, 1, patches, dim))
            self.pos_time = nn.Parameter(torch.zeros(1, frames, 1, dim))
            self.blocks = nn.ModuleList(DividedBlock() for _ in range(depth))
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, classes)

        def forward(self, video):
            x = self.embed(video).flatten(3).permute(0, 2, 3, 1)
            x = (x + self.pos_space + self.pos_time).flatten(1, 2)
            for block in self.blocks:
                x = checkpoint(block, x, use_reentrant=False)
            return self.head(self.norm(x).mean(1))

    model = VideoTransformer().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.05)
    for _ in range(2):
        video = torch.randn(6, 3, frames, 224, 224, device=device)
        y = torch.randint(0, 174, (6,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(video), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def speech_enhancement_stft_complex_mask(device):
    """A hand-written speech enhancement net: the noisy waveform (batch 16 of 4 s at 16 kHz) goes
    through torch.stft (n_fft 512, hop 128, Hann window) to a complex spectrogram, its log magnitude
    through two Conv1d layers and a 2-layer bidirectional LSTM of 256 to a bounded complex ratio mask,
    the masked spectrogram back through torch.istft; trained in fp32 with Adam on negative SI-SDR plus a
    multi-resolution STFT log-magnitude L1 loss (n_fft 256, 512, 1024), gradients clipped to 5.0, two
    steps; then 4 ten-second clips enhanced under no_grad and moved to the CPU."""
    torch.manual_seed(0)
    n_fft, hop, bins = 512, 128, 257

    class MaskNet(nn.Module):
        def __init__(self, hidden=256):
            super().__init__()
            self.encoder = nn.Sequential(nn.Conv1d(bins, 512, 3, padding=1), nn.BatchNorm1d(512), nn.PReLU(),
                                         nn.Conv1d(512, 512, 3, padding=1), nn.BatchNorm1d(512), nn.PReLU())
            self.lstm = nn.LSTM(512, hidden, num_layers=2, batch_first=True, bidirectional=True)
            self.mask = nn.Linear(2 * hidden, 2 * bins)

        def forward(self, spec):
            b, _, t = spec.shape
            h = self.encoder(torch.log1p(spec.abs())).transpose(1, 2)
            h, _ = self.lstm(h)
            m = torch.tanh(self.mask(h)).view(b, t, 2, bins).permute(0, 2, 3, 1)
            return spec * torch.complex(m[:, 0].contiguous(), m[:, 1].contiguous())

    def si_sdr(est, ref, eps=1e-8):
        alpha = (est * ref).sum(-1, keepdim=True) / (ref.pow(2).sum(-1, keepdim=True) + eps)
        target = alpha * ref
        noise = est - target
        return 10 * torch.log10(target.pow(2).sum(-1) / (noise.pow(2).sum(-1) + eps) + eps)

    def multi_res_loss(est, ref):
        total = 0.0
        for size in (256, 512, 1024):
            win = torch.hann_window(size, device=est.device)
            e = torch.stft(est, size, size // 4, window=win, return_complex=True).abs()
            r = torch.stft(ref, size, size // 4, window=win, return_complex=True).abs()
            total = total + F.l1_loss(torch.log(e + 1e-5), torch.log(r + 1e-5))
        return total / 3

    model = MaskNet().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    window = torch.hann_window(n_fft, device=device)
    samples = 64000
    for _ in range(2):
        clean = 0.1 * torch.randn(16, samples, device=device)
        noisy = clean + 0.05 * torch.randn(16, samples, device=device)
        spec = torch.stft(noisy, n_fft, hop, window=window, return_complex=True)
        est = torch.istft(model(spec), n_fft, hop, window=window, length=samples)
        loss = -si_sdr(est, clean).mean() + multi_res_loss(est, clean)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    model.eval()
    with torch.no_grad():
        noisy = 0.1 * torch.randn(4, 160000, device=device)
        spec = torch.stft(noisy, n_fft, hop, window=window, return_complex=True)
        enhanced = torch.istft(model(spec), n_fft, hop, window=window, length=160000).cpu()
    assert enhanced.shape == (4, 160000)


def dcn_v2_cross_network_recommender(device):
    """A hand-written DCN-v2 click-through model: 26 categorical features embedded by nn.Embedding tables
    of 200,000 (6), 50,000 (10) and 1,000 (10) rows of width 32, concatenated with 13 dense features
    (845 inputs), 3 full-rank cross layers (x0 * W x + b + x) in parallel with a 1024-1024-512 ReLU MLP,
    one logit; batch 8,192, fp32, BCE with logits, Adam (dense embedding gradients), two steps; then 4
    evaluation batches of 16,384 scored under inference_mode, the probabilities moved to the CPU."""
    torch.manual_seed(0)
    table_sizes = [200000] * 6 + [50000] * 10 + [1000] * 10
    emb_dim, dense_features = 32, 13

    class CrossLayer(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.linear = nn.Linear(d, d)

        def forward(self, x0, x):
            return x0 * self.linear(x) + x

    class DCNv2(nn.Module):
        def __init__(self):
            super().__init__()
            self.embeddings = nn.ModuleList(nn.Embedding(n, emb_dim) for n in table_sizes)
            d = dense_features + emb_dim * len(table_sizes)
            self.cross = nn.ModuleList(CrossLayer(d) for _ in range(3))
            self.deep = nn.Sequential(nn.Linear(d, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 512), nn.ReLU())
            self.head = nn.Linear(d + 512, 1)

        def forward(self, dense, sparse):
            x0 = torch.cat([dense] + [emb(sparse[:, i]) for i, emb in enumerate(self.embeddings)], 1)
            x = x0
            for layer in self.cross:
                x = layer(x0, x)
            return self.head(torch.cat([x, self.deep(x0)], 1)).squeeze(1)

    def batch(n):
        dense = torch.log1p(torch.rand(n, dense_features, device=device) * 100)
        sparse = torch.stack([torch.randint(0, size, (n,), device=device) for size in table_sizes], 1)
        return dense, sparse

    model = DCNv2().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(2):
        dense, sparse = batch(8192)
        clicks = (torch.rand(8192, device=device) < 0.25).float()
        F.binary_cross_entropy_with_logits(model(dense, sparse), clicks).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    model.eval()
    scores = []
    with torch.inference_mode():
        for _ in range(4):
            scores.append(torch.sigmoid(model(*batch(16384))).cpu())
    assert torch.cat(scores).shape == (65536,)


def retinanet_style_fpn_focal_loss(device):
    """A hand-written RetinaNet-style detector: a torchvision ResNet-34 with FrozenBatchNorm2d whose
    layer2-4 features come out through create_feature_extractor into a torchvision FeaturePyramidNetwork
    with P6/P7 (256 channels, 5 levels), shared classification and box heads of four 3x3 conv +
    GroupNorm + ReLU layers for 9 anchors and 80 classes, on batch 8 of 512 x 640 images (61,560
    anchors each) against dense anchor targets (about 1% positive, fixed by the seed): sigmoid focal
    loss over every anchor and class plus a smooth L1 box loss masked to positives, both divided by the
    positive count; bf16 autocast with the losses in fp32, SGD momentum 0.9 with a warm-up LambdaLR,
    gradients clipped to 1.0, two steps."""
    import torchvision
    from torchvision.models.feature_extraction import create_feature_extractor
    from torchvision.ops import FeaturePyramidNetwork, sigmoid_focal_loss
    from torchvision.ops.feature_pyramid_network import LastLevelP6P7
    from torchvision.ops.misc import FrozenBatchNorm2d

    torch.manual_seed(0)
    num_classes, num_anchors = 80, 9

    def head(out_channels):
        layers = []
        for _ in range(4):
            layers += [nn.Conv2d(256, 256, 3, padding=1), nn.GroupNorm(32, 256), nn.ReLU(inplace=True)]
        layers.append(nn.Conv2d(256, out_channels, 3, padding=1))
        return nn.Sequential(*layers)

    class RetinaLike(nn.Module):
        def __init__(self):
            super().__init__()
            backbone = torchvision.models.resnet34(norm_layer=FrozenBatchNorm2d)
            self.body = create_feature_extractor(backbone, return_nodes={"layer2": "c3", "layer3": "c4", "layer4": "c5"})
            self.fpn = FeaturePyramidNetwork([128, 256, 512], 256, extra_blocks=LastLevelP6P7(256, 256))
            self.cls_head = head(num_anchors * num_classes)
            self.box_head = head(num_anchors * 4)

        def forward(self, images):
            feats = self.fpn(self.body(images))
            cls, box = [], []
            for f in feats.values():
                b, _, h, w = f.shape
                cls.append(self.cls_head(f).view(b, num_anchors, num_classes, h, w).permute(0, 3, 4, 1, 2).reshape(b, -1, num_classes))
                box.append(self.box_head(f).view(b, num_anchors, 4, h, w).permute(0, 3, 4, 1, 2).reshape(b, -1, 4))
            return torch.cat(cls, 1), torch.cat(box, 1)

    model = RetinaLike().to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, 0.001 + step / 500))
    for _ in range(2):
        images = torch.randn(8, 3, 512, 640, device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            cls_logits, box_deltas = model(images)
        anchors = cls_logits.shape[1]
        positive = torch.rand(8, anchors, device=device) < 0.01
        classes = torch.randint(0, num_classes, (8, anchors), device=device)
        cls_target = F.one_hot(classes, num_classes).float() * positive[..., None]
        box_target = torch.randn(8, anchors, 4, device=device)
        num_pos = positive.sum().clamp(min=1).float()
        cls_loss = sigmoid_focal_loss(cls_logits.float(), cls_target, alpha=0.25, gamma=2.0, reduction="sum") / num_pos
        box_loss = (F.smooth_l1_loss(box_deltas.float(), box_target, beta=1 / 9, reduction="none").sum(-1) * positive).sum() / num_pos
        (cls_loss + box_loss).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)


ISSUE35R = {
    f.__name__: f
    for f in [
        hf_gemma2_softcap_eager_bf16, hf_olmo2_gradient_checkpointing_cosine_warmup, hf_gptj_fp16_scaler_accumulate_clip,
        hf_led_long_document_global_attention_bf16, hf_bigbird_block_sparse_mlm, hf_hubert_keyword_classifier_frozen_encoder_fp16,
        hf_t5_encoder_two_tower_inbatch_negatives, tv_densenet169_memory_efficient_rmsprop, tv_vit_b_16_384_bf16_decay_groups_warmup,
        tv_googlenet_aux_heads_channels_last_sgd, timm_caformer_s18_radam_ema_bf16, timm_pvt_v2_b1_nonsquare_adamax_fp16,
        video_transformer_divided_space_time, speech_enhancement_stft_complex_mask, dcn_v2_cross_network_recommender,
        retinanet_style_fpn_focal_loss,
    ]
}
