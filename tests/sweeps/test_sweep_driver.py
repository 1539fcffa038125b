"""The sweep driver's start-up: how many trials run at once, and a local Ray whose workers import the
trainable as they start (real Ray, local, stopped at the end)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from dicelab.experiment import experiment_from_dict
from dicelab.sweeps import driver, local_ray
from dicelab.sweeps.space import SweepPlan, plan_sweep


def plan_of(search: dict[str, Any]) -> SweepPlan:
    data = {
        "name": "driver-test",
        "data": {"source": "synthetic_pairs", "synthetic": {"n_train": 40, "n_dev": 20}},
        "loss": {"name": "ce"},
        "search": {"space": {"train.learning_rate": {"grid": [1e-3, 2e-3, 3e-3, 5e-3]}}, **search},
    }
    return plan_sweep(experiment_from_dict(data, "sweep.yaml"), "sweep.yaml")


@pytest.mark.parametrize(
    ("search", "cpus", "slots"),
    [
        ({}, 2, 2),  # one CPU per trial by default
        ({}, 16, 4),  # no more than the trials
        ({"resources": {"cpu": 2}}, 2, 1),
        ({"resources": {"cpu": 1.5}}, 4, 2),  # a trial holds whole shares only
        ({"max_concurrent": 1}, 2, 1),
        ({"seeds": [1, 2, 3]}, 16, 12),
    ],
)
def test_trial_slots(search: dict[str, Any], cpus: int, slots: int) -> None:
    assert driver.trial_slots(plan_of(search), cpus) == slots


def test_workers_preload_the_trainable_only_when_every_one_hosts_a_trial() -> None:
    assert driver.preloads_trainable(plan_of({}), 2)
    assert driver.preloads_trainable(plan_of({}), 4)
    assert not driver.preloads_trainable(plan_of({}), 8)  # 4 trials: 4 workers would stay idle
    assert not driver.preloads_trainable(plan_of({"max_concurrent": 1}), 2)
    assert not driver.preloads_trainable(plan_of({"resources": {"cpu": 2}}), 2)


def test_a_local_ray_whose_workers_import_the_trainable_as_they_start() -> None:
    import ray

    module = driver.TRAINABLE_MODULE

    def imported() -> bool:  # pickled by value: the worker imports nothing of this test for it
        return module in sys.modules

    cpus = driver.local_cpus()
    driver.connect_ray(None, plan_of({"seeds": list(range(1, cpus + 1))}))  # more trials than CPUs
    try:
        probe = ray.remote(num_cpus=1)(imported)
        assert ray.get([probe.remote() for _ in range(cpus)]) == [True] * cpus
    finally:
        ray.shutdown()
        local_ray.release()
