"""Turning encoded feature rows into tensors: shared by every task's encode() and collate()."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader

MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")  # what the encoder reads
IGNORE_INDEX = -100  # targets the loss must not see (dicelab.losses' ignore_index)
# The batch layout: every collated sequence column is padded on the right, so a position in a batch row is
# the position in its feature row, for inputs and targets alike (labels, word ids, offsets, start / end
# positions). The model lays its encoder's input out as the tokenizer would, with the tokenizer's pad id on
# its padding side (dicelab.tasks._heads.FamilyEncoder, with `padding_shift` and `roll_rows`), and puts its
# hidden states back in this layout: no task sees left padding.
MODEL_PADS = {"input_ids": 0, "attention_mask": 0, "token_type_ids": 0}
RowsT = TypeVar("RowsT", torch.Tensor, np.ndarray, list)


def tokenizer_columns(encoding: Any) -> dict[str, list[list[int]]]:
    """The encoder inputs a tokenizer produced. Encode with `return_token_type_ids=True`: some tokenizers
    leave segment ids out by default even where their model has segments (ALBERT, XLNet in transformers 5);
    the model passes them on only where it takes them (dicelab.tasks.families)."""
    return {key: encoding[key] for key in MODEL_INPUTS if key in encoding}


def padding_shift(attention_mask: torch.Tensor, side: str) -> torch.Tensor:
    """(B,) how far to roll each row (`roll_rows`) so that its real tokens end up against the side opposite
    `side`: padding on the left or on the right, from a batch padded on either side."""
    length = attention_mask.shape[1]
    real = attention_mask.ne(0)
    first = real.int().argmax(dim=1)  # the first real position (argmax returns the first maximum)
    target = length - real.sum(dim=1) if side == "left" else torch.zeros_like(first)
    return target - first


def roll_rows(rows: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """Row b of `rows` (B, L, ...) rolled by shift[b] positions: out[b, j] = rows[b, (j - shift[b]) mod L].
    Rolling by -shift undoes it."""
    length = rows.shape[1]
    index = (torch.arange(length, device=rows.device)[None, :] - shift[:, None].to(rows.device)) % length
    index = index.view(*index.shape, *([1] * (rows.dim() - 2))).expand_as(rows)
    return rows.gather(1, index)


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


class LengthOrderedBatches:
    """Collated batches of `features` in order of length (the least padding), for evaluation.

    A task's evaluate() iterates it like any iterable of batches and passes its per-row outputs, concatenated
    in batch order, through `in_example_order` to get them back in example order.
    """

    def __init__(
        self, features: datasets.Dataset, collate: Any, batch_size: int, pin_memory: bool = False
    ) -> None:
        self.order = np.argsort(row_lengths(features), kind="stable")
        self.features, self.collate, self.batch_size = features, collate, batch_size
        self.pin_memory = pin_memory

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        size = self.batch_size
        batches = [self.order[start : start + size].tolist() for start in range(0, len(self.order), size)]
        # its own generator: a loader must not draw from the global RNG that dropout uses
        loader = DataLoader(
            self.features,
            batch_sampler=batches,
            collate_fn=self.collate,
            generator=torch.Generator(),
            pin_memory=self.pin_memory,
        )
        return iter(loader)


def in_example_order(batches: Iterable[Any], rows: RowsT) -> RowsT:
    """Per-row outputs (a tensor, array or list, row i from the i-th row the batches yielded) put back in
    example order; unchanged when `batches` already came in example order (anything but
    LengthOrderedBatches)."""
    if not isinstance(batches, LengthOrderedBatches):
        return rows
    order = batches.order
    if isinstance(rows, list):
        restored: list[Any] = [None] * len(rows)
        for position, index in enumerate(order.tolist()):
            restored[index] = rows[position]
        return restored  # type: ignore[return-value]
    if isinstance(rows, torch.Tensor):
        restored_tensor = torch.empty_like(rows)
        restored_tensor[torch.as_tensor(order)] = rows
        return restored_tensor
    restored_array = np.empty_like(rows)
    restored_array[order] = rows
    return restored_array


def row_lengths(features: datasets.Dataset) -> np.ndarray:
    """Tokens per row (the length of input_ids), read from Arrow."""
    return list_column(features, "input_ids")[0]


def list_array(rows: list[np.ndarray]) -> pa.ListArray:
    """Per-row arrays as one Arrow list column (the inverse of `list_column`), without a Python object per
    token; (tokens, 2) arrays become a list of [start, end] pairs per row."""
    lengths = np.fromiter((len(row) for row in rows), dtype=np.int64, count=len(rows))
    row_offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    values = np.concatenate(rows) if rows else np.zeros((0,), dtype=np.int64)
    if values.ndim == 2:
        pairs = pa.array(np.arange(0, values.size + 1, 2, dtype=np.int32))
        return pa.ListArray.from_arrays(
            row_offsets, pa.ListArray.from_arrays(pairs, pa.array(values.ravel()))
        )
    return pa.ListArray.from_arrays(row_offsets, pa.array(values))


def list_column(features: datasets.Dataset, name: str) -> tuple[np.ndarray, np.ndarray]:
    """A list column read straight from Arrow: each row's length and all rows' values, flattened.

    No Python object per token: on a large split those make reading many times slower (the garbage
    collector keeps scanning them). Values of a list-of-pairs column come back as (tokens, 2).
    """
    column = features.with_format("arrow")[name]
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    lengths = pc.list_value_length(column).to_numpy()
    values = pc.list_flatten(column)
    if pa.types.is_list(values.type) or pa.types.is_large_list(values.type):
        return lengths, pc.list_flatten(values).to_numpy().reshape(-1, 2)
    return lengths, values.to_numpy()
