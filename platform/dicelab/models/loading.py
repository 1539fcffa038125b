"""Loading a saved model from `models:/…`, `runs:/…` or a local directory."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import torch

from dicelab.errors import ConfigError, DataError, TrackingError
from dicelab.models.bundle import BUNDLE_ARTIFACT, is_bundle
from dicelab.models.saved import SavedModel, load_bundle

MLFLOW_SCHEMES = ("models:/", "runs:/")
MLMODEL_FILE = "MLmodel"


def prediction_device(asked: str | torch.device | None = "auto") -> str:
    """The device to predict on: `auto` (or None) is the first CUDA GPU where torch sees one, else the CPU.
    Raises ConfigError naming the device when it is not one, or a CUDA device this machine does not have."""
    if asked is None or str(asked) == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(asked)
    except (RuntimeError, TypeError):
        raise ConfigError(f"device {str(asked)!r}: not a device (auto, cpu, cuda or cuda:N)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {str(asked)!r}: CUDA is not available on this machine (use cpu)")
    return str(device)


def load_model(
    uri: str | Path, *, tracking_uri: str | None = None, device: str | torch.device = "auto"
) -> SavedModel:
    """The saved model at `uri`: `models:/<model_id>` or `models:/<name>/<version>`, `runs:/<run_id>/model`
    (from the tracking store `tracking_uri`, default MLflow's), an MLflow model directory, or a bundle
    directory. Raises DataError / TrackingError with one line naming `uri` when there is no model there,
    and ConfigError when `device` is not a device or a CUDA device this machine does not have (`auto`, the
    default as for `dicelab predict` and the pyfunc model: a GPU where torch sees one, else the CPU)."""
    device = prediction_device(device)
    text = str(uri)
    if not text.startswith(MLFLOW_SCHEMES):
        return load_bundle(_bundle_of(Path(text).expanduser(), text), device)
    import mlflow.artifacts
    from mlflow.exceptions import MlflowException

    # models:/ and runs:/ resolve through the process's tracking (and registry) URI, whatever is passed
    # to download_artifacts: point it at the store for the download.
    from dicelab.tracking.mlflow_adapter import use_tracking_uri

    scope = use_tracking_uri(tracking_uri) if tracking_uri else contextlib.nullcontext()
    with tempfile.TemporaryDirectory(prefix="dicelab-download-") as tmp, scope, quiet_transfers():
        try:
            local = mlflow.artifacts.download_artifacts(text, dst_path=tmp)
        except (MlflowException, OSError) as error:
            message = getattr(error, "message", None) or str(error)
            raise TrackingError(f"model {text}: not found ({message.splitlines()[0]})") from None
        return load_bundle(_bundle_of(Path(local), text), device)


@contextlib.contextmanager
def quiet_transfers() -> Iterator[None]:
    """No MLflow progress bars while artifacts are copied (saving) or downloaded (loading): a trial's and
    `dicelab predict`'s stderr keep their own progress and errors."""
    name = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
    previous = os.environ.get(name)
    os.environ[name] = "false"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


def _bundle_of(directory: Path, name: str) -> Path:
    if is_bundle(directory):
        return directory
    if (directory / MLMODEL_FILE).is_file() and is_bundle(directory / "artifacts" / BUNDLE_ARTIFACT):
        return directory / "artifacts" / BUNDLE_ARTIFACT
    if not directory.exists():
        raise DataError(f"model {name}: no such directory")
    raise DataError(
        f"model {name}: not a dicelab model (no MLmodel with a dicelab bundle, no dicelab_model.json)"
    )
