"""Workloads the GPU-free tracer (vramlab.trace) is checked on: each records itself on a GPU
(scripts/record_trace_workloads.py) and is traced on a CPU-only machine (python/tests/
test_trace.py), and the two are compared. Each is a function of the device, written as a
PyTorch user writes it, seeded, small enough to run in seconds."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def mlp_adamw(device):
    """An MLP trained with AdamW for three steps (fp32)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, 1024)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(3):
        x = torch.randn(256, 1024, device=device)
        loss = F.mse_loss(model(x), torch.zeros(256, 1024, device=device))
        loss.backward()
        opt.step()
        opt.zero_grad()


def cnn_sgd(device):
    """A CNN with BatchNorm trained with SGD and momentum (cuDNN convolutions)."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(128, 10),
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(3):
        x = torch.randn(64, 3, 64, 64, device=device)
        y = torch.randint(0, 10, (64,), device=device)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()


def accumulate_empty_cache(device):
    """Gradient accumulation over four micro-batches, emptying the cache after each step."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 2048)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(2):
        for _ in range(4):
            x = torch.randn(512, 2048, device=device)
            (model(x).square().mean() / 4).backward()
        opt.step()
        opt.zero_grad()
        if device != "cpu":
            torch.cuda.empty_cache()


def lstm(device):
    """An LSTM trained with Adam (cuDNN RNN)."""
    torch.manual_seed(0)
    model = nn.LSTM(256, 512, num_layers=2, batch_first=True).to(device)
    head = nn.Linear(512, 256).to(device)
    opt = torch.optim.Adam(list(model.parameters()) + list(head.parameters()))
    for _ in range(2):
        x = torch.randn(32, 64, 256, device=device)
        out, _ = model(x)
        head(out).square().mean().backward()
        opt.step()
        opt.zero_grad()


def checkpointed(device):
    """Activation checkpointing of four MLP blocks, trained with SGD."""
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    blocks = nn.ModuleList(nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024)) for _ in range(4)).to(device)
    opt = torch.optim.SGD(blocks.parameters(), lr=0.01)
    for _ in range(2):
        h = torch.randn(256, 1024, device=device, requires_grad=True)
        for block in blocks:
            h = checkpoint(block, h, use_reentrant=False)
        h.square().mean().backward()
        opt.step()
        opt.zero_grad()


def kv_cache_inference(device):
    """Greedy decoding with a growing key/value cache (attention written out, no_grad)."""
    torch.manual_seed(0)
    d, heads, layers = 512, 8, 4
    proj = nn.ModuleList(nn.Linear(d, 3 * d) for _ in range(layers)).to(device)
    out = nn.ModuleList(nn.Linear(d, d) for _ in range(layers)).to(device)
    with torch.no_grad():
        x = torch.randn(4, 1, d, device=device)
        cache = [None] * layers
        for _ in range(32):
            h = x
            for i in range(layers):
                q, k, v = proj[i](h).chunk(3, dim=-1)
                if cache[i] is not None:
                    k = torch.cat([cache[i][0], k], dim=1)
                    v = torch.cat([cache[i][1], v], dim=1)
                cache[i] = (k, v)
                split = lambda t: t.view(t.shape[0], t.shape[1], heads, d // heads).transpose(1, 2)
                att = (split(q) @ split(k).transpose(-1, -2) / (d // heads) ** 0.5).softmax(-1)
                h = out[i]((att @ split(v)).transpose(1, 2).reshape(h.shape[0], 1, d))
            x = h


def hf_gpt2(device):
    """A Hugging Face GPT-2 (6 layers) built from its config, trained with AdamW for two steps
    (eager attention)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=6, n_embd=512, n_head=8, vocab_size=8192, n_positions=256)
    config._attn_implementation = "eager"
    model = GPT2LMHeadModel(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 8192, (8, 256), device=device)
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad()


WORKLOADS = {
    f.__name__: f
    for f in [mlp_adamw, cnn_sgd, accumulate_empty_cache, lstm, checkpointed, kv_cache_inference, hf_gpt2]
}


# Held out: committed before they were ever run on a GPU or traced (see the commit that adds
# them), so that the tracer's figures on them say how it does on programs it was not shaped by.


def tv_resnet18_sgd(device):
    """torchvision's ResNet-18 trained with SGD and momentum for two steps (cuDNN convolutions)."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        x = torch.randn(32, 3, 128, 128, device=device)
        y = torch.randint(0, 10, (32,), device=device)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()


def hf_bert_adamw(device):
    """A Hugging Face BERT classifier (4 layers) built from its config, trained with AdamW for two
    steps (eager attention)."""
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(
        num_hidden_layers=4, hidden_size=256, num_attention_heads=4, intermediate_size=1024, vocab_size=8192
    )
    config._attn_implementation = "eager"
    model = BertForSequenceClassification(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 8192, (16, 128), device=device)
        labels = torch.randint(0, 2, (16,), device=device)
        model(input_ids=ids, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()


def hf_llama_adamw(device):
    """A Hugging Face Llama (4 layers) built from its config, one AdamW training step (eager
    attention, rotary embeddings, RMSNorm)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        num_hidden_layers=4,
        hidden_size=512,
        num_attention_heads=8,
        num_key_value_heads=4,
        intermediate_size=1376,
        vocab_size=8192,
        max_position_embeddings=512,
    )
    config._attn_implementation = "eager"
    model = LlamaForCausalLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 8192, (4, 256), device=device)
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    opt.zero_grad()


def bf16_mlp_sgd(device):
    """An MLP whose parameters are bfloat16 (model.to(torch.bfloat16), no autocast), trained with
    SGD for three steps."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2048, 8192), nn.SiLU(), nn.Linear(8192, 2048)).to(device).to(torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(3):
        x = torch.randn(512, 2048, device=device, dtype=torch.bfloat16)
        model(x).float().square().mean().backward()
        opt.step()
        opt.zero_grad()


def embedding_adam(device):
    """A large embedding table and a linear head trained with Adam (embedding backward)."""
    torch.manual_seed(0)
    embed = nn.Embedding(100_000, 256).to(device)
    head = nn.Linear(256, 1000).to(device)
    opt = torch.optim.Adam(list(embed.parameters()) + list(head.parameters()))
    for _ in range(2):
        ids = torch.randint(0, 100_000, (64, 128), device=device)
        y = torch.randint(0, 1000, (64 * 128,), device=device)
        F.cross_entropy(head(embed(ids)).view(-1, 1000), y).backward()
        opt.step()
        opt.zero_grad()


HOLDOUT = {f.__name__: f for f in [tv_resnet18_sgd, hf_bert_adamw, hf_llama_adamw, bf16_mlp_sgd, embedding_adam]}


# Held out, second group: mixed precision (bf16 autocast), committed with the tracer's autocast
# support and before either was run on a GPU (see the commit that adds them).


def gpt_autocast_adamw(device):
    """A GPT-style transformer (attention written out, causal mask, pre-LayerNorm) trained under
    bf16 autocast with AdamW for three steps, the loss taken inside the autocast region."""
    torch.manual_seed(0)
    d, heads, layers, vocab, length = 512, 8, 4, 8192, 256

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x, mask):
            b, n, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
            split = lambda t: t.view(b, n, heads, d // heads).transpose(1, 2)
            q, k, v = split(q), split(k), split(v)
            att = (q @ k.transpose(-1, -2)) / (d // heads) ** 0.5
            att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(b, n, d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    embed, pos = nn.Embedding(vocab, d).to(device), nn.Embedding(length, d).to(device)
    blocks = nn.ModuleList(Block() for _ in range(layers)).to(device)
    ln, head = nn.LayerNorm(d).to(device), nn.Linear(d, vocab, bias=False).to(device)
    params = [p for m in (embed, pos, blocks, ln, head) for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=3e-4)
    mask = torch.ones(length, length, device=device, dtype=torch.bool).triu(1)
    positions = torch.arange(length, device=device)
    for _ in range(3):
        ids = torch.randint(0, vocab, (8, length), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            x = embed(ids) + pos(positions)
            for block in blocks:
                x = block(x, mask)
            logits = head(ln(x))
            loss = F.cross_entropy(logits.view(-1, vocab), ids.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_gpt2_autocast(device):
    """A Hugging Face GPT-2 (4 layers) built from its config, trained under bf16 autocast with
    AdamW for two steps (eager attention)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=4, n_embd=512, n_head=8, vocab_size=8192, n_positions=256)
    config._attn_implementation = "eager"
    model = GPT2LMHeadModel(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 8192, (8, 256), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()


def hf_llama_autocast(device):
    """A Hugging Face Llama (4 layers) built from its config, two AdamW steps under bf16 autocast
    (eager attention; rotary embeddings computed with autocast off, RMSNorm in float32)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        num_hidden_layers=4,
        hidden_size=512,
        num_attention_heads=8,
        num_key_value_heads=4,
        intermediate_size=1376,
        vocab_size=8192,
        max_position_embeddings=512,
    )
    config._attn_implementation = "eager"
    model = LlamaForCausalLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 8192, (4, 256), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()


AUTOCAST = {f.__name__: f for f in [gpt_autocast_adamw, hf_gpt2_autocast, hf_llama_autocast]}


# Held out, third group: PyTorch's fused attention (scaled_dot_product_attention, which on an H100
# runs cuDNN attention in half precision), committed with the tracer's support for it and before
# any of them was run on a GPU (see the commit that adds them).


def hand_sdpa_autocast(device):
    """A hand-written causal transformer (head size 128) calling F.scaled_dot_product_attention,
    trained under bf16 autocast with SGD and momentum for three steps."""
    torch.manual_seed(0)
    d, heads, layers, vocab, length = 1024, 8, 3, 4096, 512

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
            self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, n, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(att.transpose(1, 2).reshape(b, n, d))
            return x + self.down(F.silu(self.up(self.ln2(x))))

    embed = nn.Embedding(vocab, d).to(device)
    blocks = nn.ModuleList(Block() for _ in range(layers)).to(device)
    head = nn.Linear(d, vocab).to(device)
    params = [p for m in (embed, blocks, head) for p in m.parameters()]
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    for _ in range(3):
        ids = torch.randint(0, vocab, (4, length), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            x = embed(ids)
            for block in blocks:
                x = block(x)
            loss = F.cross_entropy(head(x).flatten(0, 1), ids.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad()


def hf_llama_sdpa_autocast(device):
    """A Hugging Face Llama (4 layers, 8 query and 4 key/value heads) built from its config with
    its default attention (SDPA), two AdamW steps under bf16 autocast."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        num_hidden_layers=4,
        hidden_size=512,
        num_attention_heads=8,
        num_key_value_heads=4,
        intermediate_size=1376,
        vocab_size=8192,
        max_position_embeddings=1024,
    )
    model = LlamaForCausalLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 8192, (4, 512), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()


def hf_gpt2_sdpa_bf16(device):
    """A Hugging Face GPT-2 (6 layers) built from its config with its default attention (SDPA, with
    attention dropout), its parameters in bfloat16, trained with AdamW for two steps."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=6, n_embd=768, n_head=12, vocab_size=8192, n_positions=512)
    model = GPT2LMHeadModel(config).to(device).to(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 8192, (8, 512), device=device)
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad()


SDPA = {f.__name__: f for f in [hand_sdpa_autocast, hf_llama_sdpa_autocast, hf_gpt2_sdpa_bf16]}


# Held out, fourth group: float32 fused attention (memory-efficient attention on an H100),
# committed with the tracer's support for it and before any of them was run on a GPU.


def hand_fp32_sdpa(device):
    """A hand-written causal transformer in float32 calling F.scaled_dot_product_attention
    (head size 64), trained with Adam for two steps."""
    torch.manual_seed(0)
    d, heads, layers, vocab, length = 768, 12, 4, 4096, 384

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = (t.view(b, n, heads, d // heads).transpose(1, 2) for t in self.qkv(self.ln1(x)).split(d, dim=-1))
            x = x + self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, n, d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    embed = nn.Embedding(vocab, d).to(device)
    blocks = nn.ModuleList(Block() for _ in range(layers)).to(device)
    head = nn.Linear(d, vocab).to(device)
    opt = torch.optim.Adam([p for m in (embed, blocks, head) for p in m.parameters()], lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, vocab, (6, length), device=device)
        x = embed(ids)
        for block in blocks:
            x = block(x)
        F.cross_entropy(head(x).flatten(0, 1), ids.flatten()).backward()
        opt.step()
        opt.zero_grad()


def hf_gpt2_fp32_sdpa(device):
    """A Hugging Face GPT-2 (4 layers) built from its config with its default attention (SDPA, with
    attention dropout) in float32, trained with AdamW for two steps."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=4, n_embd=512, n_head=8, vocab_size=8192, n_positions=512)
    model = GPT2LMHeadModel(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 8192, (8, 512), device=device)
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad()


def hf_llama_fp32_sdpa(device):
    """A Hugging Face Llama (4 layers, as many key/value heads as query heads) built from its config
    with its default attention (SDPA) in float32, one AdamW step."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        num_hidden_layers=4,
        hidden_size=512,
        num_attention_heads=8,
        num_key_value_heads=8,
        intermediate_size=1376,
        vocab_size=8192,
        max_position_embeddings=1024,
    )
    model = LlamaForCausalLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 8192, (4, 512), device=device)
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    opt.zero_grad()


SDPA_FP32 = {f.__name__: f for f in [hand_fp32_sdpa, hf_gpt2_fp32_sdpa, hf_llama_fp32_sdpa]}


# Held out, fifth group: float16 autocast with GradScaler, committed with the tracer's handling of
# GradScaler's overflow check and before either was run on a GPU.


def fp16_scaler_transformer(device):
    """A hand-written causal transformer under float16 autocast with GradScaler and AdamW, three
    steps (SDPA inside autocast, the loss in float32)."""
    torch.manual_seed(0)
    d, heads, layers, vocab, length = 640, 10, 4, 6000, 320

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, n, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            x = x + self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, n, d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    embed = nn.Embedding(vocab, d).to(device)
    blocks = nn.ModuleList(Block() for _ in range(layers)).to(device)
    head = nn.Linear(d, vocab, bias=False).to(device)
    opt = torch.optim.AdamW([p for m in (embed, blocks, head) for p in m.parameters()], lr=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(3):
        ids = torch.randint(0, vocab, (8, length), device=device)
        with torch.autocast("cuda", dtype=torch.float16):
            x = embed(ids)
            for block in blocks:
                x = block(x)
            logits = head(x)
        loss = F.cross_entropy(logits.float().flatten(0, 1), ids.flatten())
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)


def hf_bert_fp16_scaler(device):
    """A Hugging Face BERT classifier (6 layers) built from its config with its default attention,
    trained under float16 autocast with GradScaler and AdamW for two steps."""
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(num_hidden_layers=6, hidden_size=512, num_attention_heads=8, intermediate_size=2048, vocab_size=8192)
    model = BertForSequenceClassification(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(2):
        ids = torch.randint(0, 8192, (16, 256), device=device)
        labels = torch.randint(0, 2, (16,), device=device)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(input_ids=ids, labels=labels).loss
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()


SCALER = {f.__name__: f for f in [fp16_scaler_transformer, hf_bert_fp16_scaler]}


# Held out for cuDNN convolution workspaces: committed before the table of measured workspaces
# (scripts/measure_conv_workspaces.py) and these recordings were made. Their shapes are
# torchvision's at batch sizes and image sizes the table measures, so they test whether workspaces
# measured one convolution at a time carry over to whole training steps.


def tv_resnet50_sgd(device):
    """torchvision's ResNet-50 (bottlenecks, 1x1 downsampling) trained with SGD and momentum for two
    steps at 128 pixels."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(num_classes=10).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        x = torch.randn(16, 3, 128, 128, device=device)
        y = torch.randint(0, 10, (16,), device=device)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()


def tv_mobilenet_v2_adamw(device):
    """torchvision's MobileNetV2 (depthwise convolutions) trained with AdamW for two steps at 128
    pixels."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v2(num_classes=10).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        x = torch.randn(32, 3, 128, 128, device=device)
        y = torch.randint(0, 10, (32,), device=device)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()


def tv_resnet18_autocast(device):
    """torchvision's ResNet-18 at 224 pixels under bfloat16 autocast, trained with SGD for two
    steps, then one step of inference under torch.no_grad()."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=100).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        x = torch.randn(32, 3, 224, 224, device=device)
        y = torch.randint(0, 100, (32,), device=device)
        with torch.autocast("cuda" if device != "cpu" else "cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
    with torch.no_grad(), torch.autocast("cuda" if device != "cpu" else "cpu", dtype=torch.bfloat16):
        model(torch.randn(64, 3, 224, 224, device=device))


CONV = {f.__name__: f for f in [tv_resnet50_sgd, tv_mobilenet_v2_adamw, tv_resnet18_autocast]}


# Held out, seventh group: Hugging Face models as users feed them (attention masks made on the CPU
# as a tokenizer makes them, then moved; grouped key heads in float32; T5's learned position
# bias), committed before they were recorded and before the tracer follows them (it refused each
# when this group was written).


def _token_batch(device, batch, length, vocab, padded):
    """input_ids and attention_mask as a tokenizer returns them (on the CPU), moved to `device`:
    the last `padded` tokens of every other sequence are padding."""
    ids = torch.randint(0, vocab, (batch, length))
    mask = torch.ones(batch, length, dtype=torch.long)
    if padded:
        mask[::2, -padded:] = 0
    return ids.to(device), mask.to(device)


def hf_bert_padded_mask(device):
    """A Hugging Face BERT classifier (4 layers, SDPA attention in float32) trained with AdamW for
    two steps on batches with an attention mask: the first all ones, the second with padding."""
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(num_hidden_layers=4, hidden_size=256, num_attention_heads=4, intermediate_size=1024, vocab_size=8192)
    model = BertForSequenceClassification(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for padded in (0, 24):
        ids, mask = _token_batch(device, 16, 256, 8192, padded)
        labels = torch.randint(0, 2, (16,)).to(device)
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()


def hf_llama_gqa_fp32(device):
    """A Hugging Face Llama with grouped key heads (8 query heads, 2 key/value heads) in float32
    with its default attention (SDPA), two AdamW steps, the second with a padded attention mask."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        num_hidden_layers=4, hidden_size=512, num_attention_heads=8, num_key_value_heads=2,
        intermediate_size=1376, vocab_size=8192, max_position_embeddings=1024,
    )
    model = LlamaForCausalLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for padded in (0, 32):
        ids, mask = _token_batch(device, 4, 384, 8192, padded)
        model(input_ids=ids, attention_mask=mask, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad()


def hf_t5_adamw(device):
    """A Hugging Face T5 (2 + 2 layers, learned relative position bias) built from its config,
    trained with AdamW for two steps with an all-ones attention mask."""
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    config = T5Config(d_model=256, d_ff=1024, d_kv=64, num_layers=2, num_decoder_layers=2, num_heads=4, vocab_size=8192, decoder_start_token_id=0)
    model = T5ForConditionalGeneration(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids, mask = _token_batch(device, 8, 256, 8192, 0)
        labels = torch.randint(0, 8192, (8, 64)).to(device)
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()


def hf_gpt2_padded_bf16(device):
    """A Hugging Face GPT-2 (4 layers) in bfloat16 weights, two AdamW steps on a padded batch
    (SDPA with an attention mask)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=4, n_embd=512, n_head=8, vocab_size=8192, n_positions=512)
    model = GPT2LMHeadModel(config).to(device=device, dtype=torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids, mask = _token_batch(device, 8, 384, 8192, 40)
        model(input_ids=ids, attention_mask=mask, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad()


HF_MASKS = {f.__name__: f for f in [hf_bert_padded_mask, hf_llama_gqa_fp32, hf_t5_adamw, hf_gpt2_padded_bf16]}


# Held out, eighth group: programs of the kinds the tracer is checked on but has not seen,
# chosen from the CPU-only sweep of unseen programs (issue 25) among those it traces without a
# refusal, committed before any of them was recorded on a GPU; nothing was changed for them.


def tv_efficientnet_b0_adamw(device):
    """torchvision's EfficientNet-B0 (squeeze-excitation, SiLU, stochastic depth) trained with
    AdamW for two steps at 224 pixels."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.efficientnet_b0(num_classes=10).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        x = torch.randn(16, 3, 224, 224, device=device)
        y = torch.randint(0, 10, (16,), device=device)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()


def tv_densenet121_sgd(device):
    """torchvision's DenseNet-121 (concatenations) trained with SGD and momentum for two steps
    at 224 pixels."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.densenet121(num_classes=10).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        x = torch.randn(8, 3, 224, 224, device=device)
        y = torch.randint(0, 10, (8,), device=device)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()


def tv_swin_t_bf16(device):
    """torchvision's Swin-T (shifted windows) under bfloat16 autocast, trained with AdamW for two
    steps at 224 pixels."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.swin_t(num_classes=10).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        x = torch.randn(8, 3, 224, 224, device=device)
        y = torch.randint(0, 10, (8,), device=device)
        with torch.autocast("cuda" if device != "cpu" else "cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()


def hf_roberta_mlm_padded(device):
    """A Hugging Face RoBERTa masked language model (4 layers) trained with AdamW for two steps,
    the second batch padded."""
    from transformers import RobertaConfig, RobertaForMaskedLM

    torch.manual_seed(0)
    config = RobertaConfig(num_hidden_layers=4, hidden_size=256, num_attention_heads=4, intermediate_size=1024, vocab_size=8192)
    model = RobertaForMaskedLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for padded in (0, 32):
        ids, mask = _token_batch(device, 16, 256, 8192, padded)
        model(input_ids=ids, attention_mask=mask, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad()


def hf_qwen3_checkpointed_bf16(device):
    """A Hugging Face Qwen3 (grouped key heads, 4 layers) under bfloat16 autocast with gradient
    checkpointing, trained with AdamW for two steps."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(
        num_hidden_layers=4, hidden_size=512, num_attention_heads=8, num_key_value_heads=4, head_dim=64,
        intermediate_size=1536, vocab_size=8192, max_position_embeddings=1024,
    )
    model = Qwen3ForCausalLM(config).to(device)
    model.gradient_checkpointing_enable()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids, mask = _token_batch(device, 4, 512, 8192, 0)
        with torch.autocast("cuda" if device != "cpu" else "cpu", dtype=torch.bfloat16):
            loss = model(input_ids=ids, attention_mask=mask, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()


def hf_bart_adamw(device):
    """A Hugging Face BART (2 + 2 layers) built from its config, trained with AdamW for two
    steps."""
    from transformers import BartConfig, BartForConditionalGeneration

    torch.manual_seed(0)
    config = BartConfig(
        encoder_layers=2, decoder_layers=2, d_model=256, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=1024, decoder_ffn_dim=1024, vocab_size=8192, max_position_embeddings=512,
    )
    model = BartForConditionalGeneration(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids, mask = _token_batch(device, 8, 256, 8192, 0)
        labels = torch.randint(0, 8192, (8, 64)).to(device)
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()


def transformer_encoder_padded(device):
    """nn.TransformerEncoder (4 layers, batch first) over an embedding, trained with AdamW for two
    steps on a padded batch, padding ignored by the loss (ignore_index)."""
    torch.manual_seed(0)
    embed = nn.Embedding(8192, 256).to(device)
    layer = nn.TransformerEncoderLayer(256, 8, 1024, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).to(device)
    head = nn.Linear(256, 8192).to(device)
    params = list(embed.parameters()) + list(encoder.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)
    for _ in range(2):
        ids = torch.randint(1, 8192, (16, 128))
        pad = torch.zeros(16, 128, dtype=torch.bool)
        pad[::2, -16:] = True
        targets = ids.masked_fill(pad, -100)
        ids, pad, targets = ids.to(device), pad.to(device), targets.to(device)
        out = head(encoder(embed(ids), src_key_padding_mask=pad))
        F.cross_entropy(out.view(-1, 8192), targets.view(-1), ignore_index=-100).backward()
        opt.step()
        opt.zero_grad()


UNSEEN = {
    f.__name__: f
    for f in [
        tv_efficientnet_b0_adamw,
        tv_densenet121_sgd,
        tv_swin_t_bf16,
        hf_roberta_mlm_padded,
        hf_qwen3_checkpointed_bf16,
        hf_bart_adamw,
        transformer_encoder_padded,
    ]
}


# Held out, ninth group: nn.MultiheadAttention's inference fast path
# (torch._native_multi_head_attention), which the tracer follows from attention.cu's
# scaled-dot-product branch since the commit that adds this group, before either was recorded.


def mha_inference_stack(device):
    """Four pre-norm self-attention blocks (nn.MultiheadAttention, batch first, 8 heads of 32)
    in eval mode under torch.no_grad(): PyTorch's fused inference fast path."""
    torch.manual_seed(0)
    blocks = nn.ModuleList(
        nn.ModuleDict({
            "norm1": nn.LayerNorm(256), "attn": nn.MultiheadAttention(256, 8, batch_first=True),
            "norm2": nn.LayerNorm(256), "mlp": nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256)),
        })
        for _ in range(4)
    ).to(device).eval()
    with torch.no_grad():
        x = torch.randn(32, 197, 256, device=device)
        for block in blocks:
            y = block["norm1"](x)
            x = x + block["attn"](y, y, y, need_weights=False)[0]
            x = x + block["mlp"](block["norm2"](x))


def tv_vit_b_16_inference(device):
    """torchvision's ViT-B/16 in eval mode under torch.no_grad(), a batch of 16 at 224 pixels
    (its patch convolution is outside the measured convolution table)."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.vit_b_16(num_classes=10).to(device).eval()
    with torch.no_grad():
        model(torch.randn(16, 3, 224, 224, device=device))


FASTPATH = {f.__name__: f for f in [mha_inference_stack, tv_vit_b_16_inference]}


# Held out, tenth group: nn.TransformerEncoderLayer's inference fast path
# (torch._transformer_encoder_layer_fwd), followed from transformer.cpp since the commit that adds
# this group, before it was recorded.


def encoder_inference_relu(device):
    """nn.TransformerEncoder (4 post-norm layers, ReLU, batch first) in eval mode under
    torch.no_grad(): PyTorch's fused encoder layer."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(256, 8, 1024, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 4).to(device).eval()
    with torch.no_grad():
        encoder(torch.randn(32, 128, 256, device=device))


def encoder_inference_gelu_norm_first(device):
    """nn.TransformerEncoder (4 pre-norm layers, GELU, batch first) in eval mode under
    torch.no_grad(), two batches."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(384, 6, 1536, batch_first=True, activation="gelu", norm_first=True)
    encoder = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).to(device).eval()
    with torch.no_grad():
        for _ in range(2):
            encoder(torch.randn(16, 196, 384, device=device))


ENCODER_FASTPATH = {f.__name__: f for f in [encoder_inference_relu, encoder_inference_gelu_norm_first]}


# Held out (committed before their GPU runs, and before the tracer ran them): recurrent cells
# unrolled by hand, which the tracer now follows on CUDA's fused path (vramlab/_tracer/rules/cells.py).


def lstm_cell_decoder_adam(device):
    """An LSTMCell decoder unrolled 32 steps over a batch of 64, with a vocabulary head and
    cross-entropy at every step, trained with Adam for two steps."""
    torch.manual_seed(0)
    cell = nn.LSTMCell(512, 1024).to(device)
    embed = nn.Embedding(4000, 512).to(device)
    head = nn.Linear(1024, 4000).to(device)
    opt = torch.optim.Adam([*cell.parameters(), *embed.parameters(), *head.parameters()], lr=1e-3)
    for _ in range(2):
        tokens = torch.randint(0, 4000, (33, 64), device=device)
        h = torch.zeros(64, 1024, device=device)
        c = torch.zeros(64, 1024, device=device)
        loss = 0
        for t in range(32):
            h, c = cell(embed(tokens[t]), (h, c))
            loss = loss + nn.functional.cross_entropy(head(h), tokens[t + 1])
        loss.backward()
        opt.step()
        opt.zero_grad()


def gru_cell_autocast_bf16(device):
    """A GRUCell unrolled 48 steps under bf16 autocast, its own zero state, trained with AdamW."""
    torch.manual_seed(0)
    cell = nn.GRUCell(256, 768).to(device)
    head = nn.Linear(768, 256).to(device)
    opt = torch.optim.AdamW([*cell.parameters(), *head.parameters()], lr=1e-3)
    for _ in range(2):
        x = torch.randn(48, 128, 256, device=device)
        with torch.autocast(device_type="cuda" if device != "cpu" else "cpu", dtype=torch.bfloat16):
            h = None
            outs = []
            for t in range(48):
                h = cell(x[t], h)
                outs.append(head(h))
            loss = torch.stack(outs).float().square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def stacked_cells_dropout_sgd(device):
    """Two stacked LSTMCells and an RNNCell with dropout between them, unrolled 40 steps, trained
    with SGD and momentum."""
    torch.manual_seed(0)
    first, second = nn.LSTMCell(300, 600).to(device), nn.LSTMCell(600, 600).to(device)
    third = nn.RNNCell(600, 200, nonlinearity="relu").to(device)
    drop = nn.Dropout(0.2)
    params = [*first.parameters(), *second.parameters(), *third.parameters()]
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    for _ in range(2):
        x = torch.randn(40, 96, 300, device=device)
        state1 = state2 = None
        h3 = None
        total = 0
        for t in range(40):
            state1 = first(x[t], state1)
            state2 = second(drop(state1[0]), state2)
            h3 = third(drop(state2[0]), h3)
            total = total + h3.sum()
        total.backward()
        opt.step()
        opt.zero_grad()


CELLS = {f.__name__: f for f in [lstm_cell_decoder_adam, gru_cell_autocast_bf16, stacked_cells_dropout_sgd]}


# Held out (committed before their GPU runs, and before the tracer ran them): the paths this
# session's sweeps opened: attention's general branch and cuDNN branch in inference, F.linear's
# in-place bias on transposed inputs in training, a checkpoint loaded onto the GPU, foreach
# gradient clipping.


def mha_padding_inference_weights(device):
    """Four nn.MultiheadAttention blocks (batch_first) in inference over padded batches, asking
    for the attention weights (the default), with a key padding mask."""
    torch.manual_seed(0)
    blocks = nn.ModuleList(nn.MultiheadAttention(512, 8, batch_first=True) for _ in range(4)).to(device).eval()
    x = torch.randn(16, 200, 512, device=device)
    padding = torch.zeros(16, 200, dtype=torch.bool, device=device)
    padding[8:, 150:] = True
    with torch.no_grad():
        for _ in range(2):
            h = x
            for block in blocks:
                h, weights = block(h, h, h, key_padding_mask=padding)


def vit_half_inference(device):
    """torchvision's ViT-B/16 in half precision, inference (the fast path's cuDNN attention)."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.vit_b_16(weights=None).to(device).half().eval()
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(16, 3, 224, 224, device=device, dtype=torch.float16))


def mha_batch_first_training_clipped(device):
    """A hand-written transformer with nn.MultiheadAttention(batch_first=True), trained with AdamW
    and gradient clipping (foreach), after resuming from a checkpoint loaded onto the GPU."""
    import io

    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(384, 6, batch_first=True)
            self.norm1, self.norm2 = nn.LayerNorm(384), nn.LayerNorm(384)
            self.ff = nn.Sequential(nn.Linear(384, 1536), nn.GELU(), nn.Linear(1536, 384))

        def forward(self, x):
            h = self.norm1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.ff(self.norm2(x))

    model = nn.Sequential(*[Block() for _ in range(4)])
    saved = io.BytesIO()
    torch.save(model.state_dict(), saved)
    saved.seek(0)
    model = model.to(device)
    model.load_state_dict(torch.load(saved, map_location=device))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        x = torch.randn(12, 128, 384, device=device)
        model(x).square().mean().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)


def encoder_layer_padding_bf16(device):
    """An nn.TransformerEncoderLayer in bf16 inference given a key padding mask (its fused layer
    with the general attention branch)."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(768, 12, 3072, batch_first=True).to(device, torch.bfloat16).eval()
    x = torch.randn(8, 256, 768, device=device, dtype=torch.bfloat16)
    padding = torch.zeros(8, 256, dtype=torch.bool, device=device)
    padding[4:, 180:] = True
    with torch.no_grad():
        for _ in range(2):
            layer(x, src_key_padding_mask=padding)


FASTPATH_GENERAL = {
    f.__name__: f
    for f in [mha_padding_inference_weights, vit_half_inference, mha_batch_first_training_clipped, encoder_layer_padding_bf16]
}


from trace_workloads_35 import ISSUE35  # noqa: E402
from trace_workloads_35b import ISSUE35B  # noqa: E402
from trace_workloads_35c import ISSUE35C  # noqa: E402
from trace_workloads_35d import ISSUE35D  # noqa: E402
from trace_workloads_35e import ISSUE35E  # noqa: E402
from trace_workloads_35f import ISSUE35F  # noqa: E402
from trace_workloads_35g import ISSUE35G, ISSUE35G_SEEN  # noqa: E402
from trace_workloads_35h import ISSUE35H  # noqa: E402
from trace_workloads_35i import ISSUE35I  # noqa: E402
from trace_workloads_35j import ISSUE35J  # noqa: E402
from trace_workloads_35k import ISSUE35K  # noqa: E402
from trace_workloads_35l import ISSUE35L  # noqa: E402
from trace_workloads_35m import ISSUE35M  # noqa: E402
from trace_workloads_35n import ISSUE35N  # noqa: E402
from trace_workloads_35o import ISSUE35O  # noqa: E402
from trace_workloads_35p import ISSUE35P  # noqa: E402
from trace_workloads_35q import ISSUE35Q  # noqa: E402
from trace_workloads_35r import ISSUE35R  # noqa: E402
from trace_workloads_35s import ISSUE35S  # noqa: E402
from trace_workloads_35t import ISSUE35T  # noqa: E402
from trace_workloads_35u import ISSUE35U  # noqa: E402
from trace_workloads_35v import ISSUE35V  # noqa: E402
from trace_workloads_35w import ISSUE35W  # noqa: E402
from trace_workloads_35x import ISSUE35X  # noqa: E402
from trace_workloads_35y import ISSUE35Y  # noqa: E402
from trace_workloads_35z import ISSUE35Z  # noqa: E402
from trace_workloads_35aa import ISSUE35AA  # noqa: E402

# Each group by the name scripts/record_trace_workloads.py (VRAMLAB_HOLDOUT=NAME) and
# scripts/trace_table.py (--NAME, '-' for '_') know it by; and every workload of every group.
GROUPS = {
    "": WORKLOADS,
    "holdout": HOLDOUT,
    "autocast": AUTOCAST,
    "sdpa": SDPA,
    "sdpa_fp32": SDPA_FP32,
    "scaler": SCALER,
    "conv": CONV,
    "hf_masks": HF_MASKS,
    "unseen": UNSEEN,
    "fastpath": FASTPATH,
    "encoder_fastpath": ENCODER_FASTPATH,
    "cells": CELLS,
    "fastpath_general": FASTPATH_GENERAL,
    "issue35": ISSUE35,
    "issue35b": ISSUE35B,
    "issue35c": ISSUE35C,
    "issue35d": ISSUE35D,
    "issue35e": ISSUE35E,
    "issue35f": ISSUE35F,
    "issue35g": ISSUE35G,
    "issue35g_seen": ISSUE35G_SEEN,
    "issue35h": ISSUE35H,
    "issue35i": ISSUE35I,
    "issue35j": ISSUE35J,
    "issue35k": ISSUE35K,
    "issue35l": ISSUE35L,
    "issue35m": ISSUE35M,
    "issue35n": ISSUE35N,
    "issue35o": ISSUE35O,
    "issue35p": ISSUE35P,
    "issue35q": ISSUE35Q,
    "issue35r": ISSUE35R,
    "issue35s": ISSUE35S,
    "issue35t": ISSUE35T,
    "issue35u": ISSUE35U,
    "issue35v": ISSUE35V,
    "issue35w": ISSUE35W,
    "issue35x": ISSUE35X,
    "issue35y": ISSUE35Y,
    "issue35z": ISSUE35Z,
    "issue35aa": ISSUE35AA,
}
ALL = {name: workload for group in GROUPS.values() for name, workload in group.items()}
