"""GLUE-style TSV (quoting off: MRPC strings contain quotes) and CSV (standard quoting) files.

A header row is recognised by its column names; without one, the QQP and MRPC layouts are recognised by
their shape, and anything else needs `columns` with 0-based indices. Every row must have as many fields as
the first one: a ragged row is an error naming its line.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from dicelab.data.base import Family
from dicelab.data.readers._canonical import BINARY_LABELS, KNOWN_COLUMNS, ColumnKey
from dicelab.data.readers._text import numbered_lines, read_text
from dicelab.errors import DataError

Row = tuple[int, list[str]]  # (1-based line, fields)

# GLUE files without their header row: `id qid1 qid2 question1 question2 is_duplicate` and
# `Quality #1 ID #2 ID #1 String #2 String`.
QQP_LAYOUT: dict[str, ColumnKey] = {"text_a": 3, "text_b": 4, "label": 5}
MRPC_LAYOUT: dict[str, ColumnKey] = {"label": 0, "text_a": 3, "text_b": 4}
ID_COLUMNS = {"id", "qid1", "qid2", "index", "idx", "#1 id", "#2 id"}


class HeaderMissing(DataError):
    """A file whose first row names no known column and has no known headerless layout: what to do about it
    depends on who reads it (a trial config's `data.columns`, a header row for `dicelab predict`)."""

    def __init__(self, path: Path, line: int, advice: str) -> None:
        self.path, self.line = path, line
        super().__init__(f"{path}:{line}: no header row with known column names {advice}")


def read_delimited(
    path: Path, delimiter: str, family: Family, columns: Mapping[str, ColumnKey]
) -> tuple[pd.DataFrame, Mapping[str, ColumnKey]]:
    """The file as a table indexed by line number, and the column mapping to apply to it."""
    text = read_text(path)
    rows = _tsv_rows(text) if delimiter == "\t" else _csv_rows(text, path)
    if not rows:
        return pd.DataFrame(), columns
    header: list[str] | None = None
    glue_layout = False
    if _is_header(rows[0][1], family, columns):
        header, rows = rows[0][1], rows[1:]
    elif not columns or not all(isinstance(key, int) for key in columns.values()):
        layout = _headerless_layout(rows[0], path)
        glue_layout = "label" not in columns  # the layout's label column: QQP's or MRPC's, 0 or 1
        columns = {**layout, **columns}
    width = len(header) if header is not None else len(rows[0][1]) if rows else 0
    for line, fields in rows:
        if len(fields) != width:
            raise DataError(f"{path}:{line}: expected {width} fields, found {len(fields)}")
    table = pd.DataFrame(
        [fields for _, fields in rows],
        index=pd.Index([line for line, _ in rows], dtype="int64"),
        columns=[name.strip() for name in header] if header is not None else list(range(width)),
        dtype="str",
    )
    # stray whitespace around fields (seen in QQP copies), stripped column by column (vectorised)
    table = table.apply(lambda column: column.str.strip())
    table.attrs[BINARY_LABELS] = glue_layout
    return table, columns


def _tsv_rows(text: str) -> list[Row]:
    return [(line, content.rstrip("\r").split("\t")) for line, content in numbered_lines(text)]


def _csv_rows(text: str, path: Path) -> list[Row]:
    rows: list[Row] = []
    reader = csv.reader(io.StringIO(text))
    start = 1
    try:
        for fields in reader:
            if any(field.strip() for field in fields):
                rows.append((start, fields))
            start = reader.line_num + 1
    except csv.Error as error:
        raise DataError(f"{path}:{reader.line_num}: malformed CSV ({error})") from None
    return rows


def _is_header(fields: list[str], family: Family, columns: Mapping[str, ColumnKey]) -> bool:
    known = {name for names in KNOWN_COLUMNS[family].values() for name in names} | ID_COLUMNS
    known |= {key.strip().lower() for key in columns.values() if isinstance(key, str)}
    return any(field.strip().lower() in known for field in fields)


def _headerless_layout(first: Row, path: Path) -> dict[str, ColumnKey]:
    line, fields = first[0], [field.strip() for field in first[1]]
    if len(fields) == 6 and all(field.isdigit() for field in fields[:3]) and fields[5] in ("0", "1"):
        return QQP_LAYOUT
    if len(fields) == 5 and fields[0] in ("0", "1") and fields[1].isdigit() and fields[2].isdigit():
        return MRPC_LAYOUT
    raise HeaderMissing(
        path,
        line,
        "(e.g. sentence1, sentence2, label); name the columns in data.columns (0-based indices for a file "
        "without header)",
    )
