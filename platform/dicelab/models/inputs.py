"""Reading what `dicelab predict` predicts on: any split file the data layer reads, for the model's family.

Gold columns are optional in TSV, CSV, JSON lines and Parquet (the input columns are enough: text_a[, text_b]
/ tokens / question, context[, id]): a file of inputs only, as GLUE's test files are (CoNLL's and SQuAD's
layouts hold gold). A file that holds another family's data is named as such, rather than as a missing
column. A tagging model also reads plain text (`lines`: one sentence per line, words split on whitespace),
what new sentences usually come as.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from dicelab.data import read_split_file
from dicelab.data.readers import KNOWN_COLUMNS, HeaderMissing, detect_format, read_text
from dicelab.errors import DataError
from dicelab.models.saved import INPUT_COLUMNS

FAMILY_DATA = {"pairs": "sentence pairs", "tagging": "tagged tokens", "spans": "questions with contexts"}


def read_input(
    path: Path,
    family: str,
    task_name: str,
    format: str = "auto",
    columns: Mapping[str, str | int] | None = None,
) -> pd.DataFrame:
    """The examples of `path` in the canonical columns of `family` (gold columns when the file has them).

    `columns`: the trial's `data.columns`, so that a file laid out as its training data is read the same way;
    a file in the usual names is read too.
    """
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    if format == "lines":
        return _sentences(path, family, task_name)
    try:
        if columns:
            with contextlib.suppress(DataError):
                return _read(path, family, format, columns)
        return _read(path, family, format)
    except DataError as error:
        other = _other_family(path, family, format)
        if other is not None:
            needs = ", ".join(INPUT_COLUMNS[family])
            raise DataError(
                f"{path}: holds {other} data ({FAMILY_DATA[other]}), but the model is a {task_name} model, "
                f"which predicts on {family} data ({needs})"
            ) from None
        if isinstance(error, HeaderMissing):  # no config to set data.columns in: a header row
            raise DataError(
                f"{error.path}:{error.line}: no header row with known column names; start the file with one "
                f"naming the columns this {task_name} model reads: {_header_hint(family)}"
            ) from None
        read_as = detect_format(path, "tagging") if format == "auto" else format
        if family == "tagging" and read_as == "conll":
            raise DataError(f"{error} (read as CoNLL, a word and its tag per line; {LINES_HINT})") from None
        raise error from None


LINES_HINT = "a file of one sentence per line is --format lines"


def _header_hint(family: str) -> str:
    """The header a file for a `family` model needs: its input columns, each with its common other name."""
    named = [
        f"{column} (or {others[0]})" if (others := KNOWN_COLUMNS[family][column][1:]) else column
        for column in INPUT_COLUMNS[family]
    ]
    if family == "pairs":  # a second sentence is optional: sentence classification has none
        named.append("text_b (or sentence2) for a pair's second sentence")
    return ", ".join(named)


def _sentences(path: Path, family: str, task_name: str) -> pd.DataFrame:
    """One sentence per non-blank line, its words split on whitespace (the `tokens` of a tagging model)."""
    if family != "tagging":
        raise DataError(
            f"{path}: --format lines is one sentence per line, for tagging models; this is a {task_name} "
            f"model, which predicts on {family} data ({', '.join(INPUT_COLUMNS[family])})"
        )
    sentences = [line.split() for line in read_text(path).splitlines()]
    return pd.DataFrame({"tokens": [words for words in sentences if words]})


def _read(
    path: Path, family: str, format: str, columns: Mapping[str, str | int] | None = None
) -> pd.DataFrame:
    try:
        return read_split_file(path, family, format, columns, gold=False)  # type: ignore[arg-type]
    except DataError:
        # BERT-MRC's JSON (mrc-ner.test) is a .json file the suffix alone does not tell from JSON lines
        if format == "auto" and family == "tagging" and path.suffix.lower() == ".json":
            return read_split_file(path, "tagging", "mrc_ner", gold=False)
        raise


def _other_family(path: Path, family: str, format: str) -> str | None:
    """The family whose data `path` holds, when it is not `family`."""
    records = _json_lines(path)
    for other in INPUT_COLUMNS:
        if other == family:
            continue
        if records and all(column in records[0] for column in INPUT_COLUMNS[other]):
            return other
        try:
            _read(path, other, format)
        except DataError:
            continue
        return other
    return None


def _json_lines(path: Path) -> list[dict] | None:
    if path.suffix.lower() not in (".jsonl", ".ndjson", ".json"):
        return None
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        records = [json.loads(line) for line in lines if line.strip()]
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return records if all(isinstance(record, dict) for record in records) else None
