"""AdamW without weight decay on biases and LayerNorm weights, and a linear warmup-then-decay schedule."""

from __future__ import annotations

import math

import torch
from torch import nn
from transformers import get_linear_schedule_with_warmup

from dicelab.config import TrainConfig


def build_optimizer(model: nn.Module, train: TrainConfig) -> torch.optim.AdamW:
    decayed, exempt = [], []
    for parameter in model.parameters():
        if parameter.requires_grad:
            # Biases and LayerNorm weights are the 1-D parameters; decaying them only hurts (BERT recipe).
            (decayed if parameter.ndim >= 2 else exempt).append(parameter)
    groups = [
        {"params": decayed, "weight_decay": train.weight_decay},
        {"params": exempt, "weight_decay": 0.0},
    ]
    # The fused kernel (CPU and CUDA) is also Hugging Face Trainer's default optimizer.
    return torch.optim.AdamW(groups, lr=train.learning_rate, fused=True)


def build_scheduler(
    optimizer: torch.optim.Optimizer, train: TrainConfig, total_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    warmup_steps = math.ceil(train.warmup_ratio * total_steps)
    return get_linear_schedule_with_warmup(optimizer, warmup_steps, total_steps)
