"""Hugging Face Trainer under torchrun (DDP) over a GPT-2 from its config, fp16, an evaluation
every two steps on a held-out set, six steps, the loss logged every two."""
import os

import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments


class Tokens(Dataset):
    def __init__(self, n, seq=256, seed=0):
        self.ids = torch.randint(0, 8000, (n, seq), generator=torch.Generator().manual_seed(seed))

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


model = GPT2LMHeadModel(GPT2Config(n_embd=512, n_layer=4, n_head=8, n_positions=256, vocab_size=8000))
args = TrainingArguments(
    output_dir=os.path.join("/tmp", f"trainer-36f-{os.environ.get('RANK', '0')}"),
    per_device_train_batch_size=8, per_device_eval_batch_size=16, max_steps=6,
    eval_strategy="steps", eval_steps=2, logging_steps=2, fp16=True,
    save_strategy="no", report_to=[], dataloader_num_workers=0,
)
Trainer(model=model, args=args, train_dataset=Tokens(192), eval_dataset=Tokens(64, seed=1)).train()
