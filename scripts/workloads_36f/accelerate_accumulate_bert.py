"""accelerate with bf16 mixed precision and gradient accumulation (accelerator.accumulate, two
micro-batches per step) over a Hugging Face BERT classifier from its config, AdamW with a linear
schedule prepared by the Accelerator; four micro-batches."""
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset
from transformers import BertConfig, BertForSequenceClassification, get_linear_schedule_with_warmup

accelerator = Accelerator(mixed_precision="bf16", gradient_accumulation_steps=2)
torch.manual_seed(0)
model = BertForSequenceClassification(BertConfig(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, intermediate_size=2048, num_labels=3))
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
scheduler = get_linear_schedule_with_warmup(optimizer, 0, 10)
data = TensorDataset(torch.randint(0, 30000, (64, 192)), torch.randint(0, 3, (64,)))
loader = DataLoader(data, batch_size=8, shuffle=True)
model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
model.train()
for step, (ids, labels) in enumerate(loader):
    if step == 4:
        break
    with accelerator.accumulate(model):
        loss = model(input_ids=ids, labels=labels).loss
        accelerator.backward(loss)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
accelerator.end_training()
