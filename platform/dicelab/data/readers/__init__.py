"""Reading one split file (TSV, CSV, JSONL, Parquet, CoNLL, SQuAD or MRC-NER JSON) into canonical columns."""

from dicelab.data.readers._reading import (
    FILE_SUFFIXES,
    FORMAT_FAMILIES,
    detect_format,
    read_located,
    read_split_file,
)

__all__ = ["FILE_SUFFIXES", "FORMAT_FAMILIES", "detect_format", "read_located", "read_split_file"]
