"""DDP fine-tuning of an HF Whisper (small shape) speech-to-text model from a DataLoader whose last batch per epoch is short.

Parallelism: ``DistributedDataParallel(device_ids=[local_rank])`` over 2 ranks around
``WhisperForConditionalGeneration`` built from a ``WhisperConfig`` of the whisper-small shape
(d_model 768, 12 encoder + 12 decoder layers, 12 heads, FFN 3072, 80 mel bins, 1500 encoder
positions, vocab 51865, SDPA attention; about 241.7 M parameters, random init).

Data: an in-memory ``TensorDataset`` of 77 synthetic log-mel inputs (80 x 3000, fp32) with
label sequences of 96 token slots (each utterance 24-96 real tokens, the rest -100), read
through a ``DataLoader`` (batch 12, 2 workers, pinned memory) over a
``DistributedSampler(shuffle=True, drop_last=False)``: the sampler pads 77 to 78 samples
(repeating one), so each rank sees 39 samples per epoch in batches of 12, 12, 12 and a short
final batch of 3.
``set_epoch`` is called every epoch; 2 epochs = 8 optimizer steps. The model builds the
decoder inputs by shifting the labels right (start token 50257).
Precision: fp32 parameters, ``torch.autocast("cuda", dtype=torch.bfloat16)`` around the
forward (the model's own cross entropy inside it).
Optimizer: ``torch.optim.AdamW`` (lr 1e-4, weight decay 0.01) with a linear warm-up over 3
steps (``LambdaLR``), ``clip_grad_norm_(1.0)``; per step the loss is all-reduced (AVG) and
printed on rank 0 together with the batch size.
Evaluation: a 10-sample validation ``TensorDataset`` through a ``DistributedSampler(shuffle=False)``
(5 samples per rank, one batch) in ``eval()`` under ``torch.no_grad()``; the summed token loss
and the token count are all-reduced (SUM) and the mean printed on rank 0.
"""
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler
from transformers import WhisperConfig, WhisperForConditionalGeneration

VOCAB = 51865
D_MODEL = 768
LAYERS = 12
HEADS = 12
FFN = 3072
MELS = 80
FRAMES = 3000
LABEL_SLOTS = 96
TRAIN_SAMPLES = 77
VAL_SAMPLES = 10
BATCH = 12
EPOCHS = 2
WARMUP = 3


def make_dataset(n, seed):
    g = torch.Generator()
    g.manual_seed(seed)
    features = torch.randn(n, MELS, FRAMES, generator=g) * 0.5
    labels = torch.randint(0, 50257, (n, LABEL_SLOTS), generator=g)
    lengths = torch.randint(24, LABEL_SLOTS + 1, (n,), generator=g)
    positions = torch.arange(LABEL_SLOTS).unsqueeze(0)
    labels[:, -1:] = 50256  # <|endoftext|> if the utterance fills every slot
    labels = labels.masked_fill(positions >= lengths.unsqueeze(1), -100)
    return TensorDataset(features, labels)


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)

    torch.manual_seed(0)
    config = WhisperConfig(
        vocab_size=VOCAB,
        d_model=D_MODEL,
        encoder_layers=LAYERS,
        decoder_layers=LAYERS,
        encoder_attention_heads=HEADS,
        decoder_attention_heads=HEADS,
        encoder_ffn_dim=FFN,
        decoder_ffn_dim=FFN,
        num_mel_bins=MELS,
        max_source_positions=FRAMES // 2,
        max_target_positions=448,
        use_cache=False,
        attn_implementation="sdpa",
    )
    model = WhisperForConditionalGeneration(config).to(device)
    model = DDP(model, device_ids=[local_rank])

    train_set = make_dataset(TRAIN_SAMPLES, seed=1)
    val_set = make_dataset(VAL_SAMPLES, seed=2)
    train_sampler = DistributedSampler(train_set, num_replicas=world_size, rank=rank,
                                       shuffle=True, seed=0, drop_last=False)
    val_sampler = DistributedSampler(val_set, num_replicas=world_size, rank=rank, shuffle=False)
    train_loader = DataLoader(train_set, batch_size=BATCH, sampler=train_sampler,
                              num_workers=2, pin_memory=True, drop_last=False)
    val_loader = DataLoader(val_set, batch_size=8, sampler=val_sampler, num_workers=0, pin_memory=True)

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / WARMUP))
    if rank == 0:
        n_params = sum(p.numel() for p in model.parameters())
        print(f"params {n_params / 1e6:.1f} M, {len(train_loader)} batches per epoch per rank", flush=True)

    step = 0
    model.train()
    for epoch in range(EPOCHS):
        train_sampler.set_epoch(epoch)
        for features, labels in train_loader:
            features = features.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                loss = model(input_features=features, labels=labels).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optimizer.step()
            scheduler.step()

            reported = loss.detach().float()
            dist.all_reduce(reported, op=dist.ReduceOp.AVG)
            if rank == 0:
                print(f"epoch {epoch} step {step} batch {features.shape[0]} loss {reported.item():.4f}", flush=True)
            step += 1

    model.eval()
    totals = torch.zeros(2, device=device, dtype=torch.float64)
    with torch.no_grad():
        for features, labels in val_loader:
            features = features.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                logits = model(input_features=features, labels=labels).logits
            token_loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), labels.reshape(-1),
                                         ignore_index=-100, reduction="sum")
            totals[0] += token_loss.double()
            totals[1] += (labels != -100).sum().double()
    dist.all_reduce(totals, op=dist.ReduceOp.SUM)
    if rank == 0:
        print(f"eval token loss {(totals[0] / totals[1]).item():.4f} over {int(totals[1].item())} tokens", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
