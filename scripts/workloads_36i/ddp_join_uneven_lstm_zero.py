"""DDP + ZeroRedundancyOptimizer under the generic ``Join`` context manager, uneven inputs.

Parallelism: plain data parallel over 4 ranks, ``DistributedDataParallel`` (fp32, default
25 MB buckets) together with ``torch.distributed.optim.ZeroRedundancyOptimizer`` wrapping
``torch.optim.AdamW`` (lr 1e-3, weight decay 0.01), so each rank keeps AdamW state for only
its quarter of the parameters.  Both are passed to ``torch.distributed.algorithms.Join`` so
ranks that run out of data shadow the collectives of the ranks that still have data.

Model: a word-level LSTM language model, fp32 throughout: Embedding(32000, 1024) ->
3-layer cuDNN LSTM (input 1024, hidden 2048, dropout 0.1, batch_first) -> Linear(2048, 1024)
-> Linear(1024, 32000) decoder (about 160 M parameters).

Data: synthetic token ids, batch 16 sequences x 256 tokens per rank.  The inputs are uneven
on purpose: rank r gets 4 + r batches, so ranks 0..3 run 4, 5, 6 and 7 optimizer steps and
ranks 0-2 join early.  Gradient clipping at 1.0 before every step.
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.join import Join
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB = 32000
EMBED = 1024
HIDDEN = 2048
LAYERS = 3
BATCH = 16
SEQ = 256
BASE_STEPS = 4


class LSTMLanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, EMBED)
        self.drop = nn.Dropout(0.1)
        self.lstm = nn.LSTM(EMBED, HIDDEN, num_layers=LAYERS, dropout=0.1, batch_first=True)
        self.proj = nn.Linear(HIDDEN, EMBED)
        self.decoder = nn.Linear(EMBED, VOCAB)

    def forward(self, tokens):
        x = self.drop(self.embed(tokens))
        out, _ = self.lstm(x)
        out = self.drop(self.proj(out))
        return self.decoder(out)


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    device = torch.device("cuda", local_rank)

    torch.manual_seed(0)
    model = LSTMLanguageModel().to(device)
    ddp_model = DDP(model, device_ids=[local_rank])
    optimizer = ZeroRedundancyOptimizer(
        ddp_model.parameters(),
        optimizer_class=torch.optim.AdamW,
        lr=1e-3,
        weight_decay=0.01,
    )

    # Uneven data: rank r has BASE_STEPS + r batches.
    gen = torch.Generator(device="cpu").manual_seed(1234 + rank)
    num_batches = BASE_STEPS + rank
    batches = [
        torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=gen) for _ in range(num_batches)
    ]

    ddp_model.train()
    with Join([ddp_model, optimizer]):
        for step, batch in enumerate(batches):
            batch = batch.to(device, non_blocking=True)
            inputs, targets = batch[:, :-1], batch[:, 1:]
            optimizer.zero_grad(set_to_none=True)
            logits = ddp_model(inputs)
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(ddp_model.parameters(), 1.0)
            optimizer.step()
            print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)

    # Gather the full optimizer state on rank 0, as a checkpointing job would.
    optimizer.consolidate_state_dict(to=0)
    if rank == 0:
        state = optimizer.state_dict()
        print(f"consolidated optimizer state for {len(state['state'])} parameters", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
