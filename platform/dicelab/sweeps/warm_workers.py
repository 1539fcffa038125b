"""Trial workers that are ready when Tune asks for them (a private local Ray).

Ray prestarts one Python worker per CPU when the driver connects, and gives an idle worker to a new actor
only when their runtime environments match. Three things follow:
- Tune gives every trial actor a runtime env (`PL_DISABLE_FORK=1`, a PyTorch Lightning switch; dicelab does
  not use Lightning), so no trial could take a prestarted worker: Ray killed them and started new ones,
  which is slower to a first call. `bare_trial_actors` drops that variable,
  leaving the actors' environment empty like the prestarted workers'.
- The prestarted workers then import what a trial needs (torch, transformers' models, MLflow, Tune, the
  scores: ~15 s of CPU each) while the driver still sets up, through Ray's `preload_python_modules`,
  instead of after Tune has created the actors, so the first trials start sooner. Only when every
  prestarted worker will host a trial: an idle worker with these imports holds its memory (hundreds of MB)
  until the sweep ends.
- Ray's idle-worker killer keeps as many idle workers as there are free CPUs, and there are none once Tune
  has reserved the trials' placement groups: in the moment before the actors claimed them, it killed the
  prestarted workers in some sweeps, and the trials waited for new workers. With preloading,
  the killer is off: a private cluster's only idle workers are those prestarted for its trials.

`DICELAB_RAY_TUNING=0` turns all of it off (`ray_adapter.tuning_on`); a Ray that refuses these settings
gets a plain start. Kept for the quickstart sweep's wall time (benchmarks/results/ray_speedups_ab.md).
"""

from __future__ import annotations

from typing import Any

from dicelab.sweeps import ray_adapter
from dicelab.sweeps.space import SweepPlan

TRIAL_MODULE = "dicelab.sweeps.trainable"  # the trials' module
# First the collector's settings for the imports (worker_start), then the trials' module and what a trial
# needs beyond it: the modelling stack and the scores, which the tasks import where they are used (so that a
# sweep's driver, which imports the tasks to build the inputs, does without them)
TRIAL_MODULES = [
    "dicelab.sweeps.worker_start",
    TRIAL_MODULE,
    "transformers.models.bert.modeling_bert",
    "sklearn.metrics",
    "seqeval.metrics",
]


def system_config(plan: SweepPlan, cpus: int) -> dict[str, Any]:
    """Ray system settings for a local node whose `cpus` prestarted workers all host a first-round trial
    of the sweep (trials at once: its first round, capped by CPUs and max_concurrent); else none."""
    resources = plan.search.resources
    if resources.gpu > 0:  # GPUs cap the trials at once, and a node has far fewer GPUs than CPUs
        return {}
    at_once = min(plan.trials_at_start, int(cpus // resources.cpu), plan.search.max_concurrent or cpus)
    if at_once < cpus:
        return {}
    return ray_adapter.preload_settings(list(TRIAL_MODULES))


def local_cpus() -> int:
    """The CPUs Ray counts for a local node it starts (cgroup limits included): one prestarted worker each."""
    return ray_adapter.local_cpus()
