"""DDP with static_graph=True and gradient_as_bucket_view=True over a Hugging Face GPT-2 with
gradient checkpointing (non-reentrant), bf16 autocast, AdamW; the run's settings shared from rank 0
with broadcast_object_list (every rank builds the same defaults first) and each rank's step time
gathered with all_gather_object; three steps."""
import os
import time

import torch
import torch.distributed as dist
from transformers import GPT2Config, GPT2LMHeadModel

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
settings = [{"lr": 3e-4, "batch": 8}]
dist.broadcast_object_list(settings, src=0)
model = GPT2LMHeadModel(GPT2Config(n_embd=768, n_layer=6, n_head=12, n_positions=512, vocab_size=16000)).cuda()
model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank], static_graph=True, gradient_as_bucket_view=True)
optimizer = torch.optim.AdamW(model.parameters(), lr=settings[0]["lr"])
for _ in range(3):
    started = time.time()
    ids = torch.randint(0, 16000, (settings[0]["batch"], 512), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    times = [None] * dist.get_world_size()
    dist.all_gather_object(times, time.time() - started)
dist.destroy_process_group()
