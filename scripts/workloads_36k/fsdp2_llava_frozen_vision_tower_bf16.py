"""FSDP2 fine-tuning of an HF LLaVA model (CLIP ViT-L/14-336 vision tower FROZEN, projector and Qwen2 language model trained), bf16.

Parallelism: FSDP2 (``torch.distributed.fsdp.fully_shard``) over 2 ranks on a 1-D DeviceMesh.
Groups: each of the 24 ``CLIPEncoderLayer``s and each of the 24 ``Qwen2DecoderLayer``s (all
with ``reshard_after_forward=True``), and the root ``fully_shard(model)`` holding the rest: the
vision patch/position embeddings and pre/post LayerNorms (frozen), the multimodal projector,
the token embedding (tied to ``lm_head``), the final RMSNorm and the rotary module. The
``CLIPVisionModel`` itself is deliberately not given its own ``fully_shard`` call (that would
swap its class and HF's output-capturing hooks would no longer return the hidden states LLaVA
reads). The whole vision tower has ``requires_grad_(False)`` (LLaVA stage-2 style fine-tuning):
its layer groups are all-gathered for the forward only; no gradient, reduce-scatter or
optimizer state exists for them, and the root group mixes frozen and trainable parameters.

Model: ``LlavaForConditionalGeneration`` built from a ``LlavaConfig`` with a
``CLIPVisionConfig`` of the ViT-L/14 at 336 px shape (hidden 1024, 24 layers, 16 heads, MLP
4096; about 303.5 M parameters, features from layer -2, CLS dropped, 576 image tokens) and a
``Qwen2Config`` of the Qwen2-0.5B shape (hidden 896, 24 layers, 14 query / 2 key-value heads,
MLP 4864, vocab 151936, tied embeddings; about 494 M parameters), GELU 2-layer projector
(about 1.7 M); ``image_token_index`` 151646; SDPA attention; about 799 M parameters in all,
random init on the GPU.

Precision: fp32 sharded parameters, ``MixedPrecisionPolicy(param_dtype=bfloat16,
reduce_dtype=float32)`` (pixel values are cast to bf16 by the root's forward-input cast); the
loss is the model's own causal-LM cross entropy over the (fp32-upcast) logits.
Optimizer: ``torch.optim.AdamW`` (lr 2e-5, weight decay 0.0) over the trainable parameters
only (projector + language model), ``clip_grad_norm_(1.0)`` over them.
Data: per rank 6 images of 3 x 336 x 336 and 6 sequences of 1024 tokens laid out as a 16-token
prompt, the 576 ``<image>`` placeholder tokens and 432 answer tokens; labels are -100 on the
prompt and image positions; 6 training steps with the loss all-reduced (AVG) and printed on
rank 0, then one evaluation batch in ``eval()`` under ``torch.no_grad()``.
"""
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from transformers import CLIPVisionConfig, LlavaConfig, LlavaForConditionalGeneration, Qwen2Config

VOCAB = 151936
IMAGE_TOKEN = 151646
IMAGE_SIZE = 336
PATCH = 14
VISION_HIDDEN = 1024
VISION_LAYERS = 24
VISION_HEADS = 16
VISION_MLP = 4096
TEXT_HIDDEN = 896
TEXT_LAYERS = 24
TEXT_HEADS = 14
TEXT_KV_HEADS = 2
TEXT_MLP = 4864
BATCH = 6
PROMPT = 16
SEQ = 1024
STEPS = 6


def make_batch(generator, device):
    n_image = (IMAGE_SIZE // PATCH) ** 2
    n_answer = SEQ - PROMPT - n_image
    prompt = torch.randint(0, IMAGE_TOKEN, (BATCH, PROMPT), generator=generator, device=device)
    image = torch.full((BATCH, n_image), IMAGE_TOKEN, device=device, dtype=torch.long)
    answer = torch.randint(0, IMAGE_TOKEN, (BATCH, n_answer), generator=generator, device=device)
    input_ids = torch.cat([prompt, image, answer], dim=1)
    labels = input_ids.clone()
    labels[:, : PROMPT + n_image] = -100
    pixel_values = torch.randn(BATCH, 3, IMAGE_SIZE, IMAGE_SIZE, generator=generator, device=device)
    return input_ids, pixel_values, labels


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)
    mesh = init_device_mesh("cuda", (world_size,), mesh_dim_names=("dp",))

    torch.manual_seed(0)
    vision_config = CLIPVisionConfig(
        hidden_size=VISION_HIDDEN,
        intermediate_size=VISION_MLP,
        num_hidden_layers=VISION_LAYERS,
        num_attention_heads=VISION_HEADS,
        image_size=IMAGE_SIZE,
        patch_size=PATCH,
    )
    text_config = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=TEXT_HIDDEN,
        num_hidden_layers=TEXT_LAYERS,
        num_attention_heads=TEXT_HEADS,
        num_key_value_heads=TEXT_KV_HEADS,
        intermediate_size=TEXT_MLP,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        use_cache=False,
    )
    config = LlavaConfig(
        vision_config=vision_config,
        text_config=text_config,
        image_token_index=IMAGE_TOKEN,
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
        projector_hidden_act="gelu",
        tie_word_embeddings=True,
        attn_implementation="sdpa",
    )
    with torch.device(device):
        model = LlavaForConditionalGeneration(config)
    vision_tower = model.model.vision_tower
    language_model = model.model.language_model
    vision_tower.requires_grad_(False)

    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in vision_tower.encoder.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=True)
    for layer in language_model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=True)
    fully_shard(model, mesh=mesh, mp_policy=mp)

    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=2e-5, weight_decay=0.0)
    if rank == 0:
        n_all = sum(p.numel() for p in model.parameters())
        n_train = sum(p.numel() for p in trainable)
        print(f"params {n_all / 1e6:.1f} M global, trainable {n_train / 1e6:.1f} M", flush=True)

    gen = torch.Generator(device=device)
    gen.manual_seed(1000 + rank)

    model.train()
    vision_tower.eval()
    for step in range(STEPS):
        input_ids, pixel_values, labels = make_batch(gen, device)
        out = model(input_ids=input_ids, pixel_values=pixel_values, labels=labels, use_cache=False)
        loss = out.loss
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(trainable, max_norm=1.0)
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
        input_ids, pixel_values, labels = make_batch(gen, device)
        eval_loss = model(input_ids=input_ids, pixel_values=pixel_values, labels=labels, use_cache=False).loss
        eval_loss = eval_loss.float()
        dist.all_reduce(eval_loss, op=dist.ReduceOp.AVG)
    if rank == 0:
        print(f"eval loss {eval_loss.item():.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
