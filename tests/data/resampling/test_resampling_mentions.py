"""The built-in mention extractor on questions."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from dicelab.data.resampling import BuiltinExtractor, make_extractor, resample_frame
from dicelab.data.resampling._mentions import _trie_pattern
from dicelab.errors import ConfigError

QUESTIONS = [
    "What is the best way to learn Python in 2016?",
    "How do I learn Python programming?",
    "Python is better than Java?",
    "Who is Donald Trump?",
    "Will Donald Trump win the US election?",
    "Explain how python works.",
    "How can I lose 10 kg in 30 days?",
    "Is New York bigger than Hong Kong? Explain Tokyo.",
    "What is 2.5GHz and 1,000 and 3.5?",
    "What Is The Best Way To Cook Rice?",
    "",
    "How long should I cook rice?",
]


@pytest.fixture(scope="module")
def mentions() -> list[tuple[int, str, str]]:
    found = BuiltinExtractor().extract(QUESTIONS)
    for text, start, end, value in zip(found.text, found.start, found.end, found.value, strict=True):
        assert QUESTIONS[text][start:end] == value  # spans point at the mention
    return list(zip(found.text.tolist(), found.kind.tolist(), found.value.tolist(), strict=True))


def test_names_years_numbers_and_acronyms(mentions: list[tuple[int, str, str]]) -> None:
    assert (0, "NAME", "Python") in mentions
    assert (0, "YEAR", "2016") in mentions
    assert (3, "NAME2", "Donald Trump") in mentions
    assert (4, "ACRONYM", "US") in mentions  # all-caps, though "Us" is a function word
    assert (6, "NUMBER", "10") in mentions and (6, "NUMBER", "30") in mentions
    assert (7, "NAME2", "New York") in mentions and (7, "NAME2", "Hong Kong") in mentions
    assert (8, "NUMBER", "1,000") in mentions and (8, "NUMBER", "3.5") in mentions


def test_sentence_starts_and_function_words_are_not_names(mentions: list[tuple[int, str, str]]) -> None:
    values = {value for _, _, value in mentions}
    assert not values & {"What", "How", "Who", "Will", "Is", "Explain", "I", "The", "Best Way To Cook Rice"}
    assert (2, "NAME", "Python") in mentions  # sentence-initial, but written capitalised elsewhere
    assert (7, "NAME", "Tokyo") in mentions  # "Explain" trimmed from the start of the second sentence
    assert not [
        value for text, _, value in mentions if text == 9
    ]  # title case: "best", "cook" ... are lower case elsewhere
    assert "2" not in values and "5" not in values  # not parts of 2.5GHz


@pytest.mark.skipif(importlib.util.find_spec("spacy") is not None, reason="spaCy is installed")
def test_without_spacy_auto_is_builtin_and_a_spacy_model_is_a_config_error() -> None:
    assert make_extractor("auto").name == "builtin"
    with pytest.raises(ConfigError, match="needs spaCy"):
        make_extractor("en_core_web_sm")


def test_a_spacy_pipeline_supplies_typed_mentions(
    tmp_path: Path, make_pairs: Callable[..., pd.DataFrame]
) -> None:
    spacy = pytest.importorskip("spacy")
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("entity_ruler", name="ner")  # rule-based stand-in for a trained NER
    places = ["India", "France", "Tokyo", "Hong Kong", "New York"]
    ruler.add_patterns([{"label": "GPE", "pattern": place} for place in places])
    nlp.meta.update(name="rules", version="0.0.1")
    nlp.to_disk(tmp_path / "pipeline")
    extractor = make_extractor(str(tmp_path / "pipeline"))
    assert extractor.name == "spacy:en_rules-0.0.1"
    found = extractor.extract(["Is Hong Kong bigger than New York?"])
    assert list(zip(found.kind, found.value, strict=True)) == [("GPE", "Hong Kong"), ("GPE", "New York")]

    result = resample_frame(make_pairs(300, 0.3), "+positive", extractor=str(tmp_path / "pipeline"))
    assert result.manifest["method"] == "spacy:en_rules-0.0.1"
    new = result.frame[result.frame["origin"] == "augmented"]
    assert len(new) == 120 and new["text_a"].str.contains("|".join(places)).all()


def test_stopword_trie_matches_exactly_its_words() -> None:
    words = ["a", "an", "and", "any", "i", "in", "into", "is"]
    pattern = re.compile(_trie_pattern(words))
    assert all(pattern.fullmatch(word) for word in words)
    assert not any(pattern.fullmatch(word) for word in ["", "ann", "anything", "int", "o", "isle", "n"])
