"""FSDP2 over an HF BART encoder-decoder whose word embeddings are tied, bf16 mixed precision.

Parallelism: FSDP2 (``torch.distributed.fsdp.fully_shard``) over 2 ranks on a 1-D DeviceMesh.
Every ``BartEncoderLayer`` and every ``BartDecoderLayer`` is its own FSDP2 group with
``reshard_after_forward=True``; the root ``fully_shard(model, reshard_after_forward=False)``
holds the one shared embedding matrix (``model.shared`` is tied to the encoder and decoder
``embed_tokens`` and to ``lm_head``), the learned position embeddings, the embedding
LayerNorms and the ``final_logits_bias`` buffer.

Model: ``BartForConditionalGeneration`` built from a ``BartConfig`` of the bart-large shape
(d_model 1024, 12 encoder + 12 decoder layers, 16 heads, FFN 4096, vocab 50265, max
positions 1024, SDPA attention), random init, about 406 M parameters; dropout left at the
config default (0.1).

Precision: fp32 sharded parameters, ``MixedPrecisionPolicy(param_dtype=bfloat16,
reduce_dtype=float32)``; the loss is the model's own cross entropy over the (bf16) logits
when ``labels`` are given (decoder inputs are the labels shifted right by the model).
Optimizer: ``torch.optim.AdamW`` (lr 1e-4, weight decay 0.01) over the DTensor parameters,
``clip_grad_norm_(1.0)`` every step.
Data: synthetic token ids, batch 8 per rank, source length 1024, target length 256,
6 training steps with the loss all-reduced (AVG) and printed on rank 0, then one evaluation
batch under ``torch.no_grad()`` with ``model.eval()``.
"""
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from transformers import BartConfig, BartForConditionalGeneration

VOCAB = 50265
D_MODEL = 1024
LAYERS = 12
HEADS = 16
FFN = 4096
BATCH = 8
SRC_LEN = 1024
TGT_LEN = 256
STEPS = 6


def make_batch(generator, device):
    src = torch.randint(4, VOCAB, (BATCH, SRC_LEN), generator=generator, device=device)
    tgt = torch.randint(4, VOCAB, (BATCH, TGT_LEN), generator=generator, device=device)
    src[:, 0] = 0  # <s>
    src[:, -1] = 2  # </s>
    tgt[:, -1] = 2
    return src, torch.ones_like(src), tgt


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)
    mesh = init_device_mesh("cuda", (world_size,), mesh_dim_names=("dp",))

    torch.manual_seed(0)
    config = BartConfig(
        vocab_size=VOCAB,
        d_model=D_MODEL,
        encoder_layers=LAYERS,
        decoder_layers=LAYERS,
        encoder_attention_heads=HEADS,
        decoder_attention_heads=HEADS,
        encoder_ffn_dim=FFN,
        decoder_ffn_dim=FFN,
        max_position_embeddings=SRC_LEN,
        tie_word_embeddings=True,
    )
    model = BartForConditionalGeneration(config).to(device)
    assert model.lm_head.weight is model.model.shared.weight

    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.model.encoder.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=True)
    for layer in model.model.decoder.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=True)
    fully_shard(model, mesh=mesh, mp_policy=mp, reshard_after_forward=False)

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)

    gen = torch.Generator(device=device)
    gen.manual_seed(1000 + rank)

    model.train()
    for step in range(STEPS):
        input_ids, attention_mask, labels = make_batch(gen, device)
        out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        loss = out.loss
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

        reported = loss.detach().clone()
        dist.all_reduce(reported, op=dist.ReduceOp.AVG)
        if hasattr(grad_norm, "full_tensor"):
            grad_norm = grad_norm.full_tensor()
        if rank == 0:
            print(f"step {step} loss {reported.item():.4f} grad_norm {grad_norm.item():.3f}", flush=True)

    model.eval()
    with torch.no_grad():
        input_ids, attention_mask, labels = make_batch(gen, device)
        eval_loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        dist.all_reduce(eval_loss, op=dist.ReduceOp.AVG)
    if rank == 0:
        print(f"eval loss {eval_loss.item():.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
