"""`load_raw_dataset(config, family)`: source -> checks -> limits -> resampling variant -> fingerprint."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dicelab.config import CarvedSplit, ExperimentConfig
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
       `family`, except the carved ones;
    2. every split must be non-empty; the label set is `data.labels`, else the source's, else the
       labels of the whole training split (binary: positive label last); every label of every split
       must be in it;
    2b. carved splits are cut out of the split they are carved from (`carve_splits`);
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
    read = _read_splits(raw.splits, data.read_splits, data.source)
    for name, frame in read.items():
        if frame.empty:
            raise DataError(f"{origin_of(frame)}: split {name!r} is empty")
    if "train" not in read:
        raise ConfigError(f"config key 'data.splits': no 'train' split (got: {', '.join(read) or 'none'})")
    label_names = resolve_label_names(family, read["train"], data, raw.label_names)
    for frame in read.values():
        check_labels(frame, family, label_names)
    read = carve_splits(read, data.splits, family)
    missing = [split for split in REQUIRED_SPLITS if split not in read]
    if missing:
        raise ConfigError(f"config key 'data.splits': no {missing[0]!r} split (got: {', '.join(read)})")
    limits = {"train": data.max_train_examples, "dev": data.max_dev_examples}
    splits = {name: _sample(frame, limits.get(name)).reset_index(drop=True) for name, frame in read.items()}
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
        # only when a split is carved: the fingerprints of datasets without one stay what they were
        **({"carved": carved} if (carved := _carved(data.splits)) else {}),
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


def carve_splits(
    splits: dict[str, pd.DataFrame], wanted: dict[str, str | CarvedSplit], family: Family
) -> dict[str, pd.DataFrame]:
    """`splits` with each carved split of `wanted` cut out of the split it is carved from: a seeded random
    share of its examples, stratified by label for pairs data (as scikit-learn's train_test_split does), both
    parts in file order. Carved before any limit applies: a limit on train leaves the carved dev as it is."""
    from sklearn.model_selection import train_test_split

    carved = dict(splits)
    for name, split in wanted.items():
        if not isinstance(split, CarvedSplit):
            continue
        whole = carved[split.carve_from]
        labels = whole["label"].astype(str) if family == "pairs" else None
        try:
            kept, cut = train_test_split(
                np.arange(len(whole)), test_size=split.fraction, random_state=split.seed, stratify=labels
            )
        except ValueError as error:  # too few examples of a class, or a fraction that leaves nothing
            raise DataError(
                f"{origin_of(whole)}: cannot carve {name!r} ({split.fraction:g} of {len(whole)} examples of "
                f"split {split.carve_from!r}): {error}"
            ) from None
        carved[split.carve_from] = whole.iloc[np.sort(kept)]
        carved[name] = whole.iloc[np.sort(cut)]
    return carved


def _read_splits(
    found: dict[str, pd.DataFrame], wanted: dict[str, str], source: str
) -> dict[str, pd.DataFrame]:
    """The splits `wanted` (canonical -> the source's name) as the source returned them. A source reading
    files returns them by canonical name; a source with fixed splits (synthetic: train, dev) by its own, so
    `test: dev` takes a synthetic source's dev split as the test."""
    splits = {}
    for name, source_name in wanted.items():
        frame = found.get(name) if name in found else found.get(source_name)
        if frame is None:
            raise ConfigError(
                f"config key 'data.splits.{name}': source {source!r} has no split {source_name!r} "
                f"(it gives: {', '.join(found)})"
            )
        splits[name] = frame
    return splits


def _carved(splits: dict[str, str | CarvedSplit]) -> dict[str, dict]:
    return {name: split.model_dump() for name, split in splits.items() if isinstance(split, CarvedSplit)}


def _sample(frame: pd.DataFrame, limit: int | None) -> pd.DataFrame:
    if limit is None or limit >= len(frame):
        return frame
    keep = np.sort(np.random.default_rng(SAMPLE_SEED).choice(len(frame), size=limit, replace=False))
    return frame.iloc[keep]
