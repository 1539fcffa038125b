"""The MRC-NER JSON layout of BERT-MRC (ShannonAI/mrc-for-flat-nested-ner, files `mrc-ner.{train,dev,test}`).

A JSON list with one object per (sentence, entity type): `context` (the sentence, words separated by spaces;
Chinese data: one character per word), `entity_label`, `start_position` / `end_position` (word indices of
each entity, the end inclusive) and `qas_id` ("<sentence>.<type>"). The objects of one sentence are merged
back into its tokens and IOB2 tags (the task builds its own queries), in order of first appearance.
Entities must not overlap: the tagging family holds flat NER only (nested entities are an error naming the
object).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from dicelab.data.readers._text import read_text
from dicelab.errors import DataError


def read_mrc_ner(path: Path) -> pd.DataFrame:
    """Sentences as a table (tokens, tags) indexed by the 1-based number of each sentence's first object."""
    try:
        objects = json.loads(read_text(path))
    except json.JSONDecodeError as error:
        raise DataError(f"{path}:{error.lineno}: invalid JSON ({error.msg})") from None
    if not isinstance(objects, list):
        raise DataError(f"{path}: not MRC-NER JSON (expected a list of objects)")
    sentences: dict[str, tuple[int, list[str], list[str]]] = {}  # sentence id -> (first object, tokens, tags)
    for number, item in enumerate(objects, start=1):
        try:
            _merge(sentences, number, item)
        except (KeyError, TypeError, ValueError) as error:
            where = (
                f"object {number} (qas_id {item.get('qas_id')!r})"
                if isinstance(item, dict)
                else f"object {number}"
            )
            raise DataError(f"{path}: {where}: {_message(error)}") from None
    rows = list(sentences.values())
    return pd.DataFrame(
        {"tokens": [row[1] for row in rows], "tags": [row[2] for row in rows]},
        index=pd.Index([row[0] for row in rows], dtype="int64"),
    )


def _merge(sentences: dict[str, tuple[int, list[str], list[str]]], number: int, item: dict[str, Any]) -> None:
    sentence = str(item["qas_id"]).split(".")[0]
    tokens = str(item["context"]).split()
    kind = str(item["entity_label"])
    if sentence not in sentences:
        sentences[sentence] = (number, tokens, ["O"] * len(tokens))
    _, known, tags = sentences[sentence]
    if known != tokens:
        raise ValueError(f"its context differs from the first object of sentence {sentence!r}")
    starts, ends = list(item["start_position"]), list(item["end_position"])
    if len(starts) != len(ends):
        raise ValueError(f"{len(starts)} start_position but {len(ends)} end_position")
    for start, end in zip(starts, ends, strict=True):
        start, end = int(start), int(end)
        if not 0 <= start <= end < len(tokens):
            raise ValueError(f"entity [{start}, {end}] is outside its {len(tokens)} words")
        if any(tag != "O" for tag in tags[start : end + 1]):
            raise ValueError(
                f"entity [{start}, {end}] ({kind}) overlaps another: nested NER is not supported"
            )
        tags[start : end + 1] = [f"B-{kind}", *[f"I-{kind}"] * (end - start)]


def _message(error: Exception) -> str:
    return f"missing field {error}" if isinstance(error, KeyError) else str(error)
