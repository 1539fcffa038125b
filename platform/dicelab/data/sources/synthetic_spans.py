"""Source `synthetic_spans`: questions on short biographies, some unanswerable (`unanswerable_rate`)."""

from __future__ import annotations

from dicelab.config import ExperimentConfig
from dicelab.data.base import Family, RawDataset
from dicelab.data.sources.registry import SOURCES
from dicelab.data.synthetic import generate_spans


@SOURCES.register("synthetic_spans")
def synthetic_spans(config: ExperimentConfig, family: Family) -> RawDataset:
    options = config.data.synthetic
    # train and dev draw from independent streams: changing n_train leaves dev as it is
    splits = {
        "train": generate_spans(options.n_train, options.unanswerable_rate, [options.seed, 0], "train-"),
        "dev": generate_spans(options.n_dev, options.unanswerable_rate, [options.seed, 1], "dev-"),
    }
    return RawDataset(
        family="spans",
        splits=splits,
        label_names=[],
        fingerprint="",
        description=f"synthetic spans, {options.unanswerable_rate:.0%} unanswerable, seed {options.seed}",
    )
