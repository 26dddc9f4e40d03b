"""WGAN-GP with a ResNet critic: gradient penalty by double backward through a DDP-wrapped critic.

Parallelism: data parallel over 2 ranks.  Generator and critic are each wrapped in their own
``DistributedDataParallel`` (fp32, default buckets).  Every critic iteration runs the DDP
critic three times (real, fake, random interpolates) before one ``backward()``; the gradient
penalty takes ``torch.autograd.grad(critic(interp).sum(), interp, create_graph=True)`` and
the penalty term is then back-propagated through that graph (double backward through conv,
unnormalised residual blocks and LeakyReLU).  Two critic iterations per generator
iteration; the generated batch for the critic is made under ``torch.no_grad()``.  For the
generator update the critic's parameters are frozen with ``requires_grad_(False)`` and the
critic is called through ``D.module`` (bypassing its DDP reducer); only the generator's
gradients are all-reduced there.

Model: generator 128-d latent -> linear to 512x4x4 -> four up-sampling residual blocks
(512-512-256-128-64, BatchNorm + ReLU, nearest upsample + 3x3 convs) -> 3x64x64, tanh
(about 8.5 M params); critic: 3x64x64 -> four down-sampling residual blocks
(64-128-256-512-512, no normalisation, LeakyReLU(0.2), avg-pool) -> linear to one score
(about 10 M params).

Precision: fp32 throughout (no autocast), TF32 matmul/conv allowed.
Optimizers: two ``torch.optim.Adam`` (lr 1e-4, betas 0.0/0.9); penalty weight 10.
Data: synthetic "real" images, batch 64 x 3 x 64 x 64 per rank; 5 generator iterations
(10 critic iterations), losses printed on rank 0 after each generator iteration, Wasserstein
estimate all-reduced (AVG).
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

LATENT = 128
IMAGE = 64
G_CHANS = (512, 512, 256, 128, 64)
D_CHANS = (64, 128, 256, 512, 512)
BATCH = 64
G_ITERS = 5
N_CRITIC = 2
GP_WEIGHT = 10.0


class GBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1)

    def forward(self, x):
        h = F.interpolate(F.relu(self.bn1(x)), scale_factor=2, mode="nearest")
        h = self.conv2(F.relu(self.bn2(self.conv1(h))))
        return self.skip(F.interpolate(x, scale_factor=2, mode="nearest")) + h


class DBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1)

    def forward(self, x):
        h = self.conv1(F.leaky_relu(x, 0.2))
        h = self.conv2(F.leaky_relu(h, 0.2))
        return F.avg_pool2d(self.skip(x) + h, 2)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(LATENT, G_CHANS[0] * 4 * 4)
        self.blocks = nn.Sequential(*[GBlock(a, b) for a, b in zip(G_CHANS[:-1], G_CHANS[1:])])
        self.bn = nn.BatchNorm2d(G_CHANS[-1])
        self.out = nn.Conv2d(G_CHANS[-1], 3, 3, padding=1)

    def forward(self, z):
        h = self.fc(z).view(z.size(0), G_CHANS[0], 4, 4)
        h = self.blocks(h)
        return torch.tanh(self.out(F.relu(self.bn(h))))


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_in = nn.Conv2d(3, D_CHANS[0], 3, padding=1)
        self.blocks = nn.Sequential(*[DBlock(a, b) for a, b in zip(D_CHANS[:-1], D_CHANS[1:])])
        self.fc = nn.Linear(D_CHANS[-1] * 4 * 4, 1)

    def forward(self, x):
        h = self.blocks(self.conv_in(x))
        return self.fc(F.leaky_relu(h, 0.2).flatten(1)).squeeze(1)


def main():
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True

    torch.manual_seed(0)
    netG = Generator().to(device)
    netD = Critic().to(device)
    G = DDP(netG, device_ids=[local_rank])
    D = DDP(netD, device_ids=[local_rank])
    optG = torch.optim.Adam(G.parameters(), lr=1e-4, betas=(0.0, 0.9))
    optD = torch.optim.Adam(D.parameters(), lr=1e-4, betas=(0.0, 0.9))

    torch.manual_seed(100 + rank)
    for it in range(G_ITERS):
        # ---- critic iterations ----
        for p in netD.parameters():
            p.requires_grad_(True)
        for _ in range(N_CRITIC):
            real = torch.rand(BATCH, 3, IMAGE, IMAGE, device=device) * 2 - 1
            z = torch.randn(BATCH, LATENT, device=device)
            with torch.no_grad():
                fake = G(z)
            eps = torch.rand(BATCH, 1, 1, 1, device=device)
            interp = (eps * real + (1 - eps) * fake).requires_grad_(True)

            d_real = D(real)
            d_fake = D(fake)
            d_interp = D(interp)
            (grads,) = torch.autograd.grad(d_interp.sum(), interp, create_graph=True)
            gp = ((grads.flatten(1).norm(2, dim=1) - 1.0) ** 2).mean()
            wdist = d_real.mean() - d_fake.mean()
            loss_d = -wdist + GP_WEIGHT * gp
            optD.zero_grad(set_to_none=True)
            loss_d.backward()
            optD.step()

        # ---- generator iteration ----
        for p in netD.parameters():
            p.requires_grad_(False)
        z = torch.randn(BATCH, LATENT, device=device)
        loss_g = -D.module(G(z)).mean()
        optG.zero_grad(set_to_none=True)
        loss_g.backward()
        optG.step()

        stats = torch.stack([wdist.detach(), gp.detach(), loss_g.detach()])
        dist.all_reduce(stats, op=dist.ReduceOp.AVG)
        if rank == 0:
            w, g, lg = stats.tolist()
            print(f"iter {it} wdist {w:.4f} gp {g:.4f} loss_g {lg:.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
