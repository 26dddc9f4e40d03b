"""DDP over a Hugging Face BERT classifier built from its config, fp16 autocast with a GradScaler,
AdamW with a linear warm-up schedule and gradient clipping; three steps."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import BertConfig, BertForSequenceClassification, get_linear_schedule_with_warmup

rank = int(os.environ["RANK"])
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group(backend="nccl")
torch.manual_seed(1234 + rank)

config = BertConfig(hidden_size=512, num_hidden_layers=6, num_attention_heads=8, intermediate_size=2048, num_labels=5)
model = BertForSequenceClassification(config).cuda()
model = DDP(model, device_ids=[local_rank], output_device=local_rank)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5, weight_decay=0.01)
scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=1, num_training_steps=3)
scaler = torch.amp.GradScaler("cuda")

for step in range(3):
    input_ids = torch.randint(0, config.vocab_size, (16, 256), device="cuda")
    attention_mask = torch.ones_like(input_ids)
    labels = torch.randint(0, 5, (16,), device="cuda")
    with torch.autocast(device_type="cuda", dtype=torch.float16):
        out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    scaler.scale(out.loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
    optimizer.zero_grad()

dist.destroy_process_group()
