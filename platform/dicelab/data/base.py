"""What every data source returns: the raw examples of each split in canonical columns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pandas as pd

Family = Literal["pairs", "tagging", "spans"]

# Canonical columns per task family (sources map their own columns onto these).
CANONICAL_COLUMNS: dict[str, tuple[str, ...]] = {
    # sentence or sentence-pair classification; text_b is None for single sentences (SST)
    "pairs": ("text_a", "text_b", "label"),
    # token tagging: lists of tokens and IOB2 tags of equal length
    "tagging": ("tokens", "tags"),
    # extractive QA: answer_texts / answer_starts are lists (empty when unanswerable)
    "spans": ("id", "question", "context", "answer_texts", "answer_starts"),
}
# the gold among them: inputs to predict on may leave it out (read with gold=False)
GOLD_COLUMNS: dict[str, tuple[str, ...]] = {
    "pairs": ("label",),
    "tagging": ("tags",),
    "spans": ("answer_texts", "answer_starts"),
}


@dataclass
class RawDataset:
    """Examples of every split (at least "train" and "dev") as DataFrames in canonical columns.

    `label_names` is the label set: class names for "pairs" (strings, in a fixed order; for binary tasks
    the positive class is last), IOB2 tags for "tagging" ("O" first), empty for "spans".
    `fingerprint` identifies the content and the options that produced it (feature cache key).
    Splits from `dicelab.data.load_raw_dataset` have a plain RangeIndex.
    """

    family: Family
    splits: dict[str, pd.DataFrame]
    label_names: list[str]
    fingerprint: str
    description: str = ""
    manifest: dict | None = field(default=None)  # resampling manifest when a variant was applied

    @property
    def train(self) -> pd.DataFrame:
        return self.splits["train"]

    @property
    def dev(self) -> pd.DataFrame:
        return self.splits["dev"]
