"""The contract every registered data source passes (`dicelab.contracts.sources`, the source-side twin of the
LossContract).

`SourceContract` runs over `SOURCES.names()`: a source is in the suite the moment it is registered, and a
source without an example dataset in `EXAMPLES` fails until it gets one. The file sources read local copies
of synthetic data (`local`: JSONL split files; `hub`: Parquet splits in hub layout, no network).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import datasets
import pandas as pd
import pytest

from dicelab.contracts.sources import SourceCase, SourceContract, make_config
from dicelab.data import Family
from dicelab.data.sources import SOURCES

SYNTHETIC = {"pairs": "synthetic_pairs", "tagging": "synthetic_tagging", "spans": "synthetic_spans"}


def synthetic_frames(family: Family, tmp_path: Path) -> dict[str, pd.DataFrame]:
    raw = SOURCES.get(SYNTHETIC[family])(make_config(SYNTHETIC[family], tmp_path), family)
    return {split: frame.reset_index(drop=True) for split, frame in raw.splits.items()}


def synthetic_cases(source: str, tmp_path: Path) -> list[SourceCase]:
    family = next(family for family, name in SYNTHETIC.items() if name == source)
    return [SourceCase(source, family, make_config(source, tmp_path), reads_files=False)]


def local_cases(tmp_path: Path) -> list[SourceCase]:
    cases = []
    for family in SYNTHETIC:
        directory = tmp_path / f"local-{family}"
        directory.mkdir()
        for split, frame in synthetic_frames(family, tmp_path).items():
            frame.to_json(directory / f"{split}.jsonl", orient="records", lines=True)
        config = make_config("local", tmp_path, path=str(directory))
        cases.append(SourceCase("local", family, config, reads_files=True))
    return cases


def hub_cases(tmp_path: Path) -> list[SourceCase]:
    cases = []
    for family in SYNTHETIC:
        directory = tmp_path / f"hub-{family}"
        directory.mkdir()
        for split, frame in synthetic_frames(family, tmp_path).items():
            hub_split = {"dev": "validation"}.get(split, split)  # the hub's name; dev falls back to it
            datasets.Dataset.from_pandas(frame).to_parquet(str(directory / f"{hub_split}.parquet"))
        config = make_config("hub", tmp_path, name=str(directory))
        cases.append(SourceCase("hub", family, config, reads_files=True))
    return cases


# source -> its example datasets, one per family it serves
EXAMPLES: dict[str, Callable[[Path], list[SourceCase]]] = {
    "hub": hub_cases,
    "local": local_cases,
    **{name: lambda tmp_path, name=name: synthetic_cases(name, tmp_path) for name in SYNTHETIC.values()},
}


@pytest.fixture(autouse=True)
def _hub_cache_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    datasets.disable_progress_bars()


@pytest.fixture(params=SOURCES.names())
def cases(request: pytest.FixtureRequest, tmp_path: Path) -> list[SourceCase]:
    assert request.param in EXAMPLES, f"source {request.param!r} has no example dataset in EXAMPLES"
    found = EXAMPLES[request.param](tmp_path)
    assert found and all(case.source == request.param for case in found)
    return found


class TestEveryRegisteredSource(SourceContract):
    """Runs the contract for every name in `SOURCES` (the `cases` fixture is parametrized over them)."""
