"""Where each example came from, so that an error can name the file and line.

Readers index a frame by the location of each example in its source (the 1-based line of a TSV/CSV/JSONL
row or of a CoNLL sentence's first token, the row of a Parquet file or hub split, the number of a SQuAD
question) and record the source and the kind of location in `frame.attrs`. `load_raw_dataset` reports
errors through `where` and then gives every split a plain RangeIndex.
"""

from __future__ import annotations

from typing import Any, Literal

import pandas as pd

# line: one example per line; conll: the line of the first token, token i on line + i;
# row / question: an example's 1-based position in a Parquet file, hub split or SQuAD file.
Unit = Literal["line", "conll", "row", "question"]


def set_origin(frame: pd.DataFrame, origin: str, unit: Unit) -> pd.DataFrame:
    frame.attrs["origin"] = origin
    frame.attrs["unit"] = unit
    return frame


def origin_of(frame: pd.DataFrame) -> str:
    return str(frame.attrs.get("origin", "<data>"))


def where(frame: pd.DataFrame, location: Any, token: int | None = None) -> str:
    """`file:line` (or `source: row N`) of the example at index `location`, optionally of one token."""
    origin = origin_of(frame)
    unit = frame.attrs.get("unit", "row")
    if unit == "conll":
        return f"{origin}:{int(location) + (token or 0)}"
    token_part = "" if token is None else f", token {token + 1}"
    if unit == "line":
        return f"{origin}:{location}{token_part}"
    return f"{origin}: {unit} {location}{token_part}"
