"""`load_raw_dataset(config, family)`: source -> checks -> limits -> resampling variant -> fingerprint."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dicelab.config import ExperimentConfig
from dicelab.data.base import Family, RawDataset
from dicelab.data.hashing import fingerprint, frame_digest
from dicelab.data.labels import check_labels, resolve_label_names
from dicelab.data.provenance import origin_of
from dicelab.data.sources import SOURCES
from dicelab.errors import ConfigError, DataError

REQUIRED_SPLITS = ("train", "dev")
SAMPLE_SEED = 0  # data.max_*_examples keep the same examples in every trial


def load_raw_dataset(config: ExperimentConfig, family: Family) -> RawDataset:
    """The dataset named by `config.data`, checked, limited, resampled and fingerprinted.

    `family` is the task's (`Task.family`): the data layer is told it, it does not look tasks up.
    1. the source (`data.source`) reads every split of `data.splits` in the canonical columns of
       `family`;
    2. every split must be non-empty; the label set is `data.labels`, else the source's, else the
       labels of the whole training split (binary: positive label last); every label of every split
       must be in it;
    3. `data.max_train_examples` / `max_dev_examples` keep a seeded random sample (seed 0, same examples
       in every trial, file order kept), so a limit does not take a sorted file's first class only;
    4. `data.variant` other than "original" replaces the training split by its resampled variant;
    5. the fingerprint covers the final content of every split, the label set and the variant.
    """
    data = config.data
    try:
        source = SOURCES.get(data.source)
    except ValueError as error:
        raise ConfigError(f"config key 'data.source': {error}") from None
    if data.variant != "original" and family != "pairs":
        raise ConfigError(f"config key 'data.variant': resampling variants apply to pairs data, not {family}")
    raw = source(config, family)
    if raw.family != family:
        raise ConfigError(
            f"config key 'data.source': {data.source!r} gives {raw.family} data, "
            f"task {config.task.name!r} needs {family}"
        )
    missing = [split for split in REQUIRED_SPLITS if split not in raw.splits]
    if missing:
        raise ConfigError(f"config key 'data.splits': no {missing[0]!r} split (got: {', '.join(raw.splits)})")
    for name, frame in raw.splits.items():
        if frame.empty:
            raise DataError(f"{origin_of(frame)}: split {name!r} is empty")
    label_names = resolve_label_names(family, raw.splits["train"], data, raw.label_names)
    for frame in raw.splits.values():
        check_labels(frame, family, label_names)
    limits = {"train": data.max_train_examples, "dev": data.max_dev_examples}
    splits = {
        name: _sample(frame, limits.get(name)).reset_index(drop=True) for name, frame in raw.splits.items()
    }
    manifest = None
    if data.variant != "original":
        from dicelab.data.resampling import materialize_variant

        splits["train"], manifest = materialize_variant(
            splits["train"],
            data.variant,
            data.variant_options,
            cache_dir=data.cache_dir,
            positive_label=label_names[-1],
        )
    content = {
        "family": family,
        "label_names": label_names,
        "splits": {name: frame_digest(frame) for name, frame in sorted(splits.items())},
        "variant": data.variant,
        "variant_options": data.variant_options,
    }
    sizes = ", ".join(f"{name} {len(frame)}" for name, frame in splits.items())
    return RawDataset(
        family=family,
        splits=splits,
        label_names=label_names,
        fingerprint=fingerprint(content),
        description=f"{raw.description} ({sizes})",
        manifest=manifest,
    )


def _sample(frame: pd.DataFrame, limit: int | None) -> pd.DataFrame:
    if limit is None or limit >= len(frame):
        return frame
    keep = np.sort(np.random.default_rng(SAMPLE_SEED).choice(len(frame), size=limit, replace=False))
    return frame.iloc[keep]
