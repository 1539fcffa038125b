"""Map a table read from any source (file or hub) onto the canonical columns of its family.

Columns are found through the `columns` option (canonical name -> source column name or 0-based index),
else through the usual names of well-known datasets (GLUE, MRPC, QQP, SST, CoNLL, SQuAD), compared
case-insensitively.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from dicelab.data.base import CANONICAL_COLUMNS, GOLD_COLUMNS, Family
from dicelab.data.iob import TagError, to_iob2
from dicelab.data.provenance import Unit, origin_of, set_origin, where
from dicelab.errors import ConfigError, DataError

ColumnKey = str | int

# canonical name -> usual source names, most specific first
KNOWN_COLUMNS: dict[Family, dict[str, tuple[str, ...]]] = {
    "pairs": {
        "text_a": ("text_a", "sentence1", "question1", "#1 string", "premise", "sentence", "text"),
        "text_b": ("text_b", "sentence2", "question2", "#2 string", "hypothesis"),
        "label": ("label", "is_duplicate", "quality", "gold_label"),
    },
    "tagging": {
        "tokens": ("tokens", "words"),
        "tags": ("tags", "ner_tags", "labels"),
    },
    "spans": {
        "id": ("id", "qid"),
        "question": ("question",),
        "context": ("context",),
        "answers": ("answers",),
        "answer_texts": ("answer_texts",),
        "answer_starts": ("answer_starts",),
    },
}
OPTIONAL_COLUMNS = {"text_b", "id", "answers", "answer_texts", "answer_starts"}
# The source columns of the gold (`GOLD_COLUMNS` once canonical), which only what is predicted on may leave
# out (`gold=False`): its frame then has none.
GOLD_KEYS: dict[Family, frozenset[str]] = {
    "pairs": frozenset({"label"}),
    "tagging": frozenset({"tags"}),
    "spans": frozenset({"answers", "answer_texts", "answer_starts"}),
}
# Label columns of datasets whose label set is known to be {0, 1} (QQP, MRPC): a "7" there is an error,
# not a second class. Readers that recognise such a file by its shape set BINARY_LABELS in table.attrs.
BINARY_LABEL_COLUMNS = ("is_duplicate", "quality")
BINARY_LABELS = "binary_labels"
LABEL_NAMES = "label_names"  # frame.attrs key: the label set the file's layout implies


def to_canonical(
    table: pd.DataFrame,
    family: Family,
    columns: Mapping[str, ColumnKey] | None,
    origin: str,
    unit: Unit,
    *,
    gold: bool = True,
) -> pd.DataFrame:
    """Canonical frame of `table` (whose index holds each row's location), with its origin recorded.
    gold=False: the gold columns may be missing (inputs to predict on), and the frame then leaves them out."""
    set_origin(table, origin, unit)
    found = resolve_columns(table, family, columns or {}, gold=gold)
    convert = {"pairs": _pairs, "tagging": _tagging, "spans": _spans}[family]
    frame = convert(table, found)
    if not gold and all(found[key] is None for key in GOLD_KEYS[family]):
        frame = frame.drop(columns=list(GOLD_COLUMNS[family]))
    return set_origin(frame, origin, unit)


def resolve_columns(
    table: pd.DataFrame, family: Family, columns: Mapping[str, ColumnKey], *, gold: bool = True
) -> dict[str, ColumnKey | None]:
    known = KNOWN_COLUMNS[family]
    unknown = sorted(set(columns) - set(known))
    if unknown:
        raise ConfigError(
            f"config key 'data.columns': unknown column {unknown[0]!r} for {family} data "
            f"(allowed: {', '.join(known)})"
        )
    by_name = _by_name(table)
    found: dict[str, ColumnKey | None] = {}
    for key in known:
        found[key] = _find(table, by_name, family, key, columns)
        if key in columns:
            if found[key] is None and (gold or key not in GOLD_KEYS[family]):
                raise DataError(
                    f"{origin_of(table)}: missing column {columns[key]!r} (found: {_names(table)})"
                )
            continue
        if found[key] is None and key not in OPTIONAL_COLUMNS and (gold or key not in GOLD_KEYS[family]):
            raise DataError(f"{origin_of(table)}: missing column {key!r} (found: {_names(table)})")
    answer_parts = (found["answer_texts"], found["answer_starts"]) if family == "spans" else ()
    if (
        family == "spans"
        and found["answers"] is None
        and None in answer_parts
        and (gold or any(part is not None for part in answer_parts))  # no gold at all, where allowed
    ):
        raise DataError(f"{origin_of(table)}: missing column 'answers' (found: {_names(table)})")
    return found


def find_column(
    table: pd.DataFrame, family: Family, key: str, columns: Mapping[str, ColumnKey] | None = None
) -> ColumnKey | None:
    """The column of `table` that canonical `key` is read from (as `resolve_columns` finds it: `columns`'
    name or index for it, else its usual names, case-insensitively); None when there is none."""
    return _find(table, _by_name(table), family, key, columns or {})


def _find(
    table: pd.DataFrame,
    by_name: dict[str, Any],
    family: Family,
    key: str,
    columns: Mapping[str, ColumnKey],
) -> ColumnKey | None:
    if key in columns:
        return _lookup(table, by_name, columns[key])
    return next((by_name[name] for name in KNOWN_COLUMNS[family][key] if name in by_name), None)


def _by_name(table: pd.DataFrame) -> dict[str, Any]:
    return {str(name).strip().lower(): name for name in table.columns if isinstance(name, str)}


def _lookup(table: pd.DataFrame, by_name: dict[str, Any], key: ColumnKey) -> ColumnKey | None:
    if isinstance(key, str) and key.strip().lower() in by_name:
        return by_name[key.strip().lower()]
    if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
        index = int(key)
        return index if index in table.columns else None
    return None


def _names(table: pd.DataFrame) -> str:
    return ", ".join(str(name) for name in table.columns) or "no columns"


def _pairs(table: pd.DataFrame, found: dict[str, ColumnKey | None]) -> pd.DataFrame:
    label_column = found["label"]
    labels = _labels(table[label_column]) if label_column is not None else pd.Series("", index=table.index)
    missing = labels.isna().to_numpy()
    if missing.any():
        raise DataError(f"{where(table, table.index[missing.argmax()])}: missing label")
    text_b = found["text_b"]
    frame = pd.DataFrame(
        {
            "text_a": _texts(table[found["text_a"]]),
            "text_b": _texts(table[text_b]) if text_b is not None else None,
            "label": labels,
        },
        index=table.index,
        columns=list(CANONICAL_COLUMNS["pairs"]),
    )
    named_binary = isinstance(label_column, str) and label_column.strip().lower() in BINARY_LABEL_COLUMNS
    if named_binary or table.attrs.get(BINARY_LABELS):
        frame.attrs[LABEL_NAMES] = ["0", "1"]
    return frame


def _texts(column: pd.Series) -> pd.Series:
    if pd.api.types.is_string_dtype(column) and not pd.api.types.is_object_dtype(column):
        return column.fillna("")
    return column.map(_text).astype("str")


def _labels(column: pd.Series) -> pd.Series:
    """Labels as strings, missing ones as NA; 1, 1.0 and "1" are the same label (vectorised when typed)."""
    if pd.api.types.is_integer_dtype(column):
        return _as_str(column)
    if pd.api.types.is_string_dtype(column) and not pd.api.types.is_object_dtype(column):
        labels = column.str.strip()
        return labels.where(labels != "")
    return _as_str(column.map(_label))


def _as_str(column: pd.Series) -> pd.Series:
    """`astype("str")` that keeps missing values missing: pandas 2 turns them into "None"/"nan" strings
    (MLflow 3.10 installs pandas 2; pandas 3 keeps them)."""
    missing = column.isna()
    labels = column.astype("str")
    return labels.mask(missing) if missing.any() else labels


def _tagging(table: pd.DataFrame, found: dict[str, ColumnKey | None]) -> pd.DataFrame:
    rows: dict[Any, tuple[list[str], list[str]]] = {}
    tag_column = found["tags"]
    all_tags = table[tag_column] if tag_column is not None else [None] * len(table)  # no gold: "O" tags
    for location, tokens, tags in zip(table.index, table[found["tokens"]], all_tags, strict=True):
        tokens = _strings(table, location, "tokens", tokens)
        tags = _strings(table, location, "tags", tags) if tag_column is not None else ["O"] * len(tokens)
        if len(tokens) != len(tags):
            raise DataError(f"{where(table, location)}: {len(tokens)} tokens but {len(tags)} tags")
        if not tokens:
            continue  # an empty sentence has nothing to tag
        try:
            rows[location] = (tokens, to_iob2(tags))
        except TagError as error:
            raise DataError(f"{where(table, location, error.position)}: {error}") from None
    return pd.DataFrame(
        {"tokens": [row[0] for row in rows.values()], "tags": [row[1] for row in rows.values()]},
        index=pd.Index(list(rows), dtype=table.index.dtype),
        columns=list(CANONICAL_COLUMNS["tagging"]),
    )


def _spans(table: pd.DataFrame, found: dict[str, ColumnKey | None]) -> pd.DataFrame:
    def column(key: str) -> Any:
        name = found[key]
        return table[name] if name is not None else [None] * len(table)

    records = []
    rows = zip(
        table.index, column("id"), column("question"), column("context"),
        column("answers"), column("answer_texts"), column("answer_starts"), strict=True,
    )  # fmt: skip
    for number, (location, raw_id, question, context, answers, answer_texts, answer_starts) in enumerate(
        rows, 1
    ):
        question_id = str(number) if found["id"] is None else _text(raw_id)
        context = _text(context)
        if found["answers"] is not None:
            texts, starts = _answers(table, location, answers)
        elif found["answer_texts"] is None:  # no gold (gold=False)
            texts, starts = [], []
        else:
            texts = _strings(table, location, "answer_texts", answer_texts)
            starts = _ints(table, location, "answer_starts", answer_starts)
        if len(texts) != len(starts):
            raise DataError(f"{where(table, location)}: {len(texts)} answer texts but {len(starts)} starts")
        for text, start in zip(texts, starts, strict=True):
            if start < 0 or context[start : start + len(text)] != text:
                raise DataError(
                    f"{origin_of(table)}: question {question_id!r}: answer {text!r} is not at offset "
                    f"{start} of its context (found {context[start : start + len(text)]!r})"
                )
        records.append((question_id, _text(question), context, texts, starts))
    return pd.DataFrame(records, index=table.index, columns=list(CANONICAL_COLUMNS["spans"]))


def _answers(table: pd.DataFrame, location: Any, value: Any) -> tuple[list[str], list[int]]:
    """SQuAD answers either as the hub's {"text": [...], "answer_start": [...]} or a list of such dicts."""
    if isinstance(value, Mapping):
        return (
            _strings(table, location, "answers.text", value.get("text", [])),
            _ints(table, location, "answers.answer_start", value.get("answer_start", [])),
        )
    if _is_sequence(value) and all(isinstance(answer, Mapping) for answer in value):
        try:
            return [str(answer["text"]) for answer in value], [
                int(answer["answer_start"]) for answer in value
            ]
        except (KeyError, TypeError, ValueError):
            pass
    raise DataError(f"{where(table, location)}: answers must be {{text: [...], answer_start: [...]}}")


def _is_sequence(value: Any) -> bool:
    return isinstance(value, list | tuple | np.ndarray)


def _strings(table: pd.DataFrame, location: Any, name: str, value: Any) -> list[str]:
    if not _is_sequence(value):
        raise DataError(f"{where(table, location)}: {name} must be a list, got {type(value).__name__}")
    return [str(item) for item in value]


def _ints(table: pd.DataFrame, location: Any, name: str, value: Any) -> list[int]:
    if not _is_sequence(value):
        raise DataError(f"{where(table, location)}: {name} must be a list, got {type(value).__name__}")
    try:
        return [int(item) for item in value]
    except (TypeError, ValueError):
        raise DataError(f"{where(table, location)}: {name} must be integers") from None


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def _text(value: Any) -> str:
    return "" if _missing(value) else str(value)


def _label(value: Any) -> str | None:
    """Labels are strings; 1, 1.0 and "1" are the same label."""
    if _missing(value):
        return None
    if isinstance(value, float | np.floating) and float(value).is_integer():
        value = int(value)
    text = str(value).strip()
    return text or None
