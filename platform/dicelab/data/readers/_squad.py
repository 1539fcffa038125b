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


def read_squad(path: Path) -> pd.DataFrame:
    """Questions as a table (id, question, context, answers) indexed by question number."""
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
                    rows.append(_question(paragraph["context"], qa))
    except (KeyError, TypeError) as error:
        raise DataError(f"{path}: question {len(rows) + 1}: missing SQuAD field {error}") from None
    return pd.DataFrame(
        rows, index=pd.RangeIndex(1, len(rows) + 1), columns=["id", "question", "context", "answers"]
    )


def _question(context: str, qa: dict[str, Any]) -> dict[str, Any]:
    answers = [] if qa.get("is_impossible", False) else qa["answers"]
    return {
        "id": str(qa["id"]),
        "question": qa["question"],
        "context": context,
        "answers": [{"text": answer["text"], "answer_start": answer["answer_start"]} for answer in answers],
    }
