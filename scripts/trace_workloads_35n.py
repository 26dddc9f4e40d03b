"""Fourteenth held-out group of issue 35 (group ISSUE35N): sixteen convolutional programs, the
kind whose misses earlier groups showed most (cuDNN's workspaces), written after ISSUE35M's
figures and committed before they were recorded on a GPU (an H200) or compared with anything, and
before the timm convolution measurements of scripts/measure_conv_timm.py were taken. Some use
timm models that script measures (at batch sizes and resolutions it may or may not reach), some
models it does not (resnet34d, efficientnet_b1, regnety_032, a hand-written U-Net and pix2pix
generator), so that its effect on models it never saw can be told apart.

Each is a function of the device, recorded by scripts/record_trace_workloads.py
(VRAMLAB_HOLDOUT=issue35n). Traced on the CPU before recording only to see that each program is
itself valid."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def timm_resnet50_bf16_adamw(device):
    """timm's ResNet-50 (50 classes), batch 32 of 160x160, bf16 autocast, AdamW, two steps."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("resnet50", num_classes=50).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        x, y = torch.randn(32, 3, 160, 160, device=device), torch.randint(0, 50, (32,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def timm_efficientnet_b2_fp16_scaler(device):
    """timm's EfficientNet-B2, batch 16 of 224x224, float16 autocast with a GradScaler, RMSprop as
    timm's recipe has it, two steps."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("efficientnet_b2", num_classes=100).to(device)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3, alpha=0.9, eps=1e-3, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(2):
        x, y = torch.randn(16, 3, 224, 224, device=device), torch.randint(0, 100, (16,), device=device)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)


def timm_convnext_nano_bf16_label_smoothing(device):
    """timm's ConvNeXt-Nano, batch 24 of 128x128, bf16 autocast, label smoothing 0.1, AdamW with a
    weight decay, two steps."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("convnext_nano", num_classes=10).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=4e-3, weight_decay=0.05)
    for _ in range(2):
        x, y = torch.randn(24, 3, 128, 128, device=device), torch.randint(0, 10, (24,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def timm_regnetx_016_fp32_sgd(device):
    """timm's RegNetX-1.6GF in float32 (TF32 as PyTorch's default allows), batch 32 of 128x128,
    SGD with Nesterov momentum, two steps."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("regnetx_016", num_classes=20).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
    for _ in range(2):
        x, y = torch.randn(32, 3, 128, 128, device=device), torch.randint(0, 20, (32,), device=device)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def timm_mobilenetv4_bf16_batch64(device):
    """timm's MobileNetV4-Conv-Small, batch 64 of 160x160, bf16 autocast, AdamW, two steps."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("mobilenetv4_conv_small", num_classes=10).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        x, y = torch.randn(64, 3, 160, 160, device=device), torch.randint(0, 10, (64,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def timm_densenet121_bf16_small_images(device):
    """timm's DenseNet-121, batch 16 of 96x96, bf16 autocast, SGD, two steps."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("densenet121", num_classes=10).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _ in range(2):
        x, y = torch.randn(16, 3, 96, 96, device=device), torch.randint(0, 10, (16,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def timm_cspdarknet53_bf16_batch8(device):
    """timm's CSPDarknet-53, batch 8 of 256x256, bf16 autocast, AdamW, two steps."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("cspdarknet53", num_classes=10).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        x, y = torch.randn(8, 3, 256, 256, device=device), torch.randint(0, 10, (8,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def timm_ghostnet_channels_last_bf16(device):
    """timm's GhostNet-1.0 in channels-last (model and input, as timm's --channels-last does),
    batch 32 of 224x224, bf16 autocast, SGD, two steps."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("ghostnet_100", num_classes=10).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _ in range(2):
        x = torch.randn(32, 3, 224, 224, device=device).contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, 10, (32,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def timm_inception_v3_299_bf16(device):
    """timm's Inception-v3 at its own 299x299, batch 16, bf16 autocast, SGD, two steps."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("inception_v3", num_classes=10).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.045, momentum=0.9)
    for _ in range(2):
        x, y = torch.randn(16, 3, 299, 299, device=device), torch.randint(0, 10, (16,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def timm_seresnext26d_bf16_batch48(device):
    """timm's SE-ResNeXt-26d 32x4d (grouped convolutions), batch 48 of 128x128, bf16 autocast,
    AdamW, two steps."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("seresnext26d_32x4d", num_classes=10).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        x, y = torch.randn(48, 3, 128, 128, device=device), torch.randint(0, 10, (48,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def timm_resnet34d_fp32_batch20(device):
    """timm's ResNet-34d (a model scripts/measure_conv_timm.py does not list), float32, batch 20 of
    112x112, SGD, two steps."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("resnet34d", num_classes=10).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        x, y = torch.randn(20, 3, 112, 112, device=device), torch.randint(0, 10, (20,), device=device)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def timm_efficientnet_b1_240_bf16(device):
    """timm's EfficientNet-B1 (not listed by the measurement) at 240x240, batch 20, bf16 autocast,
    AdamW, two steps."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("efficientnet_b1", num_classes=10).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        x, y = torch.randn(20, 3, 240, 240, device=device), torch.randint(0, 10, (20,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def timm_regnety_032_bf16_batch12(device):
    """timm's RegNetY-3.2GF (not listed by the measurement), batch 12 of 176x176, bf16 autocast,
    SGD, two steps."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("regnety_032", num_classes=10).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        x, y = torch.randn(12, 3, 176, 176, device=device), torch.randint(0, 10, (12,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def unet_transposed_output_padding(device):
    """A hand-written U-Net of four levels (32 to 256 channels) whose decoder upsamples by
    ConvTranspose2d with kernel 3, stride 2, padding 1 and output_padding 1, BatchNorm and ReLU,
    batch 8 of 1x128x128 images, BCE-with-logits on a mask, bf16 autocast, Adam, two steps."""
    torch.manual_seed(0)

    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                             nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            widths = [32, 64, 128, 256]
            self.down = nn.ModuleList([block(1, 32)] + [block(a, b) for a, b in zip(widths, widths[1:])])
            self.up = nn.ModuleList(nn.ConvTranspose2d(b, a, 3, stride=2, padding=1, output_padding=1) for a, b in zip(widths, widths[1:]))
            self.merge = nn.ModuleList(block(2 * a, a) for a in widths[:-1])
            self.head = nn.Conv2d(32, 1, 1)

        def forward(self, x):
            skips = []
            for i, down in enumerate(self.down):
                x = down(x if i == 0 else F.max_pool2d(x, 2))
                skips.append(x)
            for i in reversed(range(3)):
                x = self.merge[i](torch.cat([self.up[i](x), skips[i]], dim=1))
            return self.head(x)

    model = UNet().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(2):
        x = torch.randn(8, 1, 128, 128, device=device)
        mask = (torch.rand(8, 1, 128, 128, device=device) > 0.5).float()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.binary_cross_entropy_with_logits(model(x), mask)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def pix2pix_generator_discriminator(device):
    """A pix2pix-style encoder-decoder generator (kernel 4, stride 2 convolutions down to 4x4 and
    transposed ones back, InstanceNorm, LeakyReLU, dropout) and a PatchGAN discriminator, on 16
    image pairs of 3x128x128 in float32, Adam for each, L1 plus adversarial loss, two steps."""
    torch.manual_seed(0)
    down = [3, 64, 128, 256, 256, 256]
    enc = nn.Sequential(*[nn.Sequential(nn.Conv2d(a, b, 4, 2, 1), nn.InstanceNorm2d(b), nn.LeakyReLU(0.2)) for a, b in zip(down, down[1:])])
    up = list(reversed(down))
    dec = nn.Sequential(*[nn.Sequential(nn.ConvTranspose2d(a, b, 4, 2, 1), nn.InstanceNorm2d(b), nn.ReLU(), nn.Dropout(0.5)) for a, b in zip(up[:-2], up[1:-1])],
                        nn.ConvTranspose2d(64, 3, 4, 2, 1), nn.Tanh())
    gen = nn.Sequential(enc, dec).to(device)
    disc = nn.Sequential(nn.Conv2d(6, 64, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(64, 128, 4, 2, 1), nn.InstanceNorm2d(128), nn.LeakyReLU(0.2),
                         nn.Conv2d(128, 256, 4, 1, 1), nn.InstanceNorm2d(256), nn.LeakyReLU(0.2), nn.Conv2d(256, 1, 4, 1, 1)).to(device)
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    for _ in range(2):
        a, b = torch.randn(16, 3, 128, 128, device=device), torch.randn(16, 3, 128, 128, device=device)
        fake = gen(a)
        real_logits, fake_logits = disc(torch.cat([a, b], 1)), disc(torch.cat([a, fake.detach()], 1))
        loss_d = F.binary_cross_entropy_with_logits(real_logits, torch.ones_like(real_logits)) + F.binary_cross_entropy_with_logits(fake_logits, torch.zeros_like(fake_logits))
        opt_d.zero_grad(set_to_none=True)
        loss_d.backward()
        opt_d.step()
        logits = disc(torch.cat([a, fake], 1))
        loss_g = F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits)) + 100 * F.l1_loss(fake, b)
        opt_g.zero_grad(set_to_none=True)
        loss_g.backward()
        opt_g.step()


def tv_resnet18_channels_last_fp16_inference(device):
    """torchvision's ResNet-18 in channels-last and float16 (model.half()), inference at batch 64 of
    224x224 under torch.inference_mode, three batches."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=1000).to(device).half().eval().to(memory_format=torch.channels_last)
    with torch.inference_mode():
        for _ in range(3):
            x = torch.randn(64, 3, 224, 224, device=device, dtype=torch.float16).contiguous(memory_format=torch.channels_last)
            model(x).argmax(dim=1)


ISSUE35N = {
    f.__name__: f
    for f in [
        timm_resnet50_bf16_adamw, timm_efficientnet_b2_fp16_scaler, timm_convnext_nano_bf16_label_smoothing, timm_regnetx_016_fp32_sgd,
        timm_mobilenetv4_bf16_batch64, timm_densenet121_bf16_small_images, timm_cspdarknet53_bf16_batch8, timm_ghostnet_channels_last_bf16,
        timm_inception_v3_299_bf16, timm_seresnext26d_bf16_batch48, timm_resnet34d_fp32_batch20, timm_efficientnet_b1_240_bf16,
        timm_regnety_032_bf16_batch12, unet_transposed_output_padding, pix2pix_generator_discriminator, tv_resnet18_channels_last_fp16_inference,
    ]
}
