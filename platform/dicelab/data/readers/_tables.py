"""JSON lines (one object per line) and Parquet files, read as tables of named columns."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dicelab.data.readers._text import numbered_lines, read_text
from dicelab.errors import DataError


def read_jsonl(path: Path) -> pd.DataFrame:
    """One JSON object per line; the table is indexed by line number."""
    records, lines = [], []
    for line, content in numbered_lines(read_text(path)):
        try:
            record = json.loads(content)
        except json.JSONDecodeError as error:
            raise DataError(f"{path}:{line}: invalid JSON ({error.msg})") from None
        if not isinstance(record, dict):
            raise DataError(f"{path}:{line}: expected a JSON object, got {type(record).__name__}")
        records.append(record)
        lines.append(line)
    return pd.DataFrame(records, index=pd.Index(lines, dtype="int64")) if records else pd.DataFrame()


def read_parquet(path: Path) -> pd.DataFrame:
    """The table indexed by 1-based row number."""
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as error:
        raise DataError(f"{path}: cannot read ({error})") from None
    frame = table.to_pandas()
    frame.index = pd.RangeIndex(1, len(frame) + 1)
    return frame
