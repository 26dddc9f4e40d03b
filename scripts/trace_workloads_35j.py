"""Tenth held-out group of issue 35 (group ISSUE35J): twelve programs of kinds no earlier group
had, written after ISSUE35I's figures and committed before they were recorded on a GPU (an H200).
Traced on the CPU before recording only to see whether the tracer runs them to the end.

A RealNVP normalizing flow (affine couplings, log-determinants, torch.distributions); Hugging
Face's BLOOM from its config (ALiBi attention by baddbmm) under bf16 autocast; timm's MobileViT;
Hugging Face's Wav2Vec2 for CTC from its config; a capsule network with dynamic routing; PGD
adversarial training of a torchvision ResNet-18 (gradients with respect to the input); MoCo with a
momentum encoder and a queue of keys; a StyleGAN-like modulated convolution (a grouped convolution
with one group per sample) with an R1 penalty (double backward); causal linear attention by
cumsum; nn.MultiheadAttention with a key padding mask and averaged weights; classifier-free
guided DDIM sampling of a small conditional U-Net in half precision under inference_mode; weight
norm and orthogonal parametrizations. Each is a function of the device, recorded by
scripts/record_trace_workloads.py (VRAMLAB_HOLDOUT=issue35j)."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def realnvp_flow_coupling(device):
    """A RealNVP flow of six affine coupling layers (alternating masks, MLP scale and shift nets
    with tanh-bounded scales) on 64-dimensional data, batch 1024; the log-likelihood under a
    standard Normal base (torch.distributions) plus the summed log-determinants; Adam, three
    steps."""
    torch.manual_seed(0)
    dim = 64

    class Coupling(nn.Module):
        def __init__(self, mask):
            super().__init__()
            self.register_buffer("mask", mask)
            self.net = nn.Sequential(nn.Linear(dim, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 2 * dim))

        def forward(self, x):
            s, t = self.net(x * self.mask).chunk(2, dim=1)
            s = torch.tanh(s) * (1 - self.mask)
            t = t * (1 - self.mask)
            return x * self.mask + (1 - self.mask) * (x * torch.exp(s) + t), s.sum(dim=1)

    masks = [(torch.arange(dim) % 2 == i % 2).float() for i in range(6)]
    layers = nn.ModuleList(Coupling(m) for m in masks).to(device)
    base = torch.distributions.Normal(torch.zeros(dim, device=device), torch.ones(dim, device=device))
    opt = torch.optim.Adam(layers.parameters(), lr=1e-3)
    for _ in range(3):
        z = torch.randn(1024, dim, device=device)
        log_det = torch.zeros(1024, device=device)
        for layer in layers:
            z, ld = layer(z)
            log_det = log_det + ld
        loss = -(base.log_prob(z).sum(dim=1) + log_det).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_bloom_alibi_bf16(device):
    """Hugging Face's BLOOM (4 layers, hidden 512, 8 heads, from its config: ALiBi biases added by
    baddbmm) trained as a causal language model under bf16 autocast at batch 8 of 256 tokens with
    a padded attention mask (the last 32 tokens of half the rows masked); AdamW; two steps."""
    from transformers import BloomConfig, BloomForCausalLM

    torch.manual_seed(0)
    config = BloomConfig(vocab_size=16000, hidden_size=512, n_layer=4, n_head=8)
    model = BloomForCausalLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 16000, (8, 256), device=device)
        mask = torch.ones(8, 256, dtype=torch.long, device=device)
        mask[::2, -32:] = 0
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, attention_mask=mask, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def timm_mobilevit_xxs_adamw(device):
    """timm's MobileViT-XXS (convolutions, then transformer blocks over unfolded patches) trained
    on batch 32 of 256x256 images, 100 classes, with label smoothing; AdamW; two steps."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("mobilevit_xxs", num_classes=100).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        x = torch.randn(32, 3, 256, 256, device=device)
        y = torch.randint(0, 100, (32,), device=device)
        F.cross_entropy(model(x), y, label_smoothing=0.1).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_wav2vec2_ctc_from_config(device):
    """Hugging Face's Wav2Vec2 for CTC from a small config (its 1-d convolutional feature encoder
    with group norm, 4 transformer layers of hidden 256), trained on batch 4 of 2 s of 16 kHz audio
    with labels of 40 tokens (no padding); AdamW; two steps."""
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

    torch.manual_seed(0)
    config = Wav2Vec2Config(
        vocab_size=32, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
        mask_time_prob=0.0, layerdrop=0.0, ctc_loss_reduction="mean", pad_token_id=0,
    )
    model = Wav2Vec2ForCTC(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        audio = torch.randn(4, 32000, device=device)
        labels = torch.randint(1, 32, (4, 40), device=device)
        model(input_values=audio, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def capsule_dynamic_routing(device):
    """A capsule network on 28x28 images, batch 64: a convolution, primary capsules (32 maps of
    8-d capsules), three iterations of dynamic routing to 10 digit capsules of 16 dimensions
    (softmax over the coupling logits, squash, agreement by matmul), margin loss; Adam, three
    steps."""
    torch.manual_seed(0)

    def squash(s, dim=-1):
        n2 = (s * s).sum(dim=dim, keepdim=True)
        return n2 / (1 + n2) * s / torch.sqrt(n2 + 1e-8)

    class CapsNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 256, 9)
            self.primary = nn.Conv2d(256, 32 * 8, 9, stride=2)
            self.W = nn.Parameter(0.01 * torch.randn(1, 32 * 6 * 6, 10, 16, 8))

        def forward(self, x):
            h = F.relu(self.conv(x))
            u = self.primary(h).view(x.size(0), 32, 8, 6, 6).permute(0, 1, 3, 4, 2).reshape(x.size(0), -1, 8)
            u = squash(u)
            u_hat = (self.W @ u[:, :, None, :, None]).squeeze(-1)
            b = torch.zeros(x.size(0), u.size(1), 10, device=x.device)
            for i in range(3):
                c = b.softmax(dim=2)
                v = squash((c[..., None] * u_hat).sum(dim=1))
                if i < 2:
                    b = b + (u_hat * v[:, None]).sum(dim=-1)
            return v.norm(dim=-1)

    model = CapsNet().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(3):
        x = torch.randn(64, 1, 28, 28, device=device)
        y = F.one_hot(torch.randint(0, 10, (64,), device=device), 10).float()
        lengths = model(x)
        loss = (y * F.relu(0.9 - lengths) ** 2 + 0.5 * (1 - y) * F.relu(lengths - 0.1) ** 2).sum(dim=1).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def pgd_adversarial_resnet18(device):
    """PGD adversarial training of torchvision's ResNet-18 on batch 32 of 224x224 images: three
    projected gradient steps on the input (the model in eval mode, torch.autograd.grad with
    respect to the perturbation, its sign, clamped to an 8/255 ball), then a training step on the
    perturbed batch; SGD with momentum, two steps."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=100).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    eps, alpha = 8 / 255, 2 / 255
    for _ in range(2):
        x = torch.rand(32, 3, 224, 224, device=device)
        y = torch.randint(0, 100, (32,), device=device)
        model.eval()
        delta = torch.zeros_like(x).uniform_(-eps, eps).requires_grad_(True)
        for _ in range(3):
            loss = F.cross_entropy(model(x + delta), y)
            (grad,) = torch.autograd.grad(loss, delta)
            delta = (delta + alpha * grad.sign()).clamp(-eps, eps).detach().requires_grad_(True)
        model.train()
        F.cross_entropy(model((x + delta.detach()).clamp(0, 1)), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def moco_queue_momentum(device):
    """MoCo v2 with a small convolutional encoder (128-d projections): a query encoder trained by
    SGD and a key encoder updated as its momentum average (torch._foreach_mul_ and _add_), a queue
    of 8192 keys whose oldest batch is overwritten each step, InfoNCE with temperature 0.2 over
    batch 128 of 64x64 images; three steps."""
    torch.manual_seed(0)

    def encoder():
        return nn.Sequential(
            nn.Conv2d(3, 64, 3, 2, 1), nn.BatchNorm2d(64), nn.ReLU(), nn.Conv2d(64, 128, 3, 2, 1), nn.BatchNorm2d(128), nn.ReLU(),
            nn.Conv2d(128, 256, 3, 2, 1), nn.BatchNorm2d(256), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 128),
        )

    query, key = encoder().to(device), encoder().to(device)
    key.load_state_dict(query.state_dict())
    for p in key.parameters():
        p.requires_grad_(False)
    queue = F.normalize(torch.randn(8192, 128, device=device), dim=1)
    opt = torch.optim.SGD(query.parameters(), lr=0.03, momentum=0.9, weight_decay=1e-4)
    batch = 128
    for step in range(3):
        x1, x2 = torch.randn(batch, 3, 64, 64, device=device), torch.randn(batch, 3, 64, 64, device=device)
        q = F.normalize(query(x1), dim=1)
        with torch.no_grad():
            qp, kp = list(query.parameters()), list(key.parameters())
            torch._foreach_mul_(kp, 0.999)
            torch._foreach_add_(kp, qp, alpha=0.001)
            k = F.normalize(key(x2), dim=1)
        logits = torch.cat([(q * k).sum(dim=1, keepdim=True), q @ queue.T], dim=1) / 0.2
        loss = F.cross_entropy(logits, torch.zeros(batch, dtype=torch.long, device=device))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        queue[step * batch:(step + 1) * batch] = k


def stylegan_modulated_conv_r1(device):
    """A StyleGAN-like generator of three modulated 3x3 convolutions (styles from a mapping MLP,
    weights demodulated per sample, run as one grouped convolution with a group per sample) and a
    convolutional discriminator with the R1 penalty on real images (torch.autograd.grad with
    create_graph, then backward through it); non-saturating losses, Adam for both, batch 16 of
    64x64, two steps."""
    torch.manual_seed(0)

    class ModConv(nn.Module):
        def __init__(self, cin, cout, wdim=256):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(cout, cin, 3, 3))
            self.affine = nn.Linear(wdim, cin)

        def forward(self, x, w):
            b, cin, h, wid = x.shape
            s = self.affine(w) + 1
            weight = self.weight[None] * s[:, None, :, None, None]
            weight = weight * torch.rsqrt((weight * weight).sum(dim=[2, 3, 4], keepdim=True) + 1e-8)
            out = F.conv2d(x.reshape(1, b * cin, h, wid), weight.reshape(-1, cin, 3, 3), padding=1, groups=b)
            return F.leaky_relu(out.reshape(b, -1, h, wid), 0.2)

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.mapping = nn.Sequential(nn.Linear(256, 256), nn.LeakyReLU(0.2), nn.Linear(256, 256), nn.LeakyReLU(0.2))
            self.const = nn.Parameter(torch.randn(1, 256, 16, 16))
            self.convs = nn.ModuleList([ModConv(256, 128), ModConv(128, 64), ModConv(64, 32)])
            self.to_rgb = nn.Conv2d(32, 3, 1)

        def forward(self, z):
            w = self.mapping(z)
            x = self.const.expand(z.size(0), -1, -1, -1)
            for i, conv in enumerate(self.convs):
                x = conv(x, w)
                if i < 2:
                    x = F.interpolate(x, scale_factor=2, mode="nearest")
            return self.to_rgb(x)

    gen = Generator().to(device)
    disc = nn.Sequential(
        nn.Conv2d(3, 64, 3, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(64, 128, 3, 2, 1), nn.LeakyReLU(0.2),
        nn.Conv2d(128, 256, 3, 2, 1), nn.LeakyReLU(0.2), nn.Flatten(), nn.Linear(256 * 8 * 8, 1),
    ).to(device)
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-3, betas=(0.0, 0.99))
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-3, betas=(0.0, 0.99))
    for _ in range(2):
        real = torch.randn(16, 3, 64, 64, device=device).requires_grad_(True)
        fake = gen(torch.randn(16, 256, device=device))
        real_score = disc(real)
        (grad,) = torch.autograd.grad(real_score.sum(), real, create_graph=True)
        d_loss = F.softplus(disc(fake.detach())).mean() + F.softplus(-real_score).mean() + 5.0 * grad.pow(2).sum(dim=[1, 2, 3]).mean()
        d_loss.backward()
        opt_d.step()
        opt_d.zero_grad(set_to_none=True)
        g_loss = F.softplus(-disc(fake)).mean()
        g_loss.backward()
        opt_g.step()
        opt_g.zero_grad(set_to_none=True)


def causal_linear_attention_cumsum(device):
    """A 4-layer transformer language model with causal linear attention (feature map elu + 1;
    prefix sums of the key-value outer products and of the keys by torch.cumsum over the
    sequence), batch 8 of 512 tokens, 4 heads of 32 dimensions; AdamW with gradient clipping;
    two steps."""
    torch.manual_seed(0)
    vocab, dim, heads, head_dim = 8000, 128, 4, 32

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv = nn.Linear(dim, 3 * dim)
            self.out = nn.Linear(dim, dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, heads, head_dim).unbind(2)
            q, k = F.elu(q) + 1, F.elu(k) + 1
            kv = torch.cumsum(k[..., :, None] * v[..., None, :], dim=1)
            z = torch.cumsum(k, dim=1)
            h = (q[..., None, :] @ kv).squeeze(-2) / ((q * z).sum(dim=-1, keepdim=True) + 1e-6)
            x = x + self.out(h.reshape(b, n, dim))
            return x + self.mlp(self.norm2(x))

    model = nn.ModuleDict({"embed": nn.Embedding(vocab, dim), "blocks": nn.Sequential(*[Block() for _ in range(4)]), "head": nn.Linear(dim, vocab)}).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for _ in range(2):
        ids = torch.randint(0, vocab, (8, 512), device=device)
        logits = model["head"](model["blocks"](model["embed"](ids)))
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, vocab), ids[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)


def mha_key_padding_need_weights(device):
    """A 3-layer encoder of nn.MultiheadAttention (batch_first, 8 heads of width 512) called with a
    key padding mask and need_weights=True (weights averaged over heads, so not the fused path),
    a classifier on the mean of the unpadded positions; dropout 0.1 in training; Adam; batch 16
    of 200 tokens; three steps."""
    torch.manual_seed(0)

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(512, 8, dropout=0.1, batch_first=True)
            self.norm1, self.norm2 = nn.LayerNorm(512), nn.LayerNorm(512)
            self.ff = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Dropout(0.1), nn.Linear(2048, 512))

        def forward(self, x, pad):
            h, weights = self.attn(x, x, x, key_padding_mask=pad, need_weights=True)
            x = self.norm1(x + h)
            return self.norm2(x + self.ff(x)), weights

    layers = nn.ModuleList(Layer() for _ in range(3)).to(device)
    head = nn.Linear(512, 5).to(device)
    opt = torch.optim.Adam(list(layers.parameters()) + list(head.parameters()), lr=1e-4)
    lengths = torch.tensor([200 - 10 * (i % 8) for i in range(16)], device=device)
    pad = torch.arange(200, device=device)[None, :] >= lengths[:, None]
    for _ in range(3):
        x = torch.randn(16, 200, 512, device=device)
        for layer in layers:
            x, _ = layer(x, pad)
        keep = (~pad).float()[..., None]
        pooled = (x * keep).sum(dim=1) / keep.sum(dim=1)
        F.cross_entropy(head(pooled), torch.randint(0, 5, (16,), device=device)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def ddim_cfg_sampling_fp16(device):
    """Classifier-free guided DDIM sampling with a small class-conditional U-Net (GroupNorm, SiLU,
    a timestep and class embedding, one down and one up level with a skip) in half precision under
    torch.inference_mode: each of 20 steps runs the conditional and unconditional halves as one
    batch of 2 x 16 latents of 4x64x64, mixes them with guidance 4 and takes the DDIM update."""
    torch.manual_seed(0)

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.t_embed = nn.Sequential(nn.Linear(128, 256), nn.SiLU(), nn.Linear(256, 256))
            self.c_embed = nn.Embedding(11, 256)
            self.inp = nn.Conv2d(4, 64, 3, padding=1)
            self.down = nn.Conv2d(64, 128, 3, 2, 1)
            self.norm_mid = nn.GroupNorm(32, 128)
            self.mid = nn.Conv2d(128, 128, 3, padding=1)
            self.emb_mid = nn.Linear(256, 128)
            self.up = nn.ConvTranspose2d(128, 64, 4, 2, 1)
            self.norm_out = nn.GroupNorm(32, 128)
            self.out = nn.Conv2d(128, 4, 3, padding=1)

        def forward(self, x, t, c):
            half = 64
            freqs = torch.exp(-math.log(10000) * torch.arange(half, device=x.device, dtype=torch.float32) / half)
            args = t[:, None].float() * freqs[None]
            emb = self.t_embed(torch.cat([args.cos(), args.sin()], dim=1).to(x.dtype)) + self.c_embed(c)
            h0 = self.inp(x)
            h = F.silu(self.norm_mid(self.down(h0)))
            h = self.mid(h + self.emb_mid(F.silu(emb))[:, :, None, None])
            h = torch.cat([self.up(h), h0], dim=1)
            return self.out(F.silu(self.norm_out(h)))

    model = UNet().to(device).half().eval()
    alphas = torch.cumprod(1 - torch.linspace(1e-4, 0.02, 1000, device=device), dim=0)
    steps = torch.linspace(999, 0, 20, device=device).long()
    with torch.inference_mode():
        x = torch.randn(16, 4, 64, 64, device=device, dtype=torch.float16)
        labels = torch.randint(0, 10, (16,), device=device)
        classes = torch.cat([labels, torch.full_like(labels, 10)])
        for i in range(20):
            t = steps[i]
            eps_cond, eps_uncond = model(torch.cat([x, x]), t.repeat(32), classes).chunk(2)
            eps = eps_uncond + 4.0 * (eps_cond - eps_uncond)
            a_t = alphas[t]
            a_prev = alphas[steps[i + 1]] if i < 19 else torch.ones((), device=device)
            x0 = (x - (1 - a_t).sqrt() * eps) / a_t.sqrt()
            x = (a_prev.sqrt() * x0 + (1 - a_prev).sqrt() * eps).half()


def parametrized_weight_norm_orthogonal(device):
    """A convolutional classifier whose convolutions carry torch.nn.utils.parametrizations'
    weight_norm and whose square hidden linear layer is kept orthogonal (its parametrization by
    the matrix exponential), recomputed at every forward; batch 64 of 32x32 images; Adam; three
    steps."""
    from torch.nn.utils import parametrizations

    torch.manual_seed(0)
    model = nn.Sequential(
        parametrizations.weight_norm(nn.Conv2d(3, 64, 3, padding=1)), nn.ReLU(), nn.MaxPool2d(2),
        parametrizations.weight_norm(nn.Conv2d(64, 128, 3, padding=1)), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(128 * 8 * 8, 256), nn.ReLU(),
        parametrizations.orthogonal(nn.Linear(256, 256), orthogonal_map="matrix_exp"), nn.ReLU(), nn.Linear(256, 10),
    ).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(3):
        x = torch.randn(64, 3, 32, 32, device=device)
        F.cross_entropy(model(x), torch.randint(0, 10, (64,), device=device)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


ISSUE35J = {
    f.__name__: f
    for f in [
        realnvp_flow_coupling, hf_bloom_alibi_bf16, timm_mobilevit_xxs_adamw, hf_wav2vec2_ctc_from_config,
        capsule_dynamic_routing, pgd_adversarial_resnet18, moco_queue_momentum, stylegan_modulated_conv_r1,
        causal_linear_attention_cumsum, mha_key_padding_need_weights, ddim_cfg_sampling_fp16,
        parametrized_weight_norm_orthogonal,
    ]
}
