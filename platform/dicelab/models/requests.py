"""What one call of the pyfunc model (one request to `mlflow models serve`) may hold, and its errors.

A request is refused, before the model sees it, when it has more rows than the model's `max_rows` (its
`model_config`, MAX_ROWS unless loaded with another) or a value of the wrong type in an input column (text
where text goes, a list of words for `tokens`). Every refusal, a missing column included, is a BadRequest:
MLflow's scoring server answers it with HTTP 400 and the one line, without the request's data or a
traceback.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
from mlflow.exceptions import MlflowException

from dicelab.errors import DataError
from dicelab.models.saved import SavedModel

MAX_ROWS = 1000  # rows in one request; model_config={"max_rows": N} when loading changes it, None lifts it
TEXT_COLUMNS = ("text_a", "text_b", "question", "context")  # one string per row
OPTIONAL_TEXT = ("text_b",)  # may be missing in a row (a single sentence)
WORD_LISTS = ("tokens",)  # a list of strings per row


class BadRequest(MlflowException, DataError):
    """A request the model cannot predict on, said in one line (`line`). MLflow's scoring server turns it
    into a 400 (INVALID_PARAMETER_VALUE); it rewrites a predict error's message to begin with the request's
    whole data, over several lines, so the body it sends (`serialize_as_json`) carries `line` alone. A
    DataError too, as the model's other input errors are."""

    def __init__(self, line: str) -> None:
        # the code's protobuf number lives in mlflow.protos: MLflow's public constructor of its 400 gives the
        # code and what MLflow derives from it
        public = MlflowException.invalid_parameter_value(line)
        super().__init__(line, sqlstate=public.sqlstate, error_class=public.error_class)
        self.error_code = public.error_code
        self.line = line

    def serialize_as_json(self) -> str:
        return json.dumps({"error_code": self.error_code, "message": self.line})


def check_request(saved: SavedModel, frame: pd.DataFrame, max_rows: int | None) -> None:
    """Raise BadRequest when `frame` has more than `max_rows` rows, lacks an input column, or holds a value
    of the wrong type in one (naming the column, the row and the type)."""
    if max_rows is not None and len(frame) > max_rows:
        raise BadRequest(
            f"{len(frame)} rows in one request; this model takes at most {max_rows} (send them in parts)"
        )
    try:
        columns = saved.input_columns(frame)
    except DataError as error:
        raise BadRequest(str(error)) from None
    for key, column in columns.items():
        for row, value in enumerate(frame[column]):
            problem = _type_problem(key, value)
            if problem:
                raise BadRequest(
                    f"input column {column!r}, row {row}: {problem}, got {_kind(value)} "
                    f"(a {saved.task_name} model)"
                )


def batch_size_of(params: dict[str, Any] | None) -> int | None:
    """The request's `batch_size` param (None: the model's default); BadRequest when it is not a positive
    whole number."""
    value = (params or {}).get("batch_size")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(_plain(value), int) or value < 1:
        raise BadRequest(f"params: batch_size must be a positive whole number of examples, got {value!r}")
    return int(value)


def _type_problem(key: str, value: Any) -> str | None:
    value = _plain(value)
    if key in TEXT_COLUMNS:
        if key in OPTIONAL_TEXT and _missing(value):
            return None
        return None if isinstance(value, str) else "expected text"
    if key in WORD_LISTS:
        if isinstance(value, list | tuple) and all(isinstance(word, str) for word in value):
            return None
        return "expected a list of words (strings)"
    return None


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)  # NaN: a missing cell


PLURALS = {"a boolean": "booleans", "a number": "numbers", "an object": "objects", "null": "nulls"}


def _plain(value: Any) -> Any:
    """Python values for numpy ones: MLflow's request parser hands over arrays (a string as a 0-d one)."""
    return value.tolist() if hasattr(value, "tolist") and not isinstance(value, str) else value


def _kind(value: Any) -> str:
    """The JSON type a client sent, in its words."""
    value = _plain(value)
    names = {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "text",
        list: "a list",
        dict: "an object",
    }
    if value is None:
        return "null"
    if isinstance(value, list | tuple):
        inner = {PLURALS.get(kind, kind) for kind in map(_kind, value)}
        return f"a list of {' and '.join(sorted(inner))}" if inner else "an empty list"
    return next((name for kind, name in names.items() if isinstance(value, kind)), type(value).__name__)
