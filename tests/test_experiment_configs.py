"""Every YAML in experiments/ is a runnable config: it loads, validates, and (for sweeps) every trial of its
search space resolves to a valid trial config, named spaces included. Nothing is trained."""

from __future__ import annotations

from pathlib import Path

import pytest

from dicelab.experiment import load_experiment
from dicelab.sweeps.space import plan_sweep

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"
CONFIGS = sorted(EXPERIMENTS.rglob("*.yaml"))


def test_there_are_configs() -> None:
    names = {path.relative_to(EXPERIMENTS).as_posix() for path in CONFIGS}
    assert "quickstart.yaml" in names
    assert {
        "paper/table7_mrpc_bert.yaml",
        "paper/table8_qqp_variants.yaml",
        "paper/table10_tversky_quoref.yaml",
    } <= names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda path: path.relative_to(EXPERIMENTS).as_posix())
def test_config_validates(path: Path) -> None:
    config = load_experiment(path)
    if config.search is None:
        return
    plan = plan_sweep(config, str(path))
    points = plan.probe_points()
    assert points, f"{path}: empty search space"
    for point in points:
        trial = plan.trial_config(point)
        assert trial.search is None or trial.name == config.name


def test_paper_configs_record_the_papers_numbers() -> None:
    for path in sorted((EXPERIMENTS / "paper").glob("*.yaml")):
        config = load_experiment(path)
        if config.search is None:
            continue
        assert config.paper is not None and "metric" in config.paper, f"{path}: no paper section"
        assert config.paper.get("results") or config.paper.get("sensitivity"), f"{path}: no paper numbers"


def test_table8_grid_covers_every_variant_and_loss() -> None:
    config = load_experiment(EXPERIMENTS / "paper" / "table8_qqp_variants.yaml")
    points = plan_sweep(config).points()
    variants = {point["data.variant"] for point in points}
    assert variants == {"original", "+positive", "+negative", "-negative", "+positive+negative"}
    assert {point["loss.name"] for point in points} >= {"ce", "dsc"}
    assert len(points) == len(variants) * 4 * 3  # losses x variants x seeds


def test_tversky_sweeps_tie_beta_to_alpha() -> None:
    config = load_experiment(EXPERIMENTS / "paper" / "table10_tversky_quoref.yaml")
    plan = plan_sweep(config)
    for point in plan.points():
        trial = plan.trial_config(point)
        assert trial.loss.params["beta"] == pytest.approx(1 - trial.loss.params["alpha"])
