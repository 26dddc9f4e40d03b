"""Ninth held-out group of issue 35 (group ISSUE35I): seven programs written after ISSUE35H's mends
to try those rules on cases they were not written from, and two Hugging Face vision models from
their configs; committed before they were recorded on a GPU (an H200). Traced on the CPU before
recording only to see whether the tracer runs them to the end.

Metric learning through cdist's backward; GroupNorm in several forms (bf16 autocast, no affine,
1-d); a channels-last segmentation net with nearest upsampling and cross entropy on bilinearly
upsampled logits; a 1-d spectral network (rfft and irfft with an odd length, a complex fft); neural
style transfer (Gram matrices, InstanceNorm, nearest upsampling, the image optimized); Hugging
Face's ConvNeXt classifier and DINOv2 at a larger image than its position embeddings (bicubic
interpolation). Each is a function of the device, recorded by scripts/record_trace_workloads.py
(VRAMLAB_HOLDOUT=issue35i)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def cdist_prototype_metric_learning(device):
    """Embeddings of batch 512 by an MLP, distances to 64 learned prototypes of width 128 by
    torch.cdist (its matmul path), a softmax over negative distances, cross entropy; the loss's
    gradient goes through cdist to both sides; Adam, three steps."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 128)).to(device)
    prototypes = nn.Parameter(torch.randn(64, 128, device=device))
    opt = torch.optim.Adam(list(net.parameters()) + [prototypes], lr=1e-3)
    for _ in range(3):
        x = torch.randn(512, 256, device=device)
        y = torch.randint(0, 64, (512,), device=device)
        d = torch.cdist(net(x), prototypes)
        loss = F.cross_entropy(-d, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def group_norm_variants(device):
    """A small convolutional net with GroupNorm with affine under bf16 autocast, GroupNorm without
    affine, and GroupNorm over a 1-d sequence (conv1d), batch 24; AdamW, three steps."""
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 64, 3, padding=1)
            self.g1 = nn.GroupNorm(8, 64)
            self.c2 = nn.Conv2d(64, 96, 3, stride=2, padding=1)
            self.g2 = nn.GroupNorm(12, 96, affine=False)
            self.seq = nn.Conv1d(96, 128, 3, padding=1)
            self.g3 = nn.GroupNorm(16, 128)
            self.head = nn.Linear(128, 10)

        def forward(self, x):
            x = F.silu(self.g1(self.c1(x)))
            x = F.silu(self.g2(self.c2(x)))
            x = x.flatten(2)
            x = F.silu(self.g3(self.seq(x)))
            return self.head(x.mean(-1))

    model = Net().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(3):
        x = torch.randn(24, 3, 48, 48, device=device)
        y = torch.randint(0, 10, (24,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def channels_last_segmentation_upsampling(device):
    """A small encoder-decoder for segmentation in channels-last memory format: strided
    convolutions down, nearest upsampling and convolutions up with skip additions, logits at a
    quarter resolution bilinearly upsampled to the labels (21 classes, ignore index 255) and
    cross entropy; batch 8 of 128x128, SGD with momentum, three steps."""
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1 = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.ReLU())
            self.d2 = nn.Sequential(nn.Conv2d(32, 64, 3, 2, 1), nn.BatchNorm2d(64), nn.ReLU())
            self.d3 = nn.Sequential(nn.Conv2d(64, 128, 3, 2, 1), nn.BatchNorm2d(128), nn.ReLU())
            self.u2 = nn.Conv2d(128, 64, 3, padding=1)
            self.out = nn.Conv2d(64, 21, 1)

        def forward(self, x):
            a = self.d1(x)
            b = self.d2(a)
            c = self.d3(b)
            up = F.interpolate(c, scale_factor=2.0, mode="nearest")
            x = F.relu(self.u2(up) + b)
            return self.out(x)

    model = Net().to(device, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for _ in range(3):
        x = torch.randn(8, 3, 128, 128, device=device).to(memory_format=torch.channels_last)
        labels = torch.randint(0, 21, (8, 128, 128), device=device)
        logits = F.interpolate(model(x), size=(128, 128), mode="bilinear", align_corners=False)
        loss = F.cross_entropy(logits, labels, ignore_index=255)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def spectral_conv1d_odd_length(device):
    """A 1-d spectral network on sequences of odd length 1,001: a lift by Linear, three layers of
    rfft over the last dimension of a transposed activation, complex weights on the 32 lowest
    modes, irfft back to length 1,001, beside a 1x1 conv1d; a complex fft of the output as an extra
    loss term; batch 16, Adam, three steps."""
    torch.manual_seed(0)
    width, modes, length = 48, 32, 1001

    class Spectral(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(width, width, modes, dtype=torch.cfloat) / (width * width))

        def forward(self, x):
            x_ft = torch.fft.rfft(x)
            out = torch.zeros(x.shape[0], width, length // 2 + 1, dtype=torch.cfloat, device=x.device)
            out[:, :, :modes] = torch.einsum("bix,iox->box", x_ft[:, :, :modes], self.w)
            return torch.fft.irfft(out, n=length)

    lift = nn.Linear(2, width).to(device)
    spectral = nn.ModuleList(Spectral() for _ in range(3)).to(device)
    pointwise = nn.ModuleList(nn.Conv1d(width, width, 1) for _ in range(3)).to(device)
    proj = nn.Linear(width, 1).to(device)
    params = [p for m in (lift, spectral, pointwise, proj) for p in m.parameters()]
    opt = torch.optim.Adam(params, lr=1e-3)
    for _ in range(3):
        a = torch.randn(16, length, 2, device=device)
        target = torch.randn(16, length, device=device)
        x = lift(a).transpose(1, 2)
        for s, p in zip(spectral, pointwise):
            x = F.gelu(s(x) + p(x))
        u = proj(x.transpose(1, 2)).squeeze(-1)
        spectrum = torch.fft.fft(u.to(torch.cfloat))
        loss = F.mse_loss(u, target) + 1e-3 * spectrum.abs().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def style_transfer_gram(device):
    """Neural style transfer in the manner of Johnson et al.: a transformer net (strided
    convolutions, InstanceNorm2d with affine, residual blocks, nearest upsampling) trained against
    a frozen VGG-like feature net by content and Gram-matrix style losses; batch 4 of 256x256,
    Adam, three steps."""
    torch.manual_seed(0)

    def conv(cin, cout, k, s=1):
        return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2), nn.InstanceNorm2d(cout, affine=True), nn.ReLU())

    class Residual(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.a = conv(c, c, 3)
            self.b = nn.Sequential(nn.Conv2d(c, c, 3, 1, 1), nn.InstanceNorm2d(c, affine=True))

        def forward(self, x):
            return x + self.b(self.a(x))

    class Up(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.c = conv(cin, cout, 3)

        def forward(self, x):
            return self.c(F.interpolate(x, scale_factor=2.0, mode="nearest"))

    net = nn.Sequential(conv(3, 32, 9), conv(32, 64, 3, 2), conv(64, 128, 3, 2), *[Residual(128) for _ in range(3)], Up(128, 64), Up(64, 32), nn.Conv2d(32, 3, 9, 1, 4)).to(device)
    features = nn.ModuleList([
        nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU()),
        nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.Conv2d(128, 128, 3, padding=1), nn.ReLU()),
        nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(128, 256, 3, padding=1), nn.ReLU()),
    ]).to(device).requires_grad_(False)

    def extract(x):
        out = []
        for block in features:
            x = block(x)
            out.append(x)
        return out

    def gram(f):
        b, c, h, w = f.shape
        f = f.reshape(b, c, h * w)
        return torch.bmm(f, f.transpose(1, 2)) / (c * h * w)

    style = torch.randn(1, 3, 256, 256, device=device)
    with torch.no_grad():
        style_grams = [gram(f) for f in extract(style)]
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    for _ in range(3):
        x = torch.randn(4, 3, 256, 256, device=device)
        y = net(x)
        fy, fx = extract(y), extract(x)
        content = F.mse_loss(fy[1], fx[1].detach())
        style_loss = sum(F.mse_loss(gram(f), g.expand(4, -1, -1)) for f, g in zip(fy, style_grams))
        (content + 1e5 * style_loss).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_convnext_classifier_from_config(device):
    """Hugging Face's ConvNextForImageClassification from a small config (depths 2-2-4-2, widths
    48-96-192-384, its own channels-first LayerNorm), batch 32 of 128x128, 100 labels, AdamW; three
    steps in float32."""
    from transformers import ConvNextConfig, ConvNextForImageClassification

    torch.manual_seed(0)
    config = ConvNextConfig(depths=[2, 2, 4, 2], hidden_sizes=[48, 96, 192, 384], num_labels=100)
    model = ConvNextForImageClassification(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(3):
        pixels = torch.randn(32, 3, 128, 128, device=device)
        labels = torch.randint(0, 100, (32,), device=device)
        model(pixel_values=pixels, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_dinov2_larger_image(device):
    """Hugging Face's Dinov2Model from a small config (image size 224, patch 14, 6 layers of width
    384) fed 280x280 images, so its position embeddings are interpolated bicubically; a linear
    head on the CLS token trained with cross entropy under bf16 autocast, AdamW; three steps at
    batch 16."""
    from transformers import Dinov2Config, Dinov2Model

    torch.manual_seed(0)
    config = Dinov2Config(image_size=224, patch_size=14, hidden_size=384, num_hidden_layers=6, num_attention_heads=6, intermediate_size=1536)
    backbone = Dinov2Model(config).to(device)
    head = nn.Linear(384, 50).to(device)
    opt = torch.optim.AdamW(list(backbone.parameters()) + list(head.parameters()), lr=1e-4)
    for _ in range(3):
        pixels = torch.randn(16, 3, 280, 280, device=device)
        labels = torch.randint(0, 50, (16,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            cls = backbone(pixel_values=pixels).last_hidden_state[:, 0]
            loss = F.cross_entropy(head(cls), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


ISSUE35I = {
    f.__name__: f
    for f in [
        cdist_prototype_metric_learning, group_norm_variants, channels_last_segmentation_upsampling,
        spectral_conv1d_odd_length, style_transfer_gram, hf_convnext_classifier_from_config, hf_dinov2_larger_image,
    ]
}
