"""Everything data-side of a trial, built once and shared by every trial with the same data-affecting config.

    inputs = prepare_inputs(config)            # raw data -> tokenizer -> cached tokenized features
    run_trial(config_a, reporter, inputs=inputs)
    run_trial(config_b, reporter, inputs=inputs)  # when inputs_key(config_b) == inputs.key

TrialInputs pickles cheaply (the features are memory-mapped Arrow files and pickle by file reference; the
tokenizer by its directory or hub id), so a sweep can `ray.put` it, or rebuild it from the cache directory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import datasets
import pandas as pd

from dicelab.config import ExperimentConfig
from dicelab.data import load_raw_dataset
from dicelab.data.cache import cached_features, fingerprint
from dicelab.tasks import TASKS
from dicelab.tasks.backbones import load_tokenizer, tokenizer_identity

FEATURES_FORMAT = 2  # bump when the layout of cached features changes (2: token_type_ids always encoded)


@dataclass
class TrialInputs:
    key: str  # inputs_key(config) of the config it was built from
    family: str
    label_names: list[str]
    data_fingerprint: str
    manifest: dict | None  # resampling manifest when a data.variant was applied
    dev_frame: pd.DataFrame  # raw dev examples (the task's evaluate() scores against them)
    train_features: datasets.Dataset
    dev_features: datasets.Dataset
    class_counts: list[int]  # training-set counts per class, as the loss sees them (for wce)
    tokenizer_path: str  # a directory or hub id that AutoTokenizer loads
    features_cached: bool  # True when the features came from the cache
    # the held-out split (data.splits.test), scored once at the end of a finished trial; None without one
    test_frame: pd.DataFrame | None = None
    test_features: datasets.Dataset | None = None
    _tokenizer: Any = field(default=None, repr=False, compare=False)

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.tokenizer_path)
        return self._tokenizer

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_tokenizer": None}  # reloaded from tokenizer_path where it is needed


def inputs_key(config: ExperimentConfig) -> str:
    """Fingerprint of exactly the config fields that change a trial's inputs (data, task, backbone)."""
    data = config.data.model_dump(mode="json", exclude={"cache_dir"})  # where the cache is changes nothing
    return fingerprint(
        {
            "data": data,
            "task": config.task.model_dump(mode="json"),
            "backbone": config.model.backbone,
            # only when set: the keys of configs without a revision stay what they were
            **({"revision": config.model.revision} if config.model.revision else {}),
            "tiny_bert": config.model.tiny_bert.model_dump(mode="json"),
        }
    )


def prepare_inputs(config: ExperimentConfig) -> TrialInputs:
    """Load the raw data, the tokenizer and the tokenized features (from the cache when already built)."""
    task = TASKS.get(config.task.name)()
    raw = load_raw_dataset(config, task.family)
    tokenizer = load_tokenizer(config.model, lambda: task.texts(raw.train), config.data.cache_dir)
    key = {
        "format": FEATURES_FORMAT,
        "data": raw.fingerprint,
        "labels": raw.label_names,
        "tokenizer": tokenizer_identity(tokenizer),
        "max_length": config.data.max_length,
        "task": config.task.model_dump(mode="json"),
    }

    def encode() -> dict[str, datasets.Dataset]:
        return {
            split: task.encode(raw.splits[split], tokenizer, config, raw.label_names)
            for split in ("train", "dev", "test")
            if split in raw.splits
        }

    features, hit = cached_features(key, encode, config.data.cache_dir)
    return TrialInputs(
        key=inputs_key(config),
        family=raw.family,
        label_names=list(raw.label_names),
        data_fingerprint=raw.fingerprint,
        manifest=raw.manifest,
        dev_frame=raw.dev,
        train_features=features["train"],
        dev_features=features["dev"],
        class_counts=task.class_counts(features["train"], raw.label_names),
        tokenizer_path=tokenizer.name_or_path,
        features_cached=hit,
        test_frame=raw.splits.get("test"),
        test_features=features.get("test"),
        _tokenizer=tokenizer,
    )
