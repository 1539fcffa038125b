"""Reading one split file: its format (from the suffix unless given), the reader for it, canonical columns."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from dicelab.data.base import CANONICAL_COLUMNS, Family
from dicelab.data.labels import check_labels
from dicelab.data.provenance import Unit, set_origin
from dicelab.data.readers._canonical import ColumnKey, to_canonical
from dicelab.data.readers._conll import read_conll
from dicelab.data.readers._delimited import read_delimited
from dicelab.data.readers._mrc_ner import read_mrc_ner
from dicelab.data.readers._squad import read_squad
from dicelab.data.readers._tables import read_jsonl, read_parquet
from dicelab.errors import DataError

# format -> the families it can hold
FORMAT_FAMILIES: dict[str, tuple[Family, ...]] = {
    "tsv": ("pairs",),
    "csv": ("pairs",),
    "jsonl": ("pairs", "tagging", "spans"),
    "parquet": ("pairs", "tagging", "spans"),
    "conll": ("tagging",),
    "mrc_ner": ("tagging",),  # BERT-MRC's JSON (mrc-ner.train ...), merged back into sentences
    "squad": ("spans",),
}
FILE_SUFFIXES = (".tsv", ".csv", ".jsonl", ".json", ".parquet", ".conll", ".txt")


def detect_format(path: Path, family: Family) -> str:
    """The format of a file from its suffix; files without a known one are the family's text format."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix == ".json":
        return "squad" if family == "spans" else "jsonl"
    if suffix == ".csv" and family == "pairs":
        return "csv"
    return {"pairs": "tsv", "tagging": "conll", "spans": "squad"}[family]


def read_split_file(
    path: str | Path,
    family: Family = "pairs",
    format: str = "auto",
    columns: Mapping[str, ColumnKey] | None = None,
    labels: list[str] | None = None,
    *,
    gold: bool = True,
) -> pd.DataFrame:
    """A split file in the canonical columns of `family`; labels checked against `labels` when given.
    gold=False: a file without the gold columns (inputs to predict on) is read, without them."""
    frame = read_located(path, family, format, columns, gold=gold)
    if labels is not None:
        check_labels(frame, family, labels)
    return frame.reset_index(drop=True)


def read_located(
    path: str | Path,
    family: Family,
    format: str = "auto",
    columns: Mapping[str, ColumnKey] | None = None,
    *,
    gold: bool = True,
) -> pd.DataFrame:
    """Like `read_split_file`, indexed by each example's location in the file (see data.provenance)."""
    path = Path(path)
    format = detect_format(path, family) if format == "auto" else format
    if family not in FORMAT_FAMILIES.get(format, ()):
        raise DataError(f"{path}: format {format!r} cannot hold {family} data")
    columns = dict(columns or {})
    unit: Unit = "line"
    if format in ("tsv", "csv"):
        table, columns = read_delimited(path, "\t" if format == "tsv" else ",", family, columns)
    elif format == "jsonl":
        table = read_jsonl(path)
    elif format == "parquet":
        table, unit = read_parquet(path), "row"
    elif format == "conll":
        table, unit, columns = read_conll(path, columns), "conll", {}
    elif format == "mrc_ner":
        table, unit, columns = read_mrc_ner(path), "row", {}
    else:
        table, unit = read_squad(path, gold=gold), "question"
    if table.columns.empty:  # an empty file: no rows and no header
        return set_origin(pd.DataFrame(columns=list(CANONICAL_COLUMNS[family])), str(path), unit)
    return to_canonical(table, family, columns, str(path), unit, gold=gold)


def read_table(
    table: pd.DataFrame,
    family: Family,
    columns: Mapping[str, ColumnKey] | None = None,
    *,
    origin: str = "input",
    gold: bool = True,
) -> pd.DataFrame:
    """An in-memory table in the canonical columns of `family`, found as in a file (`columns`, else the usual
    names: GLUE's sentence1 / sentence2, QQP's question1 / question2, the hub's ner_tags ...); errors name
    `origin` and the row's position."""
    table = table.reset_index(drop=True)
    return to_canonical(table, family, columns, origin, "row", gold=gold).reset_index(drop=True)
