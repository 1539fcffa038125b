"""A sweep's trials take the workers its private local Ray prestarted, with the trial module imported, even
when Tune's placement groups took every CPU a while before the actors came (when Ray's idle-worker killer
used to end them); the workers have the trials' environment (`trial_env`)."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from dicelab.sweeps.trial_env import TRIAL_ENV

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

# Run in its own process: it starts (and stops) a private local Ray the way `dicelab sweep` does.
PROBE = textwrap.dedent(
    """
    import json, os, sys, time

    import psutil
    import ray
    from ray.tune.execution.class_cache import _ActorClassCache
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from dicelab.experiment import experiment_from_dict
    from dicelab.sweeps import local_ray, ray_adapter, trial_env, warm_workers
    from dicelab.sweeps.driver import connect_ray
    from dicelab.sweeps.space import outline_sweep

    os.environ.pop("MALLOC_ARENA_MAX", None)  # as on a machine where nobody set it: the sweep's value
    cpus = warm_workers.local_cpus()
    config = experiment_from_dict(
        {
            "name": "warm",
            "data": {"source": "synthetic_pairs"},
            "search": {"space": {"train.seed": {"grid": list(range(cpus))}}},
        },
        "warm.yaml",
    )
    connect_ray(None, outline_sweep(config, "warm.yaml"))
    ray_adapter.bare_trial_actors()


    class Probe:
        def __init__(self):
            self.warm = "dicelab.sweeps.trainable" in sys.modules  # by name: importing nothing of dicelab

        def where(self):
            env = {key: os.environ.get(key) for key in trial_env.TRIAL_ENV}
            return {"warm": self.warm, "started": psutil.Process().create_time(), "env": env}


    try:
        groups = [placement_group([{"CPU": 1}]) for _ in range(cpus)]
        ray.get([group.ready() for group in groups])
        time.sleep(2.0)  # every CPU reserved, no actor yet: the window in which idle workers were killed
        asked = time.time()
        remote = _ActorClassCache().get(Probe)  # as Tune makes its trial actors (its runtime env included)
        actors = [
            remote.options(num_cpus=1, scheduling_strategy=PlacementGroupSchedulingStrategy(group)).remote()
            for group in groups
        ]
        system = ray._private.worker._global_node._config  # what the private Ray was started with
        actors = ray.get([actor.where.remote() for actor in actors])
        print(json.dumps({"asked": asked, "actors": actors, "system": system}))
    finally:
        ray.shutdown()
        local_ray.release()
    """
)


def test_trials_take_the_prestarted_workers_with_the_trial_module_imported(tmp_path, sweep_tools):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    done = sweep_tools.run_command([sys.executable, str(script)], tmp_path, timeout_s=240)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    for actor in found["actors"]:
        # a worker Ray started for the actor would be younger than the request, and would import the
        # trial module only when the trial's own code does
        assert actor["started"] < found["asked"] - 1.0, found
        assert actor["warm"], found
        assert actor["env"] == TRIAL_ENV, found  # glibc's malloc with one arena (see trial_env)
    # no dashboard on the private Ray, so no metrics collected either (CPU the trials keep)
    assert found["system"]["enable_metrics_collection"] is False, found["system"]
    assert found["system"]["enable_worker_prestart"] is False, found["system"]
