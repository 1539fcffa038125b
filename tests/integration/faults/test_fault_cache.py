"""A cached feature file damaged after it was published (truncated, overwritten, metadata gone) is rebuilt,
never a crash: once directly on the cache, and once under a real `dicelab trial` that reads the cache."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import datasets
import pytest
import yaml

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


@pytest.mark.slow
def test_a_trial_over_a_truncated_cache_rebuilds_it_and_trains(tmp_path):
    config = tmp_path / "trial.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "name": "fault-cache",
                "data": {"source": "synthetic_pairs", "synthetic": {"n_train": 64, "n_dev": 32}},
                "model": {"backbone": "tiny-bert"},
                "train": {"epochs": 1, "batch_size": 16},
                "tracking": {"enabled": False},
            }
        )
    )
    command = [sys.executable, "-m", "dicelab.cli", "trial", str(config), "--quiet"]
    env = {key: value for key, value in os.environ.items() if not key.startswith("MLFLOW_")}

    def trial() -> subprocess.CompletedProcess:
        return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)

    assert trial().returncode == 0
    arrows = sorted(tmp_path.glob(f".dicelab/**/{FEATURES_DIR}/*/train/*.arrow"))
    assert arrows, sorted(str(path) for path in tmp_path.rglob("*.arrow"))
    for arrow in arrows:
        arrow.write_bytes(arrow.read_bytes()[:100])
    done = trial()
    assert done.returncode == 0, done.stderr[-3000:]
    assert "building them again" in done.stderr
