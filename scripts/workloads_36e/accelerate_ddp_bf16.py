"""A training loop written with Hugging Face accelerate, launched by torchrun: Accelerator with bf16
mixed precision prepares a GPT-2 from its config, AdamW and a DataLoader (which it shards over the
ranks), accelerator.backward and clip_grad_norm_; three steps."""
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset
from transformers import GPT2Config, GPT2LMHeadModel

accelerator = Accelerator(mixed_precision="bf16")
torch.manual_seed(0)
config = GPT2Config(n_embd=768, n_layer=6, n_head=12, n_positions=512, vocab_size=16000)
model = GPT2LMHeadModel(config)
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
data = TensorDataset(torch.randint(0, 16000, (96, 256)))
loader = DataLoader(data, batch_size=8, shuffle=True)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

model.train()
for step, (ids,) in enumerate(loader):
    if step == 3:
        break
    loss = model(input_ids=ids, labels=ids).loss
    accelerator.backward(loss)
    accelerator.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()

accelerator.end_training()
