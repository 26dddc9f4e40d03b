"""DDP over a Hugging Face T5ForConditionalGeneration built from a T5Config (t5-small shape:
d_model 512, 6 encoder + 6 decoder layers, 8 heads, d_ff 2048, 32128-token vocabulary with tied
embeddings) on 4 ranks, trained under bf16 autocast with the transformers Adafactor optimizer
(relative step, parameter scaling, warm-up init: factored second moments, no first moment);
five steps of 16 synthetic sequence pairs per rank (source 256 tokens, target 64 tokens), loss
from the model's own `labels` path."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from transformers import T5Config, T5ForConditionalGeneration
from transformers.optimization import Adafactor

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
torch.manual_seed(0)

config = T5Config(
    vocab_size=32128,
    d_model=512,
    d_kv=64,
    d_ff=2048,
    num_layers=6,
    num_decoder_layers=6,
    num_heads=8,
    dropout_rate=0.1,
    decoder_start_token_id=0,
    pad_token_id=0,
)
model = T5ForConditionalGeneration(config).cuda()
model.train()
model = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])
optimizer = Adafactor(model.parameters(), lr=None, scale_parameter=True, relative_step=True, warmup_init=True)

torch.manual_seed(1000 + dist.get_rank())
for step in range(5):
    input_ids = torch.randint(1, config.vocab_size, (16, 256), device="cuda")
    attention_mask = torch.ones_like(input_ids)
    labels = torch.randint(1, config.vocab_size, (16, 64), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if dist.get_rank() == 0:
        print(f"step {step} loss {loss.item():.4f}")

dist.destroy_process_group()
