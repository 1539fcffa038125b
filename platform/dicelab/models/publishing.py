"""Saving a trial's weights as a model: an MLflow 3 logged model on the trial's run, or a local directory.

Both are the same MLflow pyfunc model directory (MLmodel, the model code pyfunc_entry.py, requirements, the
dicelab package and any extra code under code/, and the bundle under artifacts/bundle), so `dicelab
predict` and `mlflow.pyfunc.load_model` read either, the latter also where dicelab is not installed.
"""

from __future__ import annotations

import contextlib
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from dicelab.config import ExperimentConfig
from dicelab.errors import DataError, TrackingError
from dicelab.models.bundle import BUNDLE_ARTIFACT, BundleInfo, write_bundle
from dicelab.models.loading import quiet_transfers

MODEL_NAME = "model"  # the logged model's name: runs:/<run_id>/model
# Tags on the logged model
TASK_TAG = "dicelab.task"
METRIC_TAG = "dicelab.metric"
STEP_TAG = "dicelab.step"
# Tags on the trial's run: the model logged on it, or why saving it failed
MODEL_TAG = "dicelab.model"
MODEL_ERROR_TAG = "dicelab.model_error"


@contextlib.contextmanager
def _without_input_example_notice() -> Iterator[None]:
    """Drops MLflow's hint that the model was logged without an input example: its signature declares only
    the `batch_size` param, on purpose (the input columns a task accepts vary: optional second text,
    optional gold, several names for each; models/pyfunc.py checks them), and a sweep's console is no place
    for the hint."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r".*An input example was not provided", category=UserWarning
        )
        yield


@dataclass
class ModelRef:
    uri: str  # models:/<model_id>
    model_id: str
    run_uri: str  # runs:/<run_id>/model
    version: str | None = None  # the Model Registry version, when registered


def save_model_dir(
    directory: str | Path,
    config: ExperimentConfig,
    label_names: list[str],
    tokenizer: Any,
    state_dict: dict[str, torch.Tensor],
    *,
    metrics: dict[str, float] | None = None,
    metric: str | None = None,
    step: int | None = None,
    mlflow_model: Any = None,
    extra_code_paths: Sequence[str | Path] = (),
    extra_requirements: Sequence[str] = (),
) -> Path:
    """Write the model as an MLflow pyfunc directory at `directory` (which must not exist yet).

    tokenizer: a tokenizer, or the directory / hub id AutoTokenizer loads (TrialInputs.tokenizer_path).
    state_dict: the model's weights (CPU tensors), e.g. TrialResult.best_model_state; metrics: their dev
    metrics, metric: the one the trial selected on (TrialResult.metric), step: their optimizer step.
    The model carries dicelab's code and `extra_code_paths` (module files or package directories, e.g. a
    plugin's, which loading then imports from the model), and requires `requirements(extra_requirements)`:
    it loads where MLflow, torch and those packages are installed, dicelab or not.
    """
    import mlflow.pyfunc
    from mlflow.models.signature import ModelSignature
    from mlflow.types.schema import ParamSchema, ParamSpec

    from dicelab.models.requests import MAX_ROWS

    directory = Path(directory)
    info = BundleInfo.of_trial(config, label_names, metrics=metrics, metric=metric, step=step)
    with (
        tempfile.TemporaryDirectory(prefix="dicelab-bundle-") as staging,
        quiet_transfers(),
        _without_input_example_notice(),
    ):
        # MLflow copies each artifact into the model directory (as artifacts/<its name>): it gets an empty
        # one, and the bundle is written in place afterwards (no second copy of the weights).
        placeholder = Path(staging) / BUNDLE_ARTIFACT
        placeholder.mkdir()
        mlflow.pyfunc.save_model(
            str(directory),
            python_model=str(Path(__file__).with_name("pyfunc_entry.py")),
            artifacts={BUNDLE_ARTIFACT: str(placeholder)},
            code_paths=[str(path) for path in code_paths(extra_code_paths)],
            pip_requirements=requirements(extra_requirements),
            mlflow_model=mlflow_model,
            # declared so that load_model(uri, model_config={"device": "cpu"}) may override them (MLflow
            # passes on only the keys a model was saved with); auto: a GPU where torch sees one; max_rows:
            # a request's row cap (dicelab.models.requests)
            model_config={"device": "auto", "max_rows": MAX_ROWS},
            # params alone: MLflow hands predict only the params a signature declares, and the inputs
            # stay unchecked by MLflow (see _without_input_example_notice)
            signature=ModelSignature(params=ParamSchema([ParamSpec("batch_size", "long", None)])),
        )
    write_bundle(directory / "artifacts" / BUNDLE_ARTIFACT, config, info, _tokenizer(tokenizer), state_dict)
    return directory


def log_model(
    tracking_uri: str,
    run_id: str,
    config: ExperimentConfig,
    label_names: list[str],
    tokenizer: Any,
    state_dict: dict[str, torch.Tensor],
    *,
    metrics: dict[str, float] | None = None,
    metric: str | None = None,
    step: int | None = None,
    register: str | None = None,
    extra_code_paths: Sequence[str | Path] = (),
    extra_requirements: Sequence[str] = (),
) -> ModelRef:
    """Log the model on run `run_id` as an MLflow 3 logged model (a run output at `step`); with `register`,
    also a new version of that registered model. Arguments as `save_model_dir`."""
    from mlflow import MlflowClient
    from mlflow.entities import LoggedModelOutput
    from mlflow.exceptions import MlflowException
    from mlflow.models import Model

    code_paths(extra_code_paths)  # a missing path is said before anything is logged
    client = MlflowClient(tracking_uri)
    try:
        run = client.get_run(run_id)
        tags = {TASK_TAG: config.task.name, METRIC_TAG: metric or config.train.metric}
        if step is not None:
            tags[STEP_TAG] = str(step)
        logged = client.create_logged_model(
            run.info.experiment_id, name=MODEL_NAME, source_run_id=run_id, tags=tags, model_type="dicelab"
        )
        model_id = logged.model_id
        try:
            with tempfile.TemporaryDirectory(prefix="dicelab-model-") as staging:
                directory = Path(staging) / MODEL_NAME
                description = Model(
                    artifact_path=logged.artifact_location,
                    model_uuid=model_id,
                    run_id=run_id,
                    model_id=model_id,
                )
                save_model_dir(
                    directory, config, label_names, tokenizer, state_dict,
                    metrics=metrics, metric=metric, step=step, mlflow_model=description,
                    extra_code_paths=extra_code_paths, extra_requirements=extra_requirements,
                )  # fmt: skip
                client.log_model_artifacts(model_id, str(directory))
        except BaseException:
            client.finalize_logged_model(model_id, "FAILED")
            raise
        client.finalize_logged_model(model_id, "READY")
        client.log_outputs(run_id, [LoggedModelOutput(model_id, step=step or 0)])
        ref = ModelRef(f"models:/{model_id}", model_id, f"runs:/{run_id}/{MODEL_NAME}")
        client.set_tag(run_id, MODEL_TAG, ref.uri)
        if register:
            ref.version = _register(client, tracking_uri, register, ref, run_id)
    except MlflowException as error:
        raise TrackingError(f"saving the model of run {run_id} in {tracking_uri}: {error.message}") from None
    return ref


def code_paths(extra: Sequence[str | Path] = ()) -> list[Path]:
    """The code a saved model carries (MLflow's `code_paths`, put first on `sys.path` when it loads): the
    dicelab package, so that the model loads where dicelab is not installed, then `extra` (a plugin's module
    files or package directories). Raises DataError naming an extra path that is missing or whose name
    another one has (each lands in the model's code/ folder under its own name)."""
    paths = [Path(__file__).resolve().parents[1]]  # dicelab/, this file being dicelab/models/publishing.py
    for entry in extra:
        path = Path(entry).expanduser().resolve()
        if not path.exists():
            raise DataError(f"{entry}: no such file or directory (code for the saved model)")
        taken = next((other for other in paths if other.name == path.name), None)
        if taken is not None:
            raise DataError(f"{entry}: the saved model already carries code named {path.name!r} ({taken})")
        paths.append(path)
    return paths


# The distributions whose modules the model's code (the dicelab modules that loading and predicting import)
# imports itself, whatever the task: tests/models/test_model_portability.py checks the list against those
# modules' imports in a virtual environment that holds only these. MLflow's own inference
# (`mlflow.models.infer_pip_requirements`) does not serve here: it maps the carried `dicelab` module to the
# installed dicelab distribution and then drops every package dicelab depends on (torch and transformers
# among them), leaving `dicelab==0.1.0`, which no index has.
MODEL_REQUIREMENTS = (
    "mlflow",
    "torch",
    "transformers",
    "tokenizers",
    "safetensors",
    "datasets",
    "pandas",
    "numpy",
    "pyarrow",
    "pydantic",
    "pyyaml",
    "scikit-learn",
    "seqeval",
    "tqdm",
)


def requirements(extra: Sequence[str] = ()) -> list[str]:
    """The model's pip requirements: MODEL_REQUIREMENTS at the versions installed here, without a local
    version label (`torch==2.13.0`, not `2.13.0+cpu`: an index has the former), then `extra` as given (a
    plugin's own packages). dicelab itself is not one: the model carries its code (`code_paths`)."""
    from importlib.metadata import PackageNotFoundError, version

    pinned = []
    for name in MODEL_REQUIREMENTS:
        try:
            pinned.append(f"{name}=={version(name).split('+', 1)[0]}")  # PEP 440: "+" starts the label
        except PackageNotFoundError:
            pinned.append(name)
    return [*pinned, *extra]


def _tokenizer(tokenizer: Any) -> Any:
    if isinstance(tokenizer, str | Path):
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(tokenizer))
    return tokenizer


def logged_model_of(client: Any, run: Any) -> str | None:
    """The models:/ URI of the model already logged on `run` (its `dicelab.model` tag), when that model is
    still in the store and READY; else None."""
    from mlflow.entities import LoggedModelStatus
    from mlflow.exceptions import MlflowException

    uri = run.data.tags.get(MODEL_TAG)
    if not uri or not uri.startswith("models:/"):
        return None
    try:
        logged = client.get_logged_model(uri.removeprefix("models:/"))
    except MlflowException:  # deleted since
        return None
    return uri if logged.status == LoggedModelStatus.READY else None


def register_model(tracking_uri: str, name: str, uri: str, run_id: str) -> str:
    """The version of registered model `name` whose source is the logged model `uri` (a new version unless
    it is one already)."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    model_id = uri.removeprefix("models:/")
    ref = ModelRef(uri, model_id, f"runs:/{run_id}/{MODEL_NAME}")
    try:
        return _register(MlflowClient(tracking_uri), tracking_uri, name, ref, run_id)
    except MlflowException as error:
        raise TrackingError(f"registering {uri} as {name!r} in {tracking_uri}: {error.message}") from None


def _register(client: Any, tracking_uri: str, name: str, ref: ModelRef, run_id: str) -> str:
    """`ref` as a version of registered model `name`: its existing version when it is one already."""
    from mlflow.exceptions import MlflowException

    from dicelab.tracking.mlflow_adapter import already_exists, use_tracking_uri

    # the registry resolves the version's models:/ source through the process's tracking URI
    with use_tracking_uri(tracking_uri):
        try:
            client.create_registered_model(name)
        except MlflowException as error:
            if not already_exists(error):
                raise
        for version in client.search_model_versions(f"name = '{name}'"):
            if version.source == ref.uri:  # registered before (a resumed sweep's winner): not twice
                return str(version.version)
        version = client.create_model_version(name, ref.uri, run_id=run_id, model_id=ref.model_id)
        return str(version.version)


__all__ = [
    "MODEL_ERROR_TAG",
    "MODEL_NAME",
    "MODEL_REQUIREMENTS",
    "MODEL_TAG",
    "ModelRef",
    "code_paths",
    "log_model",
    "logged_model_of",
    "register_model",
    "requirements",
    "save_model_dir",
]
