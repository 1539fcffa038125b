"""load_experiment: the schema, then the registry checks (sources, variants, losses, tasks) on one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from dicelab.errors import ConfigError
from dicelab.experiment import experiment_from_dict, load_experiment

MINIMAL = """
name: unit
loss: {name: tversky, alpha: 0.3, beta: 0.7}
train: {epochs: 1, seed: 7}
"""


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(MINIMAL, encoding="utf-8")
    return path


def test_a_valid_experiment_loads(config_file: Path) -> None:
    config = load_experiment(config_file, ["train.epochs=2"])
    assert config.loss.params == {"alpha": 0.3, "beta": 0.7} and config.train.epochs == 2


def test_unknown_loss_and_bad_loss_param(config_file: Path) -> None:
    with pytest.raises(ConfigError, match=r"^\S*config.yaml: config key 'loss.name'.*dsc"):
        load_experiment(config_file, ["loss.name=hinge"])
    with pytest.raises(ConfigError, match=r"config key 'loss.alpha'"):
        load_experiment(config_file, ["loss.alpha=-1"])


@pytest.mark.parametrize(
    ("override", "key", "allowed"),
    [
        ("task.name=translation", "task.name", "pair_classification"),
        ("data.source=ftp", "data.source", "synthetic_pairs"),
        ("data.variant=+both", "data.variant", "-negative"),
    ],
)
def test_unknown_registry_names(config_file: Path, override: str, key: str, allowed: str) -> None:
    with pytest.raises(ConfigError, match=rf"config key '{key}'.*allowed: .*{allowed}") as caught:
        load_experiment(config_file, [override])
    assert "\n" not in str(caught.value)


def test_schema_errors_come_first() -> None:
    # An unknown key and an unknown loss: the schema error is reported (before any registry is imported).
    with pytest.raises(ConfigError, match=r"x.yaml: config key 'train.lr' is not allowed"):
        experiment_from_dict({"name": "x", "train": {"lr": 1}, "loss": {"name": "hinge"}}, "x.yaml")
