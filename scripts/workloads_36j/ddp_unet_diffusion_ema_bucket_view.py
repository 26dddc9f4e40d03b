"""DDPM-style UNet denoiser trained with DDP (gradient_as_bucket_view, 100 MB buckets) plus an EMA copy.

Parallelism: ``DistributedDataParallel`` over 2 ranks with ``gradient_as_bucket_view=True``
and ``bucket_cap_mb=100``.  Each rank also keeps a full fp32 EMA copy of the model
(``copy.deepcopy`` before wrapping, ``requires_grad_(False)``), updated after every optimizer
step with ``torch._foreach_lerp_`` (decay 0.999).

Model: hand-written diffusion UNet for 64x64 RGB images: base width 128, channel multipliers
(1, 2, 3, 4) at resolutions 64/32/16/8, two residual blocks per level (GroupNorm(32) + SiLU +
3x3 conv, sinusoidal timestep embedding through a 2-layer MLP added to every block), single-head
self-attention blocks at 16x16 and 8x8 and in the middle, skip connections concatenated on the
way up; about 88 M parameters.

Precision: fp32 weights, forward under ``torch.autocast(bfloat16)``, MSE loss on the predicted
noise in fp32.  Linear beta schedule over 1000 timesteps, one random timestep per sample.
Optimizer: ``torch.optim.AdamW`` (lr 1e-4, weight decay 0), ``clip_grad_norm_(1.0)``.
Data: synthetic images, batch 32 x 3 x 64 x 64 per rank, 6 steps, loss all-reduced and printed
on rank 0.  After training the EMA model runs 4 DDIM-style denoising steps on 16 noise images
under ``torch.no_grad()`` and rank 0 serialises the EMA state dict with ``torch.save`` into an
in-memory buffer.
"""
import copy
import io
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

IMAGE = 64
BASE = 128
MULTS = (1, 2, 3, 4)
ATTN_RES = (16, 8)
NUM_RES_BLOCKS = 2
BATCH = 32
STEPS = 6
T_STEPS = 1000
EMA_DECAY = 0.999
SAMPLE_BATCH = 16
SAMPLE_STEPS = 4


def timestep_embedding(t, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    args = t.float()[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=1)


class ResBlock(nn.Module):
    def __init__(self, cin, cout, temb_dim):
        super().__init__()
        self.norm1 = nn.GroupNorm(32, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.temb = nn.Linear(temb_dim, cout)
        self.norm2 = nn.GroupNorm(32, cout)
        self.dropout = nn.Dropout(0.1)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, temb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.temb(F.silu(temb))[:, :, None, None]
        h = self.conv2(self.dropout(F.silu(self.norm2(h))))
        return self.skip(x) + h


class AttnBlock(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.norm = nn.GroupNorm(32, ch)
        self.qkv = nn.Conv2d(ch, 3 * ch, 1)
        self.proj = nn.Conv2d(ch, ch, 1)

    def forward(self, x, temb=None):
        b, c, h, w = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, 3, 1, c, h * w).transpose(-1, -2).unbind(1)
        out = F.scaled_dot_product_attention(q, k, v)  # (b, 1, hw, c)
        out = out.transpose(-1, -2).reshape(b, c, h, w)
        return x + self.proj(out)


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        temb_dim = BASE * 4
        self.temb = nn.Sequential(nn.Linear(BASE, temb_dim), nn.SiLU(), nn.Linear(temb_dim, temb_dim))
        self.conv_in = nn.Conv2d(3, BASE, 3, padding=1)

        self.down = nn.ModuleList()
        chans = [BASE]
        ch = BASE
        res = IMAGE
        for level, mult in enumerate(MULTS):
            for _ in range(NUM_RES_BLOCKS):
                blocks = [ResBlock(ch, BASE * mult, temb_dim)]
                ch = BASE * mult
                if res in ATTN_RES:
                    blocks.append(AttnBlock(ch))
                self.down.append(nn.ModuleList(blocks))
                chans.append(ch)
            if level != len(MULTS) - 1:
                self.down.append(nn.ModuleList([nn.Conv2d(ch, ch, 3, stride=2, padding=1)]))
                chans.append(ch)
                res //= 2

        self.mid = nn.ModuleList([ResBlock(ch, ch, temb_dim), AttnBlock(ch), ResBlock(ch, ch, temb_dim)])

        self.up = nn.ModuleList()
        for level, mult in reversed(list(enumerate(MULTS))):
            for _ in range(NUM_RES_BLOCKS + 1):
                blocks = [ResBlock(ch + chans.pop(), BASE * mult, temb_dim)]
                ch = BASE * mult
                if res in ATTN_RES:
                    blocks.append(AttnBlock(ch))
                self.up.append(nn.ModuleList(blocks))
            if level != 0:
                self.up.append(nn.ModuleList([nn.Upsample(scale_factor=2, mode="nearest"),
                                              nn.Conv2d(ch, ch, 3, padding=1)]))
                res *= 2
        self.norm_out = nn.GroupNorm(32, ch)
        self.conv_out = nn.Conv2d(ch, 3, 3, padding=1)

    @staticmethod
    def _run(blocks, h, temb):
        for blk in blocks:
            h = blk(h, temb) if isinstance(blk, (ResBlock, AttnBlock)) else blk(h)
        return h

    def forward(self, x, t):
        temb = self.temb(timestep_embedding(t, BASE))
        h = self.conv_in(x)
        hs = [h]
        for blocks in self.down:
            h = self._run(blocks, h, temb)
            hs.append(h)
        h = self._run(self.mid, h, temb)
        for blocks in self.up:
            if isinstance(blocks[0], ResBlock):
                h = torch.cat([h, hs.pop()], dim=1)
            h = self._run(blocks, h, temb)
        return self.conv_out(F.silu(self.norm_out(h)))


def main():
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)

    torch.manual_seed(0)
    net = UNet().to(device)
    ema = copy.deepcopy(net).requires_grad_(False)
    model = DDP(net, device_ids=[local_rank], gradient_as_bucket_view=True, bucket_cap_mb=100)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)

    betas = torch.linspace(1e-4, 0.02, T_STEPS, device=device)
    alphas_bar = torch.cumprod(1.0 - betas, dim=0)

    ema_params = list(ema.parameters())
    model_params = list(net.parameters())

    torch.manual_seed(100 + rank)
    for step in range(STEPS):
        x0 = torch.rand(BATCH, 3, IMAGE, IMAGE, device=device) * 2 - 1
        t = torch.randint(0, T_STEPS, (BATCH,), device=device)
        noise = torch.randn_like(x0)
        a = alphas_bar[t].view(-1, 1, 1, 1)
        xt = a.sqrt() * x0 + (1 - a).sqrt() * noise

        with torch.autocast("cuda", dtype=torch.bfloat16):
            pred = model(xt, t)
        loss = F.mse_loss(pred.float(), noise)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

        with torch.no_grad():
            torch._foreach_lerp_(ema_params, model_params, 1.0 - EMA_DECAY)

        reported = loss.detach().clone()
        dist.all_reduce(reported, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"step {step} loss {reported.item():.4f}", flush=True)

    # Short deterministic DDIM-style sampling with the EMA weights.
    ema.eval()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        x = torch.randn(SAMPLE_BATCH, 3, IMAGE, IMAGE, device=device)
        ts = torch.linspace(T_STEPS - 1, 0, SAMPLE_STEPS + 1, device=device).long()
        for i in range(SAMPLE_STEPS):
            t_now, t_next = ts[i], ts[i + 1]
            eps = ema(x, t_now.expand(SAMPLE_BATCH)).float()
            a_now, a_next = alphas_bar[t_now], alphas_bar[t_next]
            x0_hat = ((x - (1 - a_now).sqrt() * eps) / a_now.sqrt()).clamp(-1, 1)
            x = a_next.sqrt() * x0_hat + (1 - a_next).sqrt() * eps
    sample_mean = x.float().mean()
    dist.all_reduce(sample_mean, op=dist.ReduceOp.AVG)
    if rank == 0:
        print(f"ema sample mean {sample_mean.item():.4f}", flush=True)
        buf = io.BytesIO()
        torch.save(ema.state_dict(), buf)
        print(f"ema checkpoint {buf.tell() / 2**20:.1f} MiB", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
