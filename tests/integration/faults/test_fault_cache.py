"""A cached feature file damaged after it was published (truncated, overwritten, metadata gone) is rebuilt,
never a crash: here directly on the cache; under a real process that reads the cache and then trains on it,
in test_fault_driver.py (its `--resume` meets the sweep's cached features cut short)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import datasets
import pytest

from dicelab.data.cache import FEATURES_DIR, cached_features


def _features(n: int = 200) -> dict[str, datasets.Dataset]:
    return {
        "train": datasets.Dataset.from_dict({"input_ids": [[1, 2, i] for i in range(n)], "labels": [0] * n}),
        "dev": datasets.Dataset.from_dict({"input_ids": [[3]], "labels": [1]}),
    }


def _damage(directory: Path, how: str) -> None:
    arrow = sorted(directory.glob("train/*.arrow"))[0]
    if how == "truncated":
        arrow.write_bytes(arrow.read_bytes()[: arrow.stat().st_size // 2])
    elif how == "overwritten":
        arrow.write_bytes(os.urandom(arrow.stat().st_size))
    else:  # the metadata that says what the directory holds
        (directory / "train" / "dataset_info.json").unlink()
        (directory / "train" / "state.json").unlink()


@pytest.mark.parametrize("how", ["truncated", "overwritten", "metadata deleted"])
def test_a_damaged_cache_entry_is_rebuilt(tmp_path, how, fault_figure):
    key = {"what": "fault test"}
    built = []

    def build() -> dict[str, datasets.Dataset]:
        built.append(1)
        return _features()

    _, hit = cached_features(key, build, tmp_path)
    assert not hit and len(built) == 1
    (entry,) = [path for path in (tmp_path / FEATURES_DIR).iterdir() if path.is_dir()]
    _damage(entry, how)

    started = time.monotonic()
    again, hit = cached_features(key, build, tmp_path)
    seconds = time.monotonic() - started
    assert not hit and len(built) == 2  # rebuilt, not read
    # (`first` is memory-mapped from the damaged file: compare with what the build makes)
    assert list(again["train"]["input_ids"]) == list(_features()["train"]["input_ids"])
    assert cached_features(key, build, tmp_path)[1]  # and published again: the next call hits
    fault_figure(
        f"cached feature file {how}",
        trials_finished="n/a (cache)",
        runs_duplicated=0,
        evaluations_lost=0,
        seconds_to_recover=f"{seconds:.2f} (rebuild)",
    )
