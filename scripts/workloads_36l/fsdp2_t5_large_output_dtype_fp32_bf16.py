"""FSDP2 over an HF T5 encoder-decoder (t5-large shape) with per-block groups and a root ``MixedPrecisionPolicy`` whose ``output_dtype=float32`` upcasts the bf16 logits for a hand-written loss.

Parallelism: FSDP2 (``torch.distributed.fsdp.fully_shard``) over 2 ranks on a 1-D DeviceMesh:
each of the 24 encoder ``T5Block`` and 24 decoder ``T5Block`` modules is its own FSDP2 group
(``reshard_after_forward=True``, ``MixedPrecisionPolicy(param_dtype=bfloat16,
reduce_dtype=float32)``); the root ``fully_shard(model)`` holds the shared token embedding
(used by encoder, decoder and the tied ``lm_head``) and the two final layer norms, with
``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32, output_dtype=float32)`` so
every floating tensor in the returned ``Seq2SeqLMOutput`` (logits, encoder last hidden state)
is cast to fp32 after the root forward.
Model: ``T5ForConditionalGeneration`` built from a ``T5Config`` of the t5-large shape (d_model
1024, d_ff 4096 ReLU, d_kv 64, 16 heads, 24 encoder + 24 decoder layers, vocab 32128, tied
embeddings with decoder-output rescaling, dropout 0.1, eager attention with relative position
bias), about 738 M parameters, random init on the GPU.
Loss: cross entropy over the fp32 logits computed outside the model (``ignore_index=-100``);
decoder inputs are ``model._shift_right(labels)``.
Optimizer: AdamW (lr 1e-4, weight decay 0.01) over the DTensor parameters,
``clip_grad_norm_(1.0)``.
Data: synthetic span-corruption-shaped batches, 8 x 512 encoder tokens and 8 x 114 target
tokens per rank (different per rank), the last 10 target positions of every row are padding
(label -100, attention mask 0); 6 training steps with the loss all-reduced (AVG) and printed on
rank 0, then one evaluation batch under ``torch.no_grad()`` in ``eval()`` with loss and token
accuracy all-reduced.
"""
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from transformers import T5Config, T5ForConditionalGeneration

VOCAB = 32128
D_MODEL = 1024
D_FF = 4096
LAYERS = 24
HEADS = 16
BATCH = 8
SRC_LEN = 512
TGT_LEN = 114
TGT_PAD = 10
STEPS = 6


def make_batch(generator, device):
    input_ids = torch.randint(2, 32000, (BATCH, SRC_LEN), generator=generator, device=device)
    input_ids[:, -1] = 1  # </s>
    attention_mask = torch.ones(BATCH, SRC_LEN, dtype=torch.long, device=device)
    labels = torch.randint(2, 32000, (BATCH, TGT_LEN), generator=generator, device=device)
    labels[:, TGT_LEN - TGT_PAD - 1] = 1
    labels[:, TGT_LEN - TGT_PAD :] = -100
    decoder_attention_mask = (labels != -100).long()
    return input_ids, attention_mask, labels, decoder_attention_mask


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)
    mesh = init_device_mesh("cuda", (world_size,), mesh_dim_names=("dp",))

    torch.manual_seed(0)
    config = T5Config(
        vocab_size=VOCAB,
        d_model=D_MODEL,
        d_kv=64,
        d_ff=D_FF,
        num_layers=LAYERS,
        num_decoder_layers=LAYERS,
        num_heads=HEADS,
        relative_attention_num_buckets=32,
        relative_attention_max_distance=128,
        dropout_rate=0.1,
        feed_forward_proj="relu",
        decoder_start_token_id=0,
        pad_token_id=0,
        eos_token_id=1,
        use_cache=False,
    )
    with torch.device(device):
        model = T5ForConditionalGeneration(config)
    n_params = sum(p.numel() for p in model.parameters())

    block_mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    root_mp = MixedPrecisionPolicy(
        param_dtype=torch.bfloat16, reduce_dtype=torch.float32, output_dtype=torch.float32
    )
    for block in model.encoder.block:
        fully_shard(block, mesh=mesh, mp_policy=block_mp, reshard_after_forward=True)
    for block in model.decoder.block:
        fully_shard(block, mesh=mesh, mp_policy=block_mp, reshard_after_forward=True)
    fully_shard(model, mesh=mesh, mp_policy=root_mp)

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    if rank == 0:
        print(f"world {world_size} params {n_params / 1e6:.1f} M", flush=True)

    gen = torch.Generator(device=device)
    gen.manual_seed(1000 + rank)

    model.train()
    for step in range(STEPS):
        input_ids, attention_mask, labels, decoder_attention_mask = make_batch(gen, device)
        decoder_input_ids = model._shift_right(labels)
        out = model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            use_cache=False,
        )
        logits = out.logits
        assert logits.dtype == torch.float32
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1), ignore_index=-100)
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
        input_ids, attention_mask, labels, decoder_attention_mask = make_batch(gen, device)
        out = model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=model._shift_right(labels),
            decoder_attention_mask=decoder_attention_mask,
            use_cache=False,
        )
        logits = out.logits
        valid = labels != -100
        stats = torch.stack(
            [
                F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1), ignore_index=-100, reduction="sum"),
                (logits.argmax(-1)[valid] == labels[valid]).sum().float(),
                valid.sum().float(),
            ]
        )
        dist.all_reduce(stats, op=dist.ReduceOp.SUM)
    if rank == 0:
        print(f"eval loss {(stats[0] / stats[2]).item():.4f} token acc {(stats[1] / stats[2]).item():.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
