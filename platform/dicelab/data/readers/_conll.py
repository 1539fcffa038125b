"""CoNLL column format: one token per line (token ... tag), a blank line between sentences.

`-DOCSTART-` lines may appear anywhere and end the current sentence. Every token line must have the same
number of columns, separated by spaces or tabs; other Unicode spaces belong to the token (Chinese corpora hold
U+3000, the ideographic space, as a character of their own; web text holds no-break spaces). The token column
is 0 and the tag column the last one unless `columns` says otherwise ({tokens: 0, tags: 3}). Tags are
normalised to IOB2 by the canonical mapping.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from dicelab.data.readers._canonical import ColumnKey
from dicelab.data.readers._text import read_text
from dicelab.errors import ConfigError, DataError

SEPARATORS = re.compile(r"[ \t\r\f\v]+")  # ASCII whitespace only: str.split() would also split at U+3000


def read_conll(path: Path, columns: Mapping[str, ColumnKey]) -> pd.DataFrame:
    """Sentences as a table (tokens, tags) indexed by the line of each sentence's first token."""
    token_column, tag_column = _column_index(columns, "tokens", 0), _column_index(columns, "tags", -1)
    sentences: list[tuple[int, list[str], list[str]]] = []  # (first line, tokens, tags)
    in_sentence = False
    width: int | None = None
    for line, content in enumerate(read_text(path).split("\n"), start=1):
        fields = [field for field in SEPARATORS.split(content) if field]
        if not fields or fields[0] == "-DOCSTART-":
            in_sentence = False
            continue
        if width is None:
            width = len(fields)
            if not (-width <= token_column < width and -width <= tag_column < width):
                raise DataError(f"{path}:{line}: {width} columns, no column {max(token_column, tag_column)}")
        if len(fields) != width:
            raise DataError(f"{path}:{line}: expected {width} columns, found {len(fields)}")
        if not in_sentence:
            sentences.append((line, [], []))
            in_sentence = True
        sentences[-1][1].append(fields[token_column])
        sentences[-1][2].append(fields[tag_column])
    return pd.DataFrame(
        {"tokens": [sentence[1] for sentence in sentences], "tags": [sentence[2] for sentence in sentences]},
        index=pd.Index([sentence[0] for sentence in sentences], dtype="int64"),
    )


def _column_index(columns: Mapping[str, ColumnKey], key: str, default: int) -> int:
    value = columns.get(key, default)
    if isinstance(value, int) or (isinstance(value, str) and value.lstrip("-").isdigit()):
        return int(value)
    raise ConfigError(f"config key 'data.columns.{key}': CoNLL columns are 0-based indices, got {value!r}")
