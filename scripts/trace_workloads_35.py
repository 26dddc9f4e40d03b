"""Held-out workloads of issue 35 (group ISSUE35): kinds of program vramlab.trace had not followed
(transposed convolutions, GroupNorm U-Nets, VAEs, EMA copies, EmbeddingBag, frozen backbones,
peft LoRA, timm models, fixed-length generate, all-ones masks, accumulation with fused AdamW,
nn.Transformer, channels-last fp16, MobileNetV3 with GradScaler, T5 with Adafactor). Committed
before they were recorded on a GPU or traced; each is a function of the device, as a user would
write it, recorded by scripts/record_trace_workloads.py (VRAMLAB_HOLDOUT=issue35)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def dcgan_transposed(device):
    """A DCGAN at 64x64: a generator of transposed convolutions with BatchNorm, a convolutional
    discriminator, both with Adam, two steps of the usual alternating update."""
    torch.manual_seed(0)
    nz, ngf, ndf = 100, 64, 64
    gen = nn.Sequential(
        nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 8), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
        nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh(),
    ).to(device)
    disc = nn.Sequential(
        nn.Conv2d(3, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True),
        nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, True),
        nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 4), nn.LeakyReLU(0.2, True),
        nn.Conv2d(ndf * 4, 1, 8, 1, 0, bias=False),
    ).to(device)
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    loss = nn.BCEWithLogitsLoss()
    for _ in range(2):
        real = torch.randn(64, 3, 64, 64, device=device)
        noise = torch.randn(64, nz, 1, 1, device=device)
        fake = gen(noise)
        d_loss = loss(disc(real).view(-1), torch.ones(64, device=device)) + loss(disc(fake.detach()).view(-1), torch.zeros(64, device=device))
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        g_loss = loss(disc(fake).view(-1), torch.ones(64, device=device))
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()


class _ResBlock(nn.Module):
    def __init__(self, cin, cout, tdim):
        super().__init__()
        self.norm1, self.conv1 = nn.GroupNorm(8, cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.time = nn.Linear(tdim, cout)
        self.norm2, self.conv2 = nn.GroupNorm(8, cout), nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, t):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.time(t)[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return h + self.skip(x)


class _Attention(nn.Module):
    def __init__(self, channels, heads=4):
        super().__init__()
        self.norm, self.heads = nn.GroupNorm(8, channels), heads
        self.qkv, self.out = nn.Conv2d(channels, 3 * channels, 1), nn.Conv2d(channels, channels, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, 3, self.heads, c // self.heads, h * w).transpose(-1, -2).unbind(1)
        y = F.scaled_dot_product_attention(q, k, v)
        return x + self.out(y.transpose(-1, -2).reshape(b, c, h, w))


class _UNet(nn.Module):
    def __init__(self, base=64, tdim=256):
        super().__init__()
        self.tdim = tdim
        self.time = nn.Sequential(nn.Linear(tdim, tdim), nn.SiLU(), nn.Linear(tdim, tdim))
        self.inp = nn.Conv2d(4, base, 3, padding=1)
        self.down1, self.down2 = _ResBlock(base, base, tdim), _ResBlock(base, 2 * base, tdim)
        self.pool = nn.Conv2d(2 * base, 2 * base, 3, stride=2, padding=1)
        self.mid, self.attn = _ResBlock(2 * base, 2 * base, tdim), _Attention(2 * base)
        self.up1 = _ResBlock(4 * base, base, tdim)
        self.outp = nn.Sequential(nn.GroupNorm(8, base), nn.SiLU(), nn.Conv2d(base, 4, 3, padding=1))

    def embed(self, t):
        half = self.tdim // 2
        freqs = torch.exp(-torch.arange(half, device=t.device) * (9.21 / half))
        args = t[:, None].float() * freqs[None]
        return self.time(torch.cat([args.sin(), args.cos()], -1))

    def forward(self, x, t):
        e = self.embed(t)
        h1 = self.down1(self.inp(x), e)
        h2 = self.down2(h1, e)
        m = self.attn(self.mid(self.pool(h2), e))
        u = F.interpolate(m, scale_factor=2, mode="nearest")
        return self.outp(self.up1(torch.cat([u, h2], 1), e))


def unet_diffusion_bf16(device):
    """A latent-diffusion-style U-Net (GroupNorm, SiLU, a timestep embedding, SDPA self-attention
    over a 32x32 map, nearest upsampling, skip concatenation) trained on the noise-prediction loss
    under bf16 autocast with AdamW, two steps."""
    torch.manual_seed(0)
    model = _UNet().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        x = torch.randn(16, 4, 64, 64, device=device)
        t = torch.randint(0, 1000, (16,), device=device)
        noise = torch.randn_like(x)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            pred = model(x + noise, t)
        loss = F.mse_loss(pred.float(), noise)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def conv_vae(device):
    """A convolutional VAE on 128x128 images: strided convolutions down, a reparameterised latent,
    transposed convolutions up, MSE plus KL, Adam, two steps."""
    torch.manual_seed(0)

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(
                nn.Conv2d(3, 32, 4, 2, 1), nn.ReLU(), nn.Conv2d(32, 64, 4, 2, 1), nn.ReLU(),
                nn.Conv2d(64, 128, 4, 2, 1), nn.ReLU(), nn.Conv2d(128, 256, 4, 2, 1), nn.ReLU(), nn.Flatten(),
            )
            self.mu, self.logvar = nn.Linear(256 * 8 * 8, 128), nn.Linear(256 * 8 * 8, 128)
            self.expand = nn.Linear(128, 256 * 8 * 8)
            self.dec = nn.Sequential(
                nn.ConvTranspose2d(256, 128, 4, 2, 1), nn.ReLU(), nn.ConvTranspose2d(128, 64, 4, 2, 1), nn.ReLU(),
                nn.ConvTranspose2d(64, 32, 4, 2, 1), nn.ReLU(), nn.ConvTranspose2d(32, 3, 4, 2, 1), nn.Sigmoid(),
            )

        def forward(self, x):
            h = self.enc(x)
            mu, logvar = self.mu(h), self.logvar(h)
            z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
            return self.dec(self.expand(z).view(-1, 256, 8, 8)), mu, logvar

    model = VAE().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(2):
        x = torch.rand(32, 3, 128, 128, device=device)
        recon, mu, logvar = model(x)
        kl = -0.5 * torch.mean(1 + logvar - mu.pow(2) - logvar.exp())
        loss = F.mse_loss(recon, x) + kl
        opt.zero_grad()
        loss.backward()
        opt.step()


def ema_mlp_adamw(device):
    """An MLP trained with AdamW, with an exponential moving average of its weights kept in a
    second copy (deepcopy) and updated with foreach lerp after every step, as in diffusion and
    self-supervised training."""
    import copy

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2048, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, 1024)).to(device)
    ema = copy.deepcopy(model).requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(3):
        x = torch.randn(128, 2048, device=device)
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad()
        with torch.no_grad():
            torch._foreach_lerp_(list(ema.parameters()), list(model.parameters()), 0.001)


def embeddingbag_recommender(device):
    """A recommender: a large EmbeddingBag (sum of each user's items, offsets) and a dense tower,
    trained with Adagrad on a click label, three steps."""
    torch.manual_seed(0)

    class Recommender(nn.Module):
        def __init__(self):
            super().__init__()
            self.items = nn.EmbeddingBag(200_000, 64, mode="sum")
            self.users = nn.Embedding(50_000, 64)
            self.tower = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 1))

        def forward(self, users, items, offsets):
            return self.tower(torch.cat([self.users(users), self.items(items, offsets)], -1)).squeeze(-1)

    model = Recommender().to(device)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.01)
    for _ in range(3):
        users = torch.randint(0, 50_000, (4096,), device=device)
        items = torch.randint(0, 200_000, (4096 * 20,), device=device)
        offsets = torch.arange(0, 4096 * 20, 20, device=device)
        labels = torch.randint(0, 2, (4096,), device=device).float()
        F.binary_cross_entropy_with_logits(model(users, items, offsets), labels).backward()
        opt.step()
        opt.zero_grad()


def tv_resnet50_frozen_backbone(device):
    """Fine-tuning only a new head on a frozen torchvision ResNet-50 (requires_grad off on the
    backbone, the head trained with SGD), batch 32 at 224x224, three steps."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50()
    model.requires_grad_(False)
    model.fc = nn.Linear(2048, 10)
    model = model.to(device)
    opt = torch.optim.SGD(model.fc.parameters(), lr=0.01, momentum=0.9)
    for _ in range(3):
        x = torch.randn(32, 3, 224, 224, device=device)
        y = torch.randint(0, 10, (32,), device=device)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()


def peft_lora_gpt2_bf16(device):
    """peft LoRA (r=8 on the attention projections) on a Hugging Face GPT-2 built from its config,
    trained under bf16 autocast with AdamW, two steps."""
    from peft import LoraConfig, get_peft_model
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=6, n_embd=768, n_head=12, vocab_size=16384, n_positions=512, bos_token_id=1, eos_token_id=1)
    model = get_peft_model(GPT2LMHeadModel(config), LoraConfig(r=8, lora_alpha=16, target_modules=["c_attn", "c_proj"], fan_in_fan_out=True)).to(device)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 16384, (8, 512)).to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()


def peft_lora_llama(device):
    """peft LoRA (r=16 on q_proj and v_proj) on a small Hugging Face Llama in float32, AdamW, two
    steps with an attention mask from the tokenizer (all ones)."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(num_hidden_layers=4, hidden_size=512, num_attention_heads=8, num_key_value_heads=8, intermediate_size=1376, vocab_size=8192)
    model = get_peft_model(LlamaForCausalLM(config), LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "v_proj"])).to(device)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 8192, (4, 512))
        mask = torch.ones(4, 512, dtype=torch.long)
        model(input_ids=ids.to(device), attention_mask=mask.to(device), labels=ids.to(device)).loss.backward()
        opt.step()
        opt.zero_grad()


def timm_convnext_atto_adamw(device):
    """timm's ConvNeXt-atto (no pretrained weights), trained with AdamW at batch 32, 224x224,
    two steps."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("convnext_atto", pretrained=False, num_classes=100).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        x = torch.randn(32, 3, 224, 224, device=device)
        y = torch.randint(0, 100, (32,), device=device)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()


def timm_vit_tiny_bf16(device):
    """timm's ViT-Tiny/16 (no pretrained weights) under bf16 autocast with AdamW and gradient
    clipping, batch 64, two steps."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=100).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        x = torch.randn(64, 3, 224, 224, device=device)
        y = torch.randint(0, 100, (64,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()


def hf_gpt2_generate_fixed_length(device):
    """Greedy generate() of a Hugging Face GPT-2 with min_new_tokens == max_new_tokens (the
    length is fixed: no stopping criterion can fire earlier), in eval mode."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=4, n_embd=512, n_head=8, vocab_size=8192, n_positions=512, bos_token_id=1, eos_token_id=1)
    model = GPT2LMHeadModel(config).to(device).eval()
    ids = torch.randint(0, 8192, (4, 64)).to(device)
    mask = torch.ones(4, 64, dtype=torch.long).to(device)
    with torch.no_grad():
        model.generate(input_ids=ids, attention_mask=mask, min_new_tokens=32, max_new_tokens=32, do_sample=False, pad_token_id=0)


def hf_bert_all_ones_mask(device):
    """A Hugging Face BERT (4 layers) trained with AdamW for two steps, given an all-ones
    attention_mask made on the device with torch.ones."""
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    config = BertConfig(num_hidden_layers=4, hidden_size=384, num_attention_heads=6, intermediate_size=1536, vocab_size=8192)
    model = BertForMaskedLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 8192, (16, 256), device=device)
        mask = torch.ones(16, 256, dtype=torch.long, device=device)
        model(input_ids=ids, attention_mask=mask, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad()


def accumulation_fused_adamw_clip(device):
    """A hand-written loop: gradient accumulation over four micro-batches, loss scaled by 1/4,
    clip_grad_norm_, fused AdamW and a cosine schedule, two optimizer steps."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1000)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    for _ in range(2):
        for _ in range(4):
            x = torch.randn(64, 1024, device=device)
            y = torch.randint(0, 1000, (64,), device=device)
            (F.cross_entropy(model(x), y) / 4).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        schedule.step()
        opt.zero_grad(set_to_none=True)


def nn_transformer_seq2seq(device):
    """nn.Transformer (3 + 3 layers, d_model 512) trained as a sequence-to-sequence model with a
    causal target mask and Adam, two steps (training: no fast path)."""
    torch.manual_seed(0)
    model = nn.Transformer(d_model=512, nhead=8, num_encoder_layers=3, num_decoder_layers=3, dim_feedforward=2048, batch_first=True).to(device)
    embed, head = nn.Embedding(8000, 512).to(device), nn.Linear(512, 8000).to(device)
    params = list(model.parameters()) + list(embed.parameters()) + list(head.parameters())
    opt = torch.optim.Adam(params, lr=1e-4)
    for _ in range(2):
        src = torch.randint(0, 8000, (16, 128), device=device)
        tgt = torch.randint(0, 8000, (16, 96), device=device)
        causal = nn.Transformer.generate_square_subsequent_mask(96, device=device)
        out = head(model(embed(src), embed(tgt), tgt_mask=causal))
        F.cross_entropy(out.reshape(-1, 8000), tgt.reshape(-1)).backward()
        opt.step()
        opt.zero_grad()


def tv_resnet18_channels_last_fp16(device):
    """A torchvision ResNet-18 in channels-last memory format, fp16 autocast with a GradScaler and
    SGD, batch 64 at 224x224, two steps."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=100).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(2):
        x = torch.randn(64, 3, 224, 224, device=device).to(memory_format=torch.channels_last)
        y = torch.randint(0, 100, (64,), device=device)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()


def tv_mobilenet_v3_fp16_scaler(device):
    """torchvision's MobileNetV3-Large under fp16 autocast with a GradScaler and RMSprop, batch 64,
    two steps."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v3_large(num_classes=100).to(device)
    opt = torch.optim.RMSprop(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(2):
        x = torch.randn(64, 3, 224, 224, device=device)
        y = torch.randint(0, 100, (64,), device=device)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()


def hf_t5_adafactor_bf16(device):
    """A Hugging Face T5 (4 + 4 layers) trained with transformers' Adafactor under bf16 autocast,
    two steps."""
    from transformers import T5Config, T5ForConditionalGeneration
    from transformers.optimization import Adafactor

    torch.manual_seed(0)
    config = T5Config(d_model=512, d_ff=2048, d_kv=64, num_layers=4, num_decoder_layers=4, num_heads=8, vocab_size=16384, decoder_start_token_id=0)
    model = T5ForConditionalGeneration(config).to(device)
    opt = Adafactor(model.parameters(), lr=1e-3, relative_step=False, scale_parameter=False)
    for _ in range(2):
        ids = torch.randint(0, 16384, (8, 512)).to(device)
        labels = torch.randint(0, 16384, (8, 128)).to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()


ISSUE35 = {
    f.__name__: f
    for f in [
        dcgan_transposed, unet_diffusion_bf16, conv_vae, ema_mlp_adamw, embeddingbag_recommender,
        tv_resnet50_frozen_backbone, peft_lora_gpt2_bf16, peft_lora_llama, timm_convnext_atto_adamw,
        timm_vit_tiny_bf16, hf_gpt2_generate_fixed_length, hf_bert_all_ones_mask,
        accumulation_fused_adamw_clip, nn_transformer_seq2seq, tv_resnet18_channels_last_fp16,
        tv_mobilenet_v3_fp16_scaler, hf_t5_adafactor_bf16,
    ]
}
