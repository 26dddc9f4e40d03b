"""Fifth held-out group of issue 35 (group ISSUE35E): programs of kinds users run that no earlier
group has, written after the fourth group's mends and committed before they were recorded on a
GPU. They were traced on the CPU before recording only to see whether the tracer runs them to
the end (no GPU figure was seen then); what that showed is said in RESULTS.md beside the figures.

An LSTM language model and a GRU encoder-decoder (cuDNN RNN); a wav2vec-style strided conv1d
front end; a 3-D convolutional video network (torchvision's R3D-18); ALBERT (shared layers) and
ELECTRA's discriminator from their configs; a masked autoencoder (random masking by argsort and
gather); a graph network passing messages with index_add_; a spectral-norm GAN with the hinge
loss; reentrant checkpointing; a triplet embedding network; RoBERTa question answering; a
left-padded Llama generating a fixed number of tokens in bf16; timm's ResNet-26d in channels-last
under bf16 autocast; a dense top-2 mixture of experts; timm's ViT in half precision for
inference; peft LoRA on DistilBERT with a saved classifier head; and a VGG-11 with batch norm.
Each is a function of the device, recorded by scripts/record_trace_workloads.py
(VRAMLAB_HOLDOUT=issue35e)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def lstm_language_model(device):
    """A word-level LSTM language model (embedding 256, two LSTM layers of 512 with dropout,
    tied decoder), sequences of 70 at batch 32, SGD with gradient clipping; two steps."""
    torch.manual_seed(0)

    class LM(nn.Module):
        def __init__(self, vocab=10000, dim=512):
            super().__init__()
            self.embed = nn.Embedding(vocab, dim)
            self.rnn = nn.LSTM(dim, dim, num_layers=2, dropout=0.2)
            self.out = nn.Linear(dim, vocab)
            self.out.weight = self.embed.weight

        def forward(self, x, state=None):
            y, state = self.rnn(self.embed(x), state)
            return self.out(y), state

    model = LM().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    for _ in range(2):
        x = torch.randint(0, 10000, (70, 32), device=device)
        logits, _ = model(x)
        F.cross_entropy(logits.view(-1, 10000), torch.randint(0, 10000, (70 * 32,), device=device)).backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        opt.zero_grad(set_to_none=True)


def gru_seq2seq_teacher_forcing(device):
    """A GRU encoder-decoder: a bidirectional two-layer GRU encoder (batch_first), a one-layer GRU
    decoder fed the target under teacher forcing, Adam; two steps at batch 24."""
    torch.manual_seed(0)
    embed = nn.Embedding(4000, 128).to(device)
    encoder = nn.GRU(128, 256, num_layers=2, batch_first=True, bidirectional=True).to(device)
    bridge = nn.Linear(512, 256).to(device)
    decoder = nn.GRU(128, 256, batch_first=True).to(device)
    head = nn.Linear(256, 4000).to(device)
    params = [*embed.parameters(), *encoder.parameters(), *bridge.parameters(), *decoder.parameters(), *head.parameters()]
    opt = torch.optim.Adam(params, lr=1e-3)
    for _ in range(2):
        src = torch.randint(0, 4000, (24, 40), device=device)
        tgt = torch.randint(0, 4000, (24, 30), device=device)
        _, h = encoder(embed(src))
        h0 = torch.tanh(bridge(torch.cat([h[-2], h[-1]], dim=-1))).unsqueeze(0)
        y, _ = decoder(embed(tgt[:, :-1]), h0)
        F.cross_entropy(head(y).reshape(-1, 4000), tgt[:, 1:].reshape(-1)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def wav2vec_conv_frontend(device):
    """A wav2vec-style model: raw audio through strided conv1d layers (kernel 10 stride 5, then
    kernel 3 stride 2 four times, GroupNorm on the first, GELU), a projection and a two-layer
    transformer encoder, AdamW; two steps at batch 4 over 2 s of 16 kHz audio."""
    torch.manual_seed(0)
    layers = [nn.Conv1d(1, 256, 10, stride=5, bias=False), nn.GroupNorm(256, 256), nn.GELU()]
    for _ in range(4):
        layers += [nn.Conv1d(256, 256, 3, stride=2, bias=False), nn.GELU()]
    frontend = nn.Sequential(*layers).to(device)
    proj = nn.Linear(256, 384).to(device)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(384, 6, 1536, batch_first=True), 2).to(device)
    head = nn.Linear(384, 32).to(device)
    params = [*frontend.parameters(), *proj.parameters(), *encoder.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-4)
    for _ in range(2):
        audio = torch.randn(4, 1, 32000, device=device)
        feats = frontend(audio).transpose(1, 2)
        logits = head(encoder(proj(feats)))
        F.cross_entropy(logits.reshape(-1, 32), torch.randint(0, 32, (logits.shape[0] * logits.shape[1],), device=device)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def tv_r3d_18_video(device):
    """torchvision's R3D-18 (3-D convolutions) classifying 8-frame 112x112 clips, batch 4, SGD
    with momentum; two steps."""
    from torchvision.models.video import r3d_18

    torch.manual_seed(0)
    model = r3d_18(num_classes=50).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for _ in range(2):
        clips = torch.randn(4, 3, 8, 112, 112, device=device)
        F.cross_entropy(model(clips), torch.randint(0, 50, (4,), device=device)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_albert_mlm(device):
    """A Hugging Face ALBERT (one layer's weights shared by 6, factorised embeddings) from its
    config, masked language modelling with -100 labels, AdamW; two steps at batch 8 x 256."""
    from transformers import AlbertConfig, AlbertForMaskedLM

    torch.manual_seed(0)
    config = AlbertConfig(
        vocab_size=12000, embedding_size=128, hidden_size=512, num_hidden_layers=6, num_attention_heads=8,
        intermediate_size=2048, max_position_embeddings=512,
    )
    model = AlbertForMaskedLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        ids = torch.randint(5, 12000, (8, 256), device=device)
        labels = torch.full_like(ids, -100)
        labels[:, ::7] = ids[:, ::7]
        model(input_ids=ids, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_electra_discriminator(device):
    """A Hugging Face ELECTRA discriminator (replaced-token detection) from its config, trained
    with its binary labels, AdamW with a linear warmup schedule; two steps at batch 16 x 128."""
    from transformers import ElectraConfig, ElectraForPreTraining, get_linear_schedule_with_warmup

    torch.manual_seed(0)
    config = ElectraConfig(
        vocab_size=8000, embedding_size=256, hidden_size=256, num_hidden_layers=6, num_attention_heads=4,
        intermediate_size=1024, max_position_embeddings=256,
    )
    model = ElectraForPreTraining(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    schedule = get_linear_schedule_with_warmup(opt, 10, 100)
    for _ in range(2):
        ids = torch.randint(5, 8000, (16, 128), device=device)
        labels = torch.randint(0, 2, (16, 128), device=device)
        model(input_ids=ids, labels=labels).loss.backward()
        opt.step()
        schedule.step()
        opt.zero_grad(set_to_none=True)


def mae_random_masking(device):
    """A masked autoencoder: 16x16 patches of 224x224 images, 75% masked at random (noise sorted
    by argsort, kept patches gathered), a 4-layer encoder and a 2-layer decoder (nn.TransformerEncoder),
    the loss on masked patches only; AdamW, two steps at batch 16."""
    torch.manual_seed(0)
    dim, ddim, patches, keep = 384, 256, 196, 49
    patch_embed = nn.Linear(768, dim).to(device)
    pos = nn.Parameter(torch.zeros(1, patches, dim, device=device))
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(dim, 6, 4 * dim, batch_first=True, norm_first=True), 4).to(device)
    to_decoder = nn.Linear(dim, ddim).to(device)
    mask_token = nn.Parameter(torch.zeros(1, 1, ddim, device=device))
    dpos = nn.Parameter(torch.zeros(1, patches, ddim, device=device))
    decoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(ddim, 4, 4 * ddim, batch_first=True, norm_first=True), 2).to(device)
    to_pixels = nn.Linear(ddim, 768).to(device)
    params = [*patch_embed.parameters(), pos, *encoder.parameters(), *to_decoder.parameters(), mask_token, dpos, *decoder.parameters(), *to_pixels.parameters()]
    opt = torch.optim.AdamW(params, lr=1.5e-4)
    for _ in range(2):
        images = torch.randn(16, 3, 224, 224, device=device)
        x = images.unfold(2, 16, 16).unfold(3, 16, 16).permute(0, 2, 3, 1, 4, 5).reshape(16, patches, 768)
        tokens = patch_embed(x) + pos
        noise = torch.rand(16, patches, device=device)
        shuffle = torch.argsort(noise, dim=1)
        restore = torch.argsort(shuffle, dim=1)
        kept = torch.gather(tokens, 1, shuffle[:, :keep, None].expand(-1, -1, dim))
        latent = to_decoder(encoder(kept))
        full = torch.cat([latent, mask_token.expand(16, patches - keep, -1)], dim=1)
        full = torch.gather(full, 1, restore[:, :, None].expand(-1, -1, ddim)) + dpos
        pred = to_pixels(decoder(full))
        mask = torch.ones(16, patches, device=device)
        mask[:, :keep] = 0
        mask = torch.gather(mask, 1, restore)
        loss = (((pred - x) ** 2).mean(-1) * mask).sum() / mask.sum()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def gnn_message_passing(device):
    """A graph network: 20,000 nodes and 200,000 random edges, three layers each passing messages
    (an MLP over source and destination features) summed into destinations with index_add_, node
    classification; Adam, two steps."""
    torch.manual_seed(0)
    nodes, edges, dim = 20000, 200000, 128

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.message = nn.Sequential(nn.Linear(2 * dim, dim), nn.ReLU(), nn.Linear(dim, dim))
            self.update = nn.Linear(2 * dim, dim)

        def forward(self, h, src, dst):
            m = self.message(torch.cat([h[src], h[dst]], dim=-1))
            agg = torch.zeros_like(h).index_add_(0, dst, m)
            return F.relu(self.update(torch.cat([h, agg], dim=-1)))

    embed = nn.Linear(64, dim).to(device)
    layers = nn.ModuleList([Layer() for _ in range(3)]).to(device)
    head = nn.Linear(dim, 16).to(device)
    opt = torch.optim.Adam([*embed.parameters(), *layers.parameters(), *head.parameters()], lr=1e-3)
    features = torch.randn(nodes, 64, device=device)
    src = torch.randint(0, nodes, (edges,), device=device)
    dst = torch.randint(0, nodes, (edges,), device=device)
    labels = torch.randint(0, 16, (nodes,), device=device)
    for _ in range(2):
        h = embed(features)
        for layer in layers:
            h = layer(h, src, dst)
        F.cross_entropy(head(h), labels).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def sngan_spectral_norm(device):
    """A spectral-normalised GAN (parametrizations.spectral_norm on every discriminator layer,
    transposed convolutions in the generator) on 32x32 images with the hinge loss, Adam(0, 0.9)
    for both; two iterations at batch 64."""
    from torch.nn.utils.parametrizations import spectral_norm

    torch.manual_seed(0)
    gen = nn.Sequential(
        nn.ConvTranspose2d(128, 256, 4, 1, 0), nn.BatchNorm2d(256), nn.ReLU(),
        nn.ConvTranspose2d(256, 128, 4, 2, 1), nn.BatchNorm2d(128), nn.ReLU(),
        nn.ConvTranspose2d(128, 64, 4, 2, 1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.ConvTranspose2d(64, 3, 4, 2, 1), nn.Tanh(),
    ).to(device)
    disc = nn.Sequential(
        spectral_norm(nn.Conv2d(3, 64, 3, 1, 1)), nn.LeakyReLU(0.1),
        spectral_norm(nn.Conv2d(64, 128, 4, 2, 1)), nn.LeakyReLU(0.1),
        spectral_norm(nn.Conv2d(128, 256, 4, 2, 1)), nn.LeakyReLU(0.1),
        spectral_norm(nn.Conv2d(256, 512, 4, 2, 1)), nn.LeakyReLU(0.1),
        nn.Flatten(), spectral_norm(nn.Linear(512 * 4 * 4, 1)),
    ).to(device)
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.0, 0.9))
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.0, 0.9))
    for _ in range(2):
        real = torch.randn(64, 3, 32, 32, device=device)
        fake = gen(torch.randn(64, 128, 1, 1, device=device))
        d_loss = F.relu(1 - disc(real)).mean() + F.relu(1 + disc(fake.detach())).mean()
        d_loss.backward()
        opt_d.step()
        opt_d.zero_grad(set_to_none=True)
        g_loss = -disc(fake).mean()
        g_loss.backward()
        opt_g.step()
        opt_g.zero_grad(set_to_none=True)


def reentrant_checkpoint_blocks(device):
    """Six pre-norm MLP-attention blocks each under reentrant checkpointing (use_reentrant=True,
    the input made to require grad as that mode needs), Adam; two steps at batch 8 x 512."""
    torch.manual_seed(0)
    blocks = nn.ModuleList(
        [nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True, norm_first=True, dropout=0.0) for _ in range(6)]
    ).to(device)
    head = nn.Linear(512, 100).to(device)
    opt = torch.optim.Adam([*blocks.parameters(), *head.parameters()], lr=1e-4)
    for _ in range(2):
        x = torch.randn(8, 512, 512, device=device, requires_grad=True)
        for block in blocks:
            x = checkpoint(block, x, use_reentrant=True)
        F.cross_entropy(head(x.mean(1)), torch.randint(0, 100, (8,), device=device)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def triplet_embedding_net(device):
    """A metric-learning network: an MLP embedder on anchors, positives and negatives, normalised
    embeddings, TripletMarginLoss, SGD with momentum and weight decay; two steps at batch 512."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(1024, 2048), nn.BatchNorm1d(2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 256)).to(device)
    loss_fn = nn.TripletMarginLoss(margin=0.2)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    for _ in range(2):
        a, p, n = (F.normalize(net(torch.randn(512, 1024, device=device)), dim=-1) for _ in range(3))
        loss_fn(a, p, n).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_roberta_qa(device):
    """A Hugging Face RoBERTa for extractive question answering from its config, start and end
    positions as labels, AdamW; two steps at batch 12 x 384."""
    from transformers import RobertaConfig, RobertaForQuestionAnswering

    torch.manual_seed(0)
    config = RobertaConfig(
        vocab_size=20000, hidden_size=384, num_hidden_layers=4, num_attention_heads=6, intermediate_size=1536,
        max_position_embeddings=514,
    )
    model = RobertaForQuestionAnswering(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-5)
    for _ in range(2):
        ids = torch.randint(3, 20000, (12, 384), device=device)
        start = torch.randint(0, 384, (12,), device=device)
        end = torch.randint(0, 384, (12,), device=device)
        model(input_ids=ids, start_positions=start, end_positions=end).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hf_llama_left_padded_generate(device):
    """A Hugging Face Llama from its config in bf16 weights generating 24 tokens greedily
    (min_new_tokens == max_new_tokens) for a left-padded batch of 4 prompts of 48 tokens, the
    first two padded by 8 and 16 (the mask built from torch.ones)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=512, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
        vocab_size=16000, max_position_embeddings=512, pad_token_id=0, bos_token_id=1, eos_token_id=2,
    )
    model = LlamaForCausalLM(config).to(device, torch.bfloat16).eval()
    ids = torch.randint(3, 16000, (4, 48), device=device)
    mask = torch.ones(4, 48, dtype=torch.long, device=device)
    mask[0, :8] = 0
    mask[1, :16] = 0
    ids[0, :8] = 0
    ids[1, :16] = 0
    with torch.no_grad():
        model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=24, min_new_tokens=24, do_sample=False, pad_token_id=0)


def timm_resnet26d_channels_last_bf16(device):
    """timm's ResNet-26d (deep stem, average-pool downsampling) in channels-last, trained under
    bf16 autocast with SGD (Nesterov); two steps at batch 32 of 160x160 images."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("resnet26d", num_classes=100).to(device, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    for _ in range(2):
        x = torch.randn(32, 3, 160, 160, device=device).to(memory_format=torch.channels_last)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), torch.randint(0, 100, (32,), device=device))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def moe_dense_top2(device):
    """A transformer block whose MLP is a mixture of 8 experts with top-2 routing computed densely
    (topk over the router's softmax, one-hot dispatch weights, every expert run on every token
    and combined by einsum), an auxiliary load-balancing loss; AdamW, two steps at batch 8 x 256."""
    torch.manual_seed(0)
    dim, experts, hidden = 384, 8, 768
    attn = nn.MultiheadAttention(dim, 6, batch_first=True).to(device)
    norm1, norm2 = nn.LayerNorm(dim).to(device), nn.LayerNorm(dim).to(device)
    router = nn.Linear(dim, experts, bias=False).to(device)
    w1 = nn.Parameter(torch.randn(experts, dim, hidden, device=device) * 0.02)
    w2 = nn.Parameter(torch.randn(experts, hidden, dim, device=device) * 0.02)
    head = nn.Linear(dim, 10).to(device)
    params = [*attn.parameters(), *norm1.parameters(), *norm2.parameters(), *router.parameters(), w1, w2, *head.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-4)
    for _ in range(2):
        x = torch.randn(8, 256, dim, device=device)
        h = norm1(x)
        x = x + attn(h, h, h, need_weights=False)[0]
        h = norm2(x)
        probs = router(h).softmax(-1)
        top, index = probs.topk(2, dim=-1)
        gates = torch.zeros_like(probs).scatter(-1, index, top / top.sum(-1, keepdim=True))
        expert_out = torch.einsum("bsd,edh->bseh", h, w1).relu()
        expert_out = torch.einsum("bseh,ehd->bsed", expert_out, w2)
        x = x + torch.einsum("bsed,bse->bsd", expert_out, gates)
        balance = experts * (probs.mean((0, 1)) * F.one_hot(index[..., 0], experts).float().mean((0, 1))).sum()
        loss = F.cross_entropy(head(x.mean(1)), torch.randint(0, 10, (8,), device=device)) + 0.01 * balance
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def timm_vit_small_half_inference(device):
    """timm's ViT-S/16 in half precision (model.half()), inference under inference_mode over
    three batches of 64 images at 224x224."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("vit_small_patch16_224", num_classes=1000).to(device).half().eval()
    with torch.inference_mode():
        for _ in range(3):
            model(torch.randn(64, 3, 224, 224, device=device, dtype=torch.half)).argmax(-1)


def peft_lora_distilbert_classifier(device):
    """peft LoRA (r=8 on q_lin and v_lin, the classifier kept trainable by modules_to_save) on a
    Hugging Face DistilBERT sequence classifier from its config, AdamW; two steps at batch 32 x 128."""
    from peft import LoraConfig, get_peft_model
    from transformers import DistilBertConfig, DistilBertForSequenceClassification

    torch.manual_seed(0)
    config = DistilBertConfig(vocab_size=15000, dim=384, hidden_dim=1536, n_layers=4, n_heads=6, num_labels=3)
    model = DistilBertForSequenceClassification(config).to(device)
    model = get_peft_model(
        model,
        LoraConfig(r=8, lora_alpha=16, target_modules=["q_lin", "v_lin"], modules_to_save=["pre_classifier", "classifier"], task_type="SEQ_CLS"),
    )
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-4)
    for _ in range(2):
        ids = torch.randint(3, 15000, (32, 128), device=device)
        model(input_ids=ids, labels=torch.randint(0, 3, (32,), device=device)).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def tv_vgg11_bn_sgd(device):
    """torchvision's VGG-11 with batch norm on 64x64 images (its adaptive pool and large
    classifier kept, dropout), SGD with momentum; two steps at batch 32."""
    from torchvision.models import vgg11_bn

    torch.manual_seed(0)
    model = vgg11_bn(num_classes=200).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for _ in range(2):
        x = torch.randn(32, 3, 64, 64, device=device)
        F.cross_entropy(model(x), torch.randint(0, 200, (32,), device=device)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


ISSUE35E = {
    f.__name__: f
    for f in [
        lstm_language_model, gru_seq2seq_teacher_forcing, wav2vec_conv_frontend, tv_r3d_18_video, hf_albert_mlm,
        hf_electra_discriminator, mae_random_masking, gnn_message_passing, sngan_spectral_norm,
        reentrant_checkpoint_blocks, triplet_embedding_net, hf_roberta_qa, hf_llama_left_padded_generate,
        timm_resnet26d_channels_last_bf16, moe_dense_top2, timm_vit_small_half_inference,
        peft_lora_distilbert_classifier, tv_vgg11_bn_sgd,
    ]
}
