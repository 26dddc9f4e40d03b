"""DCGAN-style GAN trained with two separate DDP models and two optimizers, bf16 autocast.

Parallelism: data parallel over 4 ranks.  The generator and the discriminator are each
wrapped in their own ``DistributedDataParallel`` (fp32 parameters, default buckets,
``broadcast_buffers=True`` so the generator's BatchNorm running stats follow rank 0).
Every step runs three forwards: G(z) once, D on the concatenation [real, fake.detach()]
for the discriminator update, then D(fake) again for the generator update.  That last D
forward/backward runs inside ``D.no_sync()`` so only the generator's gradients are
all-reduced on it; the discriminator gradients it leaves behind are discarded.

Model: generator 128-d latent -> 4x4x1024 -> ConvTranspose2d stack 1024-512-256-128-64 -> 3
channels at 128x128 (BatchNorm + ReLU, tanh out); discriminator Conv2d stack
3-64-128-256-512-1024 at stride 2 with GroupNorm(32) + LeakyReLU(0.2), then a 4x4 conv to
one logit.  About 13 M + 11 M parameters.

Precision: fp32 weights, forward under ``torch.autocast(bfloat16)``; BCE-with-logits loss.
Optimizers: two ``torch.optim.Adam`` (lr 2e-4, betas 0.5/0.999), one per network.
Data: synthetic "real" images, batch 128 x 3 x 128 x 128 per rank, 6 steps.
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

LATENT = 128
BASE = 64
IMAGE = 128
BATCH = 128
STEPS = 6


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        chans = [BASE * 16, BASE * 8, BASE * 4, BASE * 2, BASE]
        layers = [
            nn.ConvTranspose2d(LATENT, chans[0], 4, 1, 0, bias=False),
            nn.BatchNorm2d(chans[0]),
            nn.ReLU(inplace=True),
        ]
        for cin, cout in zip(chans[:-1], chans[1:]):
            layers += [
                nn.ConvTranspose2d(cin, cout, 4, 2, 1, bias=False),
                nn.BatchNorm2d(cout),
                nn.ReLU(inplace=True),
            ]
        layers += [nn.ConvTranspose2d(chans[-1], 3, 4, 2, 1, bias=False), nn.Tanh()]
        self.net = nn.Sequential(*layers)

    def forward(self, z):
        return self.net(z.view(z.size(0), LATENT, 1, 1))


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        chans = [3, BASE, BASE * 2, BASE * 4, BASE * 8, BASE * 16]
        layers = []
        for i, (cin, cout) in enumerate(zip(chans[:-1], chans[1:])):
            layers.append(nn.Conv2d(cin, cout, 4, 2, 1, bias=(i == 0)))
            if i > 0:
                layers.append(nn.GroupNorm(32, cout))
            layers.append(nn.LeakyReLU(0.2, inplace=True))
        layers.append(nn.Conv2d(chans[-1], 1, 4, 1, 0))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x).flatten()


def init_weights(m):
    if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    device = torch.device("cuda", local_rank)

    torch.manual_seed(0)
    netG = Generator().apply(init_weights).to(device)
    netD = Discriminator().apply(init_weights).to(device)
    G = DDP(netG, device_ids=[local_rank])
    D = DDP(netD, device_ids=[local_rank])

    optG = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optD = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))

    torch.manual_seed(100 + rank)  # different data / noise per rank
    ones = torch.ones(BATCH, device=device)
    zeros = torch.zeros(BATCH, device=device)
    d_targets = torch.cat([ones, zeros])

    for step in range(STEPS):
        real = torch.rand(BATCH, 3, IMAGE, IMAGE, device=device) * 2 - 1
        z = torch.randn(BATCH, LATENT, device=device)

        with torch.autocast("cuda", dtype=torch.bfloat16):
            fake = G(z)

        # Discriminator update: one forward over real + detached fake.
        with torch.autocast("cuda", dtype=torch.bfloat16):
            d_logits = D(torch.cat([real, fake.detach()]))
        loss_d = F.binary_cross_entropy_with_logits(d_logits.float(), d_targets)
        loss_d.backward()
        optD.step()
        optD.zero_grad(set_to_none=True)

        # Generator update: gradients flow through D, but D does not all-reduce them.
        with D.no_sync():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                g_logits = D(fake)
            loss_g = F.binary_cross_entropy_with_logits(g_logits.float(), ones)
            loss_g.backward()
        optG.step()
        optG.zero_grad(set_to_none=True)
        optD.zero_grad(set_to_none=True)

        if rank == 0:
            print(f"step {step} loss_d {loss_d.item():.4f} loss_g {loss_g.item():.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
