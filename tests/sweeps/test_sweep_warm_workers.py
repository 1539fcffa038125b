"""When a local Ray's prestarted workers import the trial module: only when the sweep's first trials take
every one of them (an idle worker with torch imported holds ~600 MB). The real start: tests/integration."""

from __future__ import annotations

from typing import Any

import pytest

from dicelab.experiment import experiment_from_dict
from dicelab.sweeps.space import outline_sweep
from dicelab.sweeps.warm_workers import TRIAL_MODULES, system_config

WARM = {"preload_python_modules": TRIAL_MODULES, "kill_idle_workers_interval_ms": 0}
FOUR = {"space": {"train.learning_rate": {"grid": [1e-3, 2e-3, 3e-3, 4e-3]}}}


def settings(search: dict[str, Any], cpus: int, **sections: Any) -> dict[str, Any]:
    data = {"name": "warm", "data": {"source": "synthetic_pairs"}, "search": search, **sections}
    return system_config(outline_sweep(experiment_from_dict(data, "warm.yaml"), "warm.yaml"), cpus)


@pytest.mark.parametrize(
    ("search", "cpus", "warm"),
    [
        (FOUR, 2, True),  # 4 trials, 2 at a time: both workers host one
        (FOUR, 4, True),
        (FOUR, 8, False),  # 4 trials cannot take 8 workers: 4 would idle with torch imported
        ({**FOUR, "max_concurrent": 1}, 2, False),
        ({**FOUR, "resources": {"cpu": 2}}, 2, False),  # 1 trial x 2 threads: one worker of two
        ({**FOUR, "resources": {"cpu": 0.5}}, 2, True),  # 4 at once: 2 prestarted + 2 started warm too
        ({**FOUR, "seeds": [1, 2]}, 8, True),
        ({**FOUR, "racing": {"min_seeds": 2}}, 8, True),  # a race's first round: 4 configurations x 2
        ({**FOUR, "racing": {"min_seeds": 2}}, 16, False),
    ],
)
def test_workers_are_warmed_only_when_the_first_trials_take_them_all(search, cpus, warm):
    assert settings(search, cpus) == (WARM if warm else {})


def test_gpu_trials_never_warm_cpu_workers():
    assert settings({**FOUR, "resources": {"gpu": 0.5}}, 2, train={"device": "cuda"}) == {}
