"""Small synthetic trials on a tiny tiny-bert: configs per task family, with inputs built once per session."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from dicelab.config import ExperimentConfig, apply_overrides
from dicelab.experiment import experiment_from_dict
from dicelab.tracking import check_tracking
from dicelab.training import TrialInputs, inputs_key, prepare_inputs

FAMILIES: dict[str, dict] = {
    "pairs": {
        "task": {"name": "pair_classification"},
        "data": {"source": "synthetic_pairs", "max_length": 64},
    },
    "tagging": {"task": {"name": "token_tagging"}, "data": {"source": "synthetic_tagging", "max_length": 64}},
    "spans": {
        "task": {"name": "span_extraction", "doc_stride": 32},
        "data": {"source": "synthetic_spans", "max_length": 128},
    },
}


def base_config(family: str, cache_dir: Path) -> dict:
    data = {
        **FAMILIES[family]["data"],
        "synthetic": {"n_train": 160, "n_dev": 48, "seed": 1},
        "cache_dir": str(cache_dir),
    }
    return {
        "name": f"test-{family}",
        "data": data,
        "task": FAMILIES[family]["task"],
        "model": {
            "backbone": "tiny-bert",
            "tiny_bert": {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64},
        },
        "train": {
            "epochs": 1,
            "batch_size": 16,
            "eval_batch_size": 64,
            "learning_rate": 1e-3,
            "num_threads": 1,
            "log_every_steps": 2,
        },
        "tracking": {"enabled": False},
    }


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("dicelab-cache")


@pytest.fixture(scope="session")
def config_dict() -> Callable[[str, Path], dict]:
    """config_dict(family, cache_dir) -> the raw config of a small trial, to write as YAML."""
    return base_config


@pytest.fixture(scope="session")
def make_config(cache_dir: Path) -> Callable[..., ExperimentConfig]:
    """make_config("pairs", "loss.name=dsc", "train.max_steps=4") -> a validated ExperimentConfig."""

    def make(family: str, *overrides: str) -> ExperimentConfig:
        return experiment_from_dict(apply_overrides(base_config(family, cache_dir), list(overrides)))

    return make


@pytest.fixture(scope="session")
def inputs_for() -> Callable[[ExperimentConfig], TrialInputs]:
    """Prepared inputs, shared by every test whose config has the same inputs_key."""
    built: dict[str, TrialInputs] = {}

    def get(config: ExperimentConfig) -> TrialInputs:
        key = inputs_key(config)
        if key not in built:
            built[key] = prepare_inputs(config)
        return built[key]

    return get


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)  # the machine is shared; trials set their own count (train.num_threads)


@pytest.fixture(scope="session")
def _empty_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    database = tmp_path_factory.mktemp("empty-store") / "mlflow.db"
    check_tracking(f"sqlite:///{database}")  # creates the schema: seconds, so once per session
    return database


@pytest.fixture
def store(_empty_store: Path, tmp_path: Path) -> str:
    """A fresh SQLite tracking store of this test (a copy of an empty one)."""
    database = tmp_path / "store" / "mlflow.db"
    database.parent.mkdir()
    shutil.copy(_empty_store, database)
    return f"sqlite:///{database}"
