"""SQuAD JSON (v1.1 and v2.0): data -> paragraphs -> qas, flattened to one row per question.

v2.0 questions with `is_impossible: true` have no answers (their `plausible_answers` are ignored).
Answer offsets are checked against the context by the canonical mapping, which names the question id.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from dicelab.data.readers._text import read_text
from dicelab.errors import DataError


def read_squad(path: Path, *, gold: bool = True) -> pd.DataFrame:
    """Questions as a table (id, question, context, answers) indexed by question number.

    gold=False: a file whose questions have no `answers` (questions to predict on) is read, and the table
    then has no answers column; a file in which only some questions have them is refused all the same."""
    try:
        document = json.loads(read_text(path))
    except json.JSONDecodeError as error:
        raise DataError(f"{path}:{error.lineno}: invalid JSON ({error.msg})") from None
    articles = document.get("data") if isinstance(document, dict) else None
    if not isinstance(articles, list):
        raise DataError(f"{path}: not SQuAD JSON (expected an object with a 'data' list)")
    rows = []
    try:
        for article in articles:
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    rows.append(_question(paragraph["context"], qa, gold=gold))
    except (KeyError, TypeError) as error:
        raise DataError(f"{path}: question {len(rows) + 1}: missing SQuAD field {error}") from None
    answered = ["answers" in row for row in rows]
    if any(answered) and not all(answered):  # gold=False: some questions have answers, some none
        raise DataError(f"{path}: question {answered.index(False) + 1}: missing SQuAD field 'answers'")
    with_answers = gold or any(answered)
    columns = ["id", "question", "context"] + (["answers"] if with_answers else [])
    return pd.DataFrame(rows, index=pd.RangeIndex(1, len(rows) + 1), columns=columns)


def _question(context: str, qa: dict[str, Any], *, gold: bool) -> dict[str, Any]:
    """One row; without `gold`, a question with neither answers nor `is_impossible` gets no answers key."""
    row = {"id": str(qa["id"]), "question": qa["question"], "context": context}
    if gold or "answers" in qa or qa.get("is_impossible", False):
        given = [] if qa.get("is_impossible", False) else qa["answers"]
        row["answers"] = [{"text": item["text"], "answer_start": item["answer_start"]} for item in given]
    return row
