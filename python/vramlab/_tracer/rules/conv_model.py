"""A fitted model of cuDNN's 2-D convolution workspaces (the bytes PyTorch's Conv_v8.cpp
run_conv_plan allocates after a direction's output and frees when the plan has run): for each
direction, a closed-form size per "plan family" plus a decision tree that picks the family.

Fitted on: the committed measurements reports/reference/{h100,h200}/conv-workspaces/*.jsonl.gz
(torch 2.11.0+cu130, cuDNN 9.19; benchmark off, deterministic off, TF32 allowed, contiguous NCHW,
non-transposed, dilation 1 in practice), cuDNN-backend rows only, but for the more-* files and
the *-heldout groups: 70,210 distinct (gpu, dtype, n, shape) rows (H100 2-D 33,000 and 1-d, as
2-D of height 1, 21,591; H200 15,619). The figures below are the first fit's (2-D rows only);
the refit's, with the 1-d rows and the padded-channel terms (Xp, Yp, Wp'), are in FINDINGS.md. Rows PyTorch sends to CudaDepthwise2d
(depthwise float32/bfloat16 and some float16) have no workspace: `workspaces` answers (0, 0, 0)
for them without the tree.

The size formulas (bytes; e = element size of the dtype; X = N*C*H*W*e, Y = N*K*Ho*Wo*e,
W = K*(C/g)*R*S*e, W' = W if R*S > 1 else 0, I = N*C*R*S*Ho*Wo*e, NW4 = N*K*(C/g)*R*S*4):
    0                          about half of forward and input-gradient rows (most 1x1 convolutions)
    X + Y + W' + 16            NCHW<->NHWC transforms of input, output and (R*S > 1) weight
    X + Y + W' + 147           the same with another engine's 131-byte tail
    400, 272 (other small constants)
    X + W + 16                 float32 forward (output written in place)
    NW4 (+0, +272, +400), NW4 + 4*W'   weight gradient split over the batch, float32 partials
    and ~50-80 rarer ones (tails 256, 303, 431, 607...), each seen on >= 10 rows.
A family label = (coefficients over [X, Y, W', W, I, NW4], constant tail), chosen by greedy set
cover of the measured rows (analysis/cover.py). Share of rows some label explains byte-exactly:
forward 96.7%, input gradient 96.8%, weight gradient 81.0% (the rest: 'other' -> None).

Held-out accuracy (trees trained on a random 70% of rows, byte-exact hits on the other 30%,
14,416 rows; 'unknown' counts as a miss):
    forward 92.1%, input gradient 92.6%, weight gradient 76.9%
    (predicting 0 everywhere: 54.8%, 53.9%, 10.8%)
  holding out whole shapes (30% of distinct (C,H,W,K,R,S,stride,groups), all their batches/dtypes/GPUs):
    forward 84.4%, input gradient 86.8%, weight gradient 70.3%; within 1 MiB 93.8%, 95.2%, 76.9%.
  per GPU/dtype (random split; fwd / dgrad / wgrad): h100 bf16 .926/.916/.800, fp16 .966/.955/.757,
  fp32 .879/.908/.704; h200 bf16 .949/.947/.850, fp16 .961/.948/.812, fp32 .907/.925/.747.
Refitted on 2026-11-29 with the H200's timm rows too (reports/reference/h200/conv-workspaces/
conv-timm-*.jsonl.gz, NCHW; 293,816 rows in all, 224,011 reaching cuDNN): the greedy cover explains
94.3% / 94.9% / 77.4% of cuDNN rows (170, 133 and 366 families). Held out, against the trees before
(which had seen no timm row), on the timm rows reaching cuDNN (scripts/conv_model/fit_grid.py,
fit_shapes.py; OLD_RULES=65647dc's rules/):
    an image size and a batch size never fitted (192 px, batch 24; 19,403 rows):
        forward 79.0% (was 70.1%), input gradient 89.6% (76.0%), weight gradient 62.8% (57.7%)
    kinds of convolution never fitted (30% of (C, K, R, S, stride, groups) drawn; 53,683 rows):
        forward 79.1% (75.2%), input gradient 79.9% (75.8%), weight gradient 61.4% (61.9%)
The shipped trees are refitted on all rows (forward 32,081 nodes, input gradient 25,085, weight
gradient 34,581): the selector is a compressed table, not a law; see FINDINGS.md.

Channels-last tensors have trees of their own (CHANNELS_LAST_MODEL, scripts/conv_model/fit_cl.py),
of the same families and features, fitted on the H200's channels-last rows.

Not fitted (return None unless extrapolate=True): transposed convolutions, cudnn.benchmark on,
deterministic, GPUs other than h100/h200. With extrapolate=True a transposed convolution is
answered as the non-transposed convolution cuDNN runs for it (forward = that convolution's input
gradient, input gradient = its forward, weight gradient = its weight gradient with input and
output swapped), and a transposed channels-last one as that minus the X and Y transform terms:
unverified hypotheses until measure_conv_more.py's rows are checked.
"""

import gzip
import json
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_MODELS: dict = {}
_ELT = {"float32": 4, "bfloat16": 2, "float16": 2}
_DT = {"float32": 0, "bfloat16": 1, "float16": 2}


def _load(name):
    """A shipped model (its trees parsed), read once."""
    if name not in _MODELS:
        with gzip.open(os.path.join(_HERE, name), "rt") as f:
            model = json.load(f)
        for tree in model["trees"].values():
            tree["parsed"] = [_parse(c) for c in tree["classes"]]
        _MODELS[name] = model
    return _MODELS[name]


# Fitted by scripts/conv_model/fit_cl.py on 110,607 channels-last rows the H200 measured (torch
# 2.11.0+cu130, cuDNN 9.19). Held out there, byte-exact with a row it does not know traced as none
# (beside it, no workspace at all, as the tracer gave before): batch sizes never fitted (6,372
# rows), forward 85.7% (74.3%), input gradient 85.9% (60.2%), weight gradient 33.6% (32.1%); kinds
# of convolution never fitted (34,126 rows), forward 80.3% (74.3%), input gradient 77.6% (65.0%),
# weight gradient 44.2% (39.3%). Half the weight gradients' sizes are of no family it found. The
# first fit (bae8545, 94,899 rows) on twenty timm models measured after it, never fitted: forward
# 80-86%, input gradient 88-91%, weight gradient 19-31% by dtype (h200/conv-workspaces/README.md).
CHANNELS_LAST_MODEL = "conv_model_cl_trees.json.gz"


def _parse(label):
    if label == "other":
        return None
    if label.startswith("('const'"):
        return (None, int(label.split(",")[1].strip(" )")))
    coefs, tail = label.rsplit(",", 1)
    return (tuple(float(v) for v in coefs.strip("( )").split(",") if v.strip()), int(tail.strip(" )")))


def _pair(v):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return int(v[0]), int(v[-1])


def _predict(tree, feats, terms):
    i = 0
    while tree["left"][i] != -1:
        i = tree["left"][i] if feats[tree["feature"][i]] <= tree["threshold"][i] else tree["right"][i]
    label = tree["parsed"][tree["leaf"][i]]
    if label is None:
        return None
    coefs, tail = label
    if coefs is None:
        return tail
    return int(sum(c * t for c, t in zip(coefs, terms))) + tail


def _padded(dtype, channels):
    """Channels padded for the tensor cores, as cuDNN's layout transforms hold them: to a multiple
    of 8 in 16 bits, of 4 in float32 (found in the 1-d measurements; FINDINGS.md)."""
    align = 4 if dtype == "float32" else 8
    return -(-channels // align) * align


def _plain(gpu, dtype, n, c, h, w, k, r, s, stride, padding, dilation, groups, model_name="conv_model_trees.json.gz"):
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    e = _ELT[dtype]
    ho = (h + 2 * ph - dh * (r - 1) - 1) // sh + 1
    wo = (w + 2 * pw - dw * (s - 1) - 1) // sw + 1
    cg, kg = c // groups, k // groups
    X, Y, W = n * c * h * w * e, n * k * ho * wo * e, k * cg * r * s * e
    nw4 = n * k * cg * r * s * 4
    named = {"gpu": 1 if gpu == "h200" else 0, "dt": _DT[dtype], "n": n, "c": c, "h": h, "w": w, "k": k, "r": r, "s": s,
             "st": sh, "pad": ph, "g": groups, "cg": cg, "kg": kg, "ho": ho, "wo": wo, "rs": r * s, "npix": n * ho * wo,
             "crs": cg * r * s, "X": X, "Y": Y, "W": W, "hw": h * w, "nw4": nw4, "stw": sw, "padw": pw}
    model = _load(model_name)
    feats = [named[f] for f in model["features"]]
    # The transforms again with the channels padded for the tensor cores.
    cp, kp = _padded(dtype, c), _padded(dtype, k)
    xp, yp, wp = n * cp * h * w * e, n * kp * ho * wo * e, kp * (cp // groups) * r * s * e
    terms = [X, Y, W if r * s > 1 else 0, W, n * c * r * s * ho * wo * e, nw4, xp, yp, wp if r * s > 1 else 0]
    return tuple(_predict(model["trees"][d], feats, terms) for d in ("forward", "input_grad", "weight_grad")), terms


def workspaces(gpu, dtype, n, c, h, w, k, r, s, stride=1, padding=0, dilation=1, groups=1,
               transposed=False, channels_last=False, extrapolate=False):
    """(forward, input_grad, weight_grad) workspace bytes cuDNN 9.19 allocates for a 2-D convolution
    under PyTorch 2.11's defaults, or None where the model does not know (an element is None where
    only that direction is unknown).

    gpu: "h100" or "h200"; dtype: "float32" (TF32 allowed), "bfloat16" or "float16"; n, c, h, w: the
    input; k: output channels; r, s: kernel; stride/padding/dilation: int or pair. For transposed=True,
    c is the transposed convolution's input channels, k its output channels, h, w its input size
    (torch.nn.ConvTranspose2d's view), output_padding assumed 0."""
    gpu, dtype = str(gpu).lower(), str(dtype).replace("torch.", "")
    if gpu not in ("h100", "h200") or dtype not in _ELT:
        return None
    if transposed and not extrapolate:
        return None
    if channels_last and not transposed:
        # The channels-last trees (scripts/conv_model/fit_cl.py), fitted on the H200's channels-last
        # rows; the H100's choices are taken as the H200's (convolution.py's SAME_CHOICES). cuDNN
        # runs every channels-last depthwise convolution (Convolution.cpp, use_cudnn_depthwise).
        return _plain(gpu, dtype, n, c, h, w, k, r, s, stride, padding, dilation, groups, CHANNELS_LAST_MODEL)[0]
    # PyTorch's own depthwise kernels (Convolution.cpp: cudnn is used for depthwise only in
    # half precision under conditions; the table shows float32 and bfloat16 depthwise never reach cuDNN).
    if groups == c and groups == k and groups > 1 and dtype in ("float32", "bfloat16") and not transposed and not channels_last:
        return (0, 0, 0)
    if transposed:
        (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
        ho = (h - 1) * sh - 2 * ph + dh * (r - 1) + 1
        wo = (w - 1) * sw - 2 * pw + dw * (s - 1) + 1
        # cuDNN runs it as the convolution from (n, k, ho, wo) to (n, c, h, w).
        got = _plain(gpu, dtype, n, k, ho, wo, c, r, s, stride, padding, dilation, groups)
        if got is None:
            return None
        (f, d, wg), terms = got
        result = (d, f, wg)
    else:
        (result, terms) = _plain(gpu, dtype, n, c, h, w, k, r, s, stride, padding, dilation, groups)
    if channels_last:
        # Hypothesis, for transposed channels-last convolutions only: in NHWC the input/output
        # transforms are not needed.
        X, Y = terms[0], terms[1]
        result = tuple(None if v is None else max(0, v - X - Y) if v >= X + Y else v for v in result)
    return result


def _triple(v):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return int(v[0]), int(v[len(v) // 2]), int(v[-1])


def workspaces_3d(gpu, dtype, n, c, d, h, w, k, t, r, s, stride=1, padding=0, dilation=1, groups=1):
    """(forward, input_grad, weight_grad) workspace bytes cuDNN 9.19 allocates for a 3-d convolution
    under PyTorch 2.11's defaults on the H100, or None where the model does not know (an element is
    None where only that direction is unknown). Fitted by scripts/conv_model/fit3d.py to the
    conv3d-design rows scripts/measure_conv3d.py measured (reports/reference/conv-model/FINDINGS.md
    gives its held-out figures); dilation 1 only. PyTorch's own depthwise kernels
    (CudaDepthwise3d: float32 and bfloat16 depthwise) allocate none."""
    gpu, dtype = str(gpu).lower(), str(dtype).replace("torch.", "")
    if gpu != "h100" or dtype not in _ELT or _triple(dilation) != (1, 1, 1):
        return None
    if groups == c and groups == k and groups > 1 and dtype in ("float32", "bfloat16"):
        return (0, 0, 0)
    (sd, sh, sw), (pd_, ph, pw) = _triple(stride), _triple(padding)
    e = _ELT[dtype]
    do, ho, wo = (d + 2 * pd_ - t) // sd + 1, (h + 2 * ph - r) // sh + 1, (w + 2 * pw - s) // sw + 1
    cg, kg, trs = c // groups, k // groups, t * r * s
    X, Y, W = n * c * d * h * w * e, n * k * do * ho * wo * e, k * cg * trs * e
    cp, kp = _padded(dtype, c), _padded(dtype, k)
    terms = [X, Y, W if trs > 1 else 0, W, n * c * trs * do * ho * wo * e, n * k * cg * trs * 4,
             n * cp * d * h * w * e, n * kp * do * ho * wo * e, kp * (cp // groups) * trs * e if trs > 1 else 0]
    named = {"dt": _DT[dtype], "n": n, "c": c, "d": d, "h": h, "w": w, "k": k, "t": t, "r": r, "s": s, "sd": sd, "sh": sh,
             "sw": sw, "pdd": pd_, "ph": ph, "pw": pw, "g": groups, "cg": cg, "kg": kg, "do": do, "ho": ho, "wo": wo,
             "trs": trs, "npix": n * do * ho * wo, "crs": cg * trs, "X": X, "Y": Y, "W": W, "vol": d * h * w,
             "nw4": n * k * cg * trs * 4}
    model = _load("conv_model_3d_trees.json.gz")
    feats = [named[f] for f in model["features"]]
    return tuple(_predict(model["trees"][direction], feats, terms) for direction in ("forward", "input_grad", "weight_grad"))


if __name__ == "__main__":
    # The DCGAN layer (512 -> 256, 4x4 -> 8x8, kernel 4 stride 2 padding 1) at batch 64 in float32.
    print(workspaces("h100", "float32", 64, 512, 4, 4, 256, 4, 4, 2, 1, 1, 1, transposed=True, extrapolate=True))
    print(workspaces("h100", "bfloat16", 32, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1))
