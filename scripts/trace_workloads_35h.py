"""Eighth held-out group of issue 35 (group ISSUE35H): programs of kinds users run that no earlier
group has, written after the distributed groups' mends and committed before they were recorded on
a GPU (an H200: the only kind lent that day). They were traced on the CPU before recording only
to see whether the tracer runs them to the end (no GPU figure was seen then).

A DiT-style diffusion transformer (adaLN-Zero modulation, patchify convolution, bf16, an EMA copy
updated by foreach ops); a VQ-VAE (a codebook searched by cdist and argmin, the straight-through
estimator); a Fourier neural operator (rfft2, complex weights, irfft2); a two-tower recommender
(EmbeddingBag with offsets, in-batch negatives); timm's ConvNeXt-Atto in channels-last under bf16;
a torchvision ResNet-18 with cudnn.benchmark on; Hugging Face's SegFormer from its config; a peft
LoRA GPT-2 merged and then generating a fixed length; a BERT masked-language model fed by
DataCollatorForLanguageModeling under fp16 with a GradScaler; a PixelCNN (masked convolutions,
a 256-way softmax per pixel); a Mamba-like block written by hand (depthwise causal conv1d, a scan by
cumsum and exp); torchvision's EfficientNet-B0 with CutMix and an EMA under fp16; a neural ODE
integrated by a hand-written RK4; a Transformer-XL-style loop carrying detached memories across
segments; a text-conditioned U-Net with cross-attention to a frozen CLIP text encoder under fp16;
and a Gaussian-process regression by Cholesky factorisation. Each is a function of the device,
recorded by scripts/record_trace_workloads.py (VRAMLAB_HOLDOUT=issue35h)."""

import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def dit_diffusion_bf16(device):
    """A DiT-style diffusion transformer on 32x32x4 latents: a 2x2 patchify convolution to 384
    channels, a sinusoidal timestep embedding and a class embedding summed into a conditioning
    vector, six blocks with adaLN-Zero modulation (SiLU, a linear to six chunks), SDPA attention
    and an MLP, an unpatchify by reshape and einsum; the noise-prediction MSE under bf16 autocast,
    AdamW, and an EMA copy updated with torch._foreach_mul_ and _foreach_add_; batch 32, three
    steps."""
    torch.manual_seed(0)
    hidden, heads, depth, patch = 384, 6, 6, 2

    def timestep_embedding(t, dim):
        half = dim // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
        args = t[:, None].float() * freqs[None]
        return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
            self.qkv = nn.Linear(hidden, 3 * hidden)
            self.proj = nn.Linear(hidden, hidden)
            self.norm2 = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
            self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(approximate="tanh"), nn.Linear(4 * hidden, hidden))
            self.ada = nn.Sequential(nn.SiLU(), nn.Linear(hidden, 6 * hidden))

        def forward(self, x, c):
            shift1, scale1, gate1, shift2, scale2, gate2 = self.ada(c).chunk(6, dim=1)
            h = self.norm1(x) * (1 + scale1[:, None]) + shift1[:, None]
            b, n, _ = h.shape
            q, k, v = self.qkv(h).reshape(b, n, 3, heads, hidden // heads).permute(2, 0, 3, 1, 4)
            h = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, hidden)
            x = x + gate1[:, None] * self.proj(h)
            h = self.norm2(x) * (1 + scale2[:, None]) + shift2[:, None]
            return x + gate2[:, None] * self.mlp(h)

    class DiT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patchify = nn.Conv2d(4, hidden, patch, stride=patch)
            self.pos = nn.Parameter(torch.zeros(1, (32 // patch) ** 2, hidden))
            self.t_mlp = nn.Sequential(nn.Linear(256, hidden), nn.SiLU(), nn.Linear(hidden, hidden))
            self.y_embed = nn.Embedding(1001, hidden)
            self.blocks = nn.ModuleList(Block() for _ in range(depth))
            self.final_norm = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
            self.final_ada = nn.Sequential(nn.SiLU(), nn.Linear(hidden, 2 * hidden))
            self.final = nn.Linear(hidden, patch * patch * 4)

        def forward(self, x, t, y):
            x = self.patchify(x).flatten(2).transpose(1, 2) + self.pos
            c = self.t_mlp(timestep_embedding(t, 256)) + self.y_embed(y)
            for block in self.blocks:
                x = block(x, c)
            shift, scale = self.final_ada(c).chunk(2, dim=1)
            x = self.final(self.final_norm(x) * (1 + scale[:, None]) + shift[:, None])
            g = 32 // patch
            x = x.reshape(-1, g, g, patch, patch, 4)
            return torch.einsum("nhwpqc->nchpwq", x).reshape(-1, 4, 32, 32)

    model = DiT().to(device)
    ema = copy.deepcopy(model).requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0)
    betas = torch.linspace(1e-4, 0.02, 1000, device=device)
    alphas_cumprod = torch.cumprod(1 - betas, dim=0)
    for _ in range(3):
        x0 = torch.randn(32, 4, 32, 32, device=device)
        y = torch.randint(0, 1000, (32,), device=device)
        t = torch.randint(0, 1000, (32,), device=device)
        noise = torch.randn_like(x0)
        a = alphas_cumprod[t].sqrt()[:, None, None, None]
        s = (1 - alphas_cumprod[t]).sqrt()[:, None, None, None]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.mse_loss(model(a * x0 + s * noise, t, y), noise)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            ema_params, params = list(ema.parameters()), list(model.parameters())
            torch._foreach_mul_(ema_params, 0.9999)
            torch._foreach_add_(ema_params, params, alpha=1 - 0.9999)


def vqvae_codebook(device):
    """A VQ-VAE on 64x64 RGB images: a strided-convolution encoder to 64 channels at 16x16, a
    codebook of 512 by 64 searched by torch.cdist and argmin, the quantized vectors looked up by
    F.embedding, the straight-through estimator, codebook and commitment losses, a decoder of
    transposed convolutions; batch 32, Adam, three steps."""
    torch.manual_seed(0)
    encoder = nn.Sequential(
        nn.Conv2d(3, 64, 4, 2, 1), nn.ReLU(), nn.Conv2d(64, 128, 4, 2, 1), nn.ReLU(), nn.Conv2d(128, 64, 3, 1, 1),
    ).to(device)
    decoder = nn.Sequential(
        nn.Conv2d(64, 128, 3, 1, 1), nn.ReLU(), nn.ConvTranspose2d(128, 64, 4, 2, 1), nn.ReLU(),
        nn.ConvTranspose2d(64, 3, 4, 2, 1),
    ).to(device)
    codebook = nn.Embedding(512, 64).to(device)
    params = list(encoder.parameters()) + list(decoder.parameters()) + list(codebook.parameters())
    opt = torch.optim.Adam(params, lr=2e-4)
    for _ in range(3):
        x = torch.randn(32, 3, 64, 64, device=device)
        z = encoder(x)
        flat = z.permute(0, 2, 3, 1).reshape(-1, 64)
        codes = torch.cdist(flat, codebook.weight).argmin(dim=1)
        quantized = F.embedding(codes, codebook.weight).view(32, 16, 16, 64).permute(0, 3, 1, 2)
        loss_codebook = F.mse_loss(quantized, z.detach())
        loss_commit = F.mse_loss(z, quantized.detach())
        quantized = z + (quantized - z).detach()
        loss = F.mse_loss(decoder(quantized), x) + loss_codebook + 0.25 * loss_commit
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def fno_fft_darcy(device):
    """A 2-D Fourier neural operator: a lift to 32 channels, four spectral layers (rfft2 over
    64x64, complex weights on the 12x12 lowest modes of each corner multiplied by einsum, irfft2)
    each beside a 1x1 convolution, GELU, a projection; batch 20, relative L2 loss, Adam; three
    steps."""
    torch.manual_seed(0)
    width, modes = 32, 12

    class Spectral(nn.Module):
        def __init__(self):
            super().__init__()
            scale = 1 / (width * width)
            self.w1 = nn.Parameter(scale * torch.rand(width, width, modes, modes, dtype=torch.cfloat))
            self.w2 = nn.Parameter(scale * torch.rand(width, width, modes, modes, dtype=torch.cfloat))

        def forward(self, x):
            b, _, h, w = x.shape
            x_ft = torch.fft.rfft2(x)
            out = torch.zeros(b, width, h, w // 2 + 1, dtype=torch.cfloat, device=x.device)
            out[:, :, :modes, :modes] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, :modes, :modes], self.w1)
            out[:, :, -modes:, :modes] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, -modes:, :modes], self.w2)
            return torch.fft.irfft2(out, s=(h, w))

    class FNO(nn.Module):
        def __init__(self):
            super().__init__()
            self.lift = nn.Linear(3, width)
            self.spectral = nn.ModuleList(Spectral() for _ in range(4))
            self.pointwise = nn.ModuleList(nn.Conv2d(width, width, 1) for _ in range(4))
            self.proj = nn.Sequential(nn.Linear(width, 128), nn.GELU(), nn.Linear(128, 1))

        def forward(self, a):
            b, h, w, _ = a.shape
            grid_x = torch.linspace(0, 1, h, device=a.device).view(1, h, 1, 1).expand(b, h, w, 1)
            grid_y = torch.linspace(0, 1, w, device=a.device).view(1, 1, w, 1).expand(b, h, w, 1)
            x = self.lift(torch.cat([a, grid_x, grid_y], dim=-1)).permute(0, 3, 1, 2)
            for i, (spectral, pointwise) in enumerate(zip(self.spectral, self.pointwise)):
                x = spectral(x) + pointwise(x)
                if i < 3:
                    x = F.gelu(x)
            return self.proj(x.permute(0, 2, 3, 1))

    model = FNO().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    for _ in range(3):
        a = torch.randn(20, 64, 64, 1, device=device)
        u = torch.randn(20, 64, 64, 1, device=device)
        pred = model(a)
        loss = (torch.linalg.vector_norm((pred - u).reshape(20, -1), dim=1) / torch.linalg.vector_norm(u.reshape(20, -1), dim=1)).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def two_tower_embeddingbag_inbatch(device):
    """A two-tower retrieval model: a user tower of EmbeddingBag (mean over a variable number of
    history items, given by offsets) and a dense-feature MLP, an item tower of Embedding and MLP,
    normalized embeddings scored against every item of the batch (in-batch negatives, a
    temperature), cross entropy; 200,000 items by 64, batch 1024, Adam; four steps."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    items, dim, batch = 200_000, 64, 1024

    class UserTower(nn.Module):
        def __init__(self):
            super().__init__()
            self.history = nn.EmbeddingBag(items, dim, mode="mean")
            self.mlp = nn.Sequential(nn.Linear(dim + 16, 256), nn.ReLU(), nn.Linear(256, dim))

        def forward(self, history, offsets, dense):
            return self.mlp(torch.cat([self.history(history, offsets), dense], dim=1))

    user = UserTower().to(device)
    item = nn.Sequential(nn.Embedding(items, dim), nn.Linear(dim, 256), nn.ReLU(), nn.Linear(256, dim)).to(device)
    opt = torch.optim.Adam(list(user.parameters()) + list(item.parameters()), lr=1e-3)
    for _ in range(4):
        lengths = torch.randint(1, 50, (batch,), generator=gen)
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]]).to(device)
        history = torch.randint(0, items, (int(lengths.sum()),), generator=gen).to(device)
        dense = torch.randn(batch, 16, device=device)
        positives = torch.randint(0, items, (batch,), device=device)
        u = F.normalize(user(history, offsets, dense), dim=1)
        v = F.normalize(item(positives), dim=1)
        logits = u @ v.T / 0.05
        loss = F.cross_entropy(logits, torch.arange(batch, device=device))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def timm_convnext_atto_bf16_channels_last(device):
    """timm's ConvNeXt-Atto (7x7 depthwise convolutions, LayerNorm over channels) in channels-last
    memory format at batch 64 of 160x160, under bf16 autocast, AdamW with drop path 0.1; three
    steps."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("convnext_atto", num_classes=100, drop_path_rate=0.1).to(device, memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    for _ in range(3):
        x = torch.randn(64, 3, 160, 160, device=device).to(memory_format=torch.channels_last)
        y = torch.randint(0, 100, (64,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def resnet18_cudnn_benchmark(device):
    """torchvision's ResNet-18 with torch.backends.cudnn.benchmark = True (cuDNN times its
    algorithms and keeps the fastest), batch 64 of 128x128, SGD with momentum; three steps. The
    setting is restored afterwards."""
    import torchvision

    torch.manual_seed(0)
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True
    try:
        model = torchvision.models.resnet18(num_classes=10).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for _ in range(3):
            x = torch.randn(64, 3, 128, 128, device=device)
            y = torch.randint(0, 10, (64,), device=device)
            F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    finally:
        torch.backends.cudnn.benchmark = before


def hf_segformer_from_config(device):
    """Hugging Face's SegFormer (MiT-B0-sized, from its config) for semantic segmentation of
    batch 8 of 256x256 into 19 classes: labels given, so the model upsamples its logits and takes
    cross entropy with ignore index 255; AdamW; two steps."""
    from transformers import SegformerConfig, SegformerForSemanticSegmentation

    torch.manual_seed(0)
    config = SegformerConfig(num_labels=19, semantic_loss_ignore_index=255)
    model = SegformerForSemanticSegmentation(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-5)
    for _ in range(2):
        pixels = torch.randn(8, 3, 256, 256, device=device)
        labels = torch.randint(0, 19, (8, 256, 256), device=device)
        model(pixel_values=pixels, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_gpt2_lora_merge_generate(device):
    """peft LoRA (rank 16 on c_attn and c_proj) on a GPT-2 from its config: two training steps
    under bf16 autocast at batch 8 of 256 tokens, then merge_and_unload and greedy generation of
    exactly 32 new tokens (min_new_tokens == max_new_tokens) for 4 prompts of 64 tokens, in eval
    mode under torch.no_grad."""
    from peft import LoraConfig, get_peft_model
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=6, n_embd=512, n_head=8, vocab_size=16000, n_positions=512, bos_token_id=1, eos_token_id=1)
    base = GPT2LMHeadModel(config).to(device)
    model = get_peft_model(base, LoraConfig(r=16, lora_alpha=32, target_modules=["c_attn", "c_proj"], lora_dropout=0.05, fan_in_fan_out=True))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-4)
    for _ in range(2):
        ids = torch.randint(0, 16000, (8, 256), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    merged = model.merge_and_unload().eval()
    prompts = torch.randint(0, 16000, (4, 64), device=device)
    with torch.no_grad():
        merged.generate(
            prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=32, min_new_tokens=32, do_sample=False,
            pad_token_id=0,
        )


def hf_bert_mlm_collator_fp16(device):
    """A BERT masked-language model from its config, fed by DataCollatorForLanguageModeling (15%
    masking, done on the CPU by the collator) with a small word-level tokenizer, batches of 32
    sequences of 128 tokens moved to the GPU, under fp16 autocast with a GradScaler, AdamW; three
    steps."""
    from transformers import BertConfig, BertForMaskedLM, DataCollatorForLanguageModeling, PreTrainedTokenizerFast
    from tokenizers import Tokenizer, models, pre_tokenizers

    torch.manual_seed(0)
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4}
    vocab.update({f"w{i}": i + 5 for i in range(7995)})
    raw = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
    )
    collator = DataCollatorForLanguageModeling(tokenizer=tokenizer, mlm_probability=0.15)
    config = BertConfig(vocab_size=8000, hidden_size=384, num_hidden_layers=6, num_attention_heads=6, intermediate_size=1536)
    model = BertForMaskedLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        examples = [{"input_ids": torch.randint(5, 8000, (128,), generator=gen).tolist()} for _ in range(32)]
        batch = {k: v.to(device) for k, v in collator(examples).items()}
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(**batch).loss
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)


def pixelcnn_masked_conv(device):
    """A PixelCNN on 28x28 grey images quantized to 256 levels: masked 7x7 and 3x3 convolutions
    (the mask a buffer multiplied into the weight at each forward), eight residual layers of 64
    channels with BatchNorm, logits of 256 levels per pixel, cross entropy over them; batch 64,
    Adam; three steps."""
    torch.manual_seed(0)

    class MaskedConv2d(nn.Conv2d):
        def __init__(self, mask_type, *args, **kwargs):
            super().__init__(*args, **kwargs)
            _, _, h, w = self.weight.shape
            mask = torch.ones_like(self.weight)
            mask[:, :, h // 2, w // 2 + (mask_type == "B"):] = 0
            mask[:, :, h // 2 + 1:] = 0
            self.register_buffer("mask", mask)

        def forward(self, x):
            return F.conv2d(x, self.weight * self.mask, self.bias, padding=self.padding)

    layers = [MaskedConv2d("A", 1, 64, 7, padding=3), nn.BatchNorm2d(64), nn.ReLU()]
    for _ in range(8):
        layers += [MaskedConv2d("B", 64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU()]
    layers += [nn.Conv2d(64, 256, 1)]
    model = nn.Sequential(*layers).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(3):
        target = torch.randint(0, 256, (64, 28, 28), device=device)
        x = target.float().unsqueeze(1) / 255.0
        loss = F.cross_entropy(model(x), target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def mamba_like_scan(device):
    """A Mamba-like language model written by hand: four blocks of an input projection, a
    depthwise causal conv1d (kernel 4, groups = channels), SiLU gating, a selective scan done in
    parallel by cumsum of log decays and exp, an output projection and a hand-written RMSNorm;
    vocabulary 8,000, width 256, batch 8 of 256 tokens, AdamW with gradient clipping; three
    steps."""
    torch.manual_seed(0)
    width, inner, state = 256, 256, 16

    class RMSNorm(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = RMSNorm(width)
            self.in_proj = nn.Linear(width, 2 * inner)
            self.conv = nn.Conv1d(inner, inner, 4, groups=inner, padding=3)
            self.x_proj = nn.Linear(inner, 1 + 2 * state)
            self.a_log = nn.Parameter(torch.zeros(inner))
            self.out_proj = nn.Linear(inner, width)

        def forward(self, x):
            length = x.shape[1]
            u, gate = self.in_proj(self.norm(x)).chunk(2, dim=-1)
            u = F.silu(self.conv(u.transpose(1, 2))[..., :length].transpose(1, 2))
            dt, b, c = self.x_proj(u).split([1, state, state], dim=-1)
            dt = F.softplus(dt)
            log_decay = -dt * torch.exp(self.a_log)
            cum = torch.cumsum(log_decay, dim=1)
            # The scan over time in closed form: h_t = sum_s exp(cum_t - cum_s) * dt_s * b_s * u_s.
            scores = torch.einsum("btn,bsn->bts", c, b)
            causal = torch.ones(length, length, device=x.device, dtype=torch.bool).tril()
            decay = torch.exp((cum[:, :, None, :] - cum[:, None, :, :]).clamp(max=0))
            mixing = (scores.masked_fill(~causal, 0))[..., None] * decay
            y = torch.einsum("btsd,bsd->btd", mixing, dt * u)
            return x + self.out_proj(y * F.silu(gate))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(8000, width)
            self.blocks = nn.ModuleList(Block() for _ in range(4))
            self.norm = RMSNorm(width)

        def forward(self, ids):
            x = self.embed(ids)
            for block in self.blocks:
                x = block(x)
            return self.norm(x) @ self.embed.weight.T

    model = Model().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for _ in range(3):
        ids = torch.randint(0, 8000, (8, 257), device=device)
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 8000), ids[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)


def efficientnet_b0_cutmix_ema_fp16(device):
    """torchvision's EfficientNet-B0 (100 classes) at batch 48 of 192x192 with CutMix (a random
    box from a permutation of the batch, the labels mixed by area), fp16 autocast with a
    GradScaler, RMSprop, and an EMA of the weights by torch.optim.swa_utils.AveragedModel; three
    steps."""
    import torchvision
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model = torchvision.models.efficientnet_b0(num_classes=100).to(device)
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))
    opt = torch.optim.RMSprop(model.parameters(), lr=0.016, alpha=0.9, eps=1e-3, momentum=0.9, weight_decay=1e-5)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(3):
        x = torch.randn(48, 3, 192, 192, device=device)
        y = F.one_hot(torch.randint(0, 100, (48,), device=device), 100).float()
        lam = float(torch.distributions.Beta(1.0, 1.0).sample())
        perm = torch.randperm(48, generator=gen).to(device)
        cut = int(192 * math.sqrt(1 - lam))
        cx, cy = (int(v) for v in torch.randint(0, 192, (2,), generator=gen))
        x0, x1, y0, y1 = max(cx - cut // 2, 0), min(cx + cut // 2, 192), max(cy - cut // 2, 0), min(cy + cut // 2, 192)
        x[:, :, y0:y1, x0:x1] = x[perm, :, y0:y1, x0:x1]
        area = 1 - (x1 - x0) * (y1 - y0) / (192 * 192)
        target = area * y + (1 - area) * y[perm]
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(x), target)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        ema.update_parameters(model)


def neural_ode_rk4(device):
    """A neural ODE integrated by a hand-written fixed-step RK4 (20 steps over [0, 1]) whose
    dynamics are an MLP of width 512 with tanh, trained end to end through the solver on batch
    4,096 of 64-dimensional states against a target, Adam; three steps."""
    torch.manual_seed(0)
    dynamics = nn.Sequential(nn.Linear(65, 512), nn.Tanh(), nn.Linear(512, 512), nn.Tanh(), nn.Linear(512, 64)).to(device)
    opt = torch.optim.Adam(dynamics.parameters(), lr=1e-3)

    def f(t, z):
        return dynamics(torch.cat([z, t.expand(z.shape[0], 1)], dim=1))

    for _ in range(3):
        z = torch.randn(4096, 64, device=device)
        target = torch.randn(4096, 64, device=device)
        h = torch.tensor(1 / 20, device=device)
        t = torch.zeros(1, device=device)
        for _ in range(20):
            k1 = f(t, z)
            k2 = f(t + h / 2, z + h / 2 * k1)
            k3 = f(t + h / 2, z + h / 2 * k2)
            k4 = f(t + h, z + h * k3)
            z = z + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            t = t + h
        loss = F.mse_loss(z, target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def transformer_xl_memory_segments(device):
    """A Transformer-XL-style language model: four layers that attend over the current segment of
    128 tokens and a memory of the previous segment's hidden states (concatenated, detached, kept
    across steps), causal masks built for the longer keys, batch 16; six segments, one
    optimizer step each, Adam with gradient clipping."""
    torch.manual_seed(0)
    width, heads, seg = 384, 6, 128

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = nn.LayerNorm(width)
            self.q = nn.Linear(width, width)
            self.kv = nn.Linear(width, 2 * width)
            self.out = nn.Linear(width, width)
            self.norm2 = nn.LayerNorm(width)
            self.ff = nn.Sequential(nn.Linear(width, 4 * width), nn.ReLU(), nn.Linear(4 * width, width))

        def forward(self, x, memory):
            b, n, _ = x.shape
            h = self.norm1(x)
            context = h if memory is None else torch.cat([memory, h], dim=1)
            m = context.shape[1] - n
            q = self.q(h).view(b, n, heads, -1).transpose(1, 2)
            k, v = self.kv(context).view(b, -1, 2, heads, width // heads).permute(2, 0, 3, 1, 4)
            mask = torch.ones(n, n + m, dtype=torch.bool, device=x.device).tril(diagonal=m)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            x = x + self.out(a.transpose(1, 2).reshape(b, n, width))
            return x + self.ff(self.norm2(x))

    embed = nn.Embedding(10000, width).to(device)
    layers = nn.ModuleList(Layer() for _ in range(4)).to(device)
    head = nn.Linear(width, 10000).to(device)
    params = list(embed.parameters()) + list(layers.parameters()) + list(head.parameters())
    opt = torch.optim.Adam(params, lr=2.5e-4)
    memories = [None] * 4
    for _ in range(6):
        ids = torch.randint(0, 10000, (16, seg + 1), device=device)
        x = embed(ids[:, :-1])
        new_memories = []
        for i, layer in enumerate(layers):
            new_memories.append(x.detach())
            x = layer(x, memories[i])
        memories = new_memories
        loss = F.cross_entropy(head(x).reshape(-1, 10000), ids[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 0.25)
        opt.step()
        opt.zero_grad(set_to_none=True)


def text_conditioned_unet_fp16(device):
    """A text-conditioned diffusion U-Net: a frozen CLIP text encoder (Hugging Face, from its
    config) embeds 77-token prompts under torch.no_grad; a U-Net on 32x32x4 latents (three levels
    of 64 to 256 channels, GroupNorm and SiLU residual blocks, self- and cross-attention by SDPA at
    the two lower levels, nearest upsampling) predicts the noise; fp16 autocast with a GradScaler,
    AdamW; batch 16, three steps."""
    from transformers import CLIPTextConfig, CLIPTextModel

    torch.manual_seed(0)
    text = CLIPTextModel(CLIPTextConfig(hidden_size=256, intermediate_size=1024, num_hidden_layers=4, num_attention_heads=4, vocab_size=10000, pad_token_id=0, bos_token_id=1, eos_token_id=2)).to(device).eval().requires_grad_(False)

    class ResBlock(nn.Module):
        def __init__(self, cin, cout, tdim=256):
            super().__init__()
            self.norm1 = nn.GroupNorm(32, cin)
            self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
            self.t = nn.Linear(tdim, cout)
            self.norm2 = nn.GroupNorm(32, cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
            self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(self, x, temb):
            h = self.conv1(F.silu(self.norm1(x))) + self.t(temb)[:, :, None, None]
            h = self.conv2(F.silu(self.norm2(h)))
            return h + self.skip(x)

    class CrossAttention(nn.Module):
        def __init__(self, channels, context=256, heads=4):
            super().__init__()
            self.heads = heads
            self.norm = nn.GroupNorm(32, channels)
            self.q = nn.Linear(channels, channels)
            self.kv_self = nn.Linear(channels, 2 * channels)
            self.kv_text = nn.Linear(context, 2 * channels)
            self.out = nn.Linear(channels, channels)

        def split(self, t):
            b, n, c = t.shape
            return t.view(b, n, self.heads, c // self.heads).transpose(1, 2)

        def forward(self, x, text_states):
            b, c, h, w = x.shape
            s = self.norm(x).flatten(2).transpose(1, 2)
            q = self.split(self.q(s))
            k, v = (self.split(t) for t in self.kv_self(s).chunk(2, dim=-1))
            a = F.scaled_dot_product_attention(q, k, v)
            k, v = (self.split(t) for t in self.kv_text(text_states).chunk(2, dim=-1))
            a = a + F.scaled_dot_product_attention(q, k, v)
            a = self.out(a.transpose(1, 2).reshape(b, h * w, c))
            return x + a.transpose(1, 2).reshape(b, c, h, w)

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.t_mlp = nn.Sequential(nn.Linear(64, 256), nn.SiLU(), nn.Linear(256, 256))
            self.inp = nn.Conv2d(4, 64, 3, padding=1)
            self.d1, self.d2, self.d3 = ResBlock(64, 64), ResBlock(64, 128), ResBlock(128, 256)
            self.a2, self.a3 = CrossAttention(128), CrossAttention(256)
            self.mid = ResBlock(256, 256)
            self.u3, self.u2, self.u1 = ResBlock(512, 128), ResBlock(256, 64), ResBlock(128, 64)
            self.ua2 = CrossAttention(64)
            self.outp = nn.Sequential(nn.GroupNorm(32, 64), nn.SiLU(), nn.Conv2d(64, 4, 3, padding=1))

        def forward(self, x, t, text_states):
            half = 32
            freqs = torch.exp(-math.log(10000) * torch.arange(half, device=x.device) / half)
            temb = self.t_mlp(torch.cat([torch.cos(t[:, None] * freqs), torch.sin(t[:, None] * freqs)], dim=1))
            h1 = self.d1(self.inp(x), temb)
            h2 = self.a2(self.d2(F.avg_pool2d(h1, 2), temb), text_states)
            h3 = self.a3(self.d3(F.avg_pool2d(h2, 2), temb), text_states)
            m = self.mid(h3, temb)
            u = self.u3(torch.cat([m, h3], 1), temb)
            u = self.ua2(self.u2(torch.cat([F.interpolate(u, scale_factor=2.0, mode="nearest"), h2], 1), temb), text_states)
            u = self.u1(torch.cat([F.interpolate(u, scale_factor=2.0, mode="nearest"), h1], 1), temb)
            return self.outp(u)

    unet = UNet().to(device)
    opt = torch.optim.AdamW(unet.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(3):
        prompts = torch.randint(0, 10000, (16, 77), device=device)
        with torch.no_grad():
            text_states = text(input_ids=prompts).last_hidden_state
        latents = torch.randn(16, 4, 32, 32, device=device)
        noise = torch.randn_like(latents)
        t = torch.rand(16, device=device)
        noisy = (1 - t)[:, None, None, None] * latents + t[:, None, None, None] * noise
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.mse_loss(unet(noisy, t * 1000, text_states).float(), noise)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)


def gaussian_process_cholesky(device):
    """Exact Gaussian-process regression on 3,000 points in 8 dimensions: an RBF kernel with
    learned length scales and noise, its Cholesky factor, the solve by cholesky_solve and the log
    determinant from the factor's diagonal, the negative marginal likelihood minimised by Adam;
    five steps, in float64."""
    torch.manual_seed(0)
    x = torch.randn(3000, 8, device=device, dtype=torch.float64)
    y = torch.randn(3000, 1, device=device, dtype=torch.float64)
    log_scale = torch.zeros(8, device=device, dtype=torch.float64, requires_grad=True)
    log_noise = torch.tensor(-2.0, device=device, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([log_scale, log_noise], lr=0.05)
    for _ in range(5):
        z = x / log_scale.exp()
        k = torch.exp(-0.5 * torch.cdist(z, z).pow(2)) + log_noise.exp() * torch.eye(3000, device=device, dtype=torch.float64)
        chol = torch.linalg.cholesky(k)
        alpha = torch.cholesky_solve(y, chol)
        nll = 0.5 * (y * alpha).sum() + chol.diagonal().log().sum()
        nll.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


ISSUE35H = {
    f.__name__: f
    for f in [
        dit_diffusion_bf16, vqvae_codebook, fno_fft_darcy, two_tower_embeddingbag_inbatch,
        timm_convnext_atto_bf16_channels_last, resnet18_cudnn_benchmark, hf_segformer_from_config,
        hf_gpt2_lora_merge_generate, hf_bert_mlm_collator_fp16, pixelcnn_masked_conv, mamba_like_scan,
        efficientnet_b0_cutmix_ema_fp16, neural_ode_rk4, transformer_xl_memory_segments,
        text_conditioned_unet_fp16, gaussian_process_cholesky,
    ]
}
