"""Third held-out group of issue 35 (group ISSUE35C): programs of kinds users run, written after
the second group's mends (beam search of a fixed length) and committed before they were recorded
on a GPU or traced: Mistral with a sliding window under bf16 autocast, OPT under fp16 autocast
with a GradScaler, BART trained as a seq2seq model, Llama beam search with a cache, GPT-NeoX
sampling of a fixed length, a Hugging Face ViT classifier under bf16 autocast, timm's DeiT-Tiny,
torchvision's RegNetY-400MF, a hand-written language model with an EMA copy (AveragedModel), a
frozen BERT with a trained head, peft LoRA on a Llama with bf16 weights, a DLRM-style recommender
with several EmbeddingBag tables and Adagrad, a DDPM on an MLP with its sampling loop, a WGAN-GP
(double backward for the gradient penalty), a hand-written loop with OneCycleLR, clipping and
zero_grad(set_to_none=False), DistilBERT inference at batches of three sizes under
inference_mode, and a U-Net with GroupNorm trained with Adam. Each is a function of the device,
recorded by scripts/record_trace_workloads.py (VRAMLAB_HOLDOUT=issue35c)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def hf_mistral_sliding_bf16(device):
    """A Hugging Face Mistral (4 layers, sliding window 128 over 256 tokens) from its config,
    AdamW under bf16 autocast, two steps at batch 4."""
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    config = MistralConfig(
        hidden_size=512, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
        vocab_size=12000, max_position_embeddings=512, sliding_window=128,
    )
    model = MistralForCausalLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 12000, (4, 256), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_opt_fp16_scaler(device):
    """A Hugging Face OPT (4 layers) trained under fp16 autocast with a GradScaler and AdamW, two
    steps at batch 8 x 128."""
    from transformers import OPTConfig, OPTForCausalLM

    torch.manual_seed(0)
    config = OPTConfig(hidden_size=512, ffn_dim=2048, num_hidden_layers=4, num_attention_heads=8, vocab_size=10000, max_position_embeddings=256, word_embed_proj_dim=512)
    model = OPTForCausalLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(2):
        ids = torch.randint(2, 10000, (8, 128), device=device)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(input_ids=ids, labels=ids).loss
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)


def hf_bart_seq2seq_adamw(device):
    """A Hugging Face BART (2+2 layers) trained as a seq2seq model with labels, AdamW, two steps
    at batch 8, source 128 and target 64 tokens."""
    from transformers import BartConfig, BartForConditionalGeneration

    torch.manual_seed(0)
    config = BartConfig(
        d_model=512, encoder_layers=2, decoder_layers=2, encoder_attention_heads=8, decoder_attention_heads=8,
        encoder_ffn_dim=2048, decoder_ffn_dim=2048, vocab_size=10000, max_position_embeddings=256,
    )
    model = BartForConditionalGeneration(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        src = torch.randint(3, 10000, (8, 128), device=device)
        tgt = torch.randint(3, 10000, (8, 64), device=device)
        model(input_ids=src, attention_mask=torch.ones_like(src), labels=tgt).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_llama_beam_generate(device):
    """Beam search (4 beams, 2 returned) of a Hugging Face Llama with min_new_tokens ==
    max_new_tokens and the default dynamic cache, in eval mode."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=512, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4, vocab_size=8000, bos_token_id=1, eos_token_id=2)
    model = LlamaForCausalLM(config).to(device).eval()
    ids = torch.randint(3, 8000, (3, 40), device=device)
    with torch.no_grad():
        model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), num_beams=4, num_return_sequences=2, min_new_tokens=20, max_new_tokens=20, do_sample=False, pad_token_id=0)


def hf_gpt_neox_sampling_generate(device):
    """Top-k/top-p sampling of a Hugging Face GPT-NeoX with min_new_tokens == max_new_tokens, bf16
    weights."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(0)
    config = GPTNeoXConfig(hidden_size=512, intermediate_size=2048, num_hidden_layers=4, num_attention_heads=8, vocab_size=8000, max_position_embeddings=256, bos_token_id=0, eos_token_id=0)
    model = GPTNeoXForCausalLM(config).to(device=device, dtype=torch.bfloat16).eval()
    ids = torch.randint(1, 8000, (6, 32), device=device)
    with torch.no_grad():
        model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True, top_k=50, top_p=0.9, temperature=0.8, min_new_tokens=32, max_new_tokens=32, pad_token_id=0)


def hf_vit_classifier_bf16(device):
    """A Hugging Face ViT classifier (6 layers, 224 px, patch 16) trained under bf16 autocast with
    AdamW, two steps at batch 16."""
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    config = ViTConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=6, intermediate_size=1536, image_size=224, patch_size=16, num_labels=100)
    model = ViTForImageClassification(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        x = torch.randn(16, 3, 224, 224, device=device)
        y = torch.randint(0, 100, (16,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(pixel_values=x, labels=y).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def timm_deit_tiny_adamw(device):
    """timm's DeiT-Tiny (patch 16, 224 px) in float32 with AdamW and label smoothing, two steps at
    batch 32."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("deit_tiny_patch16_224", pretrained=False, num_classes=100).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        x = torch.randn(32, 3, 224, 224, device=device)
        y = torch.randint(0, 100, (32,), device=device)
        F.cross_entropy(model(x), y, label_smoothing=0.1).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def tv_regnet_y_400mf_sgd(device):
    """torchvision's RegNetY-400MF (grouped convolutions, squeeze-excitation) with SGD and momentum,
    two steps at batch 32 of 160 px."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.regnet_y_400mf(num_classes=100).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5)
    for _ in range(2):
        x = torch.randn(32, 3, 160, 160, device=device)
        y = torch.randint(0, 100, (32,), device=device)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


class _TinyLM(nn.Module):
    def __init__(self, vocab=8000, width=512, layers=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        layer = nn.TransformerEncoderLayer(width, 8, 4 * width, dropout=0.1, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocab)

    def forward(self, ids):
        n = ids.shape[1]
        mask = torch.triu(torch.full((n, n), float("-inf"), device=ids.device), diagonal=1)
        return self.head(self.blocks(self.embed(ids), mask=mask, is_causal=True))


def ema_transformer_lm(device):
    """A hand-written causal transformer language model with an exponential moving average of its
    weights (torch.optim.swa_utils.AveragedModel with get_ema_multi_avg_fn), AdamW, three steps
    at batch 8 x 256."""
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

    torch.manual_seed(0)
    model = _TinyLM().to(device)
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(3):
        ids = torch.randint(0, 8000, (8, 256), device=device)
        logits = model(ids[:, :-1])
        F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        ema.update_parameters(model)


def hf_bert_frozen_linear_probe(device):
    """A Hugging Face BERT whose weights are frozen (requires_grad False, eval mode), its pooled
    output fed to a trained linear head with SGD, three steps at batch 32 x 128."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, intermediate_size=2048, vocab_size=12000)
    base = BertModel(config).to(device).eval()
    base.requires_grad_(False)
    head = nn.Linear(512, 20).to(device)
    opt = torch.optim.SGD(head.parameters(), lr=0.1)
    for _ in range(3):
        ids = torch.randint(0, 12000, (32, 128), device=device)
        with torch.no_grad():
            pooled = base(input_ids=ids, attention_mask=torch.ones_like(ids)).pooler_output
        F.cross_entropy(head(pooled), torch.randint(0, 20, (32,), device=device)).backward()
        opt.step()
        opt.zero_grad()


def peft_lora_llama_bf16_weights(device):
    """peft LoRA (rank 16 on every projection) of a Hugging Face Llama with bf16 weights, AdamW over
    the adapters, two steps at batch 8 x 256."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=768, intermediate_size=2048, num_hidden_layers=4, num_attention_heads=12, num_key_value_heads=4, vocab_size=16000)
    base = LlamaForCausalLM(config).to(device=device, dtype=torch.bfloat16)
    model = get_peft_model(base, LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 16000, (8, 256), device=device)
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


class _DLRM(nn.Module):
    def __init__(self, tables=(200_000, 50_000, 10_000, 1_000), width=64):
        super().__init__()
        self.bags = nn.ModuleList(nn.EmbeddingBag(n, width, mode="sum") for n in tables)
        self.bottom = nn.Sequential(nn.Linear(13, 256), nn.ReLU(), nn.Linear(256, width), nn.ReLU())
        pairs = (len(tables) + 1) * len(tables) // 2
        self.top = nn.Sequential(nn.Linear(width + pairs, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 1))

    def forward(self, dense, indices, offsets):
        features = [self.bottom(dense)] + [bag(i, o) for bag, i, o in zip(self.bags, indices, offsets)]
        stacked = torch.stack(features, dim=1)
        interactions = torch.bmm(stacked, stacked.transpose(1, 2))
        rows, cols = torch.triu_indices(stacked.shape[1], stacked.shape[1], offset=1)
        return self.top(torch.cat([features[0], interactions[:, rows, cols]], dim=1))


def dlrm_embeddingbag_adagrad(device):
    """A DLRM-style recommender: four EmbeddingBag tables (sum of 20 ids per bag), a bottom and a
    top MLP, pairwise dot interactions, BCE with logits, Adagrad, three steps at batch 2048."""
    torch.manual_seed(0)
    model = _DLRM().to(device)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.01)
    for _ in range(3):
        dense = torch.randn(2048, 13, device=device)
        indices = [torch.randint(0, bag.num_embeddings, (2048 * 20,), device=device) for bag in model.bags]
        offsets = [torch.arange(0, 2048 * 20, 20, device=device) for _ in model.bags]
        y = torch.randint(0, 2, (2048, 1), device=device).float()
        F.binary_cross_entropy_with_logits(model(dense, indices, offsets), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


class _Denoiser(nn.Module):
    def __init__(self, dim=256, hidden=1024, steps=1000):
        super().__init__()
        self.time = nn.Embedding(steps, hidden)
        self.inp = nn.Linear(dim, hidden)
        self.body = nn.Sequential(nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU())
        self.out = nn.Linear(hidden, dim)

    def forward(self, x, t):
        return self.out(self.body(self.inp(x) + self.time(t)))


def ddpm_mlp_with_sampling(device):
    """A DDPM on 256-dimensional data with an MLP denoiser: two training steps at batch 4096 (noise
    at random timesteps, MSE on the noise, AdamW), then 20 steps of ancestral sampling of 512
    points under no_grad."""
    torch.manual_seed(0)
    steps = 1000
    betas = torch.linspace(1e-4, 0.02, steps, device=device)
    alphas = 1 - betas
    bars = torch.cumprod(alphas, dim=0)
    model = _Denoiser(steps=steps).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        x0 = torch.randn(4096, 256, device=device)
        t = torch.randint(0, steps, (4096,), device=device)
        noise = torch.randn_like(x0)
        bar = bars[t].unsqueeze(1)
        xt = bar.sqrt() * x0 + (1 - bar).sqrt() * noise
        F.mse_loss(model(xt, t), noise).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    with torch.no_grad():
        x = torch.randn(512, 256, device=device)
        for i in reversed(range(0, steps, steps // 20)):
            t = torch.full((512,), i, device=device, dtype=torch.long)
            eps = model(x, t)
            x = (x - betas[i] / (1 - bars[i]).sqrt() * eps) / alphas[i].sqrt()
            if i > 0:
                x = x + betas[i].sqrt() * torch.randn_like(x)


def wgan_gp_mlp(device):
    """A WGAN-GP on MLPs: the critic's gradient penalty takes the gradient of its output with
    respect to interpolated inputs (create_graph=True, a double backward), Adam for both, two
    critic steps and one generator step, twice, at batch 1024."""
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(128, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 784), nn.Tanh()).to(device)
    critic = nn.Sequential(nn.Linear(784, 1024), nn.LeakyReLU(0.2), nn.Linear(1024, 1024), nn.LeakyReLU(0.2), nn.Linear(1024, 1)).to(device)
    g_opt = torch.optim.Adam(gen.parameters(), lr=1e-4, betas=(0.0, 0.9))
    c_opt = torch.optim.Adam(critic.parameters(), lr=1e-4, betas=(0.0, 0.9))
    for _ in range(2):
        for _ in range(2):
            real = torch.rand(1024, 784, device=device) * 2 - 1
            fake = gen(torch.randn(1024, 128, device=device)).detach()
            alpha = torch.rand(1024, 1, device=device)
            mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
            grad = torch.autograd.grad(critic(mixed).sum(), mixed, create_graph=True)[0]
            penalty = ((grad.norm(2, dim=1) - 1) ** 2).mean()
            loss = critic(fake).mean() - critic(real).mean() + 10 * penalty
            c_opt.zero_grad(set_to_none=True)
            loss.backward()
            c_opt.step()
        g_opt.zero_grad(set_to_none=True)
        (-critic(gen(torch.randn(1024, 128, device=device))).mean()).backward()
        g_opt.step()


def hand_loop_onecycle_clip(device):
    """A hand-written training loop over an MLP: OneCycleLR, gradient clipping by norm,
    zero_grad(set_to_none=False) (the gradients stay allocated and are zeroed), four steps at
    batch 2048 with a validation pass under no_grad after the second."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 2048), nn.BatchNorm1d(2048), nn.ReLU(), nn.Dropout(0.2), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=4)
    for step in range(4):
        model.train()
        x = torch.randn(2048, 784, device=device)
        y = torch.randint(0, 10, (2048,), device=device)
        opt.zero_grad(set_to_none=False)
        F.cross_entropy(model(x), y).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step == 1:
            model.eval()
            with torch.no_grad():
                model(torch.randn(4096, 784, device=device)).argmax(dim=1)


def hf_distilbert_inference_batches(device):
    """A Hugging Face DistilBERT classifier with bf16 weights, inference under inference_mode at
    batches of 8, 64 and 32 sequences of 256 tokens (the cache keeps what the largest left)."""
    from transformers import DistilBertConfig, DistilBertForSequenceClassification

    torch.manual_seed(0)
    config = DistilBertConfig(dim=768, hidden_dim=3072, n_layers=4, n_heads=12, vocab_size=16000, num_labels=5)
    model = DistilBertForSequenceClassification(config).to(device=device, dtype=torch.bfloat16).eval()
    with torch.inference_mode():
        for batch in (8, 64, 32):
            ids = torch.randint(0, 16000, (batch, 256), device=device)
            model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits.softmax(-1)


class _Block(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(8, cout), nn.SiLU(), nn.Conv2d(cout, cout, 3, padding=1), nn.GroupNorm(8, cout), nn.SiLU()
        )

    def forward(self, x):
        return self.net(x)


class _UNet(nn.Module):
    def __init__(self, base=32):
        super().__init__()
        self.d1, self.d2, self.mid = _Block(3, base), _Block(base, 2 * base), _Block(2 * base, 4 * base)
        self.up2, self.u2 = nn.ConvTranspose2d(4 * base, 2 * base, 2, stride=2), _Block(4 * base, 2 * base)
        self.up1, self.u1 = nn.ConvTranspose2d(2 * base, base, 2, stride=2), _Block(2 * base, base)
        self.out = nn.Conv2d(base, 1, 1)

    def forward(self, x):
        a = self.d1(x)
        b = self.d2(F.max_pool2d(a, 2))
        m = self.mid(F.max_pool2d(b, 2))
        b = self.u2(torch.cat([self.up2(m), b], dim=1))
        return self.out(self.u1(torch.cat([self.up1(b), a], dim=1)))


def unet_groupnorm_adam(device):
    """A small U-Net (GroupNorm, SiLU, transposed-convolution upsampling, skip concatenations) for
    segmentation, Adam and BCE with logits, two steps at batch 8 of 128 px."""
    torch.manual_seed(0)
    model = _UNet().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(2):
        x = torch.randn(8, 3, 128, 128, device=device)
        y = torch.randint(0, 2, (8, 1, 128, 128), device=device).float()
        F.binary_cross_entropy_with_logits(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


ISSUE35C = {
    f.__name__: f
    for f in [
        hf_mistral_sliding_bf16, hf_opt_fp16_scaler, hf_bart_seq2seq_adamw, hf_llama_beam_generate, hf_gpt_neox_sampling_generate,
        hf_vit_classifier_bf16, timm_deit_tiny_adamw, tv_regnet_y_400mf_sgd, ema_transformer_lm, hf_bert_frozen_linear_probe,
        peft_lora_llama_bf16_weights, dlrm_embeddingbag_adagrad, ddpm_mlp_with_sampling, wgan_gp_mlp, hand_loop_onecycle_clip,
        hf_distilbert_inference_batches, unet_groupnorm_adam,
    ]
}
