"""Second held-out group of issue 35 (group ISSUE35B): programs of kinds users run that the tracer's
authors had not recorded (Qwen2 in bf16 weights, beam-search generate, BERT with a padded mask,
Llama with Hugging Face gradient checkpointing, timm EfficientNet under a GradScaler, a retrieval
loss with top-k and sort, an MLP VAE, an MLP GAN with two optimizers, torchvision's Swin-T under
bf16 autocast, a tied-embedding language model with SGD and Nesterov, LoRA on BERT in fp16,
T5 generate of fixed length, torch.compile'd training). Committed before they were recorded on
a GPU, after the mends ISSUE35 showed; each is a function of the device, recorded by
scripts/record_trace_workloads.py (VRAMLAB_HOLDOUT=issue35b)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def hf_qwen2_bf16_weights(device):
    """A Hugging Face Qwen2 (4 layers) from its config with bf16 weights (model.to(bfloat16)),
    AdamW, two steps at batch 8 x 256."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(
        hidden_size=768, intermediate_size=2048, num_hidden_layers=4, num_attention_heads=12, num_key_value_heads=4,
        vocab_size=16000, max_position_embeddings=512,
    )
    model = Qwen2ForCausalLM(config).to(device=device, dtype=torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 16000, (8, 256), device=device)
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_gpt2_beam_generate(device):
    """Beam search (3 beams) of a Hugging Face GPT-2 with min_new_tokens == max_new_tokens, in
    eval mode."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=4, n_embd=512, n_head=8, vocab_size=8192, n_positions=256, bos_token_id=1, eos_token_id=1)
    model = GPT2LMHeadModel(config).to(device).eval()
    ids = torch.randint(2, 8192, (4, 48)).to(device)
    with torch.no_grad():
        model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), num_beams=3, min_new_tokens=24, max_new_tokens=24, do_sample=False, pad_token_id=0)


def hf_bert_classifier_padded_mask(device):
    """A Hugging Face BERT classifier trained with AdamW, its attention mask padding the last 64 of
    256 positions of every other sequence (built on the host, as a collator does)."""
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(num_hidden_layers=4, hidden_size=512, num_attention_heads=8, intermediate_size=2048, vocab_size=16000, num_labels=3)
    model = BertForSequenceClassification(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    mask = torch.ones(16, 256, dtype=torch.long)
    mask[::2, -64:] = 0
    for _ in range(2):
        ids = torch.randint(0, 16000, (16, 256), device=device)
        labels = torch.randint(0, 3, (16,), device=device)
        model(input_ids=ids, attention_mask=mask.to(device), labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()


def hf_llama_gradient_checkpointing(device):
    """A Hugging Face Llama (6 layers) with model.gradient_checkpointing_enable(), bf16 autocast,
    AdamW, two steps at batch 8 x 512."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=768, intermediate_size=2048, num_hidden_layers=6, num_attention_heads=12, num_key_value_heads=4,
        vocab_size=16000, max_position_embeddings=1024,
    )
    model = LlamaForCausalLM(config).to(device)
    model.gradient_checkpointing_enable()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 16000, (8, 512), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def timm_efficientnet_b0_scaler(device):
    """timm's EfficientNet-B0 (100 classes) trained under fp16 autocast with a GradScaler and SGD,
    two steps at batch 32 x 224."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("efficientnet_b0", num_classes=100).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(2):
        x = torch.randn(32, 3, 224, 224, device=device)
        y = torch.randint(0, 100, (32,), device=device)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()


def retrieval_topk_sort(device):
    """A two-tower retrieval model: scores of 256 queries against 100,000 items, a top-50 of each
    row, a sort of the top scores, a cumulative sum over them, and a sampled softmax loss; Adam."""
    torch.manual_seed(0)
    queries = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 128)).to(device)
    items = nn.Embedding(100_000, 128).to(device)
    opt = torch.optim.Adam(list(queries.parameters()) + list(items.parameters()), lr=1e-3)
    for _ in range(2):
        q = queries(torch.randn(256, 128, device=device))
        scores = q @ items.weight.t()
        top, index = scores.topk(50, dim=1)
        ordered, _ = top.sort(dim=1, descending=True)
        weights = ordered.softmax(dim=1).cumsum(dim=1)
        positives = torch.randint(0, 100_000, (256,), device=device)
        loss = F.cross_entropy(scores, positives) + 0.01 * weights.mean() + 0.001 * items(index).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()


def mlp_vae(device):
    """A fully connected VAE on flattened 64x64 images: encoder to a 64-dimensional mean and
    log-variance, reparameterised sample, decoder, BCE plus KL; Adam, three steps."""
    torch.manual_seed(0)

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(4096, 1024), nn.ReLU(), nn.Linear(1024, 512), nn.ReLU())
            self.mean = nn.Linear(512, 64)
            self.logvar = nn.Linear(512, 64)
            self.decoder = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 4096))

        def forward(self, x):
            h = self.encoder(x)
            mean, logvar = self.mean(h), self.logvar(h)
            z = mean + torch.randn_like(mean) * torch.exp(0.5 * logvar)
            return self.decoder(z), mean, logvar

    model = VAE().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(3):
        x = torch.rand(512, 4096, device=device)
        recon, mean, logvar = model(x)
        kl = -0.5 * torch.sum(1 + logvar - mean.pow(2) - logvar.exp())
        loss = F.binary_cross_entropy_with_logits(recon, x, reduction="sum") + kl
        loss.backward()
        opt.step()
        opt.zero_grad()


def mlp_gan_two_optimizers(device):
    """An MLP GAN: the discriminator trained on real and detached fake samples, then the generator
    through the discriminator; two Adam optimizers (betas 0.5, 0.999), three steps."""
    torch.manual_seed(0)
    generator = nn.Sequential(nn.Linear(128, 1024), nn.LeakyReLU(0.2), nn.Linear(1024, 2048), nn.LeakyReLU(0.2), nn.Linear(2048, 3072), nn.Tanh()).to(device)
    discriminator = nn.Sequential(nn.Linear(3072, 1024), nn.LeakyReLU(0.2), nn.Dropout(0.3), nn.Linear(1024, 256), nn.LeakyReLU(0.2), nn.Linear(256, 1)).to(device)
    opt_g = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    for _ in range(3):
        real = torch.rand(256, 3072, device=device) * 2 - 1
        fake = generator(torch.randn(256, 128, device=device))
        d_loss = F.binary_cross_entropy_with_logits(discriminator(real), torch.ones(256, 1, device=device)) + F.binary_cross_entropy_with_logits(
            discriminator(fake.detach()), torch.zeros(256, 1, device=device)
        )
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        g_loss = F.binary_cross_entropy_with_logits(discriminator(fake), torch.ones(256, 1, device=device))
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()


def tv_swin_t_bf16_batch16(device):
    """torchvision's Swin-T (100 classes) trained under bf16 autocast with AdamW, two steps at
    batch 16 x 224."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.swin_t(num_classes=100).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        x = torch.randn(16, 3, 224, 224, device=device)
        y = torch.randint(0, 100, (16,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()


def tied_lm_sgd_nesterov(device):
    """A hand-written language model: an embedding tied to the output layer, two GRU-free
    feed-forward mixing layers over a causal mean of the context, label-smoothed cross entropy,
    gradients clipped by value, SGD with Nesterov momentum; three steps."""
    torch.manual_seed(0)

    class TiedLM(nn.Module):
        def __init__(self, vocab=32000, d=512):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.mix = nn.ModuleList(nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2048), nn.SiLU(), nn.Linear(2048, d)) for _ in range(2))

        def forward(self, ids):
            x = self.embed(ids)
            steps = torch.arange(1, ids.shape[1] + 1, device=ids.device).view(1, -1, 1)
            x = x.cumsum(1) / steps
            for layer in self.mix:
                x = x + layer(x)
            return x @ self.embed.weight.t()

    model = TiedLM().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    for _ in range(3):
        ids = torch.randint(0, 32000, (16, 128), device=device)
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 32000), ids[:, 1:].reshape(-1), label_smoothing=0.1)
        loss.backward()
        torch.nn.utils.clip_grad_value_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()


def peft_lora_bert_fp16(device):
    """peft LoRA (r=16 on query and value) over a Hugging Face BERT classifier whose base is
    frozen, fp16 autocast with a GradScaler, AdamW over the adapters and the head; two steps."""
    from peft import LoraConfig, get_peft_model
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(num_hidden_layers=6, hidden_size=768, num_attention_heads=12, intermediate_size=3072, vocab_size=16000, num_labels=2)
    model = get_peft_model(BertForSequenceClassification(config), LoraConfig(r=16, lora_alpha=32, target_modules=["query", "value"], modules_to_save=["classifier"])).to(device)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(2):
        ids = torch.randint(0, 16000, (32, 256), device=device)
        labels = torch.randint(0, 2, (32,), device=device)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels).loss
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()


def hf_t5_generate_fixed_length(device):
    """Greedy generate() of a Hugging Face T5 (encoder-decoder, 4 + 4 layers) with
    min_new_tokens == max_new_tokens, in eval mode."""
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    config = T5Config(d_model=512, d_ff=2048, num_layers=4, num_decoder_layers=4, num_heads=8, vocab_size=16000, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    model = T5ForConditionalGeneration(config).to(device).eval()
    ids = torch.randint(2, 16000, (8, 128)).to(device)
    with torch.no_grad():
        model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), min_new_tokens=32, max_new_tokens=32, do_sample=False)


def compiled_mlp_adamw(device):
    """A four-layer GELU MLP compiled with torch.compile (default mode), AdamW, three steps at
    batch 4096."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, 1024), nn.GELU(), nn.Linear(1024, 10)).to(device)
    compiled = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(3):
        x = torch.randn(4096, 1024, device=device)
        y = torch.randint(0, 10, (4096,), device=device)
        F.cross_entropy(compiled(x), y).backward()
        opt.step()
        opt.zero_grad()


ISSUE35B = {
    f.__name__: f
    for f in [
        hf_qwen2_bf16_weights, hf_gpt2_beam_generate, hf_bert_classifier_padded_mask, hf_llama_gradient_checkpointing,
        timm_efficientnet_b0_scaler, retrieval_topk_sort, mlp_vae, mlp_gan_two_optimizers, tv_swin_t_bf16_batch16,
        tied_lm_sgd_nesterov, peft_lora_bert_fp16, hf_t5_generate_fixed_length, compiled_mlp_adamw,
    ]
}
