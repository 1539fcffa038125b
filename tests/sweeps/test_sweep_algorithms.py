"""The search-algorithm contract, run over every registered algorithm (`dicelab.sweeps.algorithms`): trial
counting, trials at start, where the points come from (up front, or a Tune searcher that proposes them),
Tune's param space and sample count, a trial's point from its Tune config, warm start and racing. A new
algorithm registered there passes this suite or says which promise it breaks. No Ray is started."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from ray.tune.search import Searcher

from dicelab.errors import ConfigError
from dicelab.experiment import experiment_from_dict
from dicelab.sweeps import tuning
from dicelab.sweeps.algorithms import ALGORITHMS, POINT_KEY
from dicelab.sweeps.space import LOSS_KEY, SEED_KEY, SweepPlan, outline_sweep

BASE: dict[str, Any] = {
    "name": "algorithms",
    "data": {"source": "synthetic_pairs", "synthetic": {"n_train": 40, "n_dev": 20}},
    "loss": {"name": "ce"},
}
SEEDS = [1, 2]


def search_for(name: str, **extra: Any) -> dict[str, Any]:
    """A space every algorithm takes: listed values (a grid runs each, a sampler draws them), and a range
    where the algorithm samples."""
    algorithm = ALGORITHMS.get(name)
    space: dict[str, Any] = {
        LOSS_KEY: {"choice": ["ce", "dice"]},
        "train.learning_rate": {"choice": [1e-4, 3e-4]},
    }
    search: dict[str, Any] = {"algorithm": name, "space": space, **extra}
    if algorithm.draws_samples:  # a range too: drawn up front, or proposed while the sweep runs
        space["train.weight_decay"] = {"uniform": [0.0, 0.1]}
        search["num_samples"] = 3
    return search


def plan_of(search: dict[str, Any]) -> SweepPlan:
    data = {**copy.deepcopy(BASE), "search": search}
    return outline_sweep(experiment_from_dict(data, "sweep.yaml"), "sweep.yaml")


def inside(plan: SweepPlan, point: dict[str, Any]) -> bool:
    """Every swept key of the point holds a value its dimension can produce."""
    branch = plan.branch(point)
    for key, dimension in branch.dimensions.items():
        value = point[key]
        if dimension.values is not None and value not in dimension.values:
            return False
        if dimension.values is None and not dimension.bounds[0] <= value <= dimension.bounds[1]:
            return False
    return True


def test_the_registry_holds_the_shipped_algorithms():
    assert {"grid", "random", "optuna", "gp"} <= set(ALGORITHMS.names())


def test_an_unknown_algorithm_is_one_line_naming_the_key_and_the_choices():
    with pytest.raises(ConfigError) as caught:
        plan_of({"algorithm": "bayes", "space": {"train.learning_rate": {"choice": [1e-4]}}})
    message = str(caught.value)
    assert "\n" not in message and "'search.algorithm'" in message and "'bayes'" in message
    assert all(name in message for name in ALGORITHMS.names())


@pytest.mark.parametrize("name", ALGORITHMS.names())
class TestSearchAlgorithmContract:
    def test_trials_are_configurations_times_seeds_and_all_can_start(self, name):
        plan = plan_of(search_for(name, seeds=SEEDS))
        assert plan.num_configurations >= 1
        assert plan.num_trials == plan.num_configurations * len(SEEDS)
        assert plan.trials_at_start == plan.num_trials
        if ALGORITHMS.get(name).draws_samples:
            assert plan.num_configurations == 3

    def test_points_come_up_front_or_from_a_tune_searcher(self, name, tmp_path):
        plan = plan_of(search_for(name, seeds=SEEDS))
        algorithm = plan.algorithm
        searcher = tuning.search_algorithm(plan, "f1", tmp_path)
        if algorithm.proposes_while_running:
            with pytest.raises(ValueError, match="proposes its points while the sweep runs"):
                plan.points()
            assert isinstance(searcher, Searcher)
            assert tuning.param_space(plan) == {} and algorithm.num_samples(plan) == plan.num_trials
            proposed = [searcher.suggest(f"t{index}") for index in range(2 * len(SEEDS))]
            points = [plan.algorithm.point_of(config, plan) for config in proposed]
            # the same configuration once per seed, in the seeds' order
            assert [point[SEED_KEY] for point in points] == SEEDS * 2
            assert {k: v for k, v in points[0].items() if k != SEED_KEY} == {
                k: v for k, v in points[1].items() if k != SEED_KEY
            }
        else:
            assert searcher is None
            points = plan.points()
            assert len(points) == plan.num_trials and [p[SEED_KEY] for p in points[:2]] == SEEDS
            space = tuning.param_space(plan)
            assert space[POINT_KEY]["grid_search"] == points and algorithm.num_samples(plan) == 1
            assert [algorithm.point_of({POINT_KEY: point}, plan) for point in points] == points
        for point in points:
            assert inside(plan, point), point
            plan.trial_data(point)  # resolves (tied keys, the loss's defaults)

    def test_probe_points_cover_what_the_algorithm_can_produce(self, name):
        plan = plan_of(search_for(name))
        probes = plan.probe_points()
        assert probes and all(inside(plan, point) for point in probes)
        assert {point[LOSS_KEY] for point in probes} == {"ce", "dice"}

    def test_a_warm_start_goes_first_within_the_algorithms_limit(self, name):
        plan = plan_of(search_for(name))
        first = {LOSS_KEY: "dice", "train.learning_rate": 3e-4}
        if "train.weight_decay" in plan.branches[0].dimensions:
            first["train.weight_decay"] = 0.05
        warm = plan.with_warm_start([first])
        if plan.algorithm.proposes_while_running:
            assert warm.optuna_points()[0]["train.learning_rate"] == 3e-4
            assert warm.num_trials == plan.num_trials  # within num_samples
        else:
            assert warm.points()[0] == first
        most = plan.algorithm.max_warm_start(plan)
        if most is not None:
            with pytest.raises(ConfigError, match=r"search\.start_from\.top"):
                plan.with_warm_start([first] * (most + 1))

    def test_racing_runs_only_where_every_point_is_known_up_front(self, name):
        racing = {"racing": {"min_seeds": 2, "max_seeds": 3}}
        if ALGORITHMS.get(name).supports_racing:
            plan = plan_of(search_for(name, **racing))
            assert plan.trials_at_start == plan.num_configurations * 2 <= plan.num_trials
        else:
            with pytest.raises(ConfigError, match=f"not supported with algorithm {name}"):
                plan_of(search_for(name, **racing))

    def test_a_grid_dimension_is_refused_unless_the_algorithm_takes_grids(self, name):
        search = search_for(name)
        search["space"]["train.batch_size"] = {"grid": [8, 16]}
        if ALGORITHMS.get(name).accepts_grid:
            assert plan_of(search).num_configurations >= 2
        else:
            with pytest.raises(ConfigError, match=r"search\.space\.train\.batch_size"):
                plan_of(search)
