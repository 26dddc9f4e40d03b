"""Two programs written after this stop's work, for the final check: timm's RegNetY-016 under
bf16 autocast with SGD, and a hand-written GRU-free char-level transformer with tied embeddings
and a cosine schedule. Run: python unseen_check.py NAME (records memory_stats to $OUT)."""
import json, os, sys
import torch
import torch.nn as nn
import torch.nn.functional as F


def timm_regnety_016_bf16(device):
    import timm
    torch.manual_seed(0)
    model = timm.create_model("regnety_016", num_classes=50).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5)
    for _ in range(2):
        x = torch.randn(24, 3, 192, 192, device=device)
        y = torch.randint(0, 50, (24,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def hand_tied_lm_cosine(device):
    torch.manual_seed(0)
    vocab, width = 4096, 384
    embed = nn.Embedding(vocab, width)
    layers = nn.TransformerEncoder(nn.TransformerEncoderLayer(width, 6, 4 * width, dropout=0.1, activation="gelu", batch_first=True, norm_first=True), 6)
    norm = nn.LayerNorm(width)
    model = nn.ModuleList([embed, layers, norm]).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    mask = nn.Transformer.generate_square_subsequent_mask(255, device=device)
    for _ in range(3):
        ids = torch.randint(0, vocab, (24, 256), device=device)
        h = norm(layers(embed(ids[:, :-1]), mask=mask, is_causal=True))
        logits = h @ embed.weight.t()
        F.cross_entropy(logits.reshape(-1, vocab), ids[:, 1:].reshape(-1)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)


PROGRAMS = {f.__name__: f for f in [timm_regnety_016_bf16, hand_tied_lm_cosine]}

if __name__ == "__main__":
    name = sys.argv[1]
    PROGRAMS[name]("cuda")
    torch.cuda.synchronize()
    setting = os.environ.get("PYTORCH_ALLOC_CONF", "")
    p = torch.cuda.get_device_properties(0)
    out = {"workload": name, "alloc_conf": setting, "torch": torch.__version__, "device": p.name, "memory_stats": {k: v for k, v in torch.cuda.memory_stats().items() if isinstance(v, (int, float))}}
    with open(os.path.join(os.environ["OUT"], f"{name}-{'expandable' if setting else 'default'}.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
