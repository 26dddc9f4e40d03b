"""Fourth held-out group of issue 35 (group ISSUE35D): programs of kinds users run that no earlier
group has, written after the third group's mends and committed before they were recorded on a
GPU. They were traced on the CPU before recording only to see whether the tracer runs them to
the end (no GPU figure was seen then); what that showed is said in RESULTS.md beside the figures.

A hand-written Llama-style model (rotary embeddings, RMSNorm, SwiGLU) with non-reentrant
checkpointing and fused AdamW; SimCLR with a ResNet-18 and the NT-Xent loss; distillation from a
frozen teacher under bf16 autocast; a Hugging Face CLIP trained contrastively; Whisper (conv1d
front end) trained as seq2seq; Gemma, Phi and Qwen2 trained from their configs; DeBERTa-v2
sequence classification with label smoothing and a warmup schedule; an optimizer zoo (RAdam,
NAdam, RMSprop, Adamax); a two-headed model with retain_graph; an ESPCN super-resolution network
(pixel shuffle); a bilinear-upsampling autoencoder; a half-precision decoder with a preallocated
KV cache under inference_mode; peft LoRA on a T5; an MLP-Mixer from timm; a DeepLabV3 segmentation
model; a CTC speech model; float32 training under TF32 matmuls; and a loop that resets the peak
statistics and empties the cache between phases. Each is a function of the device, recorded by
scripts/record_trace_workloads.py (VRAMLAB_HOLDOUT=issue35d)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class _RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rotary(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class _LlamaBlock(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.heads = heads
        self.norm1 = _RMSNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)
        self.norm2 = _RMSNorm(dim)
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k = _rotary(q, cos, sin), _rotary(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def hand_llama_rope_checkpointed(device):
    """A hand-written Llama-style decoder (rotary embeddings, RMSNorm, SwiGLU, causal SDPA) in
    bf16 autocast, each block under non-reentrant checkpointing, fused AdamW with gradient
    clipping, two steps at batch 4 x 512."""
    torch.manual_seed(0)
    dim, heads, layers, vocab, seq = 512, 8, 4, 8000, 512
    embed = nn.Embedding(vocab, dim).to(device)
    blocks = nn.ModuleList(_LlamaBlock(dim, heads, 1408) for _ in range(layers)).to(device)
    norm, head = _RMSNorm(dim).to(device), nn.Linear(dim, vocab, bias=False).to(device)
    params = [*embed.parameters(), *blocks.parameters(), *norm.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=3e-4, fused=True)
    inv = 1.0 / (10000 ** (torch.arange(0, dim // heads, 2, device=device).float() / (dim // heads)))
    freqs = torch.outer(torch.arange(seq, device=device).float(), inv)
    cos, sin = freqs.cos(), freqs.sin()
    for _ in range(2):
        ids = torch.randint(0, vocab, (4, seq + 1), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            x = embed(ids[:, :-1])
            for block in blocks:
                x = checkpoint(block, x, cos, sin, use_reentrant=False)
            logits = head(norm(x))
            loss = F.cross_entropy(logits.flatten(0, 1).float(), ids[:, 1:].flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)


def simclr_resnet18(device):
    """SimCLR: a torchvision ResNet-18 backbone with a projection head, two augmented views of a
    batch of 64 at 96x96, the NT-Xent loss over the 128x128 similarity matrix, SGD; two steps."""
    import torchvision

    torch.manual_seed(0)
    backbone = torchvision.models.resnet18(num_classes=128).to(device)
    opt = torch.optim.SGD(backbone.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-6)
    for _ in range(2):
        x = torch.randn(64, 3, 96, 96, device=device)
        views = torch.cat([x + 0.1 * torch.randn_like(x), x.flip(-1)])
        z = F.normalize(backbone(views), dim=1)
        sim = z @ z.t() / 0.5
        sim = sim.masked_fill(torch.eye(128, dtype=torch.bool, device=device), float("-inf"))
        targets = torch.cat([torch.arange(64, 128), torch.arange(0, 64)]).to(device)
        loss = F.cross_entropy(sim, targets)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def distill_mlp_teacher_bf16(device):
    """Knowledge distillation: a frozen wide teacher in eval under no_grad and a small student,
    the KL divergence of temperature-softened logits plus cross-entropy, under bf16 autocast with
    AdamW; three steps at batch 256."""
    torch.manual_seed(0)
    teacher = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, 1000)).to(device).eval()
    student = nn.Sequential(nn.Linear(1024, 1024), nn.GELU(), nn.Dropout(0.1), nn.Linear(1024, 1000)).to(device)
    opt = torch.optim.AdamW(student.parameters(), lr=1e-3)
    for _ in range(3):
        x = torch.randn(256, 1024, device=device)
        y = torch.randint(0, 1000, (256,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            with torch.no_grad():
                soft = teacher(x)
            logits = student(x)
            kd = F.kl_div(F.log_softmax(logits / 4.0, dim=-1), F.softmax(soft / 4.0, dim=-1), reduction="batchmean") * 16.0
            loss = kd + F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_clip_contrastive_bf16(device):
    """A Hugging Face CLIP (small text and vision towers from their configs) trained with its own
    contrastive loss under bf16 autocast, AdamW, two steps at batch 16 (images 96x96, 32 tokens)."""
    from transformers import CLIPConfig, CLIPModel

    torch.manual_seed(0)
    config = CLIPConfig(
        text_config=dict(hidden_size=256, intermediate_size=1024, num_hidden_layers=4, num_attention_heads=4, vocab_size=5000, max_position_embeddings=64),
        vision_config=dict(hidden_size=256, intermediate_size=1024, num_hidden_layers=4, num_attention_heads=4, image_size=96, patch_size=16),
        projection_dim=128,
    )
    model = CLIPModel(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 5000, (16, 32), device=device)
        pixels = torch.randn(16, 3, 96, 96, device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, pixel_values=pixels, return_loss=True).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_whisper_seq2seq(device):
    """A Hugging Face Whisper (2 encoder and 2 decoder layers from its config; conv1d front end)
    trained on log-mel inputs with labels, AdamW, two steps at batch 4."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    torch.manual_seed(0)
    config = WhisperConfig(
        d_model=256, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=1024, decoder_ffn_dim=1024, vocab_size=6000, num_mel_bins=80, max_source_positions=750,
        max_target_positions=128, decoder_start_token_id=1, pad_token_id=0,
    )
    model = WhisperForConditionalGeneration(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        features = torch.randn(4, 80, 1500, device=device)
        labels = torch.randint(2, 6000, (4, 64), device=device)
        loss = model(input_features=features, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_gemma_bf16(device):
    """A Hugging Face Gemma (4 layers, multi-query attention) from its config, trained under bf16
    autocast with AdamW, two steps at batch 4 x 256."""
    from transformers import GemmaConfig, GemmaForCausalLM

    torch.manual_seed(0)
    config = GemmaConfig(
        hidden_size=512, intermediate_size=2048, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=1,
        head_dim=64, vocab_size=16000, max_position_embeddings=512,
    )
    model = GemmaForCausalLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 16000, (4, 256), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_phi_fp32(device):
    """A Hugging Face Phi (partial rotary, parallel attention and MLP) from its config in float32,
    AdamW, two steps at batch 4 x 128."""
    from transformers import PhiConfig, PhiForCausalLM

    torch.manual_seed(0)
    config = PhiConfig(hidden_size=512, intermediate_size=2048, num_hidden_layers=3, num_attention_heads=8, vocab_size=12000, max_position_embeddings=256)
    model = PhiForCausalLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 12000, (4, 128), device=device)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_qwen2_padded_classifier(device):
    """A Hugging Face Qwen2 sequence classifier from its config (pad token set, the last real
    token's logits pooled), a right-padded batch with an attention mask, AdamW; two steps."""
    from transformers import Qwen2Config, Qwen2ForSequenceClassification

    torch.manual_seed(0)
    config = Qwen2Config(
        hidden_size=384, intermediate_size=1024, num_hidden_layers=3, num_attention_heads=6, num_key_value_heads=2,
        vocab_size=9000, max_position_embeddings=256, num_labels=5, pad_token_id=0,
    )
    model = Qwen2ForSequenceClassification(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(1, 9000, (8, 192), device=device)
        mask = torch.ones(8, 192, dtype=torch.long, device=device)
        ids[4:, 150:] = 0
        mask[4:, 150:] = 0
        labels = torch.randint(0, 5, (8,), device=device)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_deberta_label_smoothing(device):
    """A Hugging Face DeBERTa-v2 sequence classifier (relative-position attention) from its
    config, cross-entropy with label smoothing on its logits, AdamW with a linear warmup
    schedule; two steps at batch 8 x 128."""
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification, get_linear_schedule_with_warmup

    torch.manual_seed(0)
    config = DebertaV2Config(hidden_size=256, intermediate_size=1024, num_hidden_layers=3, num_attention_heads=4, vocab_size=8000, max_position_embeddings=256, num_labels=3)
    model = DebertaV2ForSequenceClassification(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    schedule = get_linear_schedule_with_warmup(opt, 10, 100)
    for _ in range(2):
        ids = torch.randint(0, 8000, (8, 128), device=device)
        labels = torch.randint(0, 3, (8,), device=device)
        logits = model(input_ids=ids).logits
        loss = F.cross_entropy(logits, labels, label_smoothing=0.1)
        loss.backward()
        opt.step()
        schedule.step()
        opt.zero_grad(set_to_none=True)


def optimizer_zoo_mlp(device):
    """One MLP trained a step each with RAdam, NAdam, RMSprop (momentum) and Adamax, each
    optimizer dropped before the next is made."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2048, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 512)).to(device)
    for make in (
        lambda p: torch.optim.RAdam(p, lr=1e-3),
        lambda p: torch.optim.NAdam(p, lr=1e-3),
        lambda p: torch.optim.RMSprop(p, lr=1e-3, momentum=0.9),
        lambda p: torch.optim.Adamax(p, lr=1e-3),
    ):
        opt = make(model.parameters())
        for _ in range(2):
            x = torch.randn(128, 2048, device=device)
            model(x).pow(2).mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        del opt


def two_heads_retain_graph(device):
    """A shared trunk with two heads, each loss backpropagated on its own (the first with
    retain_graph=True), SGD; two steps at batch 512."""
    torch.manual_seed(0)
    trunk = nn.Sequential(nn.Linear(1024, 2048), nn.GELU(), nn.Linear(2048, 2048), nn.GELU()).to(device)
    head_a, head_b = nn.Linear(2048, 100).to(device), nn.Linear(2048, 1).to(device)
    opt = torch.optim.SGD([*trunk.parameters(), *head_a.parameters(), *head_b.parameters()], lr=0.01)
    for _ in range(2):
        x = torch.randn(512, 1024, device=device)
        h = trunk(x)
        F.cross_entropy(head_a(h), torch.randint(0, 100, (512,), device=device)).backward(retain_graph=True)
        F.mse_loss(head_b(h).squeeze(1), torch.randn(512, device=device)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def espcn_pixel_shuffle(device):
    """An ESPCN-style super-resolution network (5x5 and 3x3 convolutions, pixel shuffle x3) on
    64x64 crops, L1 loss, Adam; two steps at batch 16."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 64, 5, padding=2), nn.Tanh(), nn.Conv2d(64, 32, 3, padding=1), nn.Tanh(),
        nn.Conv2d(32, 3 * 9, 3, padding=1), nn.PixelShuffle(3),
    ).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(2):
        low = torch.randn(16, 3, 64, 64, device=device)
        high = torch.randn(16, 3, 192, 192, device=device)
        F.l1_loss(model(low), high).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def upsample_autoencoder(device):
    """A convolutional autoencoder whose decoder upsamples bilinearly (nn.Upsample, align_corners
    False) before each convolution, BCE-with-logits loss, AdamW; two steps at batch 32, 64x64."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
        nn.Upsample(scale_factor=2, mode="bilinear"), nn.Conv2d(64, 32, 3, padding=1), nn.ReLU(),
        nn.Upsample(scale_factor=2, mode="bilinear"), nn.Conv2d(32, 3, 3, padding=1),
    ).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        x = torch.rand(32, 3, 64, 64, device=device)
        F.binary_cross_entropy_with_logits(model(x), x).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def half_decoder_kv_cache_inference(device):
    """A float16 decoder (model.half(), no autocast) generating 64 tokens greedily under
    inference_mode into a preallocated KV cache, causal SDPA for the prompt and plain SDPA for
    each new token; batch 8, prompt 128."""
    torch.manual_seed(0)
    dim, heads, layers, vocab = 512, 8, 4, 8000
    embed = nn.Embedding(vocab, dim).to(device).half()
    qkv = nn.ModuleList(nn.Linear(dim, 3 * dim) for _ in range(layers)).to(device).half()
    out = nn.ModuleList(nn.Linear(dim, dim) for _ in range(layers)).to(device).half()
    head = nn.Linear(dim, vocab).to(device).half()
    b, prompt, new = 8, 128, 64
    cache_k = torch.zeros(layers, b, heads, prompt + new, dim // heads, device=device, dtype=torch.float16)
    cache_v = torch.zeros_like(cache_k)
    with torch.inference_mode():
        ids = torch.randint(0, vocab, (b, prompt), device=device)
        pos = 0
        for _ in range(new + 1):
            x = embed(ids)
            t = x.shape[1]
            for i in range(layers):
                q, k, v = qkv[i](x).view(b, t, 3, heads, dim // heads).permute(2, 0, 3, 1, 4)
                cache_k[i, :, :, pos : pos + t] = k
                cache_v[i, :, :, pos : pos + t] = v
                a = F.scaled_dot_product_attention(q, cache_k[i, :, :, : pos + t], cache_v[i, :, :, : pos + t], is_causal=t > 1)
                x = x + out[i](a.transpose(1, 2).reshape(b, t, dim))
            pos += t
            ids = head(x[:, -1]).argmax(-1, keepdim=True)


def peft_lora_t5_bf16(device):
    """peft LoRA (r=16 on q and v) on a Hugging Face T5 from its config with bf16 weights,
    seq2seq labels, AdamW over the adapters; two steps at batch 8."""
    from peft import LoraConfig, get_peft_model
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    config = T5Config(d_model=512, d_ff=2048, num_layers=4, num_decoder_layers=4, num_heads=8, vocab_size=12000, decoder_start_token_id=0)
    model = T5ForConditionalGeneration(config).to(device, torch.bfloat16)
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules=["q", "v"], lora_dropout=0.05))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    for _ in range(2):
        ids = torch.randint(1, 12000, (8, 192), device=device)
        labels = torch.randint(1, 12000, (8, 64), device=device)
        model(input_ids=ids, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def timm_mixer_bf16(device):
    """timm's MLP-Mixer (mixer_s16_224 at 128x128, 100 classes) trained under bf16 autocast with
    AdamW; two steps at batch 32."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("mixer_s16_224", pretrained=False, img_size=128, num_classes=100).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        x = torch.randn(32, 3, 128, 128, device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), torch.randint(0, 100, (32,), device=device))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def tv_deeplabv3_mobilenet(device):
    """torchvision's DeepLabV3 with a MobileNetV3-Large backbone (atrous convolutions, bilinear
    upsampling to the input) trained on 8 classes at 256x256, batch 4, SGD; two steps."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=8, aux_loss=False).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for _ in range(2):
        x = torch.randn(4, 3, 256, 256, device=device)
        target = torch.randint(0, 8, (4, 256, 256), device=device)
        F.cross_entropy(model(x)["out"], target).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def ctc_speech_transformer(device):
    """A speech model: a linear front end over 80 mel features, a 3-layer transformer encoder and
    a CTC head, F.ctc_loss with every input 400 frames and every target 60 labels (lengths made by
    torch.full), AdamW; two steps at batch 8."""
    torch.manual_seed(0)
    front = nn.Linear(80, 256).to(device)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True), 3).to(device)
    head = nn.Linear(256, 40).to(device)
    params = [*front.parameters(), *encoder.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-4)
    for _ in range(2):
        x = torch.randn(8, 400, 80, device=device)
        log_probs = head(encoder(front(x))).log_softmax(-1).transpose(0, 1)
        targets = torch.randint(1, 40, (8, 60), device=device)
        input_lengths = torch.full((8,), 400, dtype=torch.long)
        target_lengths = torch.full((8,), 60, dtype=torch.long)
        F.ctc_loss(log_probs, targets, input_lengths, target_lengths).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def tf32_mlp_high_precision(device):
    """A float32 MLP trained with matmul precision 'high' (TF32) and cuDNN TF32 on, AdamW with
    amsgrad; two steps at batch 1024."""
    torch.manual_seed(0)
    torch.set_float32_matmul_precision("high")
    try:
        model = nn.Sequential(nn.Linear(1024, 4096), nn.SiLU(), nn.Linear(4096, 1024), nn.LayerNorm(1024), nn.Linear(1024, 10)).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, amsgrad=True)
        for _ in range(2):
            x = torch.randn(1024, 1024, device=device)
            F.cross_entropy(model(x), torch.randint(0, 10, (1024,), device=device)).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    finally:
        torch.set_float32_matmul_precision("highest")


def phases_reset_peak_empty_cache(device):
    """Training then evaluation of one transformer encoder: after training, the optimizer is
    dropped, the cache emptied and the peak statistics reset; evaluation runs at twice the batch
    under no_grad."""
    torch.manual_seed(0)
    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True, dropout=0.0), 4).to(device)
    head = nn.Linear(512, 10).to(device)
    opt = torch.optim.Adam([*model.parameters(), *head.parameters()], lr=1e-4)
    for _ in range(2):
        x = torch.randn(16, 256, 512, device=device)
        F.cross_entropy(head(model(x).mean(1)), torch.randint(0, 10, (16,), device=device)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    del opt
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model.eval()
    with torch.no_grad():
        for _ in range(2):
            head(model(torch.randn(32, 256, 512, device=device)).mean(1))


ISSUE35D = {
    f.__name__: f
    for f in [
        hand_llama_rope_checkpointed, simclr_resnet18, distill_mlp_teacher_bf16, hf_clip_contrastive_bf16,
        hf_whisper_seq2seq, hf_gemma_bf16, hf_phi_fp32, hf_qwen2_padded_classifier, hf_deberta_label_smoothing,
        optimizer_zoo_mlp, two_heads_retain_graph, espcn_pixel_shuffle, upsample_autoencoder,
        half_decoder_kv_cache_inference, peft_lora_t5_bf16, timm_mixer_bf16, tv_deeplabv3_mobilenet,
        ctc_speech_transformer, tf32_mlp_high_precision, phases_reset_peak_empty_cache,
    ]
}
