"""Sixteenth held-out group of issue 35 (group ISSUE35P): sixteen more programs of kinds no earlier
group had (Hugging Face BERT with eager attention, a text-to-image step with frozen CLIP text and
VAE encoders, torch's own Adafactor, parameters_to_vector, a BiLSTM-CRF, quantization-aware
training, a TorchScript model trained, a CPU embedding feeding a GPU MLP, LoRA on Qwen2 with
checkpointing, a hand-written top-p decoding loop, a 3-d U-Net, index_put_ with accumulation,
torch.autograd.functional.jacobian, timm's Mixup, torchvision's LR-ASPP, hard-negative mining),
written after ISSUE35O's figures and committed before they were recorded on a GPU (an H200) or
compared with anything.

Each is a function of the device, recorded by scripts/record_trace_workloads.py
(VRAMLAB_HOLDOUT=issue35p). Traced on the CPU before recording only to see that each program is
itself valid."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def hf_bert_eager_attention_bf16(device):
    """Hugging Face BERT for sequence classification from a small config (6 layers, hidden 512)
    with attn_implementation="eager" (explicit softmax attention), batch 16 of 256 tokens, bf16
    autocast, AdamW, two steps."""
    from transformers import AutoModelForSequenceClassification, BertConfig

    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=512, num_hidden_layers=6, num_attention_heads=8, intermediate_size=2048, num_labels=4)
    model = AutoModelForSequenceClassification.from_config(config, attn_implementation="eager").to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
    for _ in range(2):
        ids = torch.randint(0, 30522, (16, 256), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=torch.randint(0, 4, (16,), device=device)).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def text_to_image_step_frozen_encoders(device):
    """A latent text-to-image training step: a frozen Hugging Face CLIP text encoder (small config)
    and a frozen convolutional image encoder in bfloat16 under no_grad, a trainable conditioning
    U-Net-like denoiser in float32 with cross-attention to the text, noise prediction loss, AdamW,
    two steps of batch 8 at 128x128."""
    from transformers import CLIPTextConfig, CLIPTextModel

    torch.manual_seed(0)
    text = CLIPTextModel(CLIPTextConfig(vocab_size=49408, hidden_size=256, intermediate_size=1024, num_hidden_layers=4, num_attention_heads=4,
                                        max_position_embeddings=77)).to(device, torch.bfloat16).eval().requires_grad_(False)
    encoder = nn.Sequential(nn.Conv2d(3, 64, 3, 2, 1), nn.SiLU(), nn.Conv2d(64, 128, 3, 2, 1), nn.SiLU(), nn.Conv2d(128, 4, 3, 2, 1)).to(device, torch.bfloat16).requires_grad_(False)

    class Denoiser(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Conv2d(4, 128, 3, padding=1)
            self.down = nn.Conv2d(128, 256, 3, 2, 1)
            self.attn = nn.MultiheadAttention(256, 8, kdim=256, vdim=256, batch_first=True)
            self.up = nn.ConvTranspose2d(256, 128, 4, 2, 1)
            self.out = nn.Conv2d(256, 4, 3, padding=1)
            self.time = nn.Sequential(nn.Linear(1, 128), nn.SiLU(), nn.Linear(128, 128))

        def forward(self, z, t, context):
            h = self.inp(z) + self.time(t[:, None])[:, :, None, None]
            d = F.silu(self.down(h))
            b, c, hh, ww = d.shape
            q = d.flatten(2).transpose(1, 2)
            d = d + self.attn(q, context, context, need_weights=False)[0].transpose(1, 2).reshape(b, c, hh, ww)
            return self.out(torch.cat([F.silu(self.up(d)), h], 1))

    denoiser = Denoiser().to(device)
    opt = torch.optim.AdamW(denoiser.parameters(), lr=1e-4)
    for _ in range(2):
        images = torch.randn(8, 3, 128, 128, device=device, dtype=torch.bfloat16)
        ids = torch.randint(0, 49408, (8, 77), device=device)
        with torch.no_grad():
            context = text(input_ids=ids).last_hidden_state.float()
            latents = encoder(images).float()
        noise = torch.randn_like(latents)
        t = torch.rand(8, device=device)
        noisy = latents * (1 - t)[:, None, None, None] + noise * t[:, None, None, None]
        F.mse_loss(denoiser(noisy, t, context), noise).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def t5_torch_native_adafactor(device):
    """Hugging Face T5 from a small config (4 layers each side, d_model 384) trained as a
    sequence-to-sequence model with PyTorch's own torch.optim.Adafactor (factored second moments),
    batch 8 of 256 source and 64 target tokens, float32, two steps."""
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    config = T5Config(vocab_size=32128, d_model=384, d_kv=64, d_ff=1536, num_layers=4, num_decoder_layers=4, num_heads=6, decoder_start_token_id=0,
                      pad_token_id=0, eos_token_id=1)
    model = T5ForConditionalGeneration(config).to(device)
    opt = torch.optim.Adafactor(model.parameters(), lr=1e-2)
    for _ in range(2):
        src, tgt = torch.randint(0, 32128, (8, 256), device=device), torch.randint(0, 32128, (8, 64), device=device)
        model(input_ids=src, labels=tgt).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def parameters_to_vector_penalty_clip_value(device):
    """An MLP (1024-2048-2048-10) whose loss adds a penalty on the squared norm of all its
    parameters flattened by torch.nn.utils.parameters_to_vector, gradients clipped by value
    (clip_grad_value_), SGD with momentum, batch 256, two steps."""
    from torch.nn.utils import clip_grad_value_, parameters_to_vector

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for _ in range(2):
        x, y = torch.randn(256, 1024, device=device), torch.randint(0, 10, (256,), device=device)
        loss = F.cross_entropy(model(x), y) + 1e-5 * parameters_to_vector(model.parameters()).pow(2).sum()
        loss.backward()
        clip_grad_value_(model.parameters(), 0.5)
        opt.step()
        opt.zero_grad(set_to_none=True)


def bilstm_crf_tagger(device):
    """A BiLSTM-CRF tagger: embeddings, a 2-layer bidirectional LSTM (cuDNN), emission scores, and
    the CRF's forward algorithm as a loop of logsumexp over 64 time steps with a mask, minus the
    gold path's score; batch 32, 20 tags, Adam, two steps."""
    torch.manual_seed(0)
    tags, steps, batch = 20, 64, 32
    embed = nn.Embedding(20000, 128).to(device)
    lstm = nn.LSTM(128, 256, num_layers=2, bidirectional=True, batch_first=True).to(device)
    emit = nn.Linear(512, tags).to(device)
    transitions = nn.Parameter(torch.randn(tags, tags, device=device) * 0.1)
    params = list(embed.parameters()) + list(lstm.parameters()) + list(emit.parameters()) + [transitions]
    opt = torch.optim.Adam(params, lr=1e-3)
    lengths = torch.tensor([steps - i for i in range(batch)], device=device)
    mask = torch.arange(steps, device=device)[None, :] < lengths[:, None]
    for _ in range(2):
        words, gold = torch.randint(0, 20000, (batch, steps), device=device), torch.randint(0, tags, (batch, steps), device=device)
        scores = emit(lstm(embed(words))[0])
        alpha = scores[:, 0]
        for t in range(1, steps):
            step = torch.logsumexp(alpha[:, :, None] + transitions[None] + scores[:, t, None, :], dim=1)
            alpha = torch.where(mask[:, t, None], step, alpha)
        log_z = torch.logsumexp(alpha, dim=1)
        gold_emit = scores.gather(2, gold[:, :, None]).squeeze(2).masked_fill(~mask, 0).sum(1)
        gold_trans = (transitions[gold[:, :-1], gold[:, 1:]] * mask[:, 1:]).sum(1)
        (log_z - gold_emit - gold_trans).mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def quantization_aware_training_cnn(device):
    """Quantization-aware training: a small CNN prepared by torch.ao.quantization.prepare_qat
    (fake-quantized weights and activations with moving-average observers, the default QAT
    qconfig for x86), batch 64 of 3x64x64, SGD, two steps."""
    import torch.ao.quantization as tq

    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
            self.body = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))

        def forward(self, x):
            return self.dequant(self.body(self.quant(x)))

    model = Net().train()
    model.qconfig = tq.get_default_qat_qconfig("x86")
    model = tq.prepare_qat(model).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(2):
        x, y = torch.randn(64, 3, 64, 64, device=device), torch.randint(0, 10, (64,), device=device)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def torchscript_mlp_training(device):
    """A TorchScript model trained: an MLP with dropout and LayerNorm compiled by torch.jit.script,
    batch 512 of 784 features, Adam, two steps."""
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.norm, self.fc2, self.fc3 = nn.Linear(784, 2048), nn.LayerNorm(2048), nn.Linear(2048, 2048), nn.Linear(2048, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = F.dropout(F.gelu(self.norm(self.fc1(x))), 0.1, self.training)
            return self.fc3(F.relu(self.fc2(h)))

    model = torch.jit.script(Net().to(device))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(2):
        x, y = torch.randn(512, 784, device=device), torch.randint(0, 10, (512,), device=device)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def cpu_embedding_feeds_gpu_mlp(device):
    """A large embedding table kept on the CPU (2,000,000 x 64), rows gathered there for a batch of
    4,096 ids, copied to the GPU through pinned memory with non_blocking, a GPU MLP on top; only
    the MLP trains (Adam), two steps."""
    torch.manual_seed(0)
    table = torch.randn(2_000_000, 64)
    mlp = nn.Sequential(nn.Linear(64 * 8, 1024), nn.ReLU(), nn.Linear(1024, 1)).to(device)
    opt = torch.optim.Adam(mlp.parameters(), lr=1e-3)
    for _ in range(2):
        ids = torch.randint(0, 2_000_000, (4096, 8))
        rows = table[ids].reshape(4096, -1).pin_memory().to(device, non_blocking=True)
        target = torch.rand(4096, 1).to(device, non_blocking=True)
        F.binary_cross_entropy_with_logits(mlp(rows), target).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def peft_lora_qwen2_checkpointing_bf16(device):
    """peft LoRA (rank 16 on the attention and MLP projections) on Hugging Face Qwen2 from a small
    config, gradient checkpointing on with enable_input_require_grads, bf16 autocast, batch 4 of
    512 tokens, AdamW over the adapters, two steps."""
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=32000, hidden_size=512, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=2,
                         max_position_embeddings=1024)
    model = Qwen2ForCausalLM(config).to(device)
    model.gradient_checkpointing_enable()
    model.enable_input_require_grads()
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "gate_proj"],
                                             task_type="CAUSAL_LM"))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    for _ in range(2):
        ids = torch.randint(0, 32000, (4, 512), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def manual_top_p_decoding_loop(device):
    """A hand-written decoder-only Transformer (4 layers, d 512) decoding 48 tokens for 8 prompts of
    32 with its own key-value cache grown by torch.cat, top-p (0.9) sampling by sort, cumsum,
    scatter and multinomial, temperature 0.8, under torch.no_grad in float16."""
    torch.manual_seed(0)
    vocab, d, heads = 16000, 512, 8

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x, cache):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            if cache is not None:
                k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.mlp(self.norm2(x)), (k, v)

    embed, blocks, head = nn.Embedding(vocab, d), nn.ModuleList(Block() for _ in range(4)), nn.Linear(d, vocab)
    for m in (embed, blocks, head):
        m.to(device, torch.float16).eval()
    tokens = torch.randint(0, vocab, (8, 32), device=device)
    caches = [None] * 4
    step_input = tokens
    with torch.no_grad():
        for _ in range(48):
            x = embed(step_input)
            for i, block in enumerate(blocks):
                x, caches[i] = block(x, caches[i])
            logits = head(x[:, -1]).float() / 0.8
            sorted_logits, order = logits.sort(dim=-1, descending=True)
            cumulative = sorted_logits.softmax(-1).cumsum(-1)
            drop = cumulative - sorted_logits.softmax(-1) > 0.9
            sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
            logits = torch.full_like(logits, float("-inf")).scatter(1, order, sorted_logits)
            step_input = torch.multinomial(logits.softmax(-1), 1)
            tokens = torch.cat([tokens, step_input], 1)


def unet3d_volumes_bf16(device):
    """A small 3-d U-Net (Conv3d, InstanceNorm3d, trilinear upsampling) on batch 2 of 1x64x64x64
    volumes, Dice plus cross-entropy on 3 classes, bf16 autocast, Adam, two steps."""
    torch.manual_seed(0)

    def block(cin, cout):
        return nn.Sequential(nn.Conv3d(cin, cout, 3, padding=1), nn.InstanceNorm3d(cout, affine=True), nn.LeakyReLU(0.01),
                             nn.Conv3d(cout, cout, 3, padding=1), nn.InstanceNorm3d(cout, affine=True), nn.LeakyReLU(0.01))

    class UNet3D(nn.Module):
        def __init__(self):
            super().__init__()
            self.e1, self.e2, self.e3 = block(1, 16), block(16, 32), block(32, 64)
            self.d2, self.d1 = block(64 + 32, 32), block(32 + 16, 16)
            self.head = nn.Conv3d(16, 3, 1)

        def forward(self, x):
            a = self.e1(x)
            b = self.e2(F.max_pool3d(a, 2))
            c = self.e3(F.max_pool3d(b, 2))
            b = self.d2(torch.cat([F.interpolate(c, scale_factor=2, mode="trilinear", align_corners=False), b], 1))
            return self.head(self.d1(torch.cat([F.interpolate(b, scale_factor=2, mode="trilinear", align_corners=False), a], 1)))

    model = UNet3D().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(2):
        x, y = torch.randn(2, 1, 64, 64, 64, device=device), torch.randint(0, 3, (2, 64, 64, 64), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x)
        probs = logits.float().softmax(1)
        onehot = F.one_hot(y, 3).permute(0, 4, 1, 2, 3).float()
        dice = 1 - (2 * (probs * onehot).sum((2, 3, 4)) + 1) / (probs.sum((2, 3, 4)) + onehot.sum((2, 3, 4)) + 1)
        (F.cross_entropy(logits.float(), y) + dice.mean()).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def index_put_accumulate_bucketize(device):
    """Per-bucket losses: 1,000,000 predictions bucketized by torch.bucketize into 1,000 bins,
    per-bin sums by index_put_ with accumulate=True (and a histogram by torch.histc), a weighted
    loss through a small MLP, Adam, two steps."""
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(16, 256), nn.ReLU(), nn.Linear(256, 1)).to(device)
    opt = torch.optim.Adam(mlp.parameters(), lr=1e-3)
    edges = torch.linspace(-3, 3, 999, device=device)
    for _ in range(2):
        x, y = torch.randn(1_000_000, 16, device=device), torch.randn(1_000_000, device=device)
        pred = mlp(x).squeeze(1)
        bins = torch.bucketize(pred.detach(), edges)
        sums = torch.zeros(1000, device=device).index_put_((bins,), (pred - y).pow(2), accumulate=True)
        counts = torch.histc(pred.detach(), bins=1000, min=-3, max=3) + 1
        (sums / counts).mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def functional_jacobian_vectorized(device):
    """torch.autograd.functional.jacobian with vectorize=True (vmap over the backward) of a small
    MLP's outputs (64) with respect to a batch of 128 inputs (64 each), then a loss on the
    Jacobian's Frobenius norm backpropagated with create_graph=True, Adam, two steps."""
    from torch.autograd.functional import jacobian

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 512), nn.Tanh(), nn.Linear(512, 64)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(2):
        x = torch.randn(128, 64, device=device)
        jac = jacobian(lambda v: model(v).sum(0), x, create_graph=True, vectorize=True)
        (jac.pow(2).sum() * 1e-3 + model(x).pow(2).mean()).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def timm_mixup_deit_tiny_bf16(device):
    """timm's DeiT-Tiny with timm.data.Mixup (mixup 0.8, cutmix 1.0, label smoothing 0.1) applied to
    GPU batches of 64 at 224x224, SoftTargetCrossEntropy, bf16 autocast, AdamW, two steps."""
    import timm
    from timm.data import Mixup
    from timm.loss import SoftTargetCrossEntropy

    torch.manual_seed(0)
    model = timm.create_model("deit_tiny_patch16_224", num_classes=100).to(device)
    mixup = Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1, num_classes=100)
    criterion = SoftTargetCrossEntropy()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.05)
    for _ in range(2):
        x, y = mixup(torch.randn(64, 3, 224, 224, device=device), torch.randint(0, 100, (64,), device=device))
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = criterion(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def tv_lraspp_mobilenet_segmentation(device):
    """torchvision's LR-ASPP MobileNetV3-Large (21 classes, no pretrained weights) trained on batch 8
    of 3x320x320 with per-pixel cross entropy ignoring label 255, float32, SGD, two steps."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=21).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    for _ in range(2):
        x = torch.randn(8, 3, 320, 320, device=device)
        y = torch.randint(0, 21, (8, 320, 320), device=device)
        y[:, :16] = 255
        F.cross_entropy(model(x)["out"], y, ignore_index=255).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hard_negative_mining_triplets(device):
    """Metric learning with batch-hard mining: a ResNet-ish embedding of 128-d for 256 images of
    3x64x64 in 64 identities, the full pairwise distance matrix, the hardest positive and negative
    per anchor by masked max and min, a margin loss, bf16 autocast, Adam, two steps."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 64, 3, 2, 1), nn.BatchNorm2d(64), nn.ReLU(), nn.Conv2d(64, 128, 3, 2, 1), nn.BatchNorm2d(128), nn.ReLU(),
                        nn.Conv2d(128, 256, 3, 2, 1), nn.BatchNorm2d(256), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 128)).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    labels = torch.arange(64, device=device).repeat_interleave(4)
    same = labels[:, None] == labels[None, :]
    for _ in range(2):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            emb = F.normalize(net(torch.randn(256, 3, 64, 64, device=device)).float(), dim=1)
        dist = torch.cdist(emb, emb)
        hardest_pos = dist.masked_fill(~same, 0).amax(1)
        hardest_neg = dist.masked_fill(same, float("inf")).amin(1)
        F.relu(hardest_pos - hardest_neg + 0.2).mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


ISSUE35P = {
    f.__name__: f
    for f in [
        hf_bert_eager_attention_bf16, text_to_image_step_frozen_encoders, t5_torch_native_adafactor, parameters_to_vector_penalty_clip_value,
        bilstm_crf_tagger, quantization_aware_training_cnn, torchscript_mlp_training, cpu_embedding_feeds_gpu_mlp, peft_lora_qwen2_checkpointing_bf16,
        manual_top_p_decoding_loop, unet3d_volumes_bf16, index_put_accumulate_bucketize, functional_jacobian_vectorized, timm_mixup_deit_tiny_bf16,
        tv_lraspp_mobilenet_segmentation, hard_negative_mining_triplets,
    ]
}
