"""Seventeenth held-out group of issue 35 (group ISSUE35Q): sixteen more programs of kinds no earlier
group had (Hugging Face Qwen2-MoE with its shared expert and router loss, Phi-3 generating with its
per-step scores kept, mBART with a hand-shifted target and label smoothing, XLM-RoBERTa for multiple
choice with its 250,002-word embedding under fused AdamW, the Audio Spectrogram Transformer under a
GradScaler, Swin masked image modelling; torchvision's ConvNeXt-Tiny on non-square images with
gradient accumulation and MaxViT-T trained then evaluated; timm's HRNet with NAdam and RepVGG
trained, re-parameterized and run in half precision; a hand-written Conformer with CTC, a graph
attention network with an edge softmax by scatter_reduce and index_add_, a SigLIP-style sigmoid
contrastive loss over checkpointed towers, a capacity-limited top-2 mixture of experts with
fixed-size dispatch, a temporal convolutional forecaster with a hand-written LAMB, and a DGCNN on
point clouds with k-nearest-neighbour edge convolutions), written after ISSUE35P's figures and
committed before they were recorded on a GPU (an H200) or compared with anything.

Each is a function of the device, recorded by scripts/record_trace_workloads.py
(VRAMLAB_HOLDOUT=issue35q). Traced on the CPU before recording only to see that each program is
itself valid."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def hf_qwen2_moe_shared_expert_bf16(device):
    """Hugging Face Qwen2-MoE from a small config (4 layers, hidden 512, 8 query over 4 key-value heads,
    8 routed experts of 768 with top 2 and a sigmoid-gated shared expert of 1536, output_router_logits
    on so the load-balancing loss is added), batch 4 of 256 tokens, bf16 autocast, AdamW, two steps."""
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

    torch.manual_seed(0)
    config = Qwen2MoeConfig(vocab_size=32000, hidden_size=512, intermediate_size=1536, moe_intermediate_size=768,
                            shared_expert_intermediate_size=1536, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
                            num_experts=8, num_experts_per_tok=2, output_router_logits=True, router_aux_loss_coef=0.01,
                            max_position_embeddings=1024)
    model = Qwen2MoeForCausalLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    for _ in range(2):
        ids = torch.randint(0, 32000, (4, 256), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_phi3_generate_with_scores_bf16(device):
    """Hugging Face Phi-3 from a small config (4 layers, hidden 512, 8 heads, vocabulary 32,064) with
    bfloat16 weights, greedy generate of exactly 32 new tokens (min_new_tokens == max_new_tokens)
    after 6 prompts of 80 tokens, return_dict_in_generate with output_scores (every step's float
    logits kept), the sequences and scores then moved to the CPU."""
    from transformers import Phi3Config, Phi3ForCausalLM

    torch.manual_seed(0)
    config = Phi3Config(vocab_size=32064, hidden_size=512, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=8,
                        max_position_embeddings=2048, original_max_position_embeddings=2048)
    model = Phi3ForCausalLM(config).to(device, torch.bfloat16).eval()
    ids = torch.randint(0, 32000, (6, 80), device=device)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=32, min_new_tokens=32, do_sample=False,
                             return_dict_in_generate=True, output_scores=True, pad_token_id=config.pad_token_id)
    sequences = out.sequences.cpu()
    scores = torch.stack(out.scores, 1).float().cpu()
    del out
    assert sequences.shape == (6, 112) and scores.shape[1] == 32


def hf_mbart_label_smoothing_clip_bf16(device):
    """Hugging Face mBART from a small config (3 + 3 layers, d_model 512, vocabulary 64,000) fed
    decoder inputs shifted by hand (target[:, :-1]) and trained on target[:, 1:] by cross entropy with
    label smoothing 0.1 on its logits, padded tails ignored (-100), batch 8 of 192 source and 96
    target tokens, bf16 autocast, gradients clipped to 1.0, AdamW, two steps."""
    from transformers import MBartConfig, MBartForConditionalGeneration

    torch.manual_seed(0)
    config = MBartConfig(vocab_size=64000, d_model=512, encoder_layers=3, decoder_layers=3, encoder_attention_heads=8, decoder_attention_heads=8,
                         encoder_ffn_dim=2048, decoder_ffn_dim=2048, max_position_embeddings=512, pad_token_id=1, decoder_start_token_id=2)
    model = MBartForConditionalGeneration(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4, betas=(0.9, 0.98))
    src_lengths = torch.tensor([192 - 12 * i for i in range(8)])
    tgt_lengths = torch.tensor([96 - 6 * i for i in range(8)])
    src_mask = (torch.arange(192)[None, :] < src_lengths[:, None]).long().to(device)
    tgt_pad = (torch.arange(96)[None, :] >= tgt_lengths[:, None]).to(device)
    for _ in range(2):
        src = torch.randint(4, 64000, (8, 192), device=device).masked_fill(src_mask == 0, 1)
        tgt = torch.randint(4, 64000, (8, 96), device=device).masked_fill(tgt_pad, 1)
        labels = tgt[:, 1:].masked_fill(tgt_pad[:, 1:], -100)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=src, attention_mask=src_mask, decoder_input_ids=tgt[:, :-1],
                           decoder_attention_mask=(~tgt_pad[:, :-1]).long()).logits
        loss = F.cross_entropy(logits.float().reshape(-1, 64000), labels.reshape(-1), ignore_index=-100, label_smoothing=0.1)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_xlm_roberta_multiple_choice_fused_adamw(device):
    """Hugging Face XLM-RoBERTa for multiple choice from a small config (4 layers, hidden 256, its
    full 250,002-word vocabulary), 8 questions of 4 choices of 128 tokens each (flattened to 32 rows
    by the model) with padding masks of per-choice lengths, float32, fused AdamW, two steps."""
    from transformers import XLMRobertaConfig, XLMRobertaForMultipleChoice

    torch.manual_seed(0)
    config = XLMRobertaConfig(vocab_size=250002, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
                              max_position_embeddings=514, pad_token_id=1)
    model = XLMRobertaForMultipleChoice(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5, fused=True)
    lengths = torch.tensor([[128 - 8 * q - 3 * c for c in range(4)] for q in range(8)])
    mask = (torch.arange(128)[None, None, :] < lengths[:, :, None]).long().to(device)
    for _ in range(2):
        ids = torch.randint(5, 250002, (8, 4, 128), device=device).masked_fill(mask == 0, 1)
        loss = model(input_ids=ids, attention_mask=mask, labels=torch.randint(0, 4, (8,), device=device)).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_audio_spectrogram_transformer_fp16_scaler(device):
    """Hugging Face's Audio Spectrogram Transformer for multi-label classification from a small config
    (4 layers of 384, 6 heads, 16x16 patches with stride 10 over 1,024 frames of 128 mel bins, so
    1,212 patches), 527 labels with BCE, batch 12, float16 autocast with a GradScaler, AdamW, two steps."""
    from transformers import ASTConfig, ASTForAudioClassification

    torch.manual_seed(0)
    config = ASTConfig(hidden_size=384, num_hidden_layers=4, num_attention_heads=6, intermediate_size=1536, num_mel_bins=128, max_length=1024,
                       num_labels=527, problem_type="multi_label_classification")
    model = ASTForAudioClassification(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(2):
        spec = torch.randn(12, 1024, 128, device=device)
        labels = (torch.rand(12, 527, device=device) < 0.02).float()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(input_values=spec, labels=labels).loss
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)


def hf_swin_simmim_masked_image_modeling(device):
    """SimMIM pre-training with Hugging Face's SwinForMaskedImageModeling from a small config (192x192
    images, patch 4, widths 64 to 512, depths 2-2-4-2, window 6): 22 of the 36 blocks of 32x32 masked
    at random (argsort of noise), the mask spread to the 48x48 patch grid as bool_masked_pos, L1 reconstruction loss of the model,
    batch 16, float32, AdamW with a weight decay, two steps."""
    from transformers import SwinConfig, SwinForMaskedImageModeling

    torch.manual_seed(0)
    config = SwinConfig(image_size=192, patch_size=4, embed_dim=64, depths=[2, 2, 4, 2], num_heads=[2, 4, 8, 16], window_size=6, encoder_stride=32)
    model = SwinForMaskedImageModeling(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=0.05)
    for _ in range(2):
        images = torch.randn(16, 3, 192, 192, device=device)
        blocks = torch.rand(16, 36, device=device).argsort(1) < 22
        mask = blocks.view(16, 6, 6).repeat_interleave(8, 1).repeat_interleave(8, 2).reshape(16, -1)
        loss = model(pixel_values=images, bool_masked_pos=mask).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def tv_convnext_tiny_nonsquare_accumulate_fp16(device):
    """torchvision's ConvNeXt-Tiny (100 classes, stochastic depth 0.1) on non-square 192x256 images:
    3 micro-batches of 8 per optimizer step (loss divided by 3), float16 autocast with a GradScaler,
    unscale_ then clip_grad_norm_ to 1.0, foreach AdamW, two optimizer steps."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.convnext_tiny(weights=None, num_classes=100, stochastic_depth_prob=0.1).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=4e-3, weight_decay=0.05, foreach=True)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(2):
        for _ in range(3):
            x, y = torch.randn(8, 3, 192, 256, device=device), torch.randint(0, 100, (8,), device=device)
            with torch.autocast("cuda", dtype=torch.float16):
                loss = F.cross_entropy(model(x), y) / 3
            scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)


def tv_maxvit_t_train_then_eval_bf16(device):
    """torchvision's MaxViT-T (MBConv, block and grid attention; 100 classes) trained on batch 8 of
    224x224 under bf16 autocast with SGD (Nesterov momentum, weight decay) and a cosine schedule, two
    steps; then model.eval() and two batches of 32 under torch.no_grad with bf16 autocast, each
    batch's probabilities moved to the CPU by .detach().cpu()."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.maxvit_t(weights=None, num_classes=100).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-5)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=2)
    for _ in range(2):
        x, y = torch.randn(8, 3, 224, 224, device=device), torch.randint(0, 100, (8,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
    model.eval()
    probs = []
    with torch.no_grad():
        for _ in range(2):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(torch.randn(32, 3, 224, 224, device=device))
            probs.append(logits.float().softmax(-1).detach().cpu())
    assert torch.cat(probs).shape == (64, 100)


def timm_hrnet_w18_small_v2_nadam(device):
    """timm's HRNet-W18-Small-V2 (parallel high- to low-resolution branches fused by strided
    convolutions and nearest upsampling; 100 classes) on batch 16 of non-square 224x288 images,
    float32, cross entropy with label smoothing 0.1, NAdam, two steps."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("hrnet_w18_small_v2", num_classes=100).to(device)
    opt = torch.optim.NAdam(model.parameters(), lr=1e-3)
    for _ in range(2):
        x, y = torch.randn(16, 3, 224, 288, device=device), torch.randint(0, 100, (16,), device=device)
        F.cross_entropy(model(x), y, label_smoothing=0.1).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def timm_repvgg_a0_reparameterize_half_inference(device):
    """timm's RepVGG-A0 (100 classes) trained with its multi-branch blocks on batch 32 of 160x160 under
    bf16 autocast, SGD with momentum, two steps; then timm.utils.reparameterize_model (a fused
    single-branch copy), the trained model and optimizer deleted and the cache emptied, the copy in
    float16 and channels-last run under torch.inference_mode on batches of 64, 64 and 40 at 224x224,
    top-5 indices gathered on the CPU."""
    import timm
    from timm.utils import reparameterize_model

    torch.manual_seed(0)
    model = timm.create_model("repvgg_a0", num_classes=100).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    for _ in range(2):
        x, y = torch.randn(32, 3, 160, 160, device=device), torch.randint(0, 100, (32,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    model.eval()
    deploy = reparameterize_model(model)
    del model, opt
    torch.cuda.empty_cache()
    deploy = deploy.half().to(memory_format=torch.channels_last)
    top5 = []
    with torch.inference_mode():
        for batch in (64, 64, 40):
            x = torch.randn(batch, 3, 224, 224, device=device).half().contiguous(memory_format=torch.channels_last)
            top5.append(deploy(x).topk(5, dim=1).indices.cpu())
    assert torch.cat(top5).shape == (168, 5)


def conformer_ctc_noam(device):
    """A Conformer speech recognizer written by hand: a 2-layer Conv2d subsampling (x4) of 80 mel
    features, 6 blocks of width 256 (half-step feed-forward modules, 4-head self-attention by
    F.scaled_dot_product_attention with a padding mask and dropout, a convolution module of pointwise
    conv1d, GLU, depthwise conv1d of kernel 31, BatchNorm1d, SiLU), CTC over 256 symbols with
    per-utterance input lengths (1,600 frames down to 1,150) and 80-token targets; batch 16, float32,
    AdamW with a Noam warm-up by LambdaLR, two steps."""
    torch.manual_seed(0)
    d, heads, vocab, batch = 256, 4, 256, 16

    class FeedForward(nn.Sequential):
        def __init__(self):
            super().__init__(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(), nn.Dropout(0.1), nn.Linear(4 * d, d), nn.Dropout(0.1))

    class ConformerBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.ff1, self.ff2 = FeedForward(), FeedForward()
            self.attn_norm, self.qkv, self.proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.conv_norm, self.pw1, self.pw2 = nn.LayerNorm(d), nn.Conv1d(d, 2 * d, 1), nn.Conv1d(d, d, 1)
            self.dw, self.bn = nn.Conv1d(d, d, 31, padding=15, groups=d), nn.BatchNorm1d(d)
            self.out_norm = nn.LayerNorm(d)

        def forward(self, x, valid):
            x = x + 0.5 * self.ff1(x)
            b, t, _ = x.shape
            q, k, v = self.qkv(self.attn_norm(x)).view(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=valid[:, None, None, :], dropout_p=0.1 if self.training else 0.0)
            x = x + F.dropout(self.proj(a.transpose(1, 2).reshape(b, t, d)), 0.1, self.training)
            c = F.glu(self.pw1(self.conv_norm(x).transpose(1, 2)), dim=1)
            c = self.pw2(F.silu(self.bn(self.dw(c * valid[:, None, :]))))
            x = x + F.dropout(c.transpose(1, 2), 0.1, self.training)
            return self.out_norm(x + 0.5 * self.ff2(x))

    class Conformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.subsample = nn.Sequential(nn.Conv2d(1, d, 3, 2), nn.ReLU(), nn.Conv2d(d, d, 3, 2), nn.ReLU())
            self.inp = nn.Linear(d * 19, d)
            self.blocks = nn.ModuleList(ConformerBlock() for _ in range(6))
            self.head = nn.Linear(d, vocab)

        def forward(self, feats, valid):
            x = self.subsample(feats[:, None])
            x = self.inp(x.permute(0, 2, 1, 3).flatten(2))
            for block in self.blocks:
                x = block(x, valid)
            return self.head(x)

    model = Conformer().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1.0, betas=(0.9, 0.98), weight_decay=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: d ** -0.5 * min((s + 1) ** -0.5, (s + 1) * 25000 ** -1.5))
    frames = torch.tensor([1600 - 30 * i for i in range(batch)])
    out_lengths = ((frames - 3) // 2 + 1 - 3) // 2 + 1
    valid = (torch.arange(int(out_lengths.max()))[None, :] < out_lengths[:, None]).to(device)
    for _ in range(2):
        feats = torch.randn(batch, 1600, 80, device=device)
        targets = torch.randint(1, vocab, (batch, 80), device=device)
        log_probs = model(feats, valid).log_softmax(-1).transpose(0, 1)
        loss = F.ctc_loss(log_probs, targets, out_lengths, torch.full((batch,), 80), blank=0, zero_infinity=True)
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)


def gat_edge_softmax_full_graph(device):
    """A 3-layer graph attention network (4 heads of 64, ELU between layers) trained full-batch on a
    random graph of 50,000 nodes with 128 features and 400,000 edges plus self loops: per-edge
    attention logits gathered from source and destination scores, an edge softmax by
    scatter_reduce('amax') of the detached logits and index_add_ of the exponentials, messages
    weighted and summed into destinations by index_add_, 16 classes on a training mask, Adam, two
    steps; then one evaluation pass under torch.no_grad with the predictions moved to the CPU."""
    torch.manual_seed(0)
    n, feats, heads, hidden, classes = 50_000, 128, 4, 64, 16
    loops = torch.arange(n, device=device)
    src = torch.cat([torch.randint(0, n, (400_000,), device=device), loops])
    dst = torch.cat([torch.randint(0, n, (400_000,), device=device), loops])
    x = torch.randn(n, feats, device=device)
    labels = torch.randint(0, classes, (n,), device=device)
    train_mask = torch.arange(n, device=device) % 5 != 0

    class GATLayer(nn.Module):
        def __init__(self, cin, cout, h):
            super().__init__()
            self.h, self.cout = h, cout
            self.lin = nn.Linear(cin, h * cout, bias=False)
            self.att_src, self.att_dst = nn.Parameter(torch.randn(h, cout) * 0.1), nn.Parameter(torch.randn(h, cout) * 0.1)
            self.bias = nn.Parameter(torch.zeros(h * cout))

        def forward(self, x):
            hx = self.lin(x).view(-1, self.h, self.cout)
            logits = F.leaky_relu((hx * self.att_src).sum(-1)[src] + (hx * self.att_dst).sum(-1)[dst], 0.2)
            peak = torch.full((n, self.h), float("-inf"), device=x.device).scatter_reduce(0, dst[:, None].expand(-1, self.h), logits.detach(), "amax")
            weights = (logits - peak[dst]).exp()
            alpha = weights / torch.zeros(n, self.h, device=x.device).index_add_(0, dst, weights)[dst]
            alpha = F.dropout(alpha, 0.2, self.training)
            out = torch.zeros(n, self.h, self.cout, device=x.device).index_add_(0, dst, hx[src] * alpha[..., None])
            return out.reshape(n, -1) + self.bias

    class GAT(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([GATLayer(feats, hidden, heads), GATLayer(heads * hidden, hidden, heads),
                                         GATLayer(heads * hidden, classes, 1)])

        def forward(self, x):
            for i, layer in enumerate(self.layers):
                x = layer(F.dropout(x, 0.2, self.training))
                if i < len(self.layers) - 1:
                    x = F.elu(x)
            return x

    model = GAT().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3, weight_decay=5e-4)
    for _ in range(2):
        out = model(x)
        F.cross_entropy(out[train_mask], labels[train_mask]).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    model.eval()
    with torch.no_grad():
        pred = model(x).argmax(1).detach().cpu()
    assert pred.shape == (n,)


def siglip_sigmoid_loss_checkpointed_towers(device):
    """A SigLIP-style image-text model written by hand: an image tower (a ViT of 4 blocks of 256 over
    8x8 patches of 64x64 images) and a text tower (4 causal blocks of 256 over 32 tokens of a 32,000
    vocabulary, pooled at the last token), each block under torch.utils.checkpoint (use_reentrant=False),
    the 2,048 x 2,048 similarity matrix scaled by a learned temperature plus a learned bias, the pairwise
    sigmoid loss (labels 2I - 1), bf16 autocast, AdamW with betas (0.9, 0.95), two steps at batch 2,048."""
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    d, heads, batch = 256, 4, 2048

    class Block(nn.Module):
        def __init__(self, causal):
            super().__init__()
            self.causal = causal
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            x = x + self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=self.causal).transpose(1, 2).reshape(b, t, d))
            return x + self.mlp(self.norm2(x))

    class Tower(nn.Module):
        def __init__(self, causal):
            super().__init__()
            self.blocks = nn.ModuleList(Block(causal) for _ in range(4))
            self.norm, self.out = nn.LayerNorm(d), nn.Linear(d, 256, bias=False)

        def forward(self, x):
            for block in self.blocks:
                x = checkpoint(block, x, use_reentrant=False)
            return self.out(self.norm(x))

    patchify = nn.Conv2d(3, d, 8, 8).to(device)
    image_pos = nn.Parameter(torch.zeros(1, 64, d, device=device))
    token_embed = nn.Embedding(32000, d).to(device)
    text_pos = nn.Parameter(torch.zeros(1, 32, d, device=device))
    image_tower, text_tower = Tower(False).to(device), Tower(True).to(device)
    log_scale, bias = nn.Parameter(torch.tensor(2.3026, device=device)), nn.Parameter(torch.tensor(-10.0, device=device))
    params = [*patchify.parameters(), image_pos, *token_embed.parameters(), text_pos, *image_tower.parameters(), *text_tower.parameters(),
              log_scale, bias]
    opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.95), weight_decay=1e-4)
    targets = 2 * torch.eye(batch, device=device) - 1
    for _ in range(2):
        images, tokens = torch.randn(batch, 3, 64, 64, device=device), torch.randint(0, 32000, (batch, 32), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            img = image_tower(patchify(images).flatten(2).transpose(1, 2) + image_pos).mean(1)
            txt = text_tower(token_embed(tokens) + text_pos)[:, -1]
        img, txt = F.normalize(img.float(), dim=-1), F.normalize(txt.float(), dim=-1)
        logits = img @ txt.t() * log_scale.exp() + bias
        loss = -F.logsigmoid(targets * logits).sum() / batch
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def switch_moe_capacity_dispatch_lm(device):
    """A mixture-of-experts language model written by hand (6 layers of 512, causal SDPA attention,
    8 experts of 2,048 per layer held as stacked weights): top-2 routing by torch.topk over the
    router's softmax, each assignment's slot in its expert by a one-hot cumsum, a fixed capacity of
    1.25 x tokens x 2 / 8 (overflow sent to a spare row), tokens dispatched into an [experts x capacity]
    buffer by index_add, experts run as bmm, outputs gathered back and combined by index_add with the
    gates, a load-balancing loss added; batch 8 of 256 tokens, bf16 autocast, Adam, two steps."""
    torch.manual_seed(0)
    vocab, d, heads, experts, ff, top_k = 16000, 512, 8, 8, 2048, 2
    tokens = 8 * 256
    capacity = int(1.25 * tokens * top_k / experts)

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.router = nn.Linear(d, experts, bias=False)
            self.w1 = nn.Parameter(torch.randn(experts, d, ff) * d ** -0.5)
            self.w2 = nn.Parameter(torch.randn(experts, ff, d) * ff ** -0.5)

        def forward(self, x):
            shape = x.shape
            x = x.reshape(-1, d)
            probs = self.router(x).float().softmax(-1)
            gates, chosen = probs.topk(top_k, dim=-1)
            gates = gates / gates.sum(-1, keepdim=True)
            onehot = F.one_hot(chosen.t().reshape(-1), experts)
            position = ((onehot.cumsum(0) - 1) * onehot).sum(-1)
            keep = position < capacity
            slot = torch.where(keep, chosen.t().reshape(-1) * capacity + position, experts * capacity)
            token_index = torch.arange(x.shape[0], device=x.device).repeat(top_k)
            buffer = x.new_zeros(experts * capacity + 1, d).index_add(0, slot, x[token_index])
            h = F.gelu(torch.bmm(buffer[:-1].view(experts, capacity, d), self.w1))
            out = torch.bmm(h, self.w2).reshape(experts * capacity, d)
            out = torch.cat([out, out.new_zeros(1, d)])
            combined = out[slot] * (gates.t().reshape(-1) * keep)[:, None]
            y = combined.new_zeros(x.shape[0], d).index_add(0, token_index, combined)
            balance = experts * (probs.mean(0) * F.one_hot(chosen[:, 0], experts).float().mean(0)).sum()
            return y.reshape(shape), balance

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.moe = MoE()

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            x = x + self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d))
            y, balance = self.moe(self.norm2(x))
            return x + y, balance

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.pos = nn.Embedding(vocab, d), nn.Embedding(256, d)
            self.blocks = nn.ModuleList(Block() for _ in range(6))
            self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

        def forward(self, ids):
            x = self.embed(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
            aux = 0.0
            for block in self.blocks:
                x, balance = block(x)
                aux = aux + balance
            return self.head(self.norm(x)), aux

    model = LM().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-4)
    for _ in range(2):
        ids = torch.randint(0, vocab, (8, 257), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits, aux = model(ids[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, vocab), ids[:, 1:].reshape(-1)) + 0.01 * aux
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def tcn_forecaster_handwritten_lamb(device):
    """A temporal convolutional network forecasting 321 series (an electricity-like load data set):
    windows of 336 steps normalised per window and series (RevIN-style, statistics kept for the
    de-normalisation), 6 residual blocks of causal dilated conv1d (256 channels, kernel 3, dilations
    1 to 32, left padding by F.pad, dropout), a linear head from the last step to 96 steps x 321
    series, MSE; a LAMB optimizer written by hand (Adam moments, a per-tensor trust ratio), float32,
    three steps at batches of 64, 64 and a last, smaller 40."""
    torch.manual_seed(0)
    series, window, horizon, channels = 321, 336, 96, 256

    class Lamb(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01):
            super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

        @torch.no_grad()
        def step(self):
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state["step"], state["exp_avg"], state["exp_avg_sq"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                    state["step"] += 1
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    exp_avg.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                    exp_avg_sq.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                    update = (exp_avg / (1 - beta1 ** state["step"])) / ((exp_avg_sq / (1 - beta2 ** state["step"])).sqrt() + group["eps"])
                    update.add_(p, alpha=group["weight_decay"])
                    w_norm, u_norm = p.norm(), update.norm()
                    trust = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
                    p.sub_(update * trust * group["lr"])

    class TemporalBlock(nn.Module):
        def __init__(self, cin, cout, dilation):
            super().__init__()
            self.dilation = dilation
            self.conv1, self.conv2 = nn.Conv1d(cin, cout, 3, dilation=dilation), nn.Conv1d(cout, cout, 3, dilation=dilation)
            self.skip = nn.Conv1d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(self, x):
            h = F.dropout(F.relu(self.conv1(F.pad(x, (2 * self.dilation, 0)))), 0.1, self.training)
            h = F.dropout(F.relu(self.conv2(F.pad(h, (2 * self.dilation, 0)))), 0.1, self.training)
            return F.relu(h + self.skip(x))

    class TCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.Sequential(*[TemporalBlock(series if i == 0 else channels, channels, 2 ** i) for i in range(6)])
            self.head = nn.Linear(channels, horizon * series)

        def forward(self, x):
            mean, std = x.mean(1, keepdim=True), x.std(1, keepdim=True) + 1e-5
            h = self.blocks(((x - mean) / std).transpose(1, 2))
            return self.head(h[:, :, -1]).view(-1, horizon, series) * std + mean

    model = TCN().to(device)
    opt = Lamb(model.parameters(), lr=1e-3)
    for batch in (64, 64, 40):
        past, future = torch.randn(batch, window, series, device=device), torch.randn(batch, horizon, series, device=device)
        F.mse_loss(model(past), future).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def dgcnn_knn_edgeconv_pointcloud(device):
    """A DGCNN point-cloud classifier: four EdgeConv layers (64, 64, 128, 256) that each rebuild a
    k-nearest-neighbour graph (k = 20) from the current features by a pairwise-distance matmul and
    topk, gather the neighbours' features into [batch, 2C, 1,024, 20] edge tensors, a 1x1 Conv2d,
    BatchNorm2d, LeakyReLU and a max over neighbours; a 1,024-wide conv1d, max and mean pooling, an
    MLP head with dropout, 40 classes with label smoothing 0.2; batch 16 of 1,024 points, SGD with
    momentum and a cosine schedule, zero_grad(set_to_none=False), two steps; then one batch of 32
    evaluated under torch.no_grad."""
    torch.manual_seed(0)
    k, points = 20, 1024

    def edge_features(x):
        b, c, n = x.shape
        inner = torch.bmm(x.transpose(1, 2), x)
        sq = x.pow(2).sum(1, keepdim=True)
        idx = (2 * inner - sq - sq.transpose(1, 2)).topk(k, dim=-1).indices
        idx = (idx + torch.arange(b, device=x.device)[:, None, None] * n).reshape(-1)
        flat = x.transpose(1, 2).reshape(b * n, c)
        neighbours = flat[idx].view(b, n, k, c)
        centre = flat.view(b, n, 1, c).expand(-1, -1, k, -1)
        return torch.cat([neighbours - centre, centre], 3).permute(0, 3, 1, 2).contiguous()

    class DGCNN(nn.Module):
        def __init__(self):
            super().__init__()
            widths = [(3, 64), (64, 64), (64, 128), (128, 256)]
            self.edge = nn.ModuleList(nn.Sequential(nn.Conv2d(2 * cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.LeakyReLU(0.2))
                                      for cin, cout in widths)
            self.embed = nn.Sequential(nn.Conv1d(512, 1024, 1, bias=False), nn.BatchNorm1d(1024), nn.LeakyReLU(0.2))
            self.head = nn.Sequential(nn.Linear(2048, 512, bias=False), nn.BatchNorm1d(512), nn.LeakyReLU(0.2), nn.Dropout(0.5),
                                      nn.Linear(512, 256), nn.BatchNorm1d(256), nn.LeakyReLU(0.2), nn.Dropout(0.5), nn.Linear(256, 40))

        def forward(self, x):
            feats = []
            for conv in self.edge:
                x = conv(edge_features(x)).amax(-1)
                feats.append(x)
            x = self.embed(torch.cat(feats, 1))
            return self.head(torch.cat([x.amax(-1), x.mean(-1)], 1))

    model = DGCNN().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=250, eta_min=1e-3)
    for _ in range(2):
        cloud, y = torch.randn(16, 3, points, device=device), torch.randint(0, 40, (16,), device=device)
        F.cross_entropy(model(cloud), y, label_smoothing=0.2).backward()
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=False)
    model.eval()
    with torch.no_grad():
        pred = model(torch.randn(32, 3, points, device=device)).argmax(1)
    assert pred.shape == (32,)


ISSUE35Q = {
    f.__name__: f
    for f in [
        hf_qwen2_moe_shared_expert_bf16, hf_phi3_generate_with_scores_bf16, hf_mbart_label_smoothing_clip_bf16,
        hf_xlm_roberta_multiple_choice_fused_adamw, hf_audio_spectrogram_transformer_fp16_scaler, hf_swin_simmim_masked_image_modeling,
        tv_convnext_tiny_nonsquare_accumulate_fp16, tv_maxvit_t_train_then_eval_bf16, timm_hrnet_w18_small_v2_nadam,
        timm_repvgg_a0_reparameterize_half_inference, conformer_ctc_noam, gat_edge_softmax_full_graph, siglip_sigmoid_loss_checkpointed_towers,
        switch_moe_capacity_dispatch_lm, tcn_forecaster_handwritten_lamb, dgcnn_knn_edgeconv_pointcloud,
    ]
}
