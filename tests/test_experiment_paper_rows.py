"""The paper's printed rows in the catalogue: a config records every row its table prints, or says which it
does not (`paper.not_recorded`); and it never states a model size the paper does not."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from dicelab.config import ExperimentConfig
from dicelab.experiment import load_experiment as _load_experiment

PAPER = Path(__file__).resolve().parents[1] / "experiments" / "paper"


@cache
def load_experiment(path: Path) -> ExperimentConfig:
    return _load_experiment(path)


SWEEPS = [path for path in sorted(PAPER.glob("*.yaml")) if load_experiment(path).search is not None]


@pytest.mark.parametrize("path", SWEEPS, ids=lambda path: path.name)
def test_a_dropped_number_is_declared_not_recorded(path: Path) -> None:
    paper = load_experiment(path).paper or {}
    dropped = [loss for loss, row in (paper.get("results") or {}).items() if row is None]
    assert not dropped or paper.get("not_recorded"), f"{path.name}: {dropped} null without paper.not_recorded"


@pytest.mark.parametrize("name", ["squad1", "squad2", "quoref"])
def test_table6_xlnet_rows_are_all_recorded(name: str) -> None:
    paper = load_experiment(PAPER / f"table6_{name}_xlnet.yaml").paper
    assert "not_recorded" not in paper
    assert set(paper["results"]) == {"ce", "focal", "dice", "dsc"}
    f1 = [paper["results"][loss]["original"] for loss in ("ce", "focal", "dice", "dsc")]
    assert f1 == sorted(f1)  # Table 6: each loss above the one before it on every XLNet column


def test_table4_tweets_records_the_printed_dsc_f1() -> None:
    paper = load_experiment(PAPER / "table4_pos_tweets.yaml").paper
    assert "not_recorded" not in paper
    assert paper["results"]["dsc"] == {"original": 92.58}


@pytest.mark.parametrize("path", sorted(PAPER.glob("*.yaml")), ids=lambda path: path.name)
def test_table7_bert_rows_name_no_size(path: Path) -> None:
    config = load_experiment(path)
    if (config.paper or {}).get("table") == 7:
        assert "BERT-base" not in str(config.paper.get("backbone", "")), path.name
        assert "BERT-base" not in (config.description or ""), path.name
