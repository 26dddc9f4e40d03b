"""Thirteenth held-out group of issue 35 (group ISSUE35M): twelve programs of kinds no earlier group
had, written after ISSUE35L's figures and committed before they were recorded on a GPU (an H200)
or compared with anything. Traced on the CPU before recording only to see that each program is
itself valid (a refusal or failure then is kept as the held-out figure, not mended first).

Inference by a captured CUDA graph (torch.cuda.graph, replayed); SDPA under an explicit backend
(torch.nn.attention.sdpa_kernel); batched augmentation of GPU tensors with torchvision's
transforms.v2; a discrete VAE with hard Gumbel-softmax; a recurrence by logcumsumexp; pinball
loss with torch.quantile; gradient clipping by tensor hooks; PEFT's LoRA on Hugging Face's ViT
from its config; Hugging Face's GPT-2 with its own gradient checkpointing under bf16 autocast; the
legacy torch.nn.utils.weight_norm; BERT token classification with ignored labels; a side stream
prefetching the next batch. Each is a function of the device, recorded by
scripts/record_trace_workloads.py (VRAMLAB_HOLDOUT=issue35m)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def cuda_graph_capture_inference(device):
    """An MLP (width 2048, batch 256) captured once in a CUDA graph after three warm-up passes on a
    side stream, as PyTorch's docs show, then replayed five times with new inputs copied into the
    static input; inference only."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 2048), nn.GELU(), nn.Linear(2048, 2048), nn.GELU(), nn.Linear(2048, 10)).to(device).eval()
    static_input = torch.randn(256, 1024, device=device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        for _ in range(3):
            model(static_input)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        static_output = model(static_input)
    for _ in range(5):
        static_input.copy_(torch.randn(256, 1024, device=device))
        graph.replay()
        static_output.sum()


def sdpa_forced_backend(device):
    """A 4-layer decoder by hand whose attention runs under torch.nn.attention.sdpa_kernel: the
    first two layers restricted to the efficient-attention backend, the last two to the math
    backend, float16 autocast, causal, batch 8 of 512 tokens, width 512; AdamW; two steps."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.manual_seed(0)
    blocks = nn.ModuleList(
        nn.ModuleDict({"norm": nn.LayerNorm(512), "qkv": nn.Linear(512, 1536), "out": nn.Linear(512, 512), "mlp": nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 512))})
        for _ in range(4)
    ).to(device)
    embed, head = nn.Embedding(8000, 512).to(device), nn.Linear(512, 8000).to(device)
    params = list(blocks.parameters()) + list(embed.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=3e-4)
    for _ in range(2):
        ids = torch.randint(0, 8000, (8, 512), device=device)
        with torch.autocast("cuda", dtype=torch.float16):
            x = embed(ids)
            for i, block in enumerate(blocks):
                q, k, v = block["qkv"](block["norm"](x)).view(8, 512, 3, 8, 64).permute(2, 0, 3, 1, 4)
                backend = SDPBackend.EFFICIENT_ATTENTION if i < 2 else SDPBackend.MATH
                with sdpa_kernel(backend):
                    a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                x = x + block["out"](a.transpose(1, 2).reshape(8, 512, 512))
                x = x + block["mlp"](x)
            loss = F.cross_entropy(head(x).float().view(-1, 8000), ids.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def tv_transforms_v2_gpu_augment(device):
    """A ResNet-18 (10 classes) trained on batches of 64 uint8 images of 160x160 augmented on the
    GPU by torchvision.transforms.v2 (random resized crop to 128, horizontal flip, color jitter,
    then conversion to float and normalization); SGD with momentum; two steps."""
    import torchvision
    from torchvision.transforms import v2

    torch.manual_seed(0)
    augment = v2.Compose([
        v2.RandomResizedCrop(128, antialias=True), v2.RandomHorizontalFlip(), v2.ColorJitter(0.4, 0.4, 0.4),
        v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ])
    model = torchvision.models.resnet18(num_classes=10).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        raw = torch.randint(0, 256, (64, 3, 160, 160), dtype=torch.uint8, device=device)
        x = augment(raw)
        y = torch.randint(0, 10, (64,), device=device)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def gumbel_softmax_discrete_vae(device):
    """A discrete VAE on 784-d inputs, batch 256: an encoder to 32 categorical latents of 64
    classes, hard Gumbel-softmax samples (straight-through), a decoder back, BCE with logits plus
    the KL to a uniform prior; Adam; three steps."""
    torch.manual_seed(0)
    encoder = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 32 * 64)).to(device)
    decoder = nn.Sequential(nn.Linear(32 * 64, 1024), nn.ReLU(), nn.Linear(1024, 784)).to(device)
    opt = torch.optim.Adam(list(encoder.parameters()) + list(decoder.parameters()), lr=1e-3)
    for _ in range(3):
        x = torch.rand(256, 784, device=device)
        logits = encoder(x).view(256, 32, 64)
        z = F.gumbel_softmax(logits, tau=1.0, hard=True)
        recon = decoder(z.view(256, -1))
        q = F.softmax(logits, dim=-1)
        kl = (q * (torch.log(q + 1e-10) + torch.log(torch.tensor(64.0, device=device)))).sum(dim=(1, 2)).mean()
        loss = F.binary_cross_entropy_with_logits(recon, x, reduction="sum") / 256 + kl
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def logcumsumexp_scan(device):
    """A sequence model whose layers mix by a causal log-space scan: logcumsumexp over time of
    gated projections (batch 16, 512 steps, width 256, 4 layers), a regression head, MSE; AdamW;
    two steps."""
    torch.manual_seed(0)
    layers = nn.ModuleList(nn.Linear(256, 512) for _ in range(4)).to(device)
    head = nn.Linear(256, 1).to(device)
    opt = torch.optim.AdamW(list(layers.parameters()) + list(head.parameters()), lr=1e-3)
    for _ in range(2):
        x = torch.randn(16, 512, 256, device=device)
        for layer in layers:
            a, b = layer(x).chunk(2, dim=-1)
            x = x + torch.tanh(torch.logcumsumexp(a, dim=1) - torch.logcumsumexp(b, dim=1))
        F.mse_loss(head(x).squeeze(-1), torch.randn(16, 512, device=device)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def quantile_pinball_regression(device):
    """Quantile regression of 9 quantiles by pinball loss (batch 4,096, 64 features), with the
    batch's empirical quantiles of the targets by torch.quantile as a baseline term; Adam; three
    steps."""
    torch.manual_seed(0)
    taus = torch.linspace(0.1, 0.9, 9, device=device)
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 9)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(3):
        x = torch.randn(4096, 64, device=device)
        y = torch.randn(4096, device=device)
        baseline = torch.quantile(y, taus)
        diff = y[:, None] - (model(x) + baseline)
        loss = torch.maximum(taus * diff, (taus - 1) * diff).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def grad_hook_clipping(device):
    """A transformer encoder classifier (4 layers of 384, batch 32 of 128 tokens) whose every
    parameter carries a tensor hook clamping its gradient to [-0.1, 0.1] as autograd makes it;
    SGD; two steps."""
    torch.manual_seed(0)
    embed = nn.Embedding(10000, 384)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(384, 6, 1536, batch_first=True), 4)
    head = nn.Linear(384, 5)
    model = nn.ModuleList([embed, encoder, head]).to(device)
    for p in model.parameters():
        p.register_hook(lambda g: g.clamp(-0.1, 0.1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(2):
        ids = torch.randint(0, 10000, (32, 128), device=device)
        y = torch.randint(0, 5, (32,), device=device)
        F.cross_entropy(head(encoder(embed(ids)).mean(dim=1)), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def peft_lora_hf_vit_classifier(device):
    """PEFT's LoRA (rank 16 on the query and value projections, q_proj and v_proj in transformers 5) on Hugging Face's ViT from its
    config (6 layers of 384, 224x224 images of 16x16 patches, 100 classes), batch 32, the
    classifier trained fully; AdamW; two steps."""
    from peft import LoraConfig, get_peft_model
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    config = ViTConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=6, intermediate_size=1536, num_labels=100)
    model = ViTForImageClassification(config)
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=16, target_modules=["q_proj", "v_proj"], modules_to_save=["classifier"])).to(device)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    for _ in range(2):
        pixels = torch.randn(32, 3, 224, 224, device=device)
        labels = torch.randint(0, 100, (32,), device=device)
        model(pixel_values=pixels, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_gpt2_gradient_checkpointing_bf16(device):
    """Hugging Face's GPT-2 from its config (6 layers of 512) with gradient_checkpointing_enable()
    (non-reentrant), trained under bf16 autocast on batch 8 of 512 tokens; AdamW; two steps."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=16000, n_positions=512, n_embd=512, n_layer=6, n_head=8)).to(device)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 16000, (8, 512), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def weight_norm_legacy_mlp(device):
    """An MLP of width 2048 whose linears carry the legacy torch.nn.utils.weight_norm (weight_g,
    weight_v, recomputed by a forward pre-hook), batch 512; Adam; three steps."""
    torch.manual_seed(0)
    wn = torch.nn.utils.weight_norm
    model = nn.Sequential(wn(nn.Linear(1024, 2048)), nn.ReLU(), wn(nn.Linear(2048, 2048)), nn.ReLU(), wn(nn.Linear(2048, 10))).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(3):
        x = torch.randn(512, 1024, device=device)
        y = torch.randint(0, 10, (512,), device=device)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_bert_token_classification(device):
    """Hugging Face's BERT for token classification from its config (6 layers of 512, 9 labels)
    on batch 16 of 256 tokens, padded: per-row lengths, the padding masked and its labels set to
    -100; AdamW; two steps."""
    from transformers import BertConfig, BertForTokenClassification

    torch.manual_seed(0)
    config = BertConfig(vocab_size=16000, hidden_size=512, num_hidden_layers=6, num_attention_heads=8, intermediate_size=2048, num_labels=9)
    model = BertForTokenClassification(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5)
    lengths = torch.tensor([256 - 12 * i for i in range(16)], device=device)
    mask = (torch.arange(256, device=device)[None, :] < lengths[:, None]).long()
    for _ in range(2):
        ids = torch.randint(0, 16000, (16, 256), device=device) * mask
        labels = torch.randint(0, 9, (16, 256), device=device).masked_fill(mask == 0, -100)
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def side_stream_prefetch(device):
    """An MLP trained on batches copied from pinned host memory on a side stream one step ahead
    (wait_stream before use, record_stream on the batch), batch 1,024 of 2,048 features; SGD;
    five steps."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    host = [torch.randn(1024, 2048).pin_memory() for _ in range(5)]
    copy_stream = torch.cuda.Stream()

    def fetch(i):
        with torch.cuda.stream(copy_stream):
            return host[i].to(device, non_blocking=True)

    nxt = fetch(0)
    for i in range(5):
        torch.cuda.current_stream().wait_stream(copy_stream)
        x = nxt
        x.record_stream(torch.cuda.current_stream())
        if i + 1 < 5:
            nxt = fetch(i + 1)
        y = torch.randint(0, 10, (1024,), device=device)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


ISSUE35M = {
    f.__name__: f
    for f in [
        cuda_graph_capture_inference, sdpa_forced_backend, tv_transforms_v2_gpu_augment, gumbel_softmax_discrete_vae,
        logcumsumexp_scan, quantile_pinball_regression, grad_hook_clipping, peft_lora_hf_vit_classifier,
        hf_gpt2_gradient_checkpointing_bf16, weight_norm_legacy_mlp, hf_bert_token_classification, side_stream_prefetch,
    ]
}
