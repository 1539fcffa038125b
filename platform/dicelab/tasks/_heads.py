"""The encoder of every task model, run as its family expects, and the one head most tasks put on it."""

from __future__ import annotations

import torch
from torch import nn

from dicelab.tasks._batching import MODEL_INPUTS, padding_shift, roll_rows
from dicelab.tasks.families import Padding, SummaryToken, family_of


class FamilyEncoder(nn.Module):
    """A Hugging Face `encoder` fed the way its family and tokenizer expect (dicelab.tasks.families).

    Batches come padded on the right (dicelab.tasks._batching); the encoder sees the tokenizer's pad id on
    the tokenizer's padding side and `token_type_ids` only when it has segments, and its hidden states go back
    to the batch's layout, so that every position a task knows (labels, offsets, word ids) stays right.
    """

    def __init__(self, encoder: nn.Module, padding: Padding):
        super().__init__()
        self.encoder = encoder
        self.family = family_of(encoder.config.model_type, encoder.config.name_or_path)
        self.padding = padding
        self.takes_segment_ids = self.family.segment_ids(encoder.config)

    def hidden_states(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(B, L, H) last hidden states, position i of a row being position i of the batch's row."""
        pads = attention_mask.eq(0)
        inputs = {
            "input_ids": input_ids.masked_fill(pads, self.padding.pad_id),
            "attention_mask": attention_mask,
        }
        if token_type_ids is not None and self.takes_segment_ids:
            inputs["token_type_ids"] = token_type_ids.masked_fill(pads, self.padding.pad_type_id)
        if self.padding.side == "right":  # the batch's layout already
            return self.encoder(**inputs).last_hidden_state
        shift = padding_shift(attention_mask, self.padding.side)
        hidden = self.encoder(**{key: roll_rows(value, shift) for key, value in inputs.items()})
        return roll_rows(hidden.last_hidden_state, -shift)

    def summary(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(B, H): each row's hidden state at its family's summary token."""
        positions = summary_positions(attention_mask, self.family.summary_token)
        return hidden[torch.arange(len(hidden), device=hidden.device), positions.to(hidden.device)]


def summary_positions(attention_mask: torch.Tensor, summary_token: SummaryToken) -> torch.Tensor:
    """(B,) the position of each row's first or last real token, from the attention mask: right whichever
    side the row is padded on."""
    real = attention_mask.ne(0).int()
    if summary_token == "first":
        return real.argmax(dim=1)  # argmax returns the first maximum
    return attention_mask.shape[1] - 1 - real.flip(1).argmax(dim=1)


class EncoderWithHead(FamilyEncoder):
    """The encoder followed by dropout and a linear layer to `num_outputs` scores.

    pool_summary=True scores the family's summary token only ([CLS] first for BERT, `<cls>` last for XLNet),
    a sentence classifier: (B, K). Otherwise every position is scored (tagging, span boundaries): (B, L, K).
    """

    def __init__(
        self, encoder: nn.Module, num_outputs: int, dropout: float, pool_summary: bool, padding: Padding
    ):
        super().__init__(encoder, padding)
        self.pool_summary = pool_summary
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
        hidden = self.hidden_states(input_ids, attention_mask, token_type_ids)
        if self.pool_summary:
            hidden = self.summary(hidden, attention_mask)
        return self.head(self.dropout(hidden))


def model_inputs(model: nn.Module, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The encoder inputs of a collated batch, on the model's device."""
    device = next(model.parameters()).device
    return {key: batch[key].to(device) for key in MODEL_INPUTS if key in batch}
