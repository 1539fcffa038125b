"""Warm start (`search.start_from`): the earlier sweep's best configurations, ranked from a real MLflow store,
become this sweep's first points (grid: reordered; random: prepended; optuna: enqueued)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag

from dicelab.errors import ConfigError
from dicelab.experiment import experiment_from_dict
from dicelab.sweeps.schema import StartFrom
from dicelab.sweeps.space import SweepPlan, outline_sweep
from dicelab.sweeps.start_from import warm_points
from dicelab.sweeps.winner import rank_configurations, winner_run
from dicelab.tracking import conventions as names
from dicelab.tracking.store import check_tracking

BASE: dict[str, Any] = {
    "name": "warm-test",
    "data": {"source": "synthetic_pairs", "synthetic": {"n_train": 40, "n_dev": 20}},
    "loss": {"name": "ce"},
}
TVERSKY = {"space": {"loss.alpha": {"grid": [0.3, 0.5, 0.7]}}, "tied": {"loss.beta": "1 - loss.alpha"}}


def plan_of(search: dict[str, Any]) -> SweepPlan:
    data = {**copy.deepcopy(BASE), "search": search}
    return outline_sweep(experiment_from_dict(data, "sweep.yaml"), "sweep.yaml")


def grid_search(**more: Any) -> dict[str, Any]:
    return {
        "space": {"loss.name": {"grid": ["ce", "tversky"]}},
        "conditional": {"tversky": TVERSKY},
        "seeds": [1, 2],
        **more,
    }


# -- the plan ------------------------------------------------------------------------------------------------


def test_a_grid_runs_the_warm_configurations_first_and_adds_nothing():
    plan = plan_of(grid_search())
    warm = plan.with_warm_start([{"loss.name": "tversky", "loss.alpha": 0.7}, {"loss.name": "ce"}])
    points = warm.points()
    assert warm.num_trials == plan.num_trials == 8
    assert points[:4] == [
        {"loss.name": "tversky", "loss.alpha": 0.7, "train.seed": 1},
        {"loss.name": "tversky", "loss.alpha": 0.7, "train.seed": 2},
        {"loss.name": "ce", "train.seed": 1},
        {"loss.name": "ce", "train.seed": 2},
    ]
    assert sorted(map(str, points)) == sorted(map(str, plan.points()))


def test_a_grid_refuses_a_warm_configuration_it_does_not_hold():
    warm = plan_of(grid_search()).with_warm_start([{"loss.name": "tversky", "loss.alpha": 0.4}])
    with pytest.raises(ConfigError, match=r"^sweep.yaml: config key 'search.start_from': .*not a point"):
        warm.points()


def test_random_search_runs_the_warm_configurations_first_in_addition_to_its_draws():
    search = {"space": {"train.learning_rate": {"loguniform": [1e-5, 1e-3]}}, "algorithm": "random"}
    plan = plan_of({**search, "num_samples": 3})
    warm = plan.with_warm_start([{"train.learning_rate": 2e-4}])
    assert warm.points()[0] == {"train.learning_rate": 2e-4}
    assert warm.points()[1:] == plan.points()
    assert warm.num_configurations == 4


def test_optuna_enqueues_the_warm_configurations_under_the_names_it_suggests():
    search = {
        "algorithm": "optuna",
        "num_samples": 4,
        "space": {
            "loss.name": {"choice": ["ce", "tversky"]},
            "train.learning_rate": {"uniform": [1e-5, 1e-3]},
        },
        "conditional": {"tversky": {"space": {"loss.alpha": {"uniform": [0.1, 0.9]}}}},
    }
    plan = plan_of(search)
    point = plan.warm_point({"loss.name": "tversky", "loss.alpha": 0.3, "train.learning_rate": 1e-4})
    warm = plan.with_warm_start([point])
    assert warm.optuna_points() == [
        {"loss.name": "tversky", "train.learning_rate": 1e-4, "tversky:loss.alpha": 0.3}
    ]
    assert warm.num_trials == plan.num_trials == 4  # within num_samples, as Tune's points_to_evaluate
    assert {**point, "train.seed": 0} not in warm.probe_points()  # no seeds: probed as given
    assert point in warm.probe_points()
    with pytest.raises(ConfigError, match=r"search.start_from.top.*num_samples"):
        plan.with_warm_start([point] * 5)


def test_a_warm_configuration_outside_this_space_is_refused():
    plan = plan_of(grid_search())
    with pytest.raises(ConfigError, match=r"loss 'dice' is not searched here \(losses: ce, tversky\)"):
        plan.warm_point({"loss.name": "dice"})
    with pytest.raises(ConfigError, match=r"its loss.alpha=0.9 is outside this sweep's space"):
        plan.warm_point({"loss.name": "tversky", "loss.alpha": 0.9})
    ranged = plan_of(
        {"space": {"train.learning_rate": {"uniform": [1e-5, 1e-3]}}, "algorithm": "random", "num_samples": 2}
    )
    assert ranged.warm_point({"train.learning_rate": 1e-4}) == {"train.learning_rate": 1e-4}
    with pytest.raises(ConfigError, match=r"train.learning_rate=0.01 is outside"):
        ranged.warm_point({"train.learning_rate": 0.01})


def test_start_from_is_checked_by_the_schema():
    with pytest.raises(ConfigError, match=r"search\.start_from\.top"):
        plan_of(grid_search(start_from={"experiment": "earlier", "top": 0}))
    with pytest.raises(ConfigError, match=r"search\.start_from\.expriment"):
        plan_of(grid_search(start_from={"expriment": "earlier"}))
    assert plan_of(grid_search(start_from={"experiment": "earlier"})).search.start_from == StartFrom(
        experiment="earlier"
    )


# -- reading the earlier sweep from a real MLflow store --------------------------------------------------


def earlier_sweep(uri: str, results: dict[tuple[str, float | None, int], tuple[float, str | None]]) -> str:
    """A finished sweep in the store: (loss, alpha, seed) -> (best_dev_f1, degenerate reason)."""
    check_tracking(uri)  # the store as dicelab makes it
    client = MlflowClient(uri)
    experiment_id = client.create_experiment("earlier")
    parent = client.create_run(
        experiment_id,
        tags={names.ROLE: names.ROLE_PARENT, names.SWEEP_ID: "s1", names.PRIMARY_METRIC: "f1"},
    )
    client.log_param(parent.info.run_id, "search.keys", "loss.name,loss.alpha,train.seed")
    for (loss, alpha, seed), (value, degenerate) in results.items():
        tags = {names.ROLE: names.ROLE_TRIAL, names.SWEEP_ID: "s1", names.OUTCOME: names.COMPLETED}
        if degenerate:
            tags[names.DEGENERATE] = degenerate
        run = client.create_run(experiment_id, tags=tags)
        params = {"loss.name": loss, "loss.alpha": alpha, "train.seed": seed, "train.learning_rate": 0.001}
        client.log_batch(
            run.info.run_id,
            metrics=[Metric(names.best_metric("f1"), value, 0, 0)],
            params=[Param(key, str(v)) for key, v in params.items()],
            tags=[RunTag("mlflow.runName", f"{loss} {alpha} {seed}")],
        )
        client.set_terminated(run.info.run_id)
    client.set_terminated(parent.info.run_id)
    return parent.info.run_id


RESULTS = {
    ("ce", None, 1): (0.60, None),
    ("ce", None, 2): (0.62, None),
    ("tversky", 0.3, 1): (0.70, None),
    ("tversky", 0.3, 2): (0.50, None),  # mean 0.60, below ce's 0.61
    ("tversky", 0.7, 1): (0.66, None),
    ("tversky", 0.7, 2): (0.64, None),  # mean 0.65: the best
    ("tversky", 0.5, 1): (0.99, "predicts no positive"),  # degenerate: never counted
}


def test_the_earlier_sweeps_best_configurations_by_mean_become_the_warm_points(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    earlier_sweep(uri, RESULTS)
    plan = plan_of(grid_search(start_from={"experiment": "earlier", "top": 2}))
    points, line = warm_points(MlflowClient(uri), plan.search.start_from, plan)
    assert points == [{"loss.name": "tversky", "loss.alpha": 0.7}, {"loss.name": "ce"}]
    assert "earlier sweep s1" in line and "0.6500, 0.6100" in line
    assert plan.with_warm_start(points).points()[0] == {
        "loss.name": "tversky",
        "loss.alpha": 0.7,
        "train.seed": 1,
    }


def test_the_winner_is_the_best_seed_of_the_best_configuration(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    parent_id = earlier_sweep(uri, RESULTS)
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("earlier").experiment_id])
    trials = [run for run in runs if run.data.tags[names.ROLE] == names.ROLE_TRIAL]
    ranked = rank_configurations(trials, "f1", ["loss.name", "loss.alpha"])
    assert [round(c.mean, 4) for c in ranked] == [0.65, 0.61, 0.6]
    winner = winner_run(client.get_run(parent_id), trials, "f1")
    assert winner is not None and winner.data.params["train.seed"] == "1"
    assert winner.data.metrics["best_dev_f1"] == 0.66  # not 0.70 (a worse configuration's lucky seed)


def test_bad_start_from_is_one_line_naming_the_key(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    earlier_sweep(uri, RESULTS)
    plan = plan_of(grid_search())
    client = MlflowClient(uri)
    cases = {
        StartFrom(experiment="nope"): "no experiment 'nope'",
        StartFrom(experiment="earlier", sweep_id="zzz"): "no finished sweep 'zzz' in experiment 'earlier'",
    }
    for start, expected in cases.items():
        with pytest.raises(ConfigError) as caught:
            warm_points(client, start, plan)
        message = str(caught.value)
        assert message.startswith("sweep.yaml: config key 'search.start_from'") and expected in message
        assert "\n" not in message
