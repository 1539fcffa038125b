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
        # numbers, or a one-line reason why none are recorded (never guessed: unverified ones are left out)
        recorded = config.paper.get("results") or config.paper.get("sensitivity")
        reason = config.paper.get("not_recorded")
        assert recorded or (isinstance(reason, str) and reason.strip()), f"{path}: no paper numbers"
        assert not (recorded and reason and "unverified" not in reason), f"{path}: numbers and not_recorded"


def _trial_configs(path: Path) -> list:
    config = load_experiment(path)
    plan = plan_sweep(config, str(path))
    return [plan.trial_config(point) for point in plan.points()]


@pytest.mark.parametrize(
    "path",
    [path for path in CONFIGS if "paper" in path.parts],
    ids=lambda path: path.relative_to(EXPERIMENTS).as_posix(),
)
def test_the_dice_family_is_set_level_on_tagging_tasks(path: Path) -> None:
    """Per-token dice predicts no entity on tagging (README, losses): every tagging / MRC-NER paper config
    runs the dice family at batch level."""
    config = load_experiment(path)
    if config.search is None or config.task.name not in ("token_tagging", "mrc_ner"):
        return
    for trial in _trial_configs(path):
        if trial.loss.name in ("dice", "dsc", "tversky"):
            assert trial.loss.params.get("level") == "batch", f"{path}: {trial.loss.name} per token"


def test_table5_runs_bert_mrc_and_keeps_a_tagging_variant() -> None:
    for name in ("conll03", "ontonotes5", "msra", "ontonotes4"):
        config = load_experiment(EXPERIMENTS / "paper" / f"table5_{name}.yaml")
        assert config.task.name == "mrc_ner", name
        assert config.task.queries == name, name  # the query set of its entity types
    tagging = load_experiment(EXPERIMENTS / "paper" / "table5_conll03_tagging.yaml")
    assert tagging.task.name == "token_tagging"


def test_table8_loss_settings_are_table7_qqps() -> None:
    def settings(name: str) -> dict[str, dict]:
        trials = _trial_configs(EXPERIMENTS / "paper" / name)
        return {trial.loss.name: trial.loss.params for trial in trials}

    assert settings("table8_qqp_variants.yaml") == settings("table7_qqp_bert.yaml")


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
