"""Source `synthetic_tagging`: NER-like sentences with `data.synthetic.entity_density` entity tokens."""

from __future__ import annotations

from dicelab.config import ExperimentConfig
from dicelab.data.base import Family, RawDataset
from dicelab.data.sources.registry import SOURCES
from dicelab.data.synthetic import TAGS, generate_tagging


@SOURCES.register("synthetic_tagging")
def synthetic_tagging(config: ExperimentConfig, family: Family) -> RawDataset:
    options = config.data.synthetic
    # train and dev draw from independent streams: changing n_train leaves dev as it is
    splits = {
        "train": generate_tagging(options.n_train, options.entity_density, [options.seed, 0]),
        "dev": generate_tagging(options.n_dev, options.entity_density, [options.seed, 1]),
    }
    return RawDataset(
        family="tagging",
        splits=splits,
        label_names=list(TAGS),
        fingerprint="",
        description=f"synthetic tagging, entity density {options.entity_density:.0%}, seed {options.seed}",
    )
