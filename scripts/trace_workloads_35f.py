"""Sixth held-out group of issue 35 (group ISSUE35F): programs of kinds users run that no earlier
group has, written after the fifth group's mends and committed before they were recorded on a
GPU. They were traced on the CPU before recording only to see whether the tracer runs them to
the end (no GPU figure was seen then); what that showed is said in RESULTS.md beside the figures.

A PPO actor-critic update (categorical policy, advantages by a loop over time, minibatches by
randperm); a NeRF-style MLP with positional encoding, volume rendering by cumprod and importance
sampling by searchsorted; per-sample gradients by torch.func (vmap of grad, DP-SGD style); a
skip-gram model with sparse embeddings and SparseAdam; a spatial transformer (affine_grid,
grid_sample); a tabular model of categorical embeddings, BatchNorm1d and a OneCycle schedule;
stochastic weight averaging (AveragedModel, SWALR, update_bn); a Hugging Face GPT-2 classifier
under dynamic padding (every step another length); L-BFGS with a closure; second-order MAML by
functional_call and create_graph; torchvision's Faster R-CNN (MobileNetV3, 320) in training; a
Llama decoding greedily by hand with its KV cache under inference_mode; timm's ResNet-18 with
timm's Mixup and soft-target cross entropy; a ConvLSTM looping over frames; a Perceiver-style
latent cross attention written with einsum; checkpoint_sequential under fp16 with a GradScaler;
set pooling by scatter_reduce (mean and amax); and a PointNet classifier (1x1 conv1d, max over
points). Each is a function of the device, recorded by scripts/record_trace_workloads.py
(VRAMLAB_HOLDOUT=issue35f)."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def ppo_actor_critic(device):
    """A PPO update: an actor-critic MLP over 64 parallel environments and 128 steps of
    observations (8 features, 6 actions), advantages by GAE in a Python loop over time, four epochs
    of minibatches of 512 by randperm, the clipped objective with an entropy bonus, Adam and
    gradient clipping."""
    torch.manual_seed(0)

    class ActorCritic(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(8, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh())
            self.pi = nn.Linear(256, 6)
            self.v = nn.Linear(256, 1)

        def forward(self, x):
            h = self.body(x)
            return torch.distributions.Categorical(logits=self.pi(h)), self.v(h).squeeze(-1)

    model = ActorCritic().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-4, eps=1e-5)
    steps, envs = 128, 64
    obs = torch.randn(steps, envs, 8, device=device)
    rewards = torch.randn(steps, envs, device=device)
    dones = (torch.rand(steps, envs, device=device) < 0.02).float()
    with torch.no_grad():
        dist, values = model(obs)
        actions = dist.sample()
        old_logp = dist.log_prob(actions)
        adv = torch.zeros_like(rewards)
        last = torch.zeros(envs, device=device)
        for t in reversed(range(steps)):
            next_value = values[t + 1] if t + 1 < steps else torch.zeros(envs, device=device)
            delta = rewards[t] + 0.99 * next_value * (1 - dones[t]) - values[t]
            last = delta + 0.99 * 0.95 * (1 - dones[t]) * last
            adv[t] = last
        returns = adv + values
    flat = [x.reshape(steps * envs, *x.shape[2:]) for x in (obs, actions, old_logp, adv, returns)]
    for _ in range(4):
        order = torch.randperm(steps * envs, device=device)
        for start in range(0, steps * envs, 512):
            idx = order[start:start + 512]
            o, a, lp, ad, ret = (x[idx] for x in flat)
            ad = (ad - ad.mean()) / (ad.std() + 1e-8)
            dist, v = model(o)
            ratio = (dist.log_prob(a) - lp).exp()
            policy = -torch.min(ratio * ad, ratio.clamp(0.8, 1.2) * ad).mean()
            loss = policy + 0.5 * F.mse_loss(v, ret) - 0.01 * dist.entropy().mean()
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()


def nerf_volume_rendering(device):
    """A NeRF-style field: 4096 rays, 64 coarse samples, positional encoding of 10 frequencies,
    an 8-layer MLP of 256 with a skip, densities and colours rendered by cumprod, 64 fine samples
    drawn by searchsorted on the coarse weights; Adam, two steps."""
    torch.manual_seed(0)

    def encode(x, freqs):
        scales = 2.0 ** torch.arange(freqs, device=x.device)
        xs = x[..., None] * scales
        return torch.cat([x, torch.sin(xs).flatten(-2), torch.cos(xs).flatten(-2)], -1)

    class Field(nn.Module):
        def __init__(self, width=256):
            super().__init__()
            d = 3 + 3 * 2 * 10
            self.first = nn.ModuleList([nn.Linear(d, width)] + [nn.Linear(width, width) for _ in range(3)])
            self.second = nn.ModuleList([nn.Linear(width + d, width)] + [nn.Linear(width, width) for _ in range(3)])
            self.out = nn.Linear(width, 4)

        def forward(self, p):
            e = encode(p, 10)
            h = e
            for layer in self.first:
                h = F.relu(layer(h))
            h = torch.cat([h, e], -1)
            for layer in self.second:
                h = F.relu(layer(h))
            return self.out(h)

    def render(field, origins, dirs, t):
        pts = origins[:, None] + dirs[:, None] * t[..., None]
        raw = field(pts)
        sigma, rgb = F.relu(raw[..., 0]), torch.sigmoid(raw[..., 1:])
        delta = torch.cat([t[:, 1:] - t[:, :-1], torch.full_like(t[:, :1], 1e10)], -1)
        alpha = 1 - torch.exp(-sigma * delta)
        trans = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1 - alpha + 1e-10], -1), -1)[:, :-1]
        weights = alpha * trans
        return (weights[..., None] * rgb).sum(1), weights

    field = Field().to(device)
    opt = torch.optim.Adam(field.parameters(), lr=5e-4)
    rays = 4096
    for _ in range(2):
        origins = torch.randn(rays, 3, device=device)
        dirs = F.normalize(torch.randn(rays, 3, device=device), dim=-1)
        target = torch.rand(rays, 3, device=device)
        t = torch.linspace(2.0, 6.0, 64, device=device).expand(rays, 64).contiguous()
        coarse, weights = render(field, origins, dirs, t)
        with torch.no_grad():
            mids = 0.5 * (t[:, 1:] + t[:, :-1])
            pdf = weights[:, 1:-1] + 1e-5
            cdf = torch.cumsum(pdf / pdf.sum(-1, keepdim=True), -1)
            cdf = torch.cat([torch.zeros_like(cdf[:, :1]), cdf], -1)
            u = torch.rand(rays, 64, device=device)
            hi = torch.searchsorted(cdf, u, right=True).clamp(max=cdf.shape[-1] - 1)
            lo = (hi - 1).clamp(min=0)
            c0, c1 = torch.gather(cdf, 1, lo), torch.gather(cdf, 1, hi)
            m0, m1 = torch.gather(mids, 1, lo.clamp(max=mids.shape[-1] - 1)), torch.gather(mids, 1, hi.clamp(max=mids.shape[-1] - 1))
            fine_t = m0 + (u - c0) / (c1 - c0).clamp(min=1e-5) * (m1 - m0)
            t_all, _ = torch.sort(torch.cat([t, fine_t], -1), -1)
        fine, _ = render(field, origins, dirs, t_all)
        loss = F.mse_loss(coarse, target) + F.mse_loss(fine, target)
        opt.zero_grad()
        loss.backward()
        opt.step()


def per_sample_grads_vmap(device):
    """Per-sample gradients with torch.func (vmap of grad over functional_call) for a small CNN at
    batch 64 on 28x28 images, clipped per sample, summed with Gaussian noise (DP-SGD) and applied
    by SGD; two steps."""
    from torch.func import functional_call, grad, vmap

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(),
        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 7 * 7, 10),
    ).to(device)
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss_of(p, x, y):
        out = functional_call(model, p, (x.unsqueeze(0),))
        return F.cross_entropy(out, y.unsqueeze(0))

    per_sample = vmap(grad(loss_of), in_dims=(None, 0, 0))
    for _ in range(2):
        x = torch.randn(64, 1, 28, 28, device=device)
        y = torch.randint(0, 10, (64,), device=device)
        grads = per_sample(params, x, y)
        norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads.values()], 1).norm(dim=1)
        factor = (1.0 / (norms + 1e-6)).clamp(max=1.0)
        with torch.no_grad():
            for name, g in grads.items():
                noisy = (g * factor.view(-1, *[1] * (g.dim() - 1))).sum(0) + torch.randn_like(params[name])
                params[name] = params[name] - 0.1 * noisy / 64


def word2vec_sparse_embedding(device):
    """Skip-gram with negative sampling: input and output embeddings of 50,000 x 300 with sparse
    gradients, scores by bmm against 1 positive and 10 negative words, SparseAdam; three steps at
    batch 1024."""
    torch.manual_seed(0)
    vocab, dim = 50000, 300
    emb_in = nn.Embedding(vocab, dim, sparse=True).to(device)
    emb_out = nn.Embedding(vocab, dim, sparse=True).to(device)
    opt = torch.optim.SparseAdam([*emb_in.parameters(), *emb_out.parameters()], lr=1e-3)
    for _ in range(3):
        center = torch.randint(0, vocab, (1024,), device=device)
        context = torch.randint(0, vocab, (1024, 11), device=device)
        scores = torch.bmm(emb_out(context), emb_in(center).unsqueeze(2)).squeeze(2)
        labels = torch.zeros_like(scores)
        labels[:, 0] = 1
        loss = F.binary_cross_entropy_with_logits(scores, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()


def spatial_transformer_grid_sample(device):
    """A spatial transformer network: a localisation CNN regressing an affine matrix (initialised
    to the identity), affine_grid and bilinear grid_sample of 64x64 images, a classifier CNN; Adam,
    two steps at batch 64."""
    torch.manual_seed(0)
    loc = nn.Sequential(
        nn.Conv2d(3, 16, 7), nn.MaxPool2d(2), nn.ReLU(), nn.Conv2d(16, 32, 5), nn.MaxPool2d(2), nn.ReLU(),
        nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(32 * 16, 64), nn.ReLU(), nn.Linear(64, 6),
    ).to(device)
    with torch.no_grad():
        loc[-1].weight.zero_()
        loc[-1].bias.copy_(torch.tensor([1.0, 0, 0, 0, 1, 0]))
    classifier = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 43),
    ).to(device)
    opt = torch.optim.Adam([*loc.parameters(), *classifier.parameters()], lr=1e-3)
    for _ in range(2):
        x = torch.randn(64, 3, 64, 64, device=device)
        theta = loc(x).view(-1, 2, 3)
        grid = F.affine_grid(theta, x.shape, align_corners=False)
        warped = F.grid_sample(x, grid, align_corners=False)
        loss = F.cross_entropy(classifier(warped), torch.randint(0, 43, (64,), device=device))
        opt.zero_grad()
        loss.backward()
        opt.step()


def tabular_embeddings_bn_mlp(device):
    """A tabular model: 12 categorical columns embedded (cardinalities 10 to 100,000) beside 20
    numeric ones, BatchNorm1d, an MLP with dropout, binary cross entropy with logits, AdamW under a
    OneCycle schedule; three steps at batch 4096."""
    torch.manual_seed(0)
    cards = [10, 50, 100, 500, 1000, 5000, 10000, 20000, 50000, 100000, 7, 31]

    class Tabular(nn.Module):
        def __init__(self):
            super().__init__()
            self.embeds = nn.ModuleList(nn.Embedding(c, min(64, (c + 1) // 2)) for c in cards)
            width = sum(e.embedding_dim for e in self.embeds) + 20
            self.bn = nn.BatchNorm1d(20)
            self.mlp = nn.Sequential(
                nn.Linear(width, 512), nn.BatchNorm1d(512), nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 256),
                nn.BatchNorm1d(256), nn.ReLU(), nn.Dropout(0.2), nn.Linear(256, 1),
            )

        def forward(self, cats, nums):
            parts = [e(cats[:, i]) for i, e in enumerate(self.embeds)] + [self.bn(nums)]
            return self.mlp(torch.cat(parts, 1)).squeeze(1)

    model = Tabular().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=10)
    for _ in range(3):
        cats = torch.stack([torch.randint(0, c, (4096,), device=device) for c in cards], 1)
        nums = torch.randn(4096, 20, device=device)
        loss = F.binary_cross_entropy_with_logits(model(cats, nums), torch.rand(4096, device=device).round())
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()


def swa_averaged_model(device):
    """Stochastic weight averaging: a small CNN with batch norm trained by SGD, an AveragedModel
    updated after each step under SWALR, then update_bn over four batches; three steps at
    batch 128 on 32x32 images."""
    from torch.optim.swa_utils import SWALR, AveragedModel, update_bn

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 8 * 8, 10),
    ).to(device)
    swa = AveragedModel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = SWALR(opt, swa_lr=0.01)
    for _ in range(3):
        x = torch.randn(128, 3, 32, 32, device=device)
        loss = F.cross_entropy(model(x), torch.randint(0, 10, (128,), device=device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        swa.update_parameters(model)
        sched.step()
    update_bn([torch.randn(128, 3, 32, 32, device=device) for _ in range(4)], swa)


def hf_gpt2_dynamic_padding_classifier(device):
    """A Hugging Face GPT-2 sequence classifier from its config under dynamic padding: four steps
    of batch 16, each padded to its own longest sequence (96, 160, 64, 224 tokens; right padding,
    pad token set), Adam."""
    from transformers import GPT2Config, GPT2ForSequenceClassification

    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=6, n_embd=512, n_head=8, vocab_size=16000, n_positions=256, num_labels=4, pad_token_id=0,
        bos_token_id=1, eos_token_id=2,
    )
    model = GPT2ForSequenceClassification(config).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(1)
    for length in [96, 160, 64, 224]:
        lengths = torch.randint(length // 2, length + 1, (16,), generator=gen)
        lengths[0] = length
        mask = (torch.arange(length)[None, :] < lengths[:, None]).long()
        ids = torch.randint(1, 16000, (16, length), generator=gen) * mask
        out = model(input_ids=ids.to(device), attention_mask=mask.to(device), labels=torch.randint(0, 4, (16,), device=device))
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def lbfgs_regression(device):
    """L-BFGS (history 10, strong-Wolfe line search off) fitting an MLP of 1024-wide layers to
    16,384 points by a closure; two optimiser steps of up to 5 iterations."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 1024), nn.Tanh(), nn.Linear(1024, 1024), nn.Tanh(), nn.Linear(1024, 1)).to(device)
    opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=5, history_size=10)
    x = torch.randn(16384, 16, device=device)
    y = torch.sin(x.sum(1, keepdim=True))

    def closure():
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        return loss

    for _ in range(2):
        opt.step(closure)


def maml_second_order(device):
    """Second-order MAML: for each of 4 tasks, one inner SGD step taken by torch.autograd.grad
    with create_graph and applied through functional_call, the query loss of the adapted weights
    summed, then an outer Adam step; two meta-steps on a 4-layer MLP."""
    from torch.func import functional_call

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 5)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(2):
        opt.zero_grad()
        meta = 0.0
        for _ in range(4):
            xs, ys = torch.randn(25, 64, device=device), torch.randint(0, 5, (25,), device=device)
            xq, yq = torch.randn(75, 64, device=device), torch.randint(0, 5, (75,), device=device)
            params = dict(model.named_parameters())
            inner = F.cross_entropy(functional_call(model, params, (xs,)), ys)
            grads = torch.autograd.grad(inner, list(params.values()), create_graph=True)
            adapted = {k: v - 0.4 * g for (k, v), g in zip(params.items(), grads)}
            meta = meta + F.cross_entropy(functional_call(model, adapted, (xq,)), yq)
        (meta / 4).backward()
        opt.step()


def tv_fasterrcnn_mobilenet_train(device):
    """torchvision's Faster R-CNN with a MobileNetV3 backbone at 320 pixels (no weights) in
    training, two images with three boxes each, SGD; two steps."""
    from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_320_fpn

    torch.manual_seed(0)
    model = fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, num_classes=5).to(device)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for _ in range(2):
        images = [torch.rand(3, 300, 400, device=device) for _ in range(2)]
        targets = [
            {"boxes": torch.tensor([[10.0, 20, 100, 120], [150, 50, 300, 200], [30, 160, 90, 280]], device=device),
             "labels": torch.tensor([1, 2, 3], device=device)}
            for _ in range(2)
        ]
        losses = model(images, targets)
        sum(losses.values()).backward()
        opt.step()
        opt.zero_grad()


def hf_llama_kv_cache_manual_decode(device):
    """A Hugging Face Llama from its config decoding greedily by hand under inference_mode: a
    prompt of 128 tokens at batch 8, then 24 tokens, each fed with the returned past_key_values
    and appended by torch.cat; bf16 weights."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=16000, hidden_size=512, intermediate_size=1408, num_hidden_layers=6, num_attention_heads=8,
        num_key_value_heads=4, max_position_embeddings=512,
    )
    model = LlamaForCausalLM(config).to(device=device, dtype=torch.bfloat16).eval()
    with torch.inference_mode():
        tokens = torch.randint(0, 16000, (8, 128), device=device)
        out = model(input_ids=tokens, use_cache=True)
        past = out.past_key_values
        for _ in range(24):
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            tokens = torch.cat([tokens, nxt], 1)
            out = model(input_ids=nxt, past_key_values=past, use_cache=True)
            past = out.past_key_values


def timm_resnet18_mixup(device):
    """timm's ResNet-18 with timm's Mixup (mixup and cutmix, label smoothing 0.1) and
    SoftTargetCrossEntropy, AdamW; two steps at batch 64 on 96x96 images."""
    import timm
    from timm.data import Mixup
    from timm.loss import SoftTargetCrossEntropy

    torch.manual_seed(0)
    model = timm.create_model("resnet18", num_classes=100).to(device)
    mix = Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1, num_classes=100)
    loss_fn = SoftTargetCrossEntropy()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        x, y = mix(torch.randn(64, 3, 96, 96, device=device), torch.randint(0, 100, (64,), device=device))
        loss_fn(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def conv_lstm_frames(device):
    """A ConvLSTM: one cell of 64 channels (the four gates from one 3x3 convolution over the
    frame and the hidden state) looped over 10 frames of 64x64, a 1x1 head predicting the next
    frame; Adam, two steps at batch 8."""
    torch.manual_seed(0)

    class Cell(nn.Module):
        def __init__(self, cin, hidden):
            super().__init__()
            self.hidden = hidden
            self.gates = nn.Conv2d(cin + hidden, 4 * hidden, 3, padding=1)

        def forward(self, x, state):
            h, c = state
            i, f, o, g = self.gates(torch.cat([x, h], 1)).chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            return h, c

    cell = Cell(1, 64).to(device)
    head = nn.Conv2d(64, 1, 1).to(device)
    opt = torch.optim.Adam([*cell.parameters(), *head.parameters()], lr=1e-3)
    for _ in range(2):
        frames = torch.rand(8, 11, 1, 64, 64, device=device)
        h = torch.zeros(8, 64, 64, 64, device=device)
        c = torch.zeros_like(h)
        loss = 0.0
        for t in range(10):
            h, c = cell(frames[:, t], (h, c))
            loss = loss + F.mse_loss(torch.sigmoid(head(h)), frames[:, t + 1])
        opt.zero_grad()
        loss.backward()
        opt.step()


def perceiver_latent_einsum(device):
    """A Perceiver-style encoder with attention written in einsum: 256 learned latents of 512
    cross-attending to 2048 inputs of 64 features, then four latent self-attention blocks (8
    heads), mean-pooled to 10 classes; AdamW, two steps at batch 8."""
    torch.manual_seed(0)

    class Attention(nn.Module):
        def __init__(self, dim, kv_dim, heads):
            super().__init__()
            self.heads = heads
            self.q = nn.Linear(dim, dim, bias=False)
            self.kv = nn.Linear(kv_dim, 2 * dim, bias=False)
            self.out = nn.Linear(dim, dim)

        def forward(self, x, ctx):
            b, n, d = x.shape
            h = self.heads
            q = self.q(x).view(b, n, h, d // h)
            k, v = self.kv(ctx).view(b, ctx.shape[1], 2, h, d // h).unbind(2)
            scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d // h)
            y = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v)
            return self.out(y.reshape(b, n, d))

    class Block(nn.Module):
        def __init__(self, dim, kv_dim, heads):
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.attn = Attention(dim, kv_dim, heads)
            self.mlp = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def forward(self, x, ctx=None):
            x = x + self.attn(self.norm(x), x if ctx is None else ctx)
            return x + self.mlp(x)

    latents = nn.Parameter(torch.randn(256, 512, device=device) * 0.02)
    cross = Block(512, 64, 1).to(device)
    blocks = nn.ModuleList(Block(512, 512, 8) for _ in range(4)).to(device)
    head = nn.Linear(512, 10).to(device)
    opt = torch.optim.AdamW([latents, *cross.parameters(), *blocks.parameters(), *head.parameters()], lr=1e-4)
    for _ in range(2):
        inputs = torch.randn(8, 2048, 64, device=device)
        x = cross(latents.expand(8, -1, -1), inputs)
        for block in blocks:
            x = block(x)
        F.cross_entropy(head(x.mean(1)), torch.randint(0, 10, (8,), device=device)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def checkpoint_sequential_fp16_scaler(device):
    """A 16-block residual-free MLP stack (2048 wide) run by checkpoint_sequential in 4 segments
    (use_reentrant=False) under fp16 autocast with a GradScaler, SGD with momentum; two steps at
    batch 512."""
    from torch.utils.checkpoint import checkpoint_sequential

    torch.manual_seed(0)
    layers = []
    for _ in range(16):
        layers += [nn.Linear(2048, 2048), nn.GELU()]
    model = nn.Sequential(*layers, nn.Linear(2048, 100)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(2):
        x = torch.randn(512, 2048, device=device, requires_grad=True)
        with torch.autocast("cuda", dtype=torch.float16):
            out = checkpoint_sequential(model, 4, x, use_reentrant=False)
            loss = F.cross_entropy(out, torch.randint(0, 100, (512,), device=device))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)


def set_pooling_scatter_reduce(device):
    """Sets of varying size pooled by scatter_reduce: 20,000 elements of 128 features in 512 sets
    (set ids sorted), an element MLP, per-set mean and amax by scatter_reduce with
    include_self=False, a set MLP; Adam, two steps."""
    torch.manual_seed(0)
    phi = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 256)).to(device)
    rho = nn.Sequential(nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 1)).to(device)
    opt = torch.optim.Adam([*phi.parameters(), *rho.parameters()], lr=1e-3)
    for _ in range(2):
        x = torch.randn(20000, 128, device=device)
        sets, _ = torch.sort(torch.randint(0, 512, (20000,), device=device))
        h = phi(x)
        index = sets[:, None].expand(-1, 256)
        mean = torch.zeros(512, 256, device=device).scatter_reduce(0, index, h, "mean", include_self=False)
        top = torch.zeros(512, 256, device=device).scatter_reduce(0, index, h, "amax", include_self=False)
        loss = F.mse_loss(rho(torch.cat([mean, top], 1)).squeeze(1), torch.randn(512, device=device))
        opt.zero_grad()
        loss.backward()
        opt.step()


def pointnet_classifier(device):
    """A PointNet classifier: 1x1 conv1d layers (3-64-128-1024) with batch norm over 1,024 points,
    max over the points, an MLP head with dropout; Adam, two steps at batch 32."""
    torch.manual_seed(0)

    class PointNet(nn.Module):
        def __init__(self, classes=40):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv1d(3, 64, 1), nn.BatchNorm1d(64), nn.ReLU(), nn.Conv1d(64, 128, 1), nn.BatchNorm1d(128),
                nn.ReLU(), nn.Conv1d(128, 1024, 1), nn.BatchNorm1d(1024),
            )
            self.head = nn.Sequential(
                nn.Linear(1024, 512), nn.BatchNorm1d(512), nn.ReLU(), nn.Dropout(0.3), nn.Linear(512, 256),
                nn.BatchNorm1d(256), nn.ReLU(), nn.Linear(256, classes),
            )

        def forward(self, pts):
            return self.head(self.features(pts).amax(2))

    model = PointNet().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(2):
        pts = torch.randn(32, 3, 1024, device=device)
        F.cross_entropy(model(pts), torch.randint(0, 40, (32,), device=device)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


ISSUE35F = {
    f.__name__: f
    for f in [
        ppo_actor_critic, nerf_volume_rendering, per_sample_grads_vmap, word2vec_sparse_embedding,
        spatial_transformer_grid_sample, tabular_embeddings_bn_mlp, swa_averaged_model,
        hf_gpt2_dynamic_padding_classifier, lbfgs_regression, maml_second_order, tv_fasterrcnn_mobilenet_train,
        hf_llama_kv_cache_manual_decode, timm_resnet18_mixup, conv_lstm_frames, perceiver_latent_einsum,
        checkpoint_sequential_fp16_scaler, set_pooling_scatter_reduce, pointnet_classifier,
    ]
}
