"""Fifteenth held-out group of issue 35 (group ISSUE35O): sixteen programs of the kinds users bring
most (Hugging Face language models from configs, a mixture of experts, a static-cache generate, a
timm ViT with checkpointing, a CIFAR ResNet, an audio CNN over `torch.stft`, a recommender's large
embedding, `torch.func` ensembles, `torch.distributions`, the Transformer encoder's inference fast
path), written after ISSUE35N's figures and committed before they were recorded on a GPU (an H200)
or compared with anything.

Each is a function of the device, recorded by scripts/record_trace_workloads.py
(VRAMLAB_HOLDOUT=issue35o). Traced on the CPU before recording only to see that each program is
itself valid."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def hf_qwen3_grad_accumulation_fused_adamw(device):
    """Hugging Face Qwen3 from a small config (4 layers, hidden 512, 8 heads over 4 key-value heads,
    vocabulary 32,000), bf16 autocast, 4 micro-batches of 4x256 tokens per step, fused AdamW,
    gradients clipped to 1.0, two steps."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=32000, hidden_size=512, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=8,
                         num_key_value_heads=4, head_dim=64, max_position_embeddings=512)
    model = Qwen3ForCausalLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
    for _ in range(2):
        for _ in range(4):
            ids = torch.randint(0, 32000, (4, 256), device=device)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss / 4
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_mixtral_moe_bf16_weights(device):
    """Hugging Face Mixtral from a small config (2 layers, hidden 256, 4 experts, top 2), weights in
    bfloat16, batch 4 of 128 tokens, AdamW, two steps."""
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(0)
    config = MixtralConfig(vocab_size=8000, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=256)
    model = MixtralForCausalLM(config).to(device, dtype=torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 8000, (4, 128), device=device)
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_llama_static_cache_greedy_generate(device):
    """Hugging Face Llama from a small config in bfloat16, greedy generate of exactly 24 new tokens
    (min and max) after 4 prompts of 64 tokens, with the static key-value cache."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=16000, hidden_size=512, intermediate_size=1376, num_hidden_layers=4, num_attention_heads=8,
                         num_key_value_heads=8, max_position_embeddings=256)
    model = LlamaForCausalLM(config).to(device, dtype=torch.bfloat16).eval()
    prompts = torch.randint(0, 16000, (4, 64), device=device)
    with torch.no_grad():
        model.generate(prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=24, min_new_tokens=24, do_sample=False,
                       cache_implementation="static", pad_token_id=0)


def hf_roberta_classifier_warmup_bf16(device):
    """Hugging Face RoBERTa for sequence classification from a small config (6 layers, hidden
    384), batch 16 of 128 tokens padded to varying lengths with an attention mask, bf16 autocast,
    AdamW with transformers' linear warm-up schedule, two steps."""
    from transformers import RobertaConfig, RobertaForSequenceClassification, get_linear_schedule_with_warmup

    torch.manual_seed(0)
    config = RobertaConfig(vocab_size=30000, hidden_size=384, num_hidden_layers=6, num_attention_heads=6, intermediate_size=1536,
                           max_position_embeddings=514, num_labels=3)
    model = RobertaForSequenceClassification(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
    schedule = get_linear_schedule_with_warmup(opt, num_warmup_steps=1, num_training_steps=10)
    lengths = torch.tensor([128 - 6 * i for i in range(16)])
    mask = (torch.arange(128)[None, :] < lengths[:, None]).long().to(device)
    for _ in range(2):
        ids = torch.randint(3, 30000, (16, 128), device=device) * mask + (1 - mask)
        labels = torch.randint(0, 3, (16,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        opt.step()
        schedule.step()
        opt.zero_grad(set_to_none=True)


def transformer_encoder_fast_path_padded_inference(device):
    """nn.TransformerEncoder (4 layers, d_model 256, batch_first, nested tensors enabled) in
    evaluation under torch.inference_mode, batch 32 of up to 128 tokens with a key padding mask
    (the fast path's nested tensors), three batches of other lengths."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(256, 8, dim_feedforward=1024, batch_first=True)
    encoder = nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=True).to(device).eval()
    with torch.inference_mode():
        for longest in (128, 96, 112):
            lengths = torch.tensor([longest - 3 * i for i in range(32)])
            padding = torch.arange(longest)[None, :] >= lengths[:, None]
            x = torch.randn(32, longest, 256, device=device)
            encoder(x, src_key_padding_mask=padding.to(device)).sum()


def timm_vit_small_grad_checkpointing_bf16(device):
    """timm's ViT-Small/16 at 224x224 with timm's gradient checkpointing switched on, batch 32, bf16
    autocast, AdamW, two steps."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("vit_small_patch16_224", num_classes=100).to(device)
    model.set_grad_checkpointing(True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    for _ in range(2):
        x, y = torch.randn(32, 3, 224, 224, device=device), torch.randint(0, 100, (32,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def cifar_resnet20_channels_last_onecycle(device):
    """A hand-written CIFAR ResNet-20 (16, 32, 64 channels, 3 blocks per stage) in channels-last,
    batch 128 of 3x32x32, bf16 autocast, SGD with OneCycleLR, three steps."""
    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
            self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
            self.short = nn.Sequential() if stride == 1 and cin == cout else nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = F.relu(self.bn1(self.conv1(x)))
            return F.relu(self.bn2(self.conv2(y)) + self.short(x))

    layers = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    cin = 16
    for cout, stride in ((16, 1), (32, 2), (64, 2)):
        for i in range(3):
            layers.append(Block(cin, cout, stride if i == 0 else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)]
    model = nn.Sequential(*layers).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    schedule = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=3)
    for _ in range(3):
        x = torch.randn(128, 3, 32, 32, device=device).contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, 10, (128,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        schedule.step()
        opt.zero_grad(set_to_none=True)


def stft_log_spectrogram_cnn(device):
    """An audio classifier: torch.stft (n_fft 512, hop 128, Hann window) of 16 one-second clips at
    16 kHz, log magnitude, a four-layer 2-D CNN, AdamW in float32, two steps."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(128, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 35),
    ).to(device)
    window = torch.hann_window(512, device=device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        audio, y = torch.randn(16, 16000, device=device), torch.randint(0, 35, (16,), device=device)
        spec = torch.stft(audio, n_fft=512, hop_length=128, window=window, return_complex=True).abs().add(1e-6).log()
        F.cross_entropy(model(spec.unsqueeze(1)), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def timm_vit_base_fp16_inference_with_remainder(device):
    """timm's ViT-Base/16 in float16 (model.half()), inference under torch.inference_mode over 100
    images in batches of 48 (the last of 4), predictions gathered with torch.cat."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("vit_base_patch16_224", num_classes=1000).to(device).half().eval()
    images = torch.randn(100, 3, 224, 224, dtype=torch.float16)
    predictions = []
    with torch.inference_mode():
        for start in range(0, 100, 48):
            batch = images[start:start + 48].to(device)
            predictions.append(model(batch).softmax(dim=-1).argmax(dim=-1))
        torch.cat(predictions)


def conditional_vae_distributions_kl(device):
    """A conditional VAE of Linear layers over flattened 28x28 images with 10 classes, its posterior
    and prior as torch.distributions.Normal, rsample and kl_divergence, batch 256, Adam, two
    steps."""
    from torch.distributions import Normal, kl_divergence

    torch.manual_seed(0)
    encoder = nn.Sequential(nn.Linear(784 + 10, 512), nn.ReLU(), nn.Linear(512, 2 * 32)).to(device)
    decoder = nn.Sequential(nn.Linear(32 + 10, 512), nn.ReLU(), nn.Linear(512, 784)).to(device)
    opt = torch.optim.Adam(list(encoder.parameters()) + list(decoder.parameters()), lr=1e-3)
    for _ in range(2):
        x = torch.rand(256, 784, device=device)
        c = F.one_hot(torch.randint(0, 10, (256,), device=device), 10).float()
        mean, log_std = encoder(torch.cat([x, c], 1)).chunk(2, dim=1)
        posterior = Normal(mean, log_std.exp())
        z = posterior.rsample()
        logits = decoder(torch.cat([z, c], 1))
        kl = kl_divergence(posterior, Normal(torch.zeros_like(mean), torch.ones_like(mean))).sum(1)
        loss = (F.binary_cross_entropy_with_logits(logits, x, reduction="none").sum(1) + kl).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def knn_retrieval_cdist_topk_chunks(device):
    """Nearest-neighbour retrieval: 50,000 normalised 256-d keys in float16, 4,096 queries in
    chunks of 1,024, torch.cdist and topk(10) per chunk, results concatenated, no gradients."""
    torch.manual_seed(0)
    keys = F.normalize(torch.randn(50000, 256, device=device), dim=1).half()
    queries = F.normalize(torch.randn(4096, 256, device=device), dim=1).half()
    found = []
    with torch.no_grad():
        for chunk in queries.split(1024):
            distances = torch.cdist(chunk.float(), keys.float())
            found.append(distances.topk(10, dim=1, largest=False).indices)
    torch.cat(found)


def hf_gpt2_ignored_padding_labels_checkpointing(device):
    """Hugging Face GPT-2 from a small config (6 layers, hidden 512), gradient checkpointing by
    `gradient_checkpointing_enable()`, batch 8 of 512 tokens whose padded tail is labelled -100,
    bf16 autocast, AdamW, two steps."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=50257, n_positions=512, n_embd=512, n_layer=6, n_head=8)
    model = GPT2LMHeadModel(config).to(device)
    model.gradient_checkpointing_enable()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    lengths = torch.tensor([512 - 40 * i for i in range(8)])
    padded = torch.arange(512)[None, :] >= lengths[:, None]
    for _ in range(2):
        ids = torch.randint(0, 50257, (8, 512))
        labels = ids.masked_fill(padded, -100)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids.to(device), attention_mask=(~padded).long().to(device), labels=labels.to(device)).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def func_vmap_ensemble_of_mlps(device):
    """An ensemble of 8 MLPs (784-1024-1024-10) stacked by torch.func.stack_module_state and run
    with vmap over functional_call on one batch of 512, the stacked parameters trained by Adam,
    two steps."""
    import copy

    from torch.func import functional_call, stack_module_state, vmap

    torch.manual_seed(0)
    members = [nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(device) for _ in range(8)]
    params, buffers = stack_module_state(members)
    base = copy.deepcopy(members[0]).to("meta")

    def one(p, b, x):
        return functional_call(base, (p, b), (x,))

    opt = torch.optim.Adam(params.values(), lr=1e-3)
    for _ in range(2):
        x, y = torch.randn(512, 784, device=device), torch.randint(0, 10, (512,), device=device)
        logits = vmap(one, in_dims=(0, 0, None))(params, buffers, x)
        F.cross_entropy(logits.reshape(-1, 10), y.repeat(8)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def wide_mlp_bf16_weights_adamw(device):
    """A wide MLP (4,096 to 8,192 to 8,192 to 4,096, GELU) with its weights in bfloat16, batch 1,024,
    mean squared error, unfused single-tensor AdamW (foreach=False), two steps."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4096, 8192), nn.GELU(), nn.Linear(8192, 8192), nn.GELU(), nn.Linear(8192, 4096)).to(device, torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    for _ in range(2):
        x = torch.randn(1024, 4096, device=device, dtype=torch.bfloat16)
        F.mse_loss(model(x), x).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def sdpa_dropout_padding_mask_transformer(device):
    """A hand-written 4-layer pre-norm Transformer encoder whose attention is
    F.scaled_dot_product_attention with dropout 0.1 and a boolean padding mask broadcast over heads,
    batch 16 of 256 tokens, d_model 512, bf16 autocast, AdamW, two steps."""
    torch.manual_seed(0)

    class Layer(nn.Module):
        def __init__(self, d=512, heads=8):
            super().__init__()
            self.heads = heads
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x, keep):
            b, t, d = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=0.1 if self.training else 0.0)
            x = x + self.out(a.transpose(1, 2).reshape(b, t, d))
            return x + self.ff(self.norm2(x))

    embed = nn.Embedding(10000, 512).to(device)
    layers = nn.ModuleList(Layer() for _ in range(4)).to(device)
    head = nn.Linear(512, 10000).to(device)
    opt = torch.optim.AdamW(list(embed.parameters()) + list(layers.parameters()) + list(head.parameters()), lr=3e-4)
    lengths = torch.tensor([256 - 8 * i for i in range(16)])
    keep = (torch.arange(256)[None, :] < lengths[:, None]).to(device)[:, None, None, :]
    for _ in range(2):
        ids = torch.randint(0, 10000, (16, 256), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            x = embed(ids)
            for layer in layers:
                x = layer(x, keep)
            loss = F.cross_entropy(head(x).flatten(0, 1), ids.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def large_embedding_recommender_dense_adam(device):
    """A recommender: a 1,000,000 x 64 item embedding and a 200,000 x 64 user embedding (dense
    gradients), dot-product scores against 4,096 sampled items per batch of 2,048 users, softmax
    cross entropy, Adam, two steps."""
    torch.manual_seed(0)
    items, users = nn.Embedding(1_000_000, 64).to(device), nn.Embedding(200_000, 64).to(device)
    opt = torch.optim.Adam(list(items.parameters()) + list(users.parameters()), lr=1e-3)
    for _ in range(2):
        u = torch.randint(0, 200_000, (2048,), device=device)
        candidates = torch.randint(0, 1_000_000, (4096,), device=device)
        scores = users(u) @ items(candidates).T
        F.cross_entropy(scores, torch.randint(0, 4096, (2048,), device=device)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


ISSUE35O = {
    f.__name__: f
    for f in [
        hf_qwen3_grad_accumulation_fused_adamw, hf_mixtral_moe_bf16_weights, hf_llama_static_cache_greedy_generate, hf_roberta_classifier_warmup_bf16,
        transformer_encoder_fast_path_padded_inference, timm_vit_small_grad_checkpointing_bf16, cifar_resnet20_channels_last_onecycle,
        stft_log_spectrogram_cnn, timm_vit_base_fp16_inference_with_remainder, conditional_vae_distributions_kl, knn_retrieval_cdist_topk_chunks,
        hf_gpt2_ignored_padding_labels_checkpointing, func_vmap_ensemble_of_mlps, wide_mlp_bf16_weights_adamw, sdpa_dropout_padding_mask_transformer,
        large_embedding_recommender_dense_adam,
    ]
}
