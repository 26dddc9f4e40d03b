"""Hugging Face Trainer launched by torchrun (so it trains under DDP): a BERT masked-language model
from its config, bf16, a dataset of its own giving batches already masked (15% of the tokens),
four steps, the loss logged every two, no checkpoints and no outside reporting."""
import os

import torch
from torch.utils.data import Dataset
from transformers import BertConfig, BertForMaskedLM, Trainer, TrainingArguments


class Masked(Dataset):
    def __init__(self, n=256, seq=256, vocab=8000):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(5, vocab, (n, seq), generator=g)
        self.mask = torch.rand(n, seq, generator=g) < 0.15

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        labels = torch.where(self.mask[i], self.ids[i], -100)
        ids = torch.where(self.mask[i], 4, self.ids[i])
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}


config = BertConfig(vocab_size=8000, hidden_size=512, num_hidden_layers=4, num_attention_heads=8, intermediate_size=2048)
model = BertForMaskedLM(config)
args = TrainingArguments(
    output_dir=os.path.join("/tmp", f"trainer-36e-{os.environ.get('RANK', '0')}"),
    per_device_train_batch_size=16,
    max_steps=4,
    bf16=True,
    learning_rate=1e-4,
    logging_steps=2,
    save_strategy="no",
    report_to=[],
    dataloader_num_workers=0,
)
Trainer(model=model, args=args, train_dataset=Masked()).train()
