"""Twelfth held-out group of issue 35 (group ISSUE35L): fifteen programs of kinds no earlier group
had, written after ISSUE35K's figures and committed before they were recorded on a GPU (an H200)
or compared with anything. Traced on the CPU before recording only to see that each program is
itself valid (a refusal then is kept as the held-out figure, not mended first).

Hugging Face's Falcon, GPTBigCode (multi-query attention), Marian and Mamba (its PyTorch scan,
no CUDA kernels) from their configs; Adam on its single-tensor path with AMSGrad; the legacy
torch.cuda.amp API (autocast and GradScaler with a lower initial scale); a DataLoader with pinned
memory and non-blocking copies; an embedding with max_norm (renormalized in place); bicubic
super-resolution; patches by F.unfold and F.fold; gradient accumulation with zero_grad keeping
the gradients; activations offloaded by torch.autograd.graph.save_on_cpu; grouped-query SDPA with
a boolean mask; torchvision's EfficientNetV2-S under bf16 autocast; Hessian-vector products by
torch.autograd.functional.hvp. Each is a function of the device, recorded by
scripts/record_trace_workloads.py (VRAMLAB_HOLDOUT=issue35l)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def hf_falcon_from_config_bf16(device):
    """Hugging Face's Falcon from its config (4 layers of hidden 512, 8 heads, rotary positions,
    parallel attention and MLP) trained as a causal language model on batch 8 of 256 tokens under
    bf16 autocast; AdamW; two steps."""
    from transformers import FalconConfig, FalconForCausalLM

    torch.manual_seed(0)
    config = FalconConfig(vocab_size=16000, hidden_size=512, num_hidden_layers=4, num_attention_heads=8, alibi=False, parallel_attn=True)
    model = FalconForCausalLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 16000, (8, 256), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_gpt_bigcode_mqa(device):
    """Hugging Face's GPTBigCode from its config (multi-query attention: one key and value head
    for 8 query heads; 4 layers of 512) trained in float32 on batch 8 of 256 tokens with a padded
    attention mask (the last 64 tokens of every other row); AdamW; two steps."""
    from transformers import GPTBigCodeConfig, GPTBigCodeForCausalLM

    torch.manual_seed(0)
    config = GPTBigCodeConfig(vocab_size=16000, n_positions=512, n_embd=512, n_layer=4, n_head=8, multi_query=True)
    model = GPTBigCodeForCausalLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 16000, (8, 256), device=device)
        mask = torch.ones(8, 256, dtype=torch.long, device=device)
        mask[1::2, -64:] = 0
        model(input_ids=ids, attention_mask=mask, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_marian_seq2seq_from_config(device):
    """Hugging Face's Marian translation model from its config (3 encoder and 3 decoder layers of
    256, sinusoidal positions, shared embeddings) trained on batch 16 of 64 source and 48 target
    tokens; Adam; two steps."""
    from transformers import MarianConfig, MarianMTModel

    torch.manual_seed(0)
    config = MarianConfig(
        vocab_size=12000, d_model=256, encoder_layers=3, decoder_layers=3, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=1024, decoder_ffn_dim=1024, pad_token_id=11999,
        decoder_start_token_id=11999, max_position_embeddings=128,
    )
    model = MarianMTModel(config).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    for _ in range(2):
        src = torch.randint(0, 11999, (16, 64), device=device)
        tgt = torch.randint(0, 11999, (16, 48), device=device)
        model(input_ids=src, labels=tgt).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_mamba_from_config(device):
    """Hugging Face's Mamba from its config (2 layers of hidden 256, state 16), its selective scan
    run by PyTorch's own operators (no CUDA kernels installed), trained as a language model on
    batch 4 of 128 tokens; AdamW; two steps."""
    from transformers import MambaConfig, MambaForCausalLM

    torch.manual_seed(0)
    config = MambaConfig(vocab_size=8000, hidden_size=256, state_size=16, num_hidden_layers=2, use_mambapy=False)
    model = MambaForCausalLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        ids = torch.randint(0, 8000, (4, 128), device=device)
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def adam_single_tensor_amsgrad(device):
    """A 4-layer transformer encoder language model (width 512, vocabulary 16,000) trained with
    Adam on its single-tensor path (foreach=False) with AMSGrad and weight decay, batch 16 of 128
    tokens; three steps."""
    torch.manual_seed(0)
    embed = nn.Embedding(16000, 512)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True), 4)
    head = nn.Linear(512, 16000)
    model = nn.ModuleList([embed, encoder, head]).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, weight_decay=0.01, amsgrad=True, foreach=False)
    for _ in range(3):
        ids = torch.randint(0, 16000, (16, 128), device=device)
        logits = head(encoder(embed(ids)))
        F.cross_entropy(logits.reshape(-1, 16000), ids.reshape(-1)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def legacy_cuda_amp_api(device):
    """A convolutional classifier trained with the legacy API, torch.cuda.amp.autocast() (float16)
    and torch.cuda.amp.GradScaler(init_scale=1024), batch 64 of 64x64 images; SGD with momentum;
    three steps."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(128 * 16 * 16, 256), nn.ReLU(), nn.Linear(256, 10),
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.cuda.amp.GradScaler(init_scale=1024.0)
    for _ in range(3):
        x = torch.randn(64, 3, 64, 64, device=device)
        y = torch.randint(0, 10, (64,), device=device)
        with torch.cuda.amp.autocast():
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)


def dataloader_pinned_non_blocking(device):
    """An MLP trained from a DataLoader over a CPU TensorDataset (4,096 rows of 512 features,
    batch 256, shuffled, pin_memory=True), each batch copied with .to(device, non_blocking=True);
    Adam; one epoch of 16 steps."""
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(4096, 512), torch.randint(0, 10, (4096,)))
    loader = torch.utils.data.DataLoader(data, batch_size=256, shuffle=True, pin_memory=True)
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def embedding_max_norm_lm(device):
    """A GRU language model whose embedding has max_norm=1.0 (the looked-up rows renormalized in
    place on every forward), vocabulary 20,000 of width 256, batch 32 of 64 tokens; Adam; two
    steps."""
    torch.manual_seed(0)
    embed = nn.Embedding(20000, 256, max_norm=1.0).to(device)
    rnn = nn.GRU(256, 512, batch_first=True).to(device)
    head = nn.Linear(512, 20000).to(device)
    params = list(embed.parameters()) + list(rnn.parameters()) + list(head.parameters())
    opt = torch.optim.Adam(params, lr=1e-3)
    for _ in range(2):
        ids = torch.randint(0, 20000, (32, 64), device=device)
        out, _ = rnn(embed(ids[:, :-1]))
        F.cross_entropy(head(out).reshape(-1, 20000), ids[:, 1:].reshape(-1)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def bicubic_super_resolution(device):
    """x4 super-resolution: 32x32 inputs upsampled by bicubic interpolation (align_corners=False)
    to 128x128 and refined by a 5-layer residual CNN, L1 loss against 128x128 targets, batch 32;
    Adam; two steps."""
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 64, 5, padding=2), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
        nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 3, 3, padding=1),
    ).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-4)
    for _ in range(2):
        low = torch.rand(32, 3, 32, 32, device=device, requires_grad=False)
        high = torch.rand(32, 3, 128, 128, device=device)
        up = F.interpolate(low, scale_factor=4, mode="bicubic", align_corners=False)
        F.l1_loss(up + net(up), high).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def unfold_fold_patches(device):
    """A patch autoencoder: 8x8 patches with stride 4 taken by F.unfold from 64x64 images, encoded
    and decoded by linears per patch, put back by F.fold and divided by the patch counts (fold of
    ones), MSE against the images, batch 32; Adam; two steps."""
    torch.manual_seed(0)
    encoder = nn.Sequential(nn.Linear(3 * 64, 256), nn.GELU(), nn.Linear(256, 64)).to(device)
    decoder = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 3 * 64)).to(device)
    opt = torch.optim.Adam(list(encoder.parameters()) + list(decoder.parameters()), lr=1e-3)
    counts = F.fold(F.unfold(torch.ones(1, 3, 64, 64, device=device), 8, stride=4), (64, 64), 8, stride=4)
    for _ in range(2):
        images = torch.rand(32, 3, 64, 64, device=device)
        patches = F.unfold(images, 8, stride=4).transpose(1, 2)
        rebuilt = decoder(encoder(patches)).transpose(1, 2)
        out = F.fold(rebuilt, (64, 64), 8, stride=4) / counts
        F.mse_loss(out, images).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def zero_grad_keep_buffers_accumulate(device):
    """Gradient accumulation over four micro-batches of 32 (loss divided by four) for an MLP of
    width 2048, with optimizer.zero_grad(set_to_none=False) after each step, so the gradients stay
    allocated and are zeroed in place; SGD with momentum; three steps."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 2048), nn.GELU(), nn.Linear(2048, 2048), nn.GELU(), nn.Linear(2048, 100)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for _ in range(3):
        for _ in range(4):
            x = torch.randn(32, 1024, device=device)
            y = torch.randint(0, 100, (32,), device=device)
            (F.cross_entropy(model(x), y) / 4).backward()
        opt.step()
        opt.zero_grad(set_to_none=False)


def save_on_cpu_activation_offload(device):
    """An 8-layer MLP of width 2048 on batch 512 whose saved activations are offloaded to pinned
    host memory during the forward by torch.autograd.graph.save_on_cpu(pin_memory=True) and
    brought back in the backward; AdamW; two steps."""
    torch.manual_seed(0)
    layers = []
    for _ in range(8):
        layers += [nn.Linear(2048, 2048), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(2048, 10)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        x = torch.randn(512, 2048, device=device)
        y = torch.randint(0, 10, (512,), device=device)
        with torch.autograd.graph.save_on_cpu(pin_memory=True):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def sdpa_gqa_bool_mask(device):
    """A 4-layer decoder written by hand with grouped-query attention (8 query heads sharing 2
    key/value heads) by F.scaled_dot_product_attention(enable_gqa=True) with a boolean mask
    (causal and padding), width 512, batch 16 of 256 tokens under bf16 autocast; AdamW; two
    steps."""
    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(512), nn.LayerNorm(512)
            self.q, self.kv, self.out = nn.Linear(512, 512), nn.Linear(512, 2 * 128), nn.Linear(512, 512)
            self.mlp = nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 512))

        def forward(self, x, mask):
            b, t, _ = x.shape
            h = self.norm1(x)
            q = self.q(h).view(b, t, 8, 64).transpose(1, 2)
            k, v = self.kv(h).view(b, t, 2, 2, 64).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
            x = x + self.out(a.transpose(1, 2).reshape(b, t, 512))
            return x + self.mlp(self.norm2(x))

    embed = nn.Embedding(16000, 512).to(device)
    blocks = nn.ModuleList(Block() for _ in range(4)).to(device)
    head = nn.Linear(512, 16000).to(device)
    params = list(embed.parameters()) + list(blocks.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=3e-4)
    causal = torch.ones(256, 256, dtype=torch.bool, device=device).tril()
    keep = torch.ones(16, 256, dtype=torch.bool, device=device)
    keep[::2, -32:] = False
    mask = causal[None, None] & keep[:, None, None, :]
    for _ in range(2):
        ids = torch.randint(0, 16000, (16, 256), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            x = embed(ids)
            for block in blocks:
                x = block(x, mask)
            loss = F.cross_entropy(head(x).float().reshape(-1, 16000), ids.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def tv_efficientnet_v2_s_bf16(device):
    """torchvision's EfficientNetV2-S (fused MBConv stages, squeeze-excitation, stochastic
    depth), 100 classes, on batch 16 of 224x224 images under bf16 autocast; RMSprop; two steps."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.efficientnet_v2_s(num_classes=100).to(device)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3, momentum=0.9, eps=1e-3)
    for _ in range(2):
        x = torch.randn(16, 3, 224, 224, device=device)
        y = torch.randint(0, 100, (16,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hessian_vector_products(device):
    """Hessian-vector products of an MLP's loss with respect to its flattened parameters by
    torch.autograd.functional.hvp (double backward), batch 256, a Newton-like update of the
    parameters by the product, three iterations."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.Tanh(), nn.Linear(512, 512), nn.Tanh(), nn.Linear(512, 10)).to(device)
    names = [n for n, _ in model.named_parameters()]
    shapes = [p.shape for p in model.parameters()]
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    x = torch.randn(256, 256, device=device)
    y = torch.randint(0, 10, (256,), device=device)

    def loss_of(theta):
        params, offset = {}, 0
        for name, shape in zip(names, shapes):
            n = shape.numel()
            params[name] = theta[offset : offset + n].view(shape)
            offset += n
        return F.cross_entropy(torch.func.functional_call(model, params, (x,)), y)

    for _ in range(3):
        v = torch.randn_like(flat)
        _, product = torch.autograd.functional.hvp(loss_of, flat, v)
        flat = flat - 1e-3 * product


ISSUE35L = {
    f.__name__: f
    for f in [
        hf_falcon_from_config_bf16, hf_gpt_bigcode_mqa, hf_marian_seq2seq_from_config, hf_mamba_from_config,
        adam_single_tensor_amsgrad, legacy_cuda_amp_api, dataloader_pinned_non_blocking, embedding_max_norm_lm,
        bicubic_super_resolution, unfold_fold_patches, zero_grad_keep_buffers_accumulate, save_on_cpu_activation_offload,
        sdpa_gqa_bool_mask, tv_efficientnet_v2_s_bf16, hessian_vector_products,
    ]
}
