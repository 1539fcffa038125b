"""The contract every registered task passes, a plugin's included (the task-side twin of `LossContract`).

Each task gets the synthetic dataset of its family through the real data path (`load_raw_dataset`), a
tiny-bert tokenizer trained on its texts and a one-layer tiny-bert (`task_case`), so the checks are about the
task, not about a backbone. Each `test_*` method is one check: pytest runs them on the built-ins
(tests/tasks), `dicelab plugins check` on a plugin's tasks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets
import pandas as pd
import torch

from dicelab.config import ExperimentConfig
from dicelab.data import CANONICAL_COLUMNS, RawDataset, load_raw_dataset
from dicelab.losses import build_loss
from dicelab.tasks import TASKS
from dicelab.tasks.backbones import load_tokenizer

# The synthetic source of each family: a new family needs its synthetic dataset here to join the contract.
SYNTHETIC_SOURCE = {"pairs": "synthetic_pairs", "tagging": "synthetic_tagging", "spans": "synthetic_spans"}
BATCH = 8
SPLITS = ("train", "dev")


@dataclass
class TaskCase:
    task: Any
    config: ExperimentConfig
    raw: RawDataset
    tokenizer: Any
    features: dict[str, datasets.Dataset]

    def batch(self, split: str = "train", size: int = BATCH) -> dict[str, torch.Tensor]:
        rows = self.features[split]
        return self.task.collate([rows[i] for i in range(min(size, len(rows)))])

    def model(self, seed: int = 0) -> torch.nn.Module:
        torch.manual_seed(seed)
        return self.task.build_model(self.config, self.raw.label_names, self.tokenizer)


def task_config(task: Any, cache_dir: Path) -> ExperimentConfig:
    assert task.family in SYNTHETIC_SOURCE, f"no synthetic dataset of family {task.family!r} for the contract"
    return ExperimentConfig.model_validate(
        {
            "name": f"contract-{task.name}",
            "task": {"name": task.name, "doc_stride": 32},
            "data": {
                "source": SYNTHETIC_SOURCE[task.family],
                "synthetic": {"n_train": 24, "n_dev": 12, "seed": 3},
                "max_length": 96,
                "cache_dir": str(cache_dir),
            },
            "model": {
                "backbone": "tiny-bert",
                "tiny_bert": {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64},
            },
        }
    )


def task_case(name: str, cache_dir: Path) -> TaskCase:
    """The registered task `name` with its family's synthetic data, tokenizer and features."""
    torch.set_num_threads(1)
    task = TASKS.get(name)()
    config = task_config(task, cache_dir)
    raw = load_raw_dataset(config, task.family)
    tokenizer = load_tokenizer(config.model, list(task.texts(raw.train)), config.data.cache_dir)
    features = {split: task.encode(raw.splits[split], tokenizer, config, raw.label_names) for split in SPLITS}
    return TaskCase(task, config, raw, tokenizer, features)


class TaskContract:
    def test_is_registered_under_its_name_with_a_known_family(self, case: TaskCase) -> None:
        assert TASKS.get(case.task.name) is type(case.task)
        assert case.task.family in CANONICAL_COLUMNS

    def test_consumes_only_the_canonical_columns(self, case: TaskCase) -> None:
        columns = list(CANONICAL_COLUMNS[case.task.family])
        dev = case.raw.dev
        assert list(dev.columns) == columns  # what the sources give (see the source contract)
        extra = dev.assign(unrelated=range(len(dev)))  # a column the task must not depend on
        again = case.task.encode(extra, case.tokenizer, case.config, case.raw.label_names)
        assert again.to_dict() == case.features["dev"].to_dict()

    def test_both_splits_give_features_of_bounded_length(self, case: TaskCase) -> None:
        for split, features in case.features.items():
            assert len(features) >= len(case.raw.splits[split]) > 0, split
            lengths = [len(ids) for ids in features["input_ids"]]
            assert max(lengths) <= case.config.data.max_length, split

    def test_a_collated_batch_has_one_row_per_feature(self, case: TaskCase) -> None:
        batch = case.batch()
        rows = min(BATCH, len(case.features["train"]))
        assert batch["input_ids"].dim() == 2 and batch["input_ids"].dtype == torch.long
        assert batch["attention_mask"].shape == batch["input_ids"].shape
        for name, tensor in batch.items():
            assert isinstance(tensor, torch.Tensor) and tensor.shape[0] == rows, name

    def test_class_counts_are_what_wce_needs(self, case: TaskCase) -> None:
        counts = case.task.class_counts(case.features["train"], case.raw.label_names)
        assert len(counts) >= 2 and all(isinstance(n, int) and n >= 0 for n in counts) and sum(counts) > 0
        if case.task.family != "spans" and len(counts) == len(case.raw.label_names):
            assert all(n > 0 for n in counts)  # the synthetic data has every class
        build_loss("wce", class_counts=counts)

    def test_a_finite_scalar_loss_that_falls_in_a_few_steps(self, case: TaskCase) -> None:
        for loss_name in ("ce", "dsc"):
            self.loss_falls(case, loss_name)

    def loss_falls(self, case: TaskCase, loss_name: str) -> None:
        assert_loss_falls(case.task, case.model(), case.batch(), build_loss(loss_name), steps=20, factor=0.8)

    def test_evaluation_scores_the_primary_metric_with_one_prediction_per_example(
        self, case: TaskCase
    ) -> None:
        model = case.model().eval()
        features, frame = case.features["dev"], case.raw.dev
        rows = [features[i] for i in range(len(features))]
        batches = [case.task.collate(rows[start : start + BATCH]) for start in range(0, len(rows), BATCH)]
        result = case.task.evaluate(model, batches, features, frame, case.raw.label_names)
        primary = case.task.primary_metric(case.raw.label_names)
        assert primary in result.metrics
        for name, value in result.metrics.items():
            assert math.isfinite(value) and 0.0 <= value <= 1.0, (name, value)  # scores: higher is better
        assert len(result.predictions) == len(frame)
        pd.DataFrame(result.predictions).to_json()  # JSON-able records (logged as an artifact)


def assert_loss_falls(
    task: Any,
    model: torch.nn.Module,
    batch: dict[str, torch.Tensor],
    loss_fn: torch.nn.Module,
    steps: int,
    factor: float,
) -> None:
    """`steps` AdamW steps on one batch take the task's training loss (a finite scalar with finite gradients
    throughout) below `factor` times its value before, both measured in eval mode."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)

    def evaluated_loss() -> float:
        model.eval()
        with torch.no_grad():
            value = task.training_loss(model, batch, loss_fn)
        model.train()
        assert value.dim() == 0 and torch.isfinite(value)
        return value.item()

    before = evaluated_loss()
    for _ in range(steps):
        optimizer.zero_grad()
        loss = task.training_loss(model, batch, loss_fn)
        assert loss.dim() == 0 and torch.isfinite(loss)
        loss.backward()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
        optimizer.step()
    assert evaluated_loss() < factor * before
