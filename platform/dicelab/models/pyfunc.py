"""The `mlflow.pyfunc` flavour of a saved model: `mlflow.pyfunc.load_model(uri).predict(frame)`.

The MLflow model directory holds the bundle (dicelab.models.bundle) as its artifact "bundle", as its model
code `pyfunc_entry.py`, which builds this class, and the dicelab package itself under code/ (MLflow puts it
first on `sys.path` when the model loads): the model loads where dicelab is not installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow.pyfunc
import pandas as pd

from dicelab.errors import DataError
from dicelab.models.bundle import BUNDLE_ARTIFACT


class DicelabPyfuncModel(mlflow.pyfunc.PythonModel):
    """predict(frame) -> a DataFrame of the task's prediction records, one row per input row."""

    def load_context(self, context: Any) -> None:
        from dicelab.models.loading import prediction_device
        from dicelab.models.saved import load_bundle

        self.saved = load_bundle(
            Path(context.artifacts[BUNDLE_ARTIFACT]), prediction_device(_asked_device(context))
        )

    # A DataFrame hint is the one MLflow neither enforces as an input schema (the task's columns vary) nor
    # warns about on every import, as it does for a predict without hints; lists of records work too.
    def predict(
        self, context: Any, model_input: pd.DataFrame, params: dict[str, Any] | None = None
    ) -> pd.DataFrame:
        """Raises BadRequest (an MlflowException, so a served request gets a 400 with its one line) for a
        request over the row cap, without an input column, or with a value of the wrong type."""
        from dicelab.models.requests import MAX_ROWS, BadRequest, batch_size_of, check_request

        frame = (
            model_input if isinstance(model_input, pd.DataFrame) else _frame(model_input, self.saved.family)
        )
        max_rows = (getattr(context, "model_config", None) or {}).get("max_rows", MAX_ROWS)
        check_request(self.saved, frame, max_rows)
        batch_size = batch_size_of(params)
        try:
            return pd.DataFrame(self.saved.predict(frame, batch_size=batch_size))
        except DataError as error:  # found by the task's reading (e.g. a sentence without words)
            raise BadRequest(str(error).splitlines()[0]) from None


def _asked_device(context: Any) -> str | None:
    """As MLflow's PyTorch flavour decides: `load_model(uri, model_config={"device": "cpu"})`, else the
    environment's MLFLOW_DEFAULT_PREDICTION_DEVICE, else None (a GPU where torch sees one)."""
    from mlflow.environment_variables import MLFLOW_DEFAULT_PREDICTION_DEVICE

    asked = (getattr(context, "model_config", None) or {}).get("device")
    if asked in (None, "auto"):  # saved as auto: the environment may still choose
        return MLFLOW_DEFAULT_PREDICTION_DEVICE.get() or asked
    return asked


def _frame(model_input: Any, family: str) -> pd.DataFrame:
    """Records, a dict of columns, or one example as a dict (served as `{"inputs": {...}}`): of strings, or
    for a tagging model of flat lists (`{"tokens": ["Hans", "went"]}` is one sentence; a dict of columns
    holds a list of sentences, `{"tokens": [["Hans", "went"], ["Li"]]}`)."""
    if isinstance(model_input, dict):
        values = list(model_input.values())
        if all(not _is_sequence(value) for value in values):
            return pd.DataFrame([model_input])
        if family == "tagging" and all(_is_flat(value) for value in values):
            return pd.DataFrame([{key: list(value) for key, value in model_input.items()}])
    return pd.DataFrame(model_input)


def _is_sequence(value: Any) -> bool:
    # served JSON arrives as numpy arrays: a string is a 0-d one
    return isinstance(value, list | tuple) or getattr(value, "ndim", 0) > 0


def _is_flat(value: Any) -> bool:
    """A list of scalars (a sentence's words or tags), not a list of them."""
    return _is_sequence(value) and not any(_is_sequence(item) for item in value)
