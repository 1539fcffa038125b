"""Reading one split file (TSV, CSV, JSONL, Parquet, CoNLL, SQuAD or MRC-NER JSON) into canonical columns."""

from dicelab.data.readers._canonical import KNOWN_COLUMNS, find_column
from dicelab.data.readers._delimited import HeaderMissing
from dicelab.data.readers._reading import (
    FILE_SUFFIXES,
    FORMAT_FAMILIES,
    detect_format,
    read_located,
    read_split_file,
    read_table,
)
from dicelab.data.readers._text import read_text

__all__ = [
    "FILE_SUFFIXES",
    "FORMAT_FAMILIES",
    "KNOWN_COLUMNS",
    "HeaderMissing",
    "detect_format",
    "find_column",
    "read_located",
    "read_split_file",
    "read_table",
    "read_text",
]
