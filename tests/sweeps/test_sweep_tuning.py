"""`search.reuse_actors`: whether Tune hands a new trial a finished trial's worker (the default) or gives
every trial a worker of its own. No Ray is started: Tune's config is built, not run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dicelab.errors import ConfigError
from dicelab.experiment import experiment_from_dict
from dicelab.sweeps.space import plan_sweep
from dicelab.sweeps.trainable import SweepContext
from dicelab.sweeps.tuning import tune_config


def context(search: dict[str, Any]) -> SweepContext:
    data = {"name": "reuse", "data": {"source": "synthetic_pairs"}, "search": search}
    plan = plan_sweep(experiment_from_dict(data, "reuse.yaml"), "reuse.yaml")
    return SweepContext(plan, "reuse", "sweep-id", "parent-id", "0", "sqlite:///unused.db", "f1", 1.0)


GRID = {"space": {"loss.name": {"grid": ["ce", "dice"]}}}


@pytest.mark.parametrize(("search", "reuse"), [(GRID, True), ({**GRID, "reuse_actors": False}, False)])
def test_trials_reuse_finished_trials_workers_unless_the_search_says_not(
    search: dict[str, Any], reuse: bool, tmp_path: Path
):
    config = tune_config(context(search), tmp_path)
    assert config.reuse_actors is reuse
    assert config.mode == "max" and config.metric == "dev_f1"


def test_reuse_actors_takes_a_boolean_only():
    with pytest.raises(ConfigError, match=r"search\.reuse_actors"):
        context({**GRID, "reuse_actors": "sometimes"})


def test_mode_and_what_is_left_of_the_time_budget_reach_tune(tmp_path: Path):
    config = tune_config(
        context({**GRID, "mode": "min", "metric": "log_loss", "time_budget_s": 300}), tmp_path
    )
    assert config.mode == "min" and 290 < config.time_budget_s <= 300  # counted from the sweep's start
    assert tune_config(context(GRID), tmp_path).time_budget_s is None


def test_a_race_keeps_its_time_budget_and_gives_tune_none(tmp_path: Path):
    from dicelab.sweeps.tuning import search_algorithm

    plan = context({**GRID, "racing": {"min_seeds": 2, "max_seeds": 4}, "time_budget_s": 60}).plan
    config = tune_config(SweepContext(plan, "r", "s", "p", "0", "sqlite:///unused.db", "f1", 1.0), tmp_path)
    assert config.time_budget_s is None
    race = search_algorithm(plan, "f1", tmp_path / "race").race
    assert race.settings.time_budget_s == 60 and 0 <= race.elapsed() < 10
