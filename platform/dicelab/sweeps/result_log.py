"""Each trial's Tune results (result.json, one JSON line per result), written straight into the trial's
folder in the sweep's storage.

Tune's own JsonLoggerCallback writes result.json, params.json and params.pkl into the driver's staging copy
of the experiment, and Tune uploads that whole copy at every save of its experiment state: at least once per
trial checkpoint (`CheckpointConfig(num_to_keep=1)`), so at N trials each save copied 3N files again, about
90 % of a save's CPU at 1,000 trials (benchmarks/results/sweep_scale.md). A sweep's storage is a local
folder (`search.storage`), so the log goes where Tune reads it back (a ResultGrid's `metrics_dataframe`, from
`<trial folder>/result.json`) and the staging copy holds no file per trial. params.json and params.pkl are
not written: a trial's config is in Tune's experiment state and in its MLflow run's params.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ray.tune.experiment import Trial
from ray.tune.logger import LoggerCallback

RESULT_FILE = "result.json"  # the name Tune's ExperimentAnalysis reads


def _plain(value: Any) -> Any:
    """A value json cannot write: a NumPy scalar as its Python value, anything else as its text."""
    item = getattr(value, "item", None)
    return item() if callable(item) else str(value)


class ResultLog(LoggerCallback):
    """Appends every result of a trial to result.json in the trial's folder (`Trial.path`); a resumed or
    retried trial appends to the same file, as Tune's logger does."""

    def log_trial_result(self, iteration: int, trial: Trial, result: dict[str, Any]) -> None:
        folder = Path(trial.path)
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / RESULT_FILE, "a") as file:
            file.write(json.dumps(result, default=_plain) + "\n")
