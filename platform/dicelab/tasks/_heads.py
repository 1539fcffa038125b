"""The one head every task uses: dropout plus a linear layer on the encoder's last hidden states."""

from __future__ import annotations

import torch
from torch import nn

MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class EncoderWithHead(nn.Module):
    """`encoder` followed by dropout and a linear layer to `num_outputs` scores.

    pool_first_token=True scores the first ([CLS]) hidden state only, BERT's sentence classifier: (B, K).
    Otherwise every position is scored (tagging, span boundaries): (B, L, K).
    """

    def __init__(self, encoder: nn.Module, num_outputs: int, dropout: float, pool_first_token: bool):
        super().__init__()
        self.encoder = encoder
        self.pool_first_token = pool_first_token
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(encoder.config.hidden_size, num_outputs)
        # BERT's initialisation for new layers (nn.Linear's default is scaled for a different regime).
        nn.init.normal_(self.head.weight, std=getattr(encoder.config, "initializer_range", 0.02))
        nn.init.zeros_(self.head.bias)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        # Encoders without segment embeddings (RoBERTa, DistilBERT) get no token_type_ids: their tokenizers
        # do not produce them, so encode() never stores them.
        extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask, **extra).last_hidden_state
        if self.pool_first_token:
            hidden = hidden[:, 0]
        return self.head(self.dropout(hidden))


def model_inputs(model: nn.Module, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The encoder inputs of a collated batch, on the model's device."""
    device = next(model.parameters()).device
    return {key: batch[key].to(device) for key in MODEL_INPUTS if key in batch}
