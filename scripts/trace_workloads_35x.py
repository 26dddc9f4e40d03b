"""Twenty-fourth held-out group of issue 35 (group ISSUE35X): twelve more programs of kinds no earlier group had (GIT image captioning train then greedy generate; Decision Transformer offline RL with warmup and a rollout; Funnel Transformer classifier with fp16 GradScaler; PEFT IA3 on a Llama LM then merge; timm EdgeNeXt with timm EMA and cosine warmup under fp16; timm Res2Net SGD channels_last bf16 with top-5 eval; torchvision SSD300 VGG16 train then detect; Autoformer multivariate forecasting with sampled generate; Kolmogorov-Arnold network with B-spline bases; multiresolution hash-grid encoding image fit; rational-quadratic neural spline flow with searchsorted; deep CCA with eigh and svdvals in float64), written by a helper that read no part of the tracer, committed before they were recorded on a GPU (an H200) or compared with anything.

Each is a function of the device, recorded by scripts/record_trace_workloads.py (VRAMLAB_HOLDOUT=issue35x).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def hf_git_image_captioning_train_then_greedy_generate_bf16(device):
    """GitForCausalLM built from a GitConfig (ViT-B/16 vision tower at 224px, 12 layers, 768 wide;
    6-layer 768-wide text decoder, vocab 30522), batch 24 images with 28-token captions (right padded,
    pad labels -100), bf16 autocast, AdamW lr 5e-5 with linear decay, 6 steps with printed loss,
    then eval: greedy generate() of 20 new tokens for 8 images under no_grad."""
    from transformers import GitConfig, GitForCausalLM

    torch.manual_seed(0)
    batch_size, caption_len, steps = 24, 28, 6
    config = GitConfig(
        vision_config=dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                           num_attention_heads=12, image_size=224, patch_size=16),
        vocab_size=30522, hidden_size=768, num_hidden_layers=6, num_attention_heads=12,
        intermediate_size=3072, max_position_embeddings=512,
    )
    model = GitForCausalLM(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 - s / steps)

    model.train()
    for step in range(steps):
        pixel_values = torch.randn(batch_size, 3, 224, 224).to(device)
        lengths = torch.randint(10, caption_len + 1, (batch_size,))
        input_ids = torch.randint(1000, 30000, (batch_size, caption_len))
        input_ids[:, 0] = config.bos_token_id
        positions = torch.arange(caption_len)[None, :]
        attention_mask = (positions < lengths[:, None]).long()
        input_ids[positions.expand(batch_size, -1) == (lengths[:, None] - 1)] = config.eos_token_id
        input_ids = input_ids.masked_fill(attention_mask == 0, config.pad_token_id)
        labels = input_ids.masked_fill(attention_mask == 0, -100)
        input_ids, attention_mask, labels = input_ids.to(device), attention_mask.to(device), labels.to(device)
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
            out = model(input_ids=input_ids, attention_mask=attention_mask,
                        pixel_values=pixel_values, labels=labels)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"step {step} loss {out.loss.item():.4f} lr {scheduler.get_last_lr()[0]:.2e}")

    model.eval()
    with torch.no_grad(), torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
        images = torch.randn(8, 3, 224, 224, device=device)
        generated = model.generate(pixel_values=images, max_new_tokens=20, do_sample=False)
    print("generated shape", tuple(generated.shape), "first caption ids", generated[0, :8].tolist())


def hf_decision_transformer_offline_rl_warmup_clip_rollout(device):
    """DecisionTransformerModel from a config (state_dim 17, act_dim 6, hidden 512, 6 GPT-2 layers,
    8 heads, context K=50 so 150 tokens), fp32, batch 384 trajectory windows with left padding and
    returns-to-go from a reverse cumsum, masked MSE on tanh action predictions, AdamW lr 1e-4 wd 1e-4
    with LambdaLR linear warmup, grad clip 0.25, 10 steps; then a no_grad 30-step autoregressive
    rollout on 16 synthetic linear environments."""
    from transformers import DecisionTransformerConfig, DecisionTransformerModel

    torch.manual_seed(0)
    state_dim, act_dim, context, batch_size, steps, warmup = 17, 6, 50, 384, 10, 4
    config = DecisionTransformerConfig(state_dim=state_dim, act_dim=act_dim, hidden_size=512,
                                       n_layer=6, n_head=8, n_inner=2048, max_ep_len=1000,
                                       n_positions=1024, activation_function="relu")
    model = DecisionTransformerModel(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min((s + 1) / warmup, 1.0))

    # offline dataset of 512 episodes of length 200 on the CPU
    n_episodes, ep_len = 512, 200
    states_all = torch.randn(n_episodes, ep_len, state_dim)
    actions_all = torch.tanh(torch.randn(n_episodes, ep_len, act_dim))
    rewards_all = torch.rand(n_episodes, ep_len)
    rtg_all = rewards_all.flip(1).cumsum(1).flip(1)
    state_mean, state_std = states_all.mean((0, 1)), states_all.std((0, 1)) + 1e-6
    scale = 100.0

    def sample_batch():
        ep = torch.randint(0, n_episodes, (batch_size,))
        start = torch.randint(-context + 10, ep_len - context, (batch_size,))
        s = torch.zeros(batch_size, context, state_dim)
        a = torch.full((batch_size, context, act_dim), -10.0)
        r = torch.zeros(batch_size, context, 1)
        g = torch.zeros(batch_size, context, 1)
        t = torch.zeros(batch_size, context, dtype=torch.long)
        m = torch.zeros(batch_size, context)
        for i in range(batch_size):
            lo = max(int(start[i]), 0)
            hi = int(start[i]) + context
            n = hi - lo
            e = int(ep[i])
            s[i, -n:] = (states_all[e, lo:hi] - state_mean) / state_std
            a[i, -n:] = actions_all[e, lo:hi]
            r[i, -n:, 0] = rewards_all[e, lo:hi]
            g[i, -n:, 0] = rtg_all[e, lo:hi] / scale
            t[i, -n:] = torch.arange(lo, hi)
            m[i, -n:] = 1.0
        return [x.to(device) for x in (s, a, r, g, t, m)]

    model.train()
    for step in range(steps):
        s, a, r, g, t, m = sample_batch()
        out = model(states=s, actions=a, rewards=r, returns_to_go=g, timesteps=t, attention_mask=m)
        valid = m.reshape(-1) > 0
        pred = out.action_preds.reshape(-1, act_dim)[valid]
        target = a.reshape(-1, act_dim)[valid]
        loss = F.mse_loss(pred, target)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        optimizer.step()
        scheduler.step()
        print(f"step {step} action mse {loss.item():.4f}")

    model.eval()
    n_env, horizon = 16, 30
    dyn = torch.randn(state_dim, state_dim, device=device) * 0.1
    act_map = torch.randn(act_dim, state_dim, device=device) * 0.1
    state = torch.randn(n_env, state_dim, device=device)
    mean_d, std_d = state_mean.to(device), state_std.to(device)
    states = ((state - mean_d) / std_d).unsqueeze(1)
    actions = torch.zeros(n_env, 1, act_dim, device=device)
    rewards = torch.zeros(n_env, 1, 1, device=device)
    rtg = torch.full((n_env, 1, 1), 3600.0 / scale, device=device)
    timesteps = torch.zeros(n_env, 1, dtype=torch.long, device=device)
    total_reward = torch.zeros(n_env, device=device)
    with torch.no_grad():
        for t in range(horizon):
            out = model(states=states[:, -context:], actions=actions[:, -context:],
                        rewards=rewards[:, -context:], returns_to_go=rtg[:, -context:],
                        timesteps=timesteps[:, -context:],
                        attention_mask=torch.ones(n_env, states[:, -context:].shape[1], device=device))
            action = out.action_preds[:, -1]
            actions[:, -1] = action
            state = state @ dyn + action @ act_map
            reward = -(state ** 2).mean(1)
            total_reward += reward
            rewards[:, -1, 0] = reward
            states = torch.cat([states, ((state - mean_d) / std_d).unsqueeze(1)], 1)
            actions = torch.cat([actions, torch.zeros(n_env, 1, act_dim, device=device)], 1)
            rewards = torch.cat([rewards, torch.zeros(n_env, 1, 1, device=device)], 1)
            rtg = torch.cat([rtg, (rtg[:, -1:] - reward[:, None, None] / scale)], 1)
            timesteps = torch.cat([timesteps, torch.full((n_env, 1), t + 1, device=device, dtype=torch.long)], 1)
    print(f"rollout mean return {total_reward.mean().item():.3f}")


def hf_funnel_transformer_classification_fp16_scaler(device):
    """FunnelForSequenceClassification from a FunnelConfig (blocks 4-4-4, d_model 768, 12 heads,
    d_inner 3072, 2 decoder layers, relative_shift attention, 3 labels), batch 32 x 512 tokens with
    padded attention masks, fp16 autocast with torch.amp.GradScaler on CUDA (fp32 elsewhere),
    AdamW lr 3e-5 with linear warmup, 6 steps; then an eval loop of 3 batches counting accuracy."""
    from transformers import FunnelConfig, FunnelForSequenceClassification

    torch.manual_seed(0)
    batch_size, seq_len, steps = 32, 512, 6
    use_amp = torch.device(device).type == "cuda"
    config = FunnelConfig(vocab_size=30522, block_sizes=[4, 4, 4], num_decoder_layers=2, d_model=768,
                          n_head=12, d_head=64, d_inner=3072, num_labels=3)
    model = FunnelForSequenceClassification(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min((s + 1) / 2, 1.0))
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp)

    def make_batch():
        ids = torch.randint(5, 30522, (batch_size, seq_len), device=device)
        lengths = torch.randint(seq_len // 4, seq_len + 1, (batch_size,), device=device)
        mask = (torch.arange(seq_len, device=device)[None, :] < lengths[:, None]).long()
        ids = ids.masked_fill(mask == 0, 0)
        token_type_ids = torch.zeros_like(ids)
        labels = torch.randint(0, 3, (batch_size,), device=device)
        return ids, mask, token_type_ids, labels

    model.train()
    for step in range(steps):
        ids, mask, tt, labels = make_batch()
        with torch.autocast(device_type="cuda", dtype=torch.float16, enabled=use_amp):
            out = model(input_ids=ids, attention_mask=mask, token_type_ids=tt, labels=labels)
        scaler.scale(out.loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"step {step} loss {out.loss.item():.4f} scale {scaler.get_scale() if use_amp else 1.0}")

    model.eval()
    correct = total = 0
    with torch.no_grad():
        for _ in range(3):
            ids, mask, tt, labels = make_batch()
            with torch.autocast(device_type="cuda", dtype=torch.float16, enabled=use_amp):
                logits = model(input_ids=ids, attention_mask=mask, token_type_ids=tt).logits
            correct += (logits.argmax(-1) == labels).sum().item()
            total += labels.numel()
    print(f"eval accuracy {correct / total:.3f}")


def peft_ia3_llama_causal_lm_bf16_then_merge(device):
    """PEFT IA3 (k_proj, v_proj, down_proj; down_proj as feed-forward) on a LlamaForCausalLM built from
    a config (hidden 1024, 12 layers, 16 heads, 4 KV heads, intermediate 2816, vocab 32000), fp32
    weights, bf16 autocast, batch 8 x 768 tokens, AdamW lr 3e-3 on the IA3 vectors only, 8 steps;
    then an eval perplexity over 2 batches, merge_and_unload() and a greedy generate of 16 tokens."""
    from peft import IA3Config, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    batch_size, seq_len, steps = 8, 768, 8
    config = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=12,
                         num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=2048)
    base = LlamaForCausalLM(config)
    peft_config = IA3Config(task_type="CAUSAL_LM", target_modules=["k_proj", "v_proj", "down_proj"],
                            feedforward_modules=["down_proj"])
    model = get_peft_model(base, peft_config).to(device)
    model.print_trainable_parameters()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    autocast = torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)

    model.train()
    for step in range(steps):
        ids = torch.randint(0, 32000, (batch_size, seq_len)).to(device)
        with autocast:
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(f"step {step} loss {loss.item():.4f}")

    model.eval()
    losses = []
    with torch.no_grad():
        for _ in range(2):
            ids = torch.randint(0, 32000, (batch_size, seq_len), device=device)
            with autocast:
                losses.append(model(input_ids=ids, labels=ids).loss.float())
    print(f"eval perplexity {math.exp(torch.stack(losses).mean().item()):.1f}")

    merged = model.merge_and_unload()
    prompt = torch.randint(0, 32000, (4, 32), device=device)
    with torch.no_grad(), autocast:
        out = merged.generate(prompt, max_new_tokens=16, do_sample=False, pad_token_id=0)
    print("generated", tuple(out.shape))


def timm_edgenext_xx_small_fp16_scaler_model_ema_cosine(device):
    """timm edgenext_xx_small (weights none, 100 classes, drop_path 0.05), batch 128 at 256x256 made on
    the CPU, fp16 autocast with GradScaler on CUDA (fp32 elsewhere), timm create_optimizer_v2 AdamW
    lr 2e-3 wd 0.05, timm CosineLRScheduler with 2 warmup updates stepped per update, timm ModelEmaV3
    decay 0.998, mixup-free soft-target cross entropy, 8 steps; then eval of model and EMA on 2 batches."""
    import timm
    from timm.loss import SoftTargetCrossEntropy
    from timm.optim import create_optimizer_v2
    from timm.scheduler import CosineLRScheduler
    from timm.utils import ModelEmaV3

    torch.manual_seed(0)
    batch_size, image_size, steps, num_classes = 128, 256, 8, 100
    use_amp = torch.device(device).type == "cuda"
    model = timm.create_model("edgenext_xx_small", pretrained=False, num_classes=num_classes,
                              drop_path_rate=0.05).to(device)
    ema = ModelEmaV3(model, decay=0.998)
    optimizer = create_optimizer_v2(model, opt="adamw", lr=2e-3, weight_decay=0.05)
    scheduler = CosineLRScheduler(optimizer, t_initial=steps, lr_min=1e-5, warmup_t=2,
                                  warmup_lr_init=1e-5, t_in_epochs=False)
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
    criterion = SoftTargetCrossEntropy()

    model.train()
    for step in range(steps):
        images = torch.randn(batch_size, 3, image_size, image_size).to(device, non_blocking=True)
        labels = torch.randint(0, num_classes, (batch_size,))
        soft = F.one_hot(labels, num_classes).float() * 0.9 + 0.1 / num_classes
        soft = soft.to(device)
        with torch.autocast(device_type="cuda", dtype=torch.float16, enabled=use_amp):
            loss = criterion(model(images), soft)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        ema.update(model, step=step)
        scheduler.step_update(num_updates=step + 1)
        print(f"step {step} loss {loss.item():.4f} lr {optimizer.param_groups[0]['lr']:.2e}")

    model.eval()
    correct, correct_ema, total = 0, 0, 0
    with torch.no_grad(), torch.autocast(device_type="cuda", dtype=torch.float16, enabled=use_amp):
        for _ in range(2):
            images = torch.randn(batch_size, 3, image_size, image_size, device=device)
            labels = torch.randint(0, num_classes, (batch_size,), device=device)
            correct += (model(images).argmax(1) == labels).sum().item()
            correct_ema += (ema.module(images).argmax(1) == labels).sum().item()
            total += batch_size
    print(f"top1 {100 * correct / total:.2f} ema top1 {100 * correct_ema / total:.2f}")


def timm_res2net50_26w_4s_sgd_channels_last_bf16_top5(device):
    """timm res2net50_26w_4s (weights none, 1000 classes) in channels_last, batch 64 at 224x224 made on
    the device, bf16 autocast, SGD nesterov momentum 0.9 lr 0.1 wd 1e-4 with MultiStepLR, timm
    LabelSmoothingCrossEntropy 0.1, 8 steps; then eval on 2 batches of 100 with top-1/top-5 counts."""
    import timm
    from timm.loss import LabelSmoothingCrossEntropy

    torch.manual_seed(0)
    batch_size, eval_batch, steps = 64, 100, 8
    dev_type = torch.device(device).type
    model = timm.create_model("res2net50_26w_4s", pretrained=False).to(device, memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[4, 6], gamma=0.1)
    criterion = LabelSmoothingCrossEntropy(smoothing=0.1)

    model.train()
    for step in range(steps):
        images = torch.randn(batch_size, 3, 224, 224, device=device).contiguous(memory_format=torch.channels_last)
        labels = torch.randint(0, 1000, (batch_size,), device=device)
        with torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
            loss = criterion(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        print(f"step {step} loss {loss.item():.4f}")

    model.eval()
    top1 = top5 = seen = 0
    with torch.inference_mode(), torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
        for _ in range(2):
            images = torch.randn(eval_batch, 3, 224, 224, device=device).contiguous(memory_format=torch.channels_last)
            labels = torch.randint(0, 1000, (eval_batch,), device=device)
            pred = model(images).topk(5, dim=1).indices
            hits = pred == labels[:, None]
            top1 += hits[:, 0].sum().item()
            top5 += hits.any(1).sum().item()
            seen += eval_batch
    print(f"top1 {top1 / seen:.3f} top5 {top5 / seen:.3f}")


def tv_ssd300_vgg16_train_then_detect(device):
    """torchvision ssd300_vgg16 (weights none, backbone weights none, 21 classes), fp32, batches of 16
    images of mixed sizes (list input, resized to 300 by the model transform) with 1-5 boxes each,
    SGD momentum 0.9 lr 1e-3 wd 5e-4, 6 steps summing the bbox_regression and classification losses;
    then eval detection on 8 images counting detections above score 0.05."""
    from torchvision.models.detection import ssd300_vgg16

    torch.manual_seed(0)
    batch_size, steps = 16, 6
    model = ssd300_vgg16(weights=None, weights_backbone=None, num_classes=21).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=1e-3, momentum=0.9, weight_decay=5e-4)

    def make_images(n):
        images, targets = [], []
        for _ in range(n):
            h, w = int(torch.randint(280, 500, (1,))), int(torch.randint(280, 500, (1,)))
            images.append(torch.rand(3, h, w).to(device))
            k = int(torch.randint(1, 6, (1,)))
            xy = torch.rand(k, 2) * torch.tensor([w * 0.6, h * 0.6])
            wh = torch.rand(k, 2) * torch.tensor([w * 0.35, h * 0.35]) + 16
            boxes = torch.cat([xy, xy + wh], 1)
            targets.append({"boxes": boxes.to(device), "labels": torch.randint(1, 21, (k,)).to(device)})
        return images, targets

    model.train()
    for step in range(steps):
        images, targets = make_images(batch_size)
        loss_dict = model(images, targets)
        loss = sum(loss_dict.values())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f} " +
              " ".join(f"{k} {v.item():.3f}" for k, v in loss_dict.items()))

    model.eval()
    images, _ = make_images(8)
    with torch.no_grad():
        detections = model(images)
    counts = [int((d["scores"] > 0.05).sum()) for d in detections]
    print("detections per image", counts)


def hf_autoformer_multivariate_forecast_sampling(device):
    """AutoformerForPrediction from a config (7 variates, context 96, prediction 24, lags up to 24,
    2 time features, d_model 128, 2 encoder / 1 decoder layers, 4 heads, ffn 256, autocorrelation
    factor 3, student-t head, 50 parallel samples), fp32, batch 256 windows cut from a synthetic
    seasonal series on the CPU, AdamW lr 1e-3, 8 steps of NLL with grad clip; then generate() samples
    for 64 windows and a printed MAE of the sample median."""
    from transformers import AutoformerConfig, AutoformerForPrediction

    torch.manual_seed(0)
    n_vars, context, horizon, batch_size, steps = 7, 96, 24, 256, 8
    lags = [1, 2, 3, 4, 5, 6, 7, 24]
    config = AutoformerConfig(prediction_length=horizon, context_length=context, input_size=n_vars,
                              lags_sequence=lags, num_time_features=2, d_model=128, encoder_layers=2,
                              decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
                              encoder_ffn_dim=256, decoder_ffn_dim=256, num_parallel_samples=50,
                              label_length=48)
    model = AutoformerForPrediction(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    past_len = context + max(lags)

    total_len = 20000
    t = torch.arange(total_len, dtype=torch.float32)
    phases = torch.rand(n_vars) * 6.28
    series = (torch.sin(2 * math.pi * t[:, None] / 24 + phases) + 0.5 * torch.sin(2 * math.pi * t[:, None] / 168)
              + 0.1 * torch.randn(total_len, n_vars) + 2.0)
    time_feats = torch.stack([(t % 24) / 23.0 - 0.5, (t % 168) / 167.0 - 0.5], 1)

    def make_batch(n):
        starts = torch.randint(0, total_len - past_len - horizon, (n,))
        idx = starts[:, None] + torch.arange(past_len + horizon)[None, :]
        vals, feats = series[idx], time_feats[idx]
        return (vals[:, :past_len].to(device), feats[:, :past_len].to(device),
                vals[:, past_len:].to(device), feats[:, past_len:].to(device))

    model.train()
    for step in range(steps):
        pv, pt, fv, ft = make_batch(batch_size)
        out = model(past_values=pv, past_time_features=pt, past_observed_mask=torch.ones_like(pv),
                    future_values=fv, future_time_features=ft)
        optimizer.zero_grad()
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        print(f"step {step} nll {out.loss.item():.4f}")

    model.eval()
    pv, pt, fv, ft = make_batch(64)
    with torch.no_grad():
        samples = model.generate(past_values=pv, past_time_features=pt, future_time_features=ft,
                                 past_observed_mask=torch.ones_like(pv)).sequences
    median = samples.median(dim=1).values
    print("samples", tuple(samples.shape), f"median MAE {(median - fv).abs().mean().item():.4f}")


class _KANLayer(nn.Module):
    def __init__(self, in_features, out_features, grid_size=8, spline_order=3, grid_range=(-1.0, 1.0)):
        super().__init__()
        self.spline_order = spline_order
        h = (grid_range[1] - grid_range[0]) / grid_size
        grid = torch.arange(-spline_order, grid_size + spline_order + 1, dtype=torch.float32) * h + grid_range[0]
        self.register_buffer("grid", grid.expand(in_features, -1).contiguous())
        self.base_weight = nn.Parameter(torch.empty(out_features, in_features))
        nn.init.kaiming_uniform_(self.base_weight, a=math.sqrt(5))
        self.spline_weight = nn.Parameter(
            torch.randn(out_features, in_features, grid_size + spline_order) * (0.1 / math.sqrt(in_features)))
        self.spline_scaler = nn.Parameter(torch.ones(out_features, in_features))

    def b_splines(self, x):
        g = self.grid
        x = x.unsqueeze(-1)
        bases = ((x >= g[:, :-1]) & (x < g[:, 1:])).to(x.dtype)
        for p in range(1, self.spline_order + 1):
            left = (x - g[:, :-(p + 1)]) / (g[:, p:-1] - g[:, :-(p + 1)]) * bases[..., :-1]
            right = (g[:, p + 1:] - x) / (g[:, p + 1:] - g[:, 1:-p]) * bases[..., 1:]
            bases = left + right
        return bases

    def forward(self, x):
        base = F.linear(F.silu(x), self.base_weight)
        weight = self.spline_weight * self.spline_scaler.unsqueeze(-1)
        spline = torch.einsum("bik,oik->bo", self.b_splines(x), weight)
        return base + spline


def kan_bspline_regression_adam(device):
    """Kolmogorov-Arnold network [32, 256, 256, 1] with cubic B-spline bases on an 8-interval grid
    (Cox-de Boor recursion, einsum over basis functions, SiLU residual branch), fp32, batch 32768
    points in [-1, 1]^32 made on the device, Adam lr 2e-3 with ExponentialLR, MSE plus an L1 penalty
    on spline coefficients, 10 steps; then a held-out RMSE in chunks of 8192."""
    torch.manual_seed(0)
    dims, batch_size, steps = [32, 256, 256, 1], 32768, 10
    layers = nn.ModuleList(_KANLayer(a, b) for a, b in zip(dims[:-1], dims[1:])).to(device)
    optimizer = torch.optim.Adam(layers.parameters(), lr=2e-3)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.95)
    freqs = torch.randn(dims[0], device=device)

    def target_fn(x):
        return torch.sin(math.pi * (x * freqs).sum(1, keepdim=True) / 4) + 0.5 * (x[:, :4] ** 2).sum(1, keepdim=True)

    def forward(x):
        for i, layer in enumerate(layers):
            x = layer(x)
            if i < len(layers) - 1:
                x = torch.tanh(x)
        return x

    for step in range(steps):
        x = torch.rand(batch_size, dims[0], device=device) * 2 - 1
        pred = forward(x)
        mse = F.mse_loss(pred, target_fn(x))
        reg = sum(layer.spline_weight.abs().mean() for layer in layers)
        loss = mse + 1e-3 * reg
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        print(f"step {step} mse {mse.item():.5f} reg {reg.item():.4f}")

    sq_err, n = 0.0, 0
    with torch.no_grad():
        x_test = torch.rand(batch_size, dims[0], device=device) * 2 - 1
        for chunk in x_test.split(8192):
            sq_err += (forward(chunk) - target_fn(chunk)).pow(2).sum().item()
            n += chunk.shape[0]
    print(f"test rmse {math.sqrt(sq_err / n):.4f}")


class _HashGrid2d(nn.Module):
    def __init__(self, levels=16, features=2, log2_table=19, base_res=16, finest_res=2048):
        super().__init__()
        self.table_size = 2 ** log2_table
        growth = math.exp((math.log(finest_res) - math.log(base_res)) / (levels - 1))
        self.resolutions = [int(math.floor(base_res * growth ** level)) for level in range(levels)]
        self.tables = nn.Parameter(torch.empty(levels, self.table_size, features).uniform_(-1e-4, 1e-4))

    def forward(self, xy):
        outs = []
        for level, res in enumerate(self.resolutions):
            pos = xy * res
            corner0 = pos.floor().long()
            frac = pos - corner0
            feats = 0.0
            for dx in (0, 1):
                for dy in (0, 1):
                    cx, cy = corner0[:, 0] + dx, corner0[:, 1] + dy
                    if (res + 2) ** 2 <= self.table_size:
                        idx = cx * (res + 2) + cy
                    else:
                        idx = torch.bitwise_xor(cx, cy * 2654435761) % self.table_size
                    wx = frac[:, 0] if dx else 1 - frac[:, 0]
                    wy = frac[:, 1] if dy else 1 - frac[:, 1]
                    feats = feats + (wx * wy).unsqueeze(1) * self.tables[level][idx]
            outs.append(feats)
        return torch.cat(outs, 1)


def hash_grid_encoding_image_fit_bf16_mlp(device):
    """Instant-NGP style multiresolution hash encoding (16 levels, 2 features, 2^19 entries per level,
    resolutions 16..2048, XOR-prime spatial hash, bilinear corner gathers) feeding a 64-wide 3-layer
    MLP run under bf16 autocast, fitting a synthetic 2048x2048 RGB image built on the device, batch
    2^19 random pixels, Adam betas (0.9, 0.99) eps 1e-15, 12 steps with PSNR prints; then a no_grad
    reconstruction of a 512x512 crop in chunks of 65536 and its PSNR."""
    torch.manual_seed(0)
    size, batch_size, steps = 2048, 2 ** 19, 12
    dev_type = torch.device(device).type
    ys, xs = torch.meshgrid(torch.linspace(0, 1, size, device=device),
                            torch.linspace(0, 1, size, device=device), indexing="ij")
    image = torch.stack([
        0.5 + 0.5 * torch.sin(40 * xs + 10 * ys ** 2),
        0.5 + 0.5 * torch.cos(30 * ys * xs + 5),
        ((torch.floor(xs * 64) + torch.floor(ys * 64)) % 2) * 0.8 + 0.1,
    ], 0)
    encoder = _HashGrid2d().to(device)
    mlp = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 3)).to(device)
    optimizer = torch.optim.Adam([{"params": encoder.parameters()},
                                  {"params": mlp.parameters(), "weight_decay": 1e-6}],
                                 lr=1e-2, betas=(0.9, 0.99), eps=1e-15)

    def render(xy):
        feats = encoder(xy)
        with torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
            return mlp(feats).float()

    for step in range(steps):
        py = torch.randint(0, size, (batch_size,), device=device)
        px = torch.randint(0, size, (batch_size,), device=device)
        xy = torch.stack([px, py], 1).float() / (size - 1)
        target = image[:, py, px].t()
        loss = F.mse_loss(render(xy), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.5f} psnr {-10 * math.log10(loss.item()):.2f}")

    crop = 512
    with torch.no_grad():
        cy, cx = torch.meshgrid(torch.arange(crop, device=device), torch.arange(crop, device=device), indexing="ij")
        xy = torch.stack([cx.reshape(-1), cy.reshape(-1)], 1).float() / (size - 1)
        recon = torch.cat([render(chunk) for chunk in xy.split(65536)], 0)
        mse = F.mse_loss(recon.clamp(0, 1), image[:, :crop, :crop].reshape(3, -1).t()).item()
    print(f"crop psnr {-10 * math.log10(mse):.2f}")


def _rq_spline(x, w, h, d, inverse, tail=3.0, min_w=1e-3, min_h=1e-3, min_d=1e-3):
    inside = (x >= -tail) & (x <= tail)
    xc = x.clamp(-tail, tail)
    num_bins = w.shape[-1]
    const = math.log(math.exp(1 - min_d) - 1)
    derivs = min_d + F.softplus(F.pad(d, (1, 1), value=const))

    widths = min_w + (1 - min_w * num_bins) * F.softmax(w, -1)
    cumw = F.pad(widths.cumsum(-1), (1, 0)) * 2 * tail - tail
    cumw = torch.cat([cumw[..., :1].clamp(-tail, -tail), cumw[..., 1:-1], cumw[..., -1:].clamp(tail, tail)], -1)
    widths = cumw[..., 1:] - cumw[..., :-1]
    heights = min_h + (1 - min_h * num_bins) * F.softmax(h, -1)
    cumh = F.pad(heights.cumsum(-1), (1, 0)) * 2 * tail - tail
    cumh = torch.cat([cumh[..., :1].clamp(-tail, -tail), cumh[..., 1:-1], cumh[..., -1:].clamp(tail, tail)], -1)
    heights = cumh[..., 1:] - cumh[..., :-1]

    edges = (cumh if inverse else cumw)[..., 1:-1].contiguous()
    idx = torch.searchsorted(edges, xc.unsqueeze(-1).contiguous(), right=True).clamp(0, num_bins - 1)

    def pick(t):
        return t.gather(-1, idx).squeeze(-1)

    in_cumw, in_w, in_cumh, in_h = pick(cumw[..., :-1]), pick(widths), pick(cumh[..., :-1]), pick(heights)
    in_delta = in_h / in_w
    in_d, in_d1 = pick(derivs[..., :-1]), pick(derivs[..., 1:])
    slope_sum = in_d + in_d1 - 2 * in_delta
    if inverse:
        dy = xc - in_cumh
        a = dy * slope_sum + in_h * (in_delta - in_d)
        b = in_h * in_d - dy * slope_sum
        c = -in_delta * dy
        disc = (b.pow(2) - 4 * a * c).clamp_min(0)
        theta = (2 * c) / (-b - disc.sqrt())
        out = theta * in_w + in_cumw
    else:
        theta = (xc - in_cumw) / in_w
    t1m = theta * (1 - theta)
    denom = in_delta + slope_sum * t1m
    dnum = in_delta.pow(2) * (in_d1 * theta.pow(2) + 2 * in_delta * t1m + in_d * (1 - theta).pow(2))
    logdet = torch.log(dnum) - 2 * torch.log(denom)
    if inverse:
        logdet = -logdet
    else:
        out = in_cumh + in_h * (in_delta * theta.pow(2) + in_d * t1m) / denom
    return torch.where(inside, out, x), torch.where(inside, logdet, torch.zeros_like(logdet))


class _RQCoupling(nn.Module):
    def __init__(self, dim, hidden, num_bins, parity):
        super().__init__()
        mask = torch.arange(dim) % 2 == parity
        self.register_buffer("id_idx", torch.nonzero(mask).squeeze(1))
        self.register_buffer("tr_idx", torch.nonzero(~mask).squeeze(1))
        self.num_bins, self.hidden = num_bins, hidden
        n_tr = int((~mask).sum())
        self.net = nn.Sequential(nn.Linear(int(mask.sum()), hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                                 nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, n_tr * (3 * num_bins - 1)))
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)

    def forward(self, x, inverse=False):
        x_id, x_tr = x[:, self.id_idx], x[:, self.tr_idx]
        params = self.net(x_id).view(x.shape[0], x_tr.shape[1], 3 * self.num_bins - 1)
        k = self.num_bins
        w = params[..., :k] / math.sqrt(self.hidden)
        h = params[..., k:2 * k] / math.sqrt(self.hidden)
        d = params[..., 2 * k:]
        y_tr, logdet = _rq_spline(x_tr, w, h, d, inverse)
        out = torch.empty_like(x)
        out[:, self.id_idx] = x_id
        out[:, self.tr_idx] = y_tr
        return out, logdet.sum(1)


def neural_spline_flow_rq_coupling_searchsorted(device):
    """Rational-quadratic neural spline flow (Durkan et al.) on 16-dim synthetic data: 8 coupling layers
    with alternating masks and fixed random permutations, 8 bins, tail bound 3, 3-hidden-layer SiLU
    conditioners of width 512, torch.searchsorted bin lookup and gathers, fp32, batch 16384 drawn from
    a Gaussian mixture on the CPU, Adam lr 5e-4 with CosineAnnealingLR, grad clip 5, 10 steps of NLL;
    then 8192 samples through the analytic inverse and a held-out bits-per-dim."""
    torch.manual_seed(0)
    dim, batch_size, steps, n_layers = 16, 16384, 10, 8
    layers = nn.ModuleList(_RQCoupling(dim, 512, 8, i % 2) for i in range(n_layers)).to(device)
    perms = [torch.randperm(dim, device=device) for _ in range(n_layers)]
    inv_perms = [torch.argsort(p) for p in perms]
    optimizer = torch.optim.Adam(layers.parameters(), lr=5e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    centers = torch.randn(6, dim) * 1.5

    def data(n):
        comp = torch.randint(0, 6, (n,))
        return (centers[comp] + 0.4 * torch.randn(n, dim)).to(device)

    def log_prob(x):
        total = torch.zeros(x.shape[0], device=x.device)
        for layer, perm in zip(layers, perms):
            x, ld = layer(x[:, perm])
            total = total + ld
        base = -0.5 * (x.pow(2) + math.log(2 * math.pi)).sum(1)
        return base + total

    for step in range(steps):
        loss = -log_prob(data(batch_size)).mean()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(layers.parameters(), 5.0)
        optimizer.step()
        scheduler.step()
        print(f"step {step} nll {loss.item():.4f}")

    with torch.no_grad():
        z = torch.randn(8192, dim, device=device)
        for layer, inv_perm in zip(reversed(layers), reversed(inv_perms)):
            z, _ = layer(z, inverse=True)
            z = z[:, inv_perm]
        test_nll = -log_prob(data(8192)).mean().item()
    print(f"sample mean {z.mean().item():.3f} std {z.std().item():.3f} "
          f"test bits/dim {test_nll / (dim * math.log(2)):.3f}")


def deep_cca_eigh_two_views_rmsprop(device):
    """Deep CCA: two 4-layer MLP towers (784 -> 2048 -> 2048 -> 2048 -> 64, BatchNorm + Sigmoid) on two
    noisy nonlinear views of a shared 32-dim latent, batch 8192 made on the device, correlation loss
    computed in float64 (regularised covariances, torch.linalg.eigh inverse square roots, svdvals of
    the whitened cross-covariance), RMSprop lr 1e-3 wd 1e-5, 10 steps; then held-out total correlation."""
    torch.manual_seed(0)
    in_dim, out_dim, batch_size, steps = 784, 64, 8192, 10
    mix1 = torch.randn(32, in_dim, device=device) / math.sqrt(32)
    mix2 = torch.randn(32, in_dim, device=device) / math.sqrt(32)

    def views(n):
        z = torch.randn(n, 32, device=device)
        x1 = torch.tanh(z @ mix1) + 0.3 * torch.randn(n, in_dim, device=device)
        x2 = torch.sigmoid(z @ mix2) * 2 - 1 + 0.3 * torch.randn(n, in_dim, device=device)
        return x1, x2

    def tower():
        return nn.Sequential(nn.Linear(in_dim, 2048), nn.BatchNorm1d(2048), nn.Sigmoid(),
                             nn.Linear(2048, 2048), nn.BatchNorm1d(2048), nn.Sigmoid(),
                             nn.Linear(2048, 2048), nn.BatchNorm1d(2048), nn.Sigmoid(),
                             nn.Linear(2048, out_dim))

    f1, f2 = tower().to(device), tower().to(device)
    optimizer = torch.optim.RMSprop(list(f1.parameters()) + list(f2.parameters()), lr=1e-3, weight_decay=1e-5)

    def total_correlation(h1, h2, reg=1e-3):
        h1, h2 = h1.double(), h2.double()
        n = h1.shape[0]
        h1 = h1 - h1.mean(0, keepdim=True)
        h2 = h2 - h2.mean(0, keepdim=True)
        eye = torch.eye(h1.shape[1], dtype=torch.float64, device=h1.device)
        s11 = h1.t() @ h1 / (n - 1) + reg * eye
        s22 = h2.t() @ h2 / (n - 1) + reg * eye
        s12 = h1.t() @ h2 / (n - 1)

        def inv_sqrt(s):
            evals, evecs = torch.linalg.eigh(s)
            return evecs @ torch.diag(evals.clamp_min(1e-9).rsqrt()) @ evecs.t()

        t = inv_sqrt(s11) @ s12 @ inv_sqrt(s22)
        return torch.linalg.svdvals(t).sum()

    f1.train()
    f2.train()
    for step in range(steps):
        x1, x2 = views(batch_size)
        corr = total_correlation(f1(x1), f2(x2))
        loss = -corr
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} total correlation {corr.item():.3f} / {out_dim}")

    f1.eval()
    f2.eval()
    with torch.no_grad():
        x1, x2 = views(batch_size)
        print(f"held-out total correlation {total_correlation(f1(x1), f2(x2)).item():.3f}")


ISSUE35X = {f.__name__: f for f in [
    hf_git_image_captioning_train_then_greedy_generate_bf16,
    hf_decision_transformer_offline_rl_warmup_clip_rollout,
    hf_funnel_transformer_classification_fp16_scaler,
    peft_ia3_llama_causal_lm_bf16_then_merge,
    timm_edgenext_xx_small_fp16_scaler_model_ema_cosine,
    timm_res2net50_26w_4s_sgd_channels_last_bf16_top5,
    tv_ssd300_vgg16_train_then_detect,
    hf_autoformer_multivariate_forecast_sampling,
    kan_bspline_regression_adam,
    hash_grid_encoding_image_fit_bf16_mlp,
    neural_spline_flow_rq_coupling_searchsorted,
    deep_cca_eigh_two_views_rmsprop,
]}
