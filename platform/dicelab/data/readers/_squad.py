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
    without_gold = not gold and not any(_has_gold(qa) for qa in _questions(articles))
    try:
        for article in articles:
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    rows.append(_question(paragraph["context"], qa, answers=not without_gold))
    except (KeyError, TypeError) as error:
        raise DataError(f"{path}: question {len(rows) + 1}: missing SQuAD field {error}") from None
    columns = ["id", "question", "context"] + ([] if without_gold else ["answers"])
    return pd.DataFrame(rows, index=pd.RangeIndex(1, len(rows) + 1), columns=columns)


def _questions(articles: list[Any]) -> list[Any]:
    """Every qa object that can be reached (the checks of the full read name what is malformed)."""
    found = []
    for article in articles:
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        for paragraph in paragraphs if isinstance(paragraphs, list) else []:
            qas = paragraph.get("qas") if isinstance(paragraph, dict) else None
            found += [qa for qa in qas if isinstance(qa, dict)] if isinstance(qas, list) else []
    return found


def _has_gold(qa: dict[str, Any]) -> bool:
    return "answers" in qa or bool(qa.get("is_impossible", False))


def _question(context: str, qa: dict[str, Any], *, answers: bool = True) -> dict[str, Any]:
    row = {"id": str(qa["id"]), "question": qa["question"], "context": context}
    if answers:
        given = [] if qa.get("is_impossible", False) else qa["answers"]
        row["answers"] = [{"text": item["text"], "answer_start": item["answer_start"]} for item in given]
    return row
