"""Measures, on a GPU, every allocation and free the caching allocator sees while PyTorch's
inference fast paths run the branches vramlab.trace does not follow yet: nn.MultiheadAttention
(batch_first, eval, no_grad) asked for its attention weights, given a key padding mask or an
attention mask, or in half precision; and nn.TransformerEncoderLayer / nn.TransformerEncoder
given a key padding mask. For each seeded random configuration it records, in order, the events
of the one call, as [action, bytes, address]. Writes JSON lines, one per configuration. Run on a
GPU machine:
    python scripts/measure_mha_fastpath.py OUT.jsonl [--random N --seed S] [--seconds S]"""

import json
import random
import sys

import torch
from torch import nn

from measure_cudnn_rnn import events_during, measure_each

# The fused operators the modules call from Python, counted to say which path each call took.
FAST_OPS = ("_native_multi_head_attention", "_transformer_encoder_layer_fwd", "_nested_tensor_from_mask")
CASES = ("weights", "weights_per_head", "padding", "padding_weights", "attn_mask", "half", "encoder_padding", "encoders_padding")
DTYPES = ("float32", "float16", "bfloat16")


def random_configs(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        heads = rng.choice((1, 2, 4, 8, 12, 16))
        per_head = rng.choice((8, 16, 32, 40, 64, 80, 96, 128))
        case = rng.choice(CASES)
        cfg = {
            "case": case, "dtype": rng.choice(DTYPES), "heads": heads, "embed": heads * per_head,
            "batch": rng.randint(1, 16), "seq": rng.randint(1, 300),
        }
        if case == "half":
            cfg["dtype"] = rng.choice(("float16", "bfloat16"))
        if case.startswith("encoder"):
            cfg["layers"] = rng.randint(1, 3) if case == "encoders_padding" else 1
            cfg["activation"] = rng.choice(("relu", "gelu"))
            cfg["norm_first"] = rng.random() < 0.5
        out.append(cfg)
    return out


def measure(cfg):
    dtype = getattr(torch, cfg["dtype"])
    torch.manual_seed(0)
    b, t, e, h = cfg["batch"], cfg["seq"], cfg["embed"], cfg["heads"]
    case = cfg["case"]
    x = torch.randn(b, t, e, device="cuda", dtype=dtype)
    padding = torch.zeros(b, t, dtype=torch.bool, device="cuda")
    padding[:, t // 2 + 1:] = True
    padding[0] = False
    row = {"config": cfg}
    with torch.no_grad():
        if case.startswith("encoder"):
            layer = nn.TransformerEncoderLayer(e, h, 4 * e, dropout=0.1, activation=cfg["activation"], batch_first=True,
                                               norm_first=cfg["norm_first"])
            module = nn.TransformerEncoder(layer, cfg["layers"], enable_nested_tensor=True) if case == "encoders_padding" else layer
            module = module.to("cuda", dtype).eval()
            call = lambda: module(x, src_key_padding_mask=padding)
        else:
            module = nn.MultiheadAttention(e, h, batch_first=True).to("cuda", dtype).eval()
            kwargs = {
                "weights": dict(need_weights=True),
                "weights_per_head": dict(need_weights=True, average_attn_weights=False),
                "padding": dict(need_weights=False, key_padding_mask=padding),
                "padding_weights": dict(need_weights=True, key_padding_mask=padding),
                "attn_mask": dict(need_weights=False, attn_mask=torch.ones(t, t, dtype=torch.bool, device="cuda").triu(1)),
                "half": dict(need_weights=False),
            }[case]
            call = lambda: module(x, x, x, **kwargs)
        called = []
        originals = {name: getattr(torch, name) for name in FAST_OPS}
        for name, original in originals.items():
            setattr(torch, name, lambda *a, _name=name, _original=original, **k: called.append(_name) or _original(*a, **k))
        try:
            _, row["events"] = events_during(call)
        finally:
            for name, original in originals.items():
                setattr(torch, name, original)
        row["fast_ops"] = called
    return row


def main():
    sink = open(sys.argv[1], "w")
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 1e9
    seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else 0
    n = int(sys.argv[sys.argv.index("--random") + 1]) if "--random" in sys.argv else 400
    meta = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name(),
            "capability": list(torch.cuda.get_device_capability())}
    sink.write(json.dumps({"meta": meta}) + "\n")
    # The process's cuBLAS and cuBLASLt workspaces, made before the measured calls.
    a = torch.ones(8, 8, device="cuda")
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        torch.nn.functional.linear(a.to(dtype), a.to(dtype), a[0].to(dtype))
    measure_each(random_configs(n, seed), measure, sink, seconds)


if __name__ == "__main__":
    main()
