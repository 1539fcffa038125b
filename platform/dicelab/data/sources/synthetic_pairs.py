"""Source `synthetic_pairs`: paraphrase-like sentence pairs with `data.synthetic.positive_rate` duplicates."""

from __future__ import annotations

from dicelab.config import ExperimentConfig
from dicelab.data.base import Family, RawDataset
from dicelab.data.sources.registry import SOURCES
from dicelab.data.synthetic import generate_pairs


@SOURCES.register("synthetic_pairs")
def synthetic_pairs(config: ExperimentConfig, family: Family) -> RawDataset:
    options = config.data.synthetic
    # train and dev draw from independent streams: changing n_train leaves dev as it is
    shares = {
        "unrelated_rate": options.unrelated_rate,
        "ambiguous_rate": options.ambiguous_rate,
        "ambiguous_positive_rate": options.ambiguous_positive_rate,
    }
    splits = {
        "train": generate_pairs(options.n_train, options.positive_rate, [options.seed, 0], **shares),
        "dev": generate_pairs(options.n_dev, options.positive_rate, [options.seed, 1], **shares),
    }
    return RawDataset(
        family="pairs",
        splits=splits,
        label_names=["0", "1"],
        fingerprint="",
        description=f"synthetic pairs, {options.positive_rate:.0%} positive, seed {options.seed}",
    )
