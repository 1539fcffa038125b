"""MLflow tracking: naming conventions (`conventions`) and the store (`resolve_tracking_uri`, ...).

The MLflow reporter of the trial loop is `dicelab.training.reporters.MlflowReporter`.
"""

from dicelab.tracking.store import (
    artifact_location,
    check_tracking,
    default_tracking_uri,
    ensure_experiment,
    resolve_tracking_uri,
)

__all__ = [
    "artifact_location",
    "check_tracking",
    "default_tracking_uri",
    "ensure_experiment",
    "resolve_tracking_uri",
]
