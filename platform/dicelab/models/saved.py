"""A saved model in memory: the task's model with its weights, the tokenizer, and prediction on a frame.

Prediction is the task's own evaluation (`Task.encode` then `Task.evaluate` over length-ordered batches),
so a saved model predicts exactly what the trial's dev evaluation did. Inputs without gold columns get
placeholder gold (the first label, "O" tags, no answer), whose fields are dropped from the records.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn

from dicelab.config import ExperimentConfig
from dicelab.data.base import GOLD_COLUMNS
from dicelab.data.readers import KNOWN_COLUMNS, find_column, read_table
from dicelab.errors import DataError
from dicelab.experiment import load_experiment
from dicelab.models.bundle import (
    CONFIG_FILE,
    ENCODER_DIR,
    TINY_BERT,
    TOKENIZER_DIR,
    BundleInfo,
    read_info,
    read_weights,
)
from dicelab.tasks import TASKS, Task
from dicelab.tasks._batching import LengthOrderedBatches

# The columns a prediction needs, per family (GOLD_COLUMNS: the gold ones it can do without).
INPUT_COLUMNS: dict[str, tuple[str, ...]] = {
    "pairs": ("text_a",),
    "tagging": ("tokens",),
    "spans": ("question", "context"),
}
GOLD_FIELDS = {"pairs": "label", "tagging": "gold", "spans": "answers"}  # in the task's prediction records


@dataclass
class SavedModel:
    info: BundleInfo
    config: ExperimentConfig
    task: Task
    model: nn.Module
    tokenizer: Any

    @property
    def task_name(self) -> str:
        return self.info.task

    @property
    def family(self) -> str:
        return self.info.family

    @property
    def label_names(self) -> list[str]:
        return self.info.label_names

    def predict(
        self, frame: pd.DataFrame, *, batch_size: int | None = None, progress: bool = False
    ) -> list[dict[str, Any]]:
        """One record per row of `frame` (canonical columns of the model's family), in row order."""
        if batch_size is not None and (isinstance(batch_size, bool) or batch_size < 1):
            raise ValueError(f"batch_size must be a positive number of examples, got {batch_size!r}")
        frame, has_gold = self.complete(frame)
        if frame.empty:
            return []
        features = self.task.encode(frame, self.tokenizer, self.config, self.label_names)
        size = batch_size or self.config.train.eval_batch_size
        batches = ProgressBatches(features, self.task.collate, size, progress=progress)
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # metrics against placeholder gold warn about empty classes
            result = self.task.evaluate(self.model, batches, features, frame, self.label_names)
        if has_gold:
            return result.predictions
        gold = GOLD_FIELDS[self.family]
        return [{key: value for key, value in record.items() if key != gold} for record in result.predictions]

    def complete(self, frame: pd.DataFrame) -> tuple[pd.DataFrame, bool]:
        """`frame` with every column the task encodes (placeholders for absent gold) and whether it had gold.

        Its columns are found as a data file's are: the canonical names, the trial's `data.columns`, or the
        usual names such as GLUE's sentence1 / sentence2. Raises DataError naming the first missing input
        column.
        """
        family = self.family
        frame = self._canonical(frame)
        has_gold = all(column in frame.columns for column in GOLD_COLUMNS[family])
        filled = frame.copy()
        if family == "pairs":
            if "text_b" not in filled.columns:
                filled["text_b"] = None
            if not has_gold:
                filled["label"] = self.label_names[0]
        elif family == "tagging" and not has_gold:
            filled["tags"] = [["O"] * len(tokens) for tokens in filled["tokens"]]
        elif family == "spans":
            if "id" not in filled.columns:
                filled["id"] = [str(row) for row in range(1, len(filled) + 1)]
            if not has_gold:
                filled["answer_texts"] = [[] for _ in range(len(filled))]
                filled["answer_starts"] = [[] for _ in range(len(filled))]
        return filled, has_gold

    def input_columns(self, frame: pd.DataFrame) -> dict[str, Any]:
        """Canonical input column -> the column of `frame` that holds it (found as `complete` finds them;
        the optional ones, such as `text_b`, only where `frame` has them). Raises DataError naming the first
        missing input column."""
        family = self.family
        named = self._named(frame)
        found = {}
        for column in KNOWN_COLUMNS[family]:
            if column in GOLD_COLUMNS[family]:
                continue
            key = find_column(frame, family, column, named)
            if key is not None:
                found[column] = key
            elif column in INPUT_COLUMNS[family]:
                present = ", ".join(map(str, frame.columns)) or "no columns"
                trials = self._trials_names()
                others = [trials[column]] if column in trials else []
                others += [name for name in KNOWN_COLUMNS[family][column] if name not in (column, *others)]
                also = f" or {', '.join(others)}" if others else ""
                raise DataError(
                    f"input has no column {column!r}{also}, which a {self.task_name} model needs "
                    f"(found: {present})"
                )
        return found

    def _trials_names(self) -> dict[str, str]:
        # The trial's own column names (positions are a file's, not a frame's).
        return {key: name for key, name in self.config.data.columns.items() if isinstance(name, str)}

    def _named(self, frame: pd.DataFrame) -> dict[str, str]:
        """The trial's own column names, where this frame has them."""
        named = self._trials_names()
        return {
            key: name
            for key, name in named.items()
            if find_column(frame, self.family, key, named) is not None
        }

    def _canonical(self, frame: pd.DataFrame) -> pd.DataFrame:
        family = self.family
        self.input_columns(frame)  # a missing one: said by name
        canonical = read_table(frame, family, self._named(frame), gold=False)
        if len(canonical) != len(frame):  # the reader leaves out sentences without tokens
            raise DataError("input has a row without tokens: a tagging model predicts on tokens")
        return canonical


class ProgressBatches(LengthOrderedBatches):
    """Evaluation's length-ordered batches, with a progress bar on stderr."""

    def __init__(self, features: Any, collate: Any, batch_size: int, *, progress: bool) -> None:
        super().__init__(features, collate, batch_size)
        self.progress = progress

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        from tqdm import tqdm

        total = -(-len(self.order) // self.batch_size)
        return iter(
            tqdm(super().__iter__(), total=total, desc="predict", unit="batch", file=sys.stderr,
                 disable=not self.progress)
        )  # fmt: skip


def load_bundle(directory: Path, device: str | torch.device = "cpu") -> SavedModel:
    """The model saved in a bundle directory (see dicelab.models.bundle), in eval mode on `device`."""
    from transformers import AutoTokenizer

    info = read_info(directory)
    config = load_experiment(directory / CONFIG_FILE)
    if config.task.name != info.task or info.task not in TASKS:
        raise DataError(f"{directory}: task {info.task!r} is not a task of this dicelab")
    task = TASKS.get(info.task)()
    tokenizer = AutoTokenizer.from_pretrained(str(directory / TOKENIZER_DIR))
    build = config
    if config.model.backbone != TINY_BERT:  # the encoder loads from the bundle, not from the hub
        build = config.model_copy(deep=True)
        build.model.backbone = str(directory / ENCODER_DIR)
        if getattr(build.model, "revision", None) is not None:
            build.model.revision = None  # a hub revision: the bundle holds the files it resolved to
    with torch.random.fork_rng(devices=[]):  # building initialises from the RNG: leave the caller's alone
        model = task.build_model(build, info.label_names, tokenizer)
    model.load_state_dict(read_weights(directory), strict=True)
    return SavedModel(info, config, task, model.to(device).eval(), tokenizer)
