"""Small synthetic QQP-like question pairs for the resampling tests, and QQP-layout TSV writing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ENTITIES = (
    "Python",
    "Java",
    "India",
    "France",
    "Google",
    "Amazon",
    "Obama",
    "Tokyo",
    "Hong Kong",
    "New York",
)
YEARS = tuple(str(year) for year in range(1990, 2021))
# (question, paraphrase); {e} an entity, {y} a year
PARAPHRASES = (
    ("How do I learn {e} in {y}?", "What is the best way to learn {e} in {y}?"),
    ("Why was {e} so popular in {y}?", "What made {e} so popular in {y}?"),
    ("What did {e} look like in {y}?", "How did {e} look in {y}?"),
    ("Is {e} better now than in {y}?", "Has {e} improved since {y}?"),
    ("What happened to {e} in {y}?", "What were the big events for {e} in {y}?"),
    ("Where can I read about {e} in {y}?", "Which books cover {e} in {y}?"),
)
NO_MENTION = (  # questions without any capitalised name, number or year
    ("how do i cook rice?", "what is the best way to cook rice?"),
    ("why do cats purr?", "what makes a cat purr?"),
    ("how can i sleep better?", "what helps to sleep better?"),
)


def _make_pairs(n: int, positive_rate: float, seed: int = 0, no_mention_positives: int = 0) -> pd.DataFrame:
    """`n` distinct pairs, round(n * positive_rate) positive; positives paraphrase one question about one
    entity and year; negatives ask about different entities. The first `no_mention_positives` positives
    (plus a row number) have no replaceable mention."""
    rng = np.random.default_rng(seed)
    positives = round(n * positive_rate)
    rows: list[tuple[str, str, str]] = []
    seen: set[tuple[str, ...]] = set()
    for index in range(no_mention_positives):
        first, second = NO_MENTION[index % len(NO_MENTION)]
        rows.append((first.replace("?", f" number{index}?"), second.replace("?", f" number{index}?"), "1"))
    while len(rows) < n:
        positive = len(rows) < positives
        first, second = PARAPHRASES[rng.integers(len(PARAPHRASES))]
        entity, year = ENTITIES[rng.integers(len(ENTITIES))], YEARS[rng.integers(len(YEARS))]
        if positive:
            pair = (first.format(e=entity, y=year), second.format(e=entity, y=year))
        else:
            other = ENTITIES[rng.integers(len(ENTITIES))]
            if other == entity:
                continue
            pair = (first.format(e=entity, y=year), first.format(e=other, y=year))
        if tuple(sorted(pair)) not in seen:  # distinct in either order
            seen.add(tuple(sorted(pair)))
            rows.append((*pair, "1" if positive else "0"))
    order = rng.permutation(n)
    return pd.DataFrame([rows[i] for i in order], columns=["text_a", "text_b", "label"])


def _write_qqp_tsv(
    frame: pd.DataFrame, path: Path, *, header: bool = True, stray_whitespace: bool = False
) -> Path:
    """The GLUE QQP layout: id qid1 qid2 question1 question2 is_duplicate."""
    pad = "  " if stray_whitespace else ""
    lines = ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate"] if header else []
    for index, (text_a, text_b, label) in enumerate(
        frame[["text_a", "text_b", "label"]].itertuples(index=False)
    ):
        lines.append(
            f"{index}\t{2 * index}\t{2 * index + 1}\t{pad}{text_a}{pad}\t{text_b}{pad}\t{label}{pad}"
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# Helpers reach the tests as fixtures, which works whatever pytest's import mode.
@pytest.fixture(scope="session")
def make_pairs() -> Callable[..., pd.DataFrame]:
    return _make_pairs


@pytest.fixture(scope="session")
def write_qqp_tsv() -> Callable[..., Path]:
    return _write_qqp_tsv


@pytest.fixture(scope="session")
def vocabulary() -> tuple[str, ...]:
    """Every entity and year the generator uses."""
    return ENTITIES + YEARS


@pytest.fixture(scope="session")
def pairs() -> pd.DataFrame:
    """600 distinct pairs, 30% positive (the minority, as in QQP)."""
    return _make_pairs(600, 0.3, seed=0)
