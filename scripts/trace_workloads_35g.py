"""Seventh held-out group of issue 35 (group ISSUE35G): programs of kinds users run that no earlier
group has, written after the sixth group's mends and committed before they were recorded on a
GPU. They were traced on the CPU before recording only to see whether the tracer runs them to
the end (no GPU figure was seen then); what that showed is said in RESULTS.md beside the figures.

Hugging Face's Trainer (a GPT-2 language model under bf16; a BERT classifier under fp16 with
gradient accumulation); a loop written with accelerate's Accelerator (bf16); torchvision's
ResNet-34 under fp16 autocast with a GradScaler, OneCycleLR and label smoothing; a U-Net for
segmentation (transposed convolutions up, a Dice and BCE loss); a text CNN (embedding, conv1d of
three widths, max over time); a Llama sampling with generate and its end-of-sequence token (top-p);
timm's ViT-Tiny at 128 pixels with drop path and timm's EMA; a Wide ResNet-16-4 on CIFAR-sized
images; a nanoGPT-style model (causal SDPA, tied embeddings, fused AdamW, gradient accumulation);
a bidirectional LSTM over packed sequences with attention pooling; a 3-D convolutional
autoencoder; knowledge-graph embeddings scored by bmm with a margin ranking loss; a ResNet-50
inference batch sweep in half precision with empty_cache between sizes; a DQN (target network by
deepcopy, a replay buffer on the GPU, gather, Huber loss, RMSprop); and attention with a boolean
mask and dropout in training. Each is a function of the device, recorded by
scripts/record_trace_workloads.py (VRAMLAB_HOLDOUT=issue35g)."""

import copy
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F


class _TokenDataset(torch.utils.data.Dataset):
    """Fixed random token ids (and labels): what Trainer's dataloader hands the model."""

    def __init__(self, count, length, vocab, classes=None):
        gen = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (count, length), generator=gen)
        self.classes = None if classes is None else torch.randint(0, classes, (count,), generator=gen)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        if self.classes is None:
            return {"input_ids": self.ids[i], "labels": self.ids[i]}
        return {"input_ids": self.ids[i], "attention_mask": torch.ones_like(self.ids[i]), "labels": self.classes[i]}


def _trainer_arguments(**kwargs):
    from transformers import TrainingArguments

    return TrainingArguments(
        output_dir=tempfile.mkdtemp(), save_strategy="no", report_to="none", disable_tqdm=True,
        dataloader_num_workers=0, logging_steps=2, seed=0, **kwargs,
    )


def hf_trainer_gpt2_bf16(device):
    """Hugging Face's Trainer fine-tuning a GPT-2 language model from its config: bf16, batch 8 of
    256 tokens, four steps with loss logged every two (the default AdamW, linear schedule, gradient
    clipping at 1.0)."""
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer

    torch.manual_seed(0)
    config = GPT2Config(n_layer=4, n_embd=384, n_head=6, vocab_size=8000, n_positions=256)
    model = GPT2LMHeadModel(config)
    args = _trainer_arguments(per_device_train_batch_size=8, max_steps=4, bf16=True)
    Trainer(model=model, args=args, train_dataset=_TokenDataset(64, 256, 8000)).train()


def hf_trainer_bert_fp16_accumulate(device):
    """Hugging Face's Trainer fine-tuning a BERT sequence classifier from its config: fp16 (a
    GradScaler), batch 16 of 128 tokens, gradient accumulation over 2, three optimizer steps."""
    from transformers import BertConfig, BertForSequenceClassification, Trainer

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=8000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
        num_labels=3,
    )
    model = BertForSequenceClassification(config)
    args = _trainer_arguments(per_device_train_batch_size=16, gradient_accumulation_steps=2, max_steps=3, fp16=True)
    Trainer(model=model, args=args, train_dataset=_TokenDataset(128, 128, 8000, classes=3)).train()


def accelerate_loop_bf16(device):
    """A training loop written with accelerate's Accelerator (mixed_precision="bf16"): an MLP
    classifier, a DataLoader of 4 batches of 256, AdamW and a cosine schedule prepared by it,
    accelerator.backward and accelerator.clip_grad_norm_."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    torch.manual_seed(0)
    # accelerate keeps one state per process, which Trainer sets first where these programs run
    # in one process (scripts/trace_table.py); on the GPU each runs in a fresh one.
    AcceleratorState._reset_state(reset_partial_state=True)
    accelerator = Accelerator(mixed_precision="bf16")
    model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.utils.data.TensorDataset(torch.randn(1024, 1024), torch.randint(0, 10, (1024,)))
    loader = torch.utils.data.DataLoader(data, batch_size=256)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    model, opt, loader, sched = accelerator.prepare(model, opt, loader, sched)
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        accelerator.backward(loss)
        accelerator.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()


def tv_resnet34_amp_onecycle(device):
    """torchvision's ResNet-34 (1000 classes) at batch 48 of 160x160 under fp16 autocast with a
    GradScaler, SGD with Nesterov momentum and weight decay, OneCycleLR, and cross entropy with
    label smoothing 0.1; three steps."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet34().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-5)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.4, total_steps=3)
    scaler = torch.amp.GradScaler("cuda")
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
    for _ in range(3):
        x = torch.randn(48, 3, 160, 160, device=device)
        y = torch.randint(0, 1000, (48,), device=device)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        sched.step()
        opt.zero_grad(set_to_none=True)


def unet_segmentation_dice(device):
    """A U-Net for binary segmentation (four levels, 32 to 256 channels, max pooling down,
    ConvTranspose2d up, skip connections by cat) at batch 8 of 1x128x128, BCE-with-logits plus a
    soft Dice loss, Adam; three steps."""
    torch.manual_seed(0)

    def block(cin, cout):
        return nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
        )

    class UNet(nn.Module):
        def __init__(self, widths=(32, 64, 128, 256)):
            super().__init__()
            self.down = nn.ModuleList()
            cin = 1
            for w in widths:
                self.down.append(block(cin, w))
                cin = w
            self.bottom = block(widths[-1], widths[-1] * 2)
            self.up = nn.ModuleList()
            self.merge = nn.ModuleList()
            cin = widths[-1] * 2
            for w in reversed(widths):
                self.up.append(nn.ConvTranspose2d(cin, w, 2, stride=2))
                self.merge.append(block(2 * w, w))
                cin = w
            self.out = nn.Conv2d(widths[0], 1, 1)

        def forward(self, x):
            skips = []
            for level in self.down:
                x = level(x)
                skips.append(x)
                x = F.max_pool2d(x, 2)
            x = self.bottom(x)
            for up, merge, skip in zip(self.up, self.merge, reversed(skips)):
                x = merge(torch.cat([up(x), skip], 1))
            return self.out(x)

    model = UNet().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(3):
        x = torch.randn(8, 1, 128, 128, device=device)
        target = (torch.rand(8, 1, 128, 128, device=device) > 0.5).float()
        logits = model(x)
        prob = torch.sigmoid(logits)
        dice = 1 - (2 * (prob * target).sum((1, 2, 3)) + 1) / (prob.sum((1, 2, 3)) + target.sum((1, 2, 3)) + 1)
        loss = F.binary_cross_entropy_with_logits(logits, target) + dice.mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def text_cnn_conv1d(device):
    """A text CNN (Kim 2014): an embedding of 30,000 words by 300, conv1d of widths 3, 4 and 5 with
    256 filters each, max over time, dropout and a linear layer; batch 64 of 400 tokens, Adam;
    three steps."""
    torch.manual_seed(0)

    class TextCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(30000, 300)
            self.convs = nn.ModuleList(nn.Conv1d(300, 256, k) for k in (3, 4, 5))
            self.drop = nn.Dropout(0.5)
            self.fc = nn.Linear(3 * 256, 5)

        def forward(self, ids):
            x = self.embed(ids).transpose(1, 2)
            pooled = [F.relu(conv(x)).amax(2) for conv in self.convs]
            return self.fc(self.drop(torch.cat(pooled, 1)))

    model = TextCNN().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(3):
        ids = torch.randint(0, 30000, (64, 400), device=device)
        F.cross_entropy(model(ids), torch.randint(0, 5, (64,), device=device)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_llama_sampling_generate(device):
    """A Hugging Face Llama from its config sampling with generate (top-p 0.9, temperature 0.8) up
    to 48 new tokens from prompts of 64 at batch 4, with its end-of-sequence token set: how long
    it runs depends on what is sampled."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=32000, hidden_size=512, intermediate_size=1408, num_hidden_layers=4, num_attention_heads=8,
        num_key_value_heads=8, max_position_embeddings=512, bos_token_id=1, eos_token_id=2, pad_token_id=0,
    )
    model = LlamaForCausalLM(config).to(device).eval()
    ids = torch.randint(3, 32000, (4, 64), device=device)
    with torch.no_grad():
        model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True, top_p=0.9, temperature=0.8,
            max_new_tokens=48,
        )


def timm_vit_ema_drop_path(device):
    """timm's ViT-Tiny/16 at 128x128 pixels with drop path 0.1, timm's ModelEmaV3 updated every
    step, AdamW, bf16 autocast; batch 64, three steps."""
    import timm
    from timm.utils import ModelEmaV3

    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", img_size=128, drop_path_rate=0.1, num_classes=100).to(device)
    ema = ModelEmaV3(model, decay=0.999)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.05)
    for _ in range(3):
        x = torch.randn(64, 3, 128, 128, device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), torch.randint(0, 100, (64,), device=device))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        ema.update(model)


def wide_resnet_cifar(device):
    """A Wide ResNet-16-4 (pre-activation blocks, dropout 0.3) on CIFAR-sized images: batch 128 of
    3x32x32, SGD with momentum and weight decay, cosine schedule; three steps."""
    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.bn1, self.conv1 = nn.BatchNorm2d(cin), nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn2, self.conv2 = nn.BatchNorm2d(cout), nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.drop = nn.Dropout(0.3)
            self.short = None if cin == cout and stride == 1 else nn.Conv2d(cin, cout, 1, stride, bias=False)

        def forward(self, x):
            o = F.relu(self.bn1(x))
            y = self.conv1(o)
            y = self.conv2(self.drop(F.relu(self.bn2(y))))
            return y + (x if self.short is None else self.short(o))

    layers, cin = [nn.Conv2d(3, 16, 3, 1, 1, bias=False)], 16
    for cout, stride in [(64, 1), (128, 2), (256, 2)]:
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    layers += [nn.BatchNorm2d(cin), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 10)]
    model = nn.Sequential(*layers).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=3)
    for _ in range(3):
        x = torch.randn(128, 3, 32, 32, device=device)
        F.cross_entropy(model(x), torch.randint(0, 10, (128,), device=device)).backward()
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)


def nanogpt_fused_adamw_accumulate(device):
    """A nanoGPT-style model written by hand: 6 layers of 384, causal scaled_dot_product_attention,
    tied input and output embeddings (vocabulary 12,000), bf16 autocast, fused AdamW with decay on
    matrices only, gradient accumulation over 2 micro-batches of 12 x 256, clipping; two steps."""
    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, 2)
            q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, d))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self, vocab=12000, d=384, layers=6, heads=6, context=256):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(context, d)
            self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            self.head.weight = self.tok.weight

        def forward(self, ids):
            x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x))

    model = GPT().to(device)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}], lr=6e-4, fused=True)
    for _ in range(2):
        for _ in range(2):
            ids = torch.randint(0, 12000, (12, 257), device=device)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(ids[:, :-1])
                loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), ids[:, 1:].reshape(-1)) / 2
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)


def packed_bilstm_attention(device):
    """A bidirectional 2-layer LSTM (256 hidden) over packed sequences (pack_padded_sequence with
    lengths on the CPU, enforce_sorted=False), unpacked, attention pooling over valid steps, a
    linear classifier; batch 32 of up to 120 tokens, Adam; three steps."""
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    torch.manual_seed(0)

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(20000, 200, padding_idx=0)
            self.lstm = nn.LSTM(200, 256, num_layers=2, bidirectional=True, batch_first=True, dropout=0.2)
            self.score = nn.Linear(512, 1)
            self.fc = nn.Linear(512, 4)

        def forward(self, ids, lengths):
            packed = pack_padded_sequence(self.embed(ids), lengths, batch_first=True, enforce_sorted=False)
            out, _ = self.lstm(packed)
            out, _ = pad_packed_sequence(out, batch_first=True, total_length=ids.shape[1])
            mask = torch.arange(ids.shape[1], device=ids.device)[None, :] < lengths.to(ids.device)[:, None]
            weights = self.score(out).squeeze(-1).masked_fill(~mask, float("-inf")).softmax(1)
            return self.fc((weights.unsqueeze(-1) * out).sum(1))

    model = Classifier().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    for _ in range(3):
        lengths = torch.randint(20, 121, (32,), generator=gen)
        lengths[0] = 120
        ids = torch.randint(1, 20000, (32, 120), generator=gen) * (torch.arange(120)[None, :] < lengths[:, None])
        F.cross_entropy(model(ids.to(device), lengths), torch.randint(0, 4, (32,), device=device)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def conv3d_autoencoder(device):
    """A 3-D convolutional autoencoder for volumes (Conv3d with stride 2 down, BatchNorm3d,
    ConvTranspose3d up) at batch 4 of 1x64x64x64, MSE, Adam; three steps."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv3d(1, 16, 3, 2, 1), nn.BatchNorm3d(16), nn.ReLU(),
        nn.Conv3d(16, 32, 3, 2, 1), nn.BatchNorm3d(32), nn.ReLU(),
        nn.Conv3d(32, 64, 3, 2, 1), nn.BatchNorm3d(64), nn.ReLU(),
        nn.ConvTranspose3d(64, 32, 4, 2, 1), nn.BatchNorm3d(32), nn.ReLU(),
        nn.ConvTranspose3d(32, 16, 4, 2, 1), nn.BatchNorm3d(16), nn.ReLU(),
        nn.ConvTranspose3d(16, 1, 4, 2, 1),
    ).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(3):
        x = torch.randn(4, 1, 64, 64, 64, device=device)
        F.mse_loss(model(x), x).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def knowledge_graph_bmm_margin(device):
    """Knowledge-graph embeddings (TransR-like): 50,000 entities and 200 relations, each relation a
    projection matrix; positive and corrupted triples scored by bmm of the projections, a margin
    ranking loss, Adagrad; batch 1024 with 8 negatives each; three steps."""
    torch.manual_seed(0)

    class KG(nn.Module):
        def __init__(self, entities=50000, relations=200, d=128, k=96):
            super().__init__()
            self.ent = nn.Embedding(entities, d)
            self.rel = nn.Embedding(relations, k)
            self.proj = nn.Parameter(torch.randn(relations, d, k) * 0.05)

        def score(self, h, r, t):
            p = self.proj[r]
            hp = torch.bmm(self.ent(h).unsqueeze(1), p).squeeze(1)
            tp = torch.bmm(self.ent(t).unsqueeze(1), p).squeeze(1)
            return -(hp + self.rel(r) - tp).norm(p=2, dim=-1)

    model = KG().to(device)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.05)
    for _ in range(3):
        h = torch.randint(0, 50000, (1024,), device=device)
        r = torch.randint(0, 200, (1024,), device=device)
        t = torch.randint(0, 50000, (1024,), device=device)
        positive = model.score(h, r, t)
        corrupt = torch.randint(0, 50000, (1024 * 8,), device=device)
        negative = model.score(h.repeat_interleave(8), r.repeat_interleave(8), corrupt).view(1024, 8)
        loss = F.margin_ranking_loss(positive.unsqueeze(1).expand_as(negative), negative, torch.ones_like(negative), margin=1.0)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def resnet50_half_batch_sweep(device):
    """torchvision's ResNet-50 in half precision under inference_mode, swept over batch 16, 64 and
    128 at 224x224 (channels first), torch.cuda.empty_cache() between sizes, as one does to find
    the largest batch that fits."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50().to(device).half().eval()
    with torch.inference_mode():
        for batch in (16, 64, 128):
            model(torch.randn(batch, 3, 224, 224, device=device, dtype=torch.half))
            torch.cuda.empty_cache()


def dqn_target_network(device):
    """A DQN update: a Q-network MLP, its target network by copy.deepcopy, a replay buffer of
    100,000 transitions kept on the GPU, minibatches of 256 sampled by randint, Q-values picked by
    gather, the Huber loss, RMSprop, the target synchronised by load_state_dict; four updates."""
    torch.manual_seed(0)
    q = nn.Sequential(nn.Linear(32, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 18)).to(device)
    target = copy.deepcopy(q)
    opt = torch.optim.RMSprop(q.parameters(), lr=2.5e-4, alpha=0.95, eps=0.01)
    size = 100_000
    states = torch.randn(size, 32, device=device)
    actions = torch.randint(0, 18, (size,), device=device)
    rewards = torch.randn(size, device=device)
    next_states = torch.randn(size, 32, device=device)
    dones = torch.zeros(size, device=device)
    for step in range(4):
        idx = torch.randint(0, size, (256,), device=device)
        with torch.no_grad():
            best = target(next_states[idx]).max(1).values
            goal = rewards[idx] + 0.99 * (1 - dones[idx]) * best
        taken = q(states[idx]).gather(1, actions[idx].unsqueeze(1)).squeeze(1)
        loss = F.smooth_l1_loss(taken, goal)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 2 == 1:
            target.load_state_dict(q.state_dict())


def masked_attention_dropout_training(device):
    """Self-attention written with scaled_dot_product_attention and a boolean padding mask
    (batch 16, 8 heads, 384 tokens, head size 64) with dropout 0.1 in training, in float32, inside
    a 4-layer encoder with AdamW; three steps."""
    torch.manual_seed(0)

    class Layer(nn.Module):
        def __init__(self, d=512, heads=8):
            super().__init__()
            self.heads = heads
            self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.ff = nn.Sequential(nn.Linear(d, 2048), nn.ReLU(), nn.Linear(2048, d))

        def forward(self, x, mask):
            b, t, d = x.shape
            q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in self.qkv(x).chunk(3, -1))
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.1 if self.training else 0.0)
            x = self.norm1(x + self.out(y.transpose(1, 2).reshape(b, t, d)))
            return self.norm2(x + self.ff(x))

    layers = nn.ModuleList(Layer() for _ in range(4)).to(device)
    opt = torch.optim.AdamW(layers.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(1)
    for _ in range(3):
        lengths = torch.randint(100, 385, (16,), generator=gen)
        keep = (torch.arange(384)[None, :] < lengths[:, None]).to(device)
        mask = keep[:, None, None, :]
        x = torch.randn(16, 384, 512, device=device)
        for layer in layers:
            x = layer(x, mask)
        x.pow(2).mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


ISSUE35G = {
    f.__name__: f
    for f in [
        hf_trainer_gpt2_bf16, hf_trainer_bert_fp16_accumulate, accelerate_loop_bf16, tv_resnet34_amp_onecycle,
        unet_segmentation_dice, text_cnn_conv1d, hf_llama_sampling_generate, timm_vit_ema_drop_path,
        wide_resnet_cifar, nanogpt_fused_adamw_accumulate, packed_bilstm_attention, conv3d_autoencoder,
        knowledge_graph_bmm_margin, resnet50_half_batch_sweep, dqn_target_network,
        masked_attention_dropout_training,
    ]
}


# Written after ISSUE35G's measurements, for the Trainer rule they led to (seen while designing,
# not held out): Trainer evaluating every two steps.


def hf_trainer_gpt2_evaluate(device):
    """Hugging Face's Trainer fine-tuning a GPT-2 language model from its config in bf16 and
    evaluating it every two steps on 32 sequences (no compute_metrics: losses only), then once
    more by trainer.evaluate(); batch 8 of 256 tokens, four steps."""
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer

    torch.manual_seed(0)
    config = GPT2Config(n_layer=4, n_embd=384, n_head=6, vocab_size=8000, n_positions=256)
    args = _trainer_arguments(
        per_device_train_batch_size=8, per_device_eval_batch_size=8, max_steps=4, bf16=True, eval_strategy="steps",
        eval_steps=2,
    )
    trainer = Trainer(model=GPT2LMHeadModel(config), args=args, train_dataset=_TokenDataset(64, 256, 8000), eval_dataset=_TokenDataset(32, 256, 8000))
    trainer.train()
    trainer.evaluate()


ISSUE35G_SEEN = {f.__name__: f for f in [hf_trainer_gpt2_evaluate]}
