"""Eleventh held-out group of issue 35 (group ISSUE35K): sixteen programs of kinds no earlier group
had, written after ISSUE35J's figures and committed before they were recorded on a GPU (an H200)
or compared with anything. Traced on the CPU before recording only to see that each program is
itself valid (a refusal then is kept as the held-out figure, not mended first).

torchvision's ShuffleNetV2 (channel shuffles, depthwise convolutions) and ResNeXt-50 (grouped
convolutions) under bf16 autocast; a CycleGAN (reflection padding, instance norm, transposed
convolutions with output padding, four networks, two optimizers); Hugging Face's GPT-Neo from its
config (local and global attention layers); Hugging Face's ViT-MAE pretraining (random masking by
argsort and gather); a Glow-like flow (actnorm, invertible 1x1 convolutions with slogdet, affine
couplings); pix2pix (a U-Net generator with dropout, a PatchGAN discriminator, L1); a small CNN
with batch norm under torch.compile; timm's NF-ResNet-26 (scaled weight standardization) with
adaptive gradient clipping; timm's LeViT-128S (attention biases by index) under bf16 autocast; an
nn.TransformerDecoder with label smoothing and ignore_index; torchvision's Swin-V2-T and a
channels-last ResNet-50, both under float16 autocast with a GradScaler; torchvision's
Inception-v3 with its auxiliary head; Hugging Face's Longformer from its config (sliding-window
attention over a padded length); knowledge distillation from a ResNet-34 to a ResNet-18 with
KL divergence. Each is a function of the device, recorded by scripts/record_trace_workloads.py
(VRAMLAB_HOLDOUT=issue35k)."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def tv_shufflenet_v2_sgd(device):
    """torchvision's ShuffleNetV2 x1.0 (100 classes) on batch 64 of 224x224 images in float32;
    SGD with Nesterov momentum and weight decay; two steps."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.shufflenet_v2_x1_0(num_classes=100).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=4e-5)
    for _ in range(2):
        x = torch.randn(64, 3, 224, 224, device=device)
        y = torch.randint(0, 100, (64,), device=device)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def tv_resnext50_32x4d_bf16(device):
    """torchvision's ResNeXt-50 32x4d (200 classes) on batch 32 of 160x160 images under bf16
    autocast; AdamW; two steps."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnext50_32x4d(num_classes=200).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        x = torch.randn(32, 3, 160, 160, device=device)
        y = torch.randint(0, 200, (32,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def cyclegan_instancenorm_reflectpad(device):
    """A CycleGAN at 128x128, batch 2: two ResNet generators (reflection padding, instance norm,
    two strided convolutions down, four residual blocks, two transposed convolutions up with
    output padding 1) and two PatchGAN discriminators; least-squares adversarial losses, cycle
    (x10) and identity (x5) L1 losses; Adam (0.5, 0.999) for the generators together and for the
    discriminators together; two steps."""
    torch.manual_seed(0)

    def block(c):
        return nn.Sequential(
            nn.ReflectionPad2d(1), nn.Conv2d(c, c, 3), nn.InstanceNorm2d(c), nn.ReLU(True),
            nn.ReflectionPad2d(1), nn.Conv2d(c, c, 3), nn.InstanceNorm2d(c),
        )

    class Residual(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.body = block(c)

        def forward(self, x):
            return x + self.body(x)

    def generator():
        layers = [nn.ReflectionPad2d(3), nn.Conv2d(3, 32, 7), nn.InstanceNorm2d(32), nn.ReLU(True)]
        layers += [nn.Conv2d(32, 64, 3, 2, 1), nn.InstanceNorm2d(64), nn.ReLU(True)]
        layers += [nn.Conv2d(64, 128, 3, 2, 1), nn.InstanceNorm2d(128), nn.ReLU(True)]
        layers += [Residual(128) for _ in range(4)]
        layers += [nn.ConvTranspose2d(128, 64, 3, 2, 1, output_padding=1), nn.InstanceNorm2d(64), nn.ReLU(True)]
        layers += [nn.ConvTranspose2d(64, 32, 3, 2, 1, output_padding=1), nn.InstanceNorm2d(32), nn.ReLU(True)]
        layers += [nn.ReflectionPad2d(3), nn.Conv2d(32, 3, 7), nn.Tanh()]
        return nn.Sequential(*layers)

    def discriminator():
        return nn.Sequential(
            nn.Conv2d(3, 64, 4, 2, 1), nn.LeakyReLU(0.2, True),
            nn.Conv2d(64, 128, 4, 2, 1), nn.InstanceNorm2d(128), nn.LeakyReLU(0.2, True),
            nn.Conv2d(128, 256, 4, 2, 1), nn.InstanceNorm2d(256), nn.LeakyReLU(0.2, True),
            nn.Conv2d(256, 1, 4, 1, 1),
        )

    g_ab, g_ba, d_a, d_b = generator().to(device), generator().to(device), discriminator().to(device), discriminator().to(device)
    opt_g = torch.optim.Adam(list(g_ab.parameters()) + list(g_ba.parameters()), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(list(d_a.parameters()) + list(d_b.parameters()), lr=2e-4, betas=(0.5, 0.999))
    for _ in range(2):
        a = torch.randn(2, 3, 128, 128, device=device)
        b = torch.randn(2, 3, 128, 128, device=device)
        fake_b, fake_a = g_ab(a), g_ba(b)
        pred_b, pred_a = d_b(fake_b), d_a(fake_a)
        loss_g = F.mse_loss(pred_b, torch.ones_like(pred_b)) + F.mse_loss(pred_a, torch.ones_like(pred_a))
        loss_g = loss_g + 10.0 * (F.l1_loss(g_ba(fake_b), a) + F.l1_loss(g_ab(fake_a), b))
        loss_g = loss_g + 5.0 * (F.l1_loss(g_ab(b), b) + F.l1_loss(g_ba(a), a))
        opt_g.zero_grad(set_to_none=True)
        loss_g.backward()
        opt_g.step()
        loss_d = 0.0
        for d, real, fake in ((d_a, a, fake_a), (d_b, b, fake_b)):
            real_score, fake_score = d(real), d(fake.detach())
            loss_d = loss_d + 0.5 * (F.mse_loss(real_score, torch.ones_like(real_score)) + F.mse_loss(fake_score, torch.zeros_like(fake_score)))
        opt_d.zero_grad(set_to_none=True)
        loss_d.backward()
        opt_d.step()


def hf_gpt_neo_local_attention_bf16(device):
    """Hugging Face's GPT-Neo from its config (4 layers alternating global and local attention
    with a window of 64, hidden 256, 8 heads) trained as a causal language model on batch 8 of 256
    tokens under bf16 autocast; AdamW; two steps."""
    from transformers import GPTNeoConfig, GPTNeoForCausalLM

    torch.manual_seed(0)
    config = GPTNeoConfig(
        vocab_size=8000, max_position_embeddings=512, hidden_size=256, num_layers=4,
        attention_types=[[["global", "local"], 2]], num_heads=8, window_size=64, intermediate_size=1024,
    )
    model = GPTNeoForCausalLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for _ in range(2):
        ids = torch.randint(0, 8000, (8, 256), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_vit_mae_pretraining(device):
    """Hugging Face's ViT-MAE from its config (a 4-layer encoder of hidden 256 over 16x16 patches
    of 128x128 images, 75% of patches masked at random by argsort of noise, a 2-layer decoder of
    hidden 128), pretrained on batch 32 with its normalized-pixel loss; AdamW; two steps."""
    from transformers import ViTMAEConfig, ViTMAEForPreTraining

    torch.manual_seed(0)
    config = ViTMAEConfig(
        image_size=128, patch_size=16, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
        intermediate_size=1024, decoder_hidden_size=128, decoder_num_hidden_layers=2,
        decoder_num_attention_heads=4, decoder_intermediate_size=512, mask_ratio=0.75, norm_pix_loss=True,
    )
    model = ViTMAEForPreTraining(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1.5e-4, weight_decay=0.05)
    for _ in range(2):
        pixels = torch.randn(32, 3, 128, 128, device=device)
        model(pixel_values=pixels).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def glow_actnorm_invconv_slogdet(device):
    """A Glow-like flow on 32x32 images, batch 64: squeeze to 12 channels at 16x16, four steps of
    actnorm, an invertible 1x1 convolution (its log-determinant by torch.slogdet) and an affine
    coupling (a 3-layer convolutional net, sigmoid scales), then squeeze to 48 channels at 8x8 and
    four more; the negative log-likelihood in bits per dimension; Adam; two steps."""
    torch.manual_seed(0)

    class ActNorm(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.loc = nn.Parameter(torch.zeros(1, c, 1, 1))
            self.log_scale = nn.Parameter(torch.zeros(1, c, 1, 1))

        def forward(self, x):
            return (x + self.loc) * torch.exp(self.log_scale), self.log_scale.sum() * x.shape[2] * x.shape[3]

    class InvConv(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.weight = nn.Parameter(torch.linalg.qr(torch.randn(c, c))[0])

        def forward(self, x):
            log_det = torch.slogdet(self.weight)[1] * x.shape[2] * x.shape[3]
            return F.conv2d(x, self.weight.view(*self.weight.shape, 1, 1)), log_det

    class Coupling(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.net = nn.Sequential(
                nn.Conv2d(c // 2, 128, 3, padding=1), nn.ReLU(), nn.Conv2d(128, 128, 1), nn.ReLU(), nn.Conv2d(128, c, 3, padding=1),
            )

        def forward(self, x):
            xa, xb = x.chunk(2, dim=1)
            shift, raw = self.net(xa).chunk(2, dim=1)
            scale = torch.sigmoid(raw + 2.0)
            return torch.cat([xa, (xb + shift) * scale], dim=1), torch.log(scale).flatten(1).sum(1)

    def squeeze(x):
        b, c, h, w = x.shape
        return x.view(b, c, h // 2, 2, w // 2, 2).permute(0, 1, 3, 5, 2, 4).reshape(b, c * 4, h // 2, w // 2)

    steps = nn.ModuleList()
    for c in (12, 48):
        steps.append(nn.ModuleList(nn.ModuleList([ActNorm(c), InvConv(c), Coupling(c)]) for _ in range(4)))
    steps = steps.to(device)
    opt = torch.optim.Adam(steps.parameters(), lr=1e-3)
    for _ in range(2):
        x = torch.rand(64, 3, 32, 32, device=device)
        log_det = torch.zeros(64, device=device)
        for level in steps:
            x = squeeze(x)
            for step in level:
                for layer in step:
                    x, ld = layer(x)
                    log_det = log_det + ld
        prior = -0.5 * (x ** 2 + math.log(2 * math.pi)).flatten(1).sum(1)
        loss = -(prior + log_det).mean() / (3 * 32 * 32 * math.log(2))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def pix2pix_unet_dropout_l1(device):
    """pix2pix at 128x128, batch 8: a U-Net generator of six strided 4x4 convolutions down
    (batch norm, leaky ReLU) and six transposed convolutions up (batch norm, dropout on the first
    three, skips by concatenation), a PatchGAN discriminator on the (input, output) pair; BCE with
    logits plus 100 x L1; Adam (0.5, 0.999); two steps."""
    torch.manual_seed(0)

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            chans = [3, 64, 128, 256, 512, 512, 512]
            self.down = nn.ModuleList()
            for i in range(6):
                layers = [nn.Conv2d(chans[i], chans[i + 1], 4, 2, 1)]
                if 0 < i < 5:
                    layers.append(nn.BatchNorm2d(chans[i + 1]))
                layers.append(nn.LeakyReLU(0.2))
                self.down.append(nn.Sequential(*layers))
            self.up = nn.ModuleList()
            for i in range(5, 0, -1):
                cin = chans[i + 1] if i == 5 else chans[i + 1] * 2
                layers = [nn.ConvTranspose2d(cin, chans[i], 4, 2, 1), nn.BatchNorm2d(chans[i])]
                if i >= 3:
                    layers.append(nn.Dropout(0.5))
                layers.append(nn.ReLU())
                self.up.append(nn.Sequential(*layers))
            self.last = nn.Sequential(nn.ConvTranspose2d(chans[1] * 2, 3, 4, 2, 1), nn.Tanh())

        def forward(self, x):
            skips = []
            for layer in self.down:
                x = layer(x)
                skips.append(x)
            skips.pop()
            for layer in self.up:
                x = torch.cat([layer(x), skips.pop()], dim=1)
            return self.last(x)

    gen = UNet().to(device)
    disc = nn.Sequential(
        nn.Conv2d(6, 64, 4, 2, 1), nn.LeakyReLU(0.2),
        nn.Conv2d(64, 128, 4, 2, 1), nn.BatchNorm2d(128), nn.LeakyReLU(0.2),
        nn.Conv2d(128, 256, 4, 2, 1), nn.BatchNorm2d(256), nn.LeakyReLU(0.2),
        nn.Conv2d(256, 1, 4, 1, 1),
    ).to(device)
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    for _ in range(2):
        src = torch.randn(8, 3, 128, 128, device=device)
        dst = torch.randn(8, 3, 128, 128, device=device)
        fake = gen(src)
        real_score = disc(torch.cat([src, dst], 1))
        fake_score = disc(torch.cat([src, fake.detach()], 1))
        loss_d = 0.5 * (F.binary_cross_entropy_with_logits(real_score, torch.ones_like(real_score)) + F.binary_cross_entropy_with_logits(fake_score, torch.zeros_like(fake_score)))
        opt_d.zero_grad(set_to_none=True)
        loss_d.backward()
        opt_d.step()
        score = disc(torch.cat([src, fake], 1))
        loss_g = F.binary_cross_entropy_with_logits(score, torch.ones_like(score)) + 100.0 * F.l1_loss(fake, dst)
        opt_g.zero_grad(set_to_none=True)
        loss_g.backward()
        opt_g.step()


def compiled_cnn_batchnorm(device):
    """A small CNN (four convolution, batch norm, ReLU blocks, max pooling, a linear head) trained
    under torch.compile (default mode) on batch 64 of 64x64 images; SGD with momentum; three
    steps."""
    torch.manual_seed(0)
    layers = []
    for cin, cout in ((3, 32), (32, 64), (64, 128), (128, 256)):
        layers += [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2)]
    model = nn.Sequential(*layers, nn.Flatten(), nn.Linear(256 * 4 * 4, 10)).to(device)
    compiled = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _ in range(3):
        x = torch.randn(64, 3, 64, 64, device=device)
        y = torch.randint(0, 10, (64,), device=device)
        F.cross_entropy(compiled(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def timm_nf_resnet26_agc(device):
    """timm's NF-ResNet-26 (normalizer-free: scaled weight standardization on every convolution,
    no batch norm), 100 classes, on batch 32 of 160x160 images; SGD with momentum and timm's
    adaptive gradient clipping (0.01) before each step; two steps."""
    import timm
    from timm.utils import adaptive_clip_grad

    torch.manual_seed(0)
    model = timm.create_model("nf_resnet26", num_classes=100).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        x = torch.randn(32, 3, 160, 160, device=device)
        y = torch.randint(0, 100, (32,), device=device)
        F.cross_entropy(model(x), y).backward()
        adaptive_clip_grad(model.parameters(), clip_factor=0.01)
        opt.step()
        opt.zero_grad(set_to_none=True)


def timm_levit_128s_bf16(device):
    """timm's LeViT-128S (convolutional stem, attention with learned biases gathered by index,
    batch-norm linears), 100 classes, on batch 64 of 224x224 images under bf16 autocast; AdamW;
    two steps."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("levit_128s", num_classes=100).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.025)
    for _ in range(2):
        x = torch.randn(64, 3, 224, 224, device=device)
        y = torch.randint(0, 100, (64,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def transformer_decoder_label_smoothing(device):
    """A decoder-only language model of nn.TransformerDecoder (4 pre-norm layers of width 512,
    8 heads, batch_first) attending to a 32-token memory, with a causal mask and a key padding mask
    from per-row lengths; cross-entropy with label smoothing 0.1 and ignore_index for padding;
    batch 32 of 128 tokens, vocabulary 16,000; Adam; two steps."""
    torch.manual_seed(0)
    vocab, width = 16000, 512
    embed = nn.Embedding(vocab, width, padding_idx=0).to(device)
    layer = nn.TransformerDecoderLayer(width, 8, 2048, dropout=0.1, batch_first=True, norm_first=True)
    decoder = nn.TransformerDecoder(layer, 4).to(device)
    head = nn.Linear(width, vocab).to(device)
    params = list(embed.parameters()) + list(decoder.parameters()) + list(head.parameters())
    opt = torch.optim.Adam(params, lr=1e-4)
    causal = nn.Transformer.generate_square_subsequent_mask(128, device=device)
    lengths = torch.tensor([128 - 3 * i for i in range(32)], device=device)
    padding = torch.arange(128, device=device)[None, :] >= lengths[:, None]
    for _ in range(2):
        ids = torch.randint(1, vocab, (32, 128), device=device).masked_fill(padding, 0)
        memory = torch.randn(32, 32, width, device=device)
        out = decoder(embed(ids), memory, tgt_mask=causal, tgt_key_padding_mask=padding, tgt_is_causal=True)
        logits = head(out[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab), ids[:, 1:].reshape(-1), ignore_index=0, label_smoothing=0.1)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def tv_swin_v2_t_fp16_scaler(device):
    """torchvision's Swin-V2-T (cosine attention with a log-spaced continuous position bias MLP),
    100 classes, on batch 16 of 256x256 images under float16 autocast with a GradScaler; AdamW;
    two steps."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.swin_v2_t(num_classes=100).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(2):
        x = torch.randn(16, 3, 256, 256, device=device)
        y = torch.randint(0, 100, (16,), device=device)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)


def tv_resnet50_channels_last_fp16_scaler(device):
    """torchvision's ResNet-50 in channels-last memory format on batch 32 of 224x224 channels-last
    images under float16 autocast with a GradScaler; SGD with momentum; two steps."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50().to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(2):
        x = torch.randn(32, 3, 224, 224, device=device).to(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (32,), device=device)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)


def tv_inception_v3_aux(device):
    """torchvision's Inception-v3 (factorized 1x7 and 7x1 convolutions), 100 classes, trained
    with its auxiliary classifier (loss + 0.4 x the auxiliary loss) on batch 16 of 299x299 images;
    SGD with momentum; two steps."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.inception_v3(weights=None, aux_logits=True, init_weights=True, num_classes=100).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.045, momentum=0.9)
    for _ in range(2):
        x = torch.randn(16, 3, 299, 299, device=device)
        y = torch.randint(0, 100, (16,), device=device)
        out = model(x)
        loss = F.cross_entropy(out.logits, y) + 0.4 * F.cross_entropy(out.aux_logits, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_longformer_from_config(device):
    """Hugging Face's Longformer from its config (2 layers of hidden 256, 4 heads, sliding-window
    attention of 64 tokens) trained as a masked language model on batch 4 of 500 tokens (padded by
    the model to a multiple of the window), no global attention; AdamW; two steps."""
    from transformers import LongformerConfig, LongformerForMaskedLM

    torch.manual_seed(0)
    config = LongformerConfig(
        vocab_size=8000, hidden_size=256, num_hidden_layers=2, num_attention_heads=4, intermediate_size=1024,
        attention_window=[64, 64], max_position_embeddings=1026, pad_token_id=1,
    )
    model = LongformerForMaskedLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(5, 8000, (4, 500), device=device)
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def kd_resnet34_to_resnet18_kldiv(device):
    """Knowledge distillation on batch 64 of 128x128 images, 100 classes: a torchvision ResNet-34
    teacher in eval mode under no_grad and a ResNet-18 student, both under bf16 autocast; the loss
    is KL divergence of the softened outputs (temperature 4, batchmean, x T^2) plus cross-entropy;
    SGD with momentum; two steps."""
    import torchvision

    torch.manual_seed(0)
    teacher = torchvision.models.resnet34(num_classes=100).to(device).eval()
    student = torchvision.models.resnet18(num_classes=100).to(device)
    opt = torch.optim.SGD(student.parameters(), lr=0.05, momentum=0.9)
    t = 4.0
    for _ in range(2):
        x = torch.randn(64, 3, 128, 128, device=device)
        y = torch.randint(0, 100, (64,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            with torch.no_grad():
                soft = F.softmax(teacher(x).float() / t, dim=1)
            logits = student(x).float()
            loss = F.kl_div(F.log_softmax(logits / t, dim=1), soft, reduction="batchmean") * t * t + F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


ISSUE35K = {
    f.__name__: f
    for f in [
        tv_shufflenet_v2_sgd, tv_resnext50_32x4d_bf16, cyclegan_instancenorm_reflectpad, hf_gpt_neo_local_attention_bf16,
        hf_vit_mae_pretraining, glow_actnorm_invconv_slogdet, pix2pix_unet_dropout_l1, compiled_cnn_batchnorm,
        timm_nf_resnet26_agc, timm_levit_128s_bf16, transformer_decoder_label_smoothing, tv_swin_v2_t_fp16_scaler,
        tv_resnet50_channels_last_fp16_scaler, tv_inception_v3_aux, hf_longformer_from_config, kd_resnet34_to_resnet18_kldiv,
    ]
}
