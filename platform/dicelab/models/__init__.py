"""Saved models: a trial's weights kept as an MLflow model, loaded back, and used to predict.

    ref = log_model(tracking_uri, run_id, config, label_names, tokenizer, state_dict)  # -> ModelRef
    model = load_model(ref.uri)                      # or runs:/<run_id>/model, or a local directory
    records = model.predict(frame)                   # the task's decoding, one record per row

`mlflow.pyfunc.load_model(uri).predict(frame)` gives the same records as a DataFrame. The names are imported
on first use (PEP 562): `dicelab predict --help` must not wait for torch, transformers and mlflow.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dicelab.models.loading import load_model
    from dicelab.models.publishing import ModelRef, log_model, save_model_dir
    from dicelab.models.saved import SavedModel

_HOMES = {
    "ModelRef": "publishing",
    "SavedModel": "saved",
    "load_model": "loading",
    "log_model": "publishing",
    "save_model_dir": "publishing",
}
__all__ = ["ModelRef", "SavedModel", "load_model", "log_model", "save_model_dir"]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
