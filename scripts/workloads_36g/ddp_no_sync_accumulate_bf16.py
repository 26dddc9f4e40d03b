"""DDP over a small GPT-style decoder (nn.TransformerEncoderLayer, causal mask), bf16 autocast,
gradient accumulation over two micro-batches with the first under model.no_sync(), gradient
clipping and AdamW; two optimizer steps."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
torch.manual_seed(0)


class Decoder(nn.Module):
    def __init__(self, vocab=8000, width=512, layers=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(width, 8, 4 * width, batch_first=True, norm_first=True) for _ in range(layers))
        self.head = nn.Linear(width, vocab)

    def forward(self, ids):
        mask = nn.Transformer.generate_square_subsequent_mask(ids.shape[1], device=ids.device)
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x, src_mask=mask, is_causal=True)
        return self.head(x)


model = nn.parallel.DistributedDataParallel(Decoder().cuda(), device_ids=[local_rank])
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
for _ in range(2):
    for micro in range(2):
        ids = torch.randint(0, 8000, (8, 257), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids[:, :-1])
            loss = nn.functional.cross_entropy(logits.reshape(-1, 8000).float(), ids[:, 1:].reshape(-1)) / 2
        if micro == 0:
            with model.no_sync():
                loss.backward()
        else:
            loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
dist.destroy_process_group()
