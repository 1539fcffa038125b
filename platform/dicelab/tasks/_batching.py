"""Turning encoded feature rows into tensors: shared by every task's encode() and collate()."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.nn.utils.rnn import pad_sequence

from dicelab.tasks._heads import MODEL_INPUTS

IGNORE_INDEX = -100  # targets the loss must not see (dicelab.losses' ignore_index)
# Padded input ids are 0 whatever the tokenizer's pad token: attention_mask hides them from the encoder.
MODEL_PADS = {"input_ids": 0, "attention_mask": 0, "token_type_ids": 0}


def tokenizer_columns(encoding: Any) -> dict[str, list[list[int]]]:
    """The encoder inputs a tokenizer produced (token_type_ids only for tokenizers that have them)."""
    return {key: encoding[key] for key in MODEL_INPUTS if key in encoding}


def pad_rows(
    rows: Sequence[dict[str, Any]], sequence_pads: dict[str, int], scalars: Sequence[str] = ()
) -> dict[str, torch.Tensor]:
    """Pad each sequence column of `rows` to the longest row of this batch; stack the scalar columns.

    Sequence columns absent from the rows (token_type_ids for RoBERTa) are skipped; columns named in neither
    argument (offsets, word ids, kept for decoding) stay in the dataset.
    """
    batch = {
        key: pad_sequence(
            [torch.as_tensor(row[key], dtype=torch.long) for row in rows], batch_first=True, padding_value=pad
        )
        for key, pad in sequence_pads.items()
        if key in rows[0]
    }
    batch.update({key: torch.as_tensor([row[key] for row in rows], dtype=torch.long) for key in scalars})
    return batch
