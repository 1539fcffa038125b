"""Shared fixtures of the data tests: configs without registry checks, small files, the real MRPC data."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dicelab.config import ExperimentConfig
from dicelab.data import RawDataset, load_raw_dataset

SHARED_MRPC = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "mrpc"


@pytest.fixture
def make_config(tmp_path: Path) -> Callable[..., ExperimentConfig]:
    """`make_config(task=..., **data)`: a schema-validated config whose cache lives in tmp_path."""

    def make(task: str = "pair_classification", **data: Any) -> ExperimentConfig:
        data.setdefault("cache_dir", str(tmp_path / "cache"))
        return ExperimentConfig.model_validate({"name": "data-test", "data": data, "task": {"name": task}})

    return make


@pytest.fixture
def load_raw() -> Callable[[ExperimentConfig], RawDataset]:
    """`load_raw(config)`: `load_raw_dataset` given the family of the config's registered task."""
    from dicelab.tasks import TASKS

    def load(config: ExperimentConfig) -> RawDataset:
        return load_raw_dataset(config, TASKS.get(config.task.name).family)

    return load


@pytest.fixture
def write(tmp_path: Path) -> Callable[..., Path]:
    """`write(name, text, bom=False)`: a UTF-8 file under tmp_path (with a byte-order mark when asked)."""

    def write_file(name: str, text: str, *, bom: bool = False) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
        return path

    return write_file


@pytest.fixture
def mrpc_dir() -> Path:
    if not (SHARED_MRPC / "train.tsv").is_file():
        pytest.skip("the shared MRPC data (../shared/data/mrpc) is absent")
    return SHARED_MRPC
