"""The contract every registered data source passes, a plugin's included (the source-side twin of
`LossContract`). Each `test_*` method is one check, given the source's example datasets (`cases`): pytest
runs them on the built-ins (tests/data), `dicelab plugins check` on a plugin's sources, with the data
settings and families the source function declares (`contract_data`, `contract_families`; default: no
data settings, the pairs family).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from dicelab.config import ExperimentConfig
from dicelab.data import CANONICAL_COLUMNS, Family, RawDataset, load_raw_dataset
from dicelab.data.provenance import origin_of
from dicelab.data.sources import SOURCES

SMALL = {"n_train": 30, "n_dev": 10, "seed": 5}


@dataclass
class SourceCase:
    source: str
    family: Family
    config: ExperimentConfig
    reads_files: bool  # file sources locate each example (file and line) for error messages


def make_config(source: str, cache_dir: Path, **data: Any) -> ExperimentConfig:
    data = {"source": source, "synthetic": SMALL, "cache_dir": str(cache_dir), **data}
    return ExperimentConfig.model_validate({"name": f"contract-{source}", "data": data})


def declared_cases(name: str, cache_dir: Path) -> list[SourceCase]:
    """A source's cases from what its function declares (a plugin's source)."""
    source = SOURCES.get(name)
    data = dict(getattr(source, "contract_data", {}))
    families = tuple(getattr(source, "contract_families", ("pairs",)))
    reads_files = "path" in data or "name" in data
    return [
        SourceCase(name, family, make_config(name, cache_dir, **data), reads_files) for family in families
    ]


class SourceContract:
    def test_gives_every_split_in_the_canonical_columns(self, cases: list[SourceCase]) -> None:
        for case in cases:
            raw = SOURCES.get(case.source)(case.config, case.family)
            assert isinstance(raw, RawDataset) and raw.family == case.family
            assert set(case.config.data.splits) <= set(raw.splits), case.family
            for split, frame in raw.splits.items():
                assert list(frame.columns) == list(CANONICAL_COLUMNS[case.family]), (case.family, split)
                assert len(frame) > 0, (case.family, split)
                if case.reads_files:
                    assert origin_of(frame) != "<data>", (case.family, split)
            assert all(isinstance(label, str) for label in raw.label_names)
            assert raw.fingerprint == ""  # load_raw_dataset fingerprints what every source gives

    def test_loads_checked_and_fingerprinted_the_same_twice(self, cases: list[SourceCase]) -> None:
        for case in cases:
            first = load_raw_dataset(case.config, case.family)
            second = load_raw_dataset(case.config, case.family)
            assert first.fingerprint and first.fingerprint == second.fingerprint
            assert set(first.splits) >= {"train", "dev"}
            for frame in first.splits.values():
                assert isinstance(frame.index, pd.RangeIndex) and frame.index.start == 0
            if case.family != "spans":
                labels = {"pairs": "label", "tagging": "tags"}[case.family]
                seen = set(first.train[labels].explode()) | set(first.dev[labels].explode())
                assert seen <= set(first.label_names)
