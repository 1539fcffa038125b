"""Entity-mention extractors: a spaCy pipeline when one is installed, else a built-in one for questions.

Both return every mention of a list of texts as parallel arrays (text index, character span, type,
surface string). The built-in extractor works on the whole corpus at once: regular expressions over one
string find numbers, years and runs of capitalised words, and corpus statistics decide which capitalised words
are names (a word is a name when, away from the start of a sentence, it is written capitalised more often
than in lower case: "Python", "India", "USA" are; "Best", "Explain", "Way" are not).
"""

from __future__ import annotations

import importlib.util
import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd

from dicelab.errors import ConfigError

DEFAULT_SPACY_MODEL = "en_core_web_sm"


@dataclass(frozen=True)
class Mentions:
    """Mentions found in a list of texts, in text order; `start`/`end` are character offsets in the text."""

    text: np.ndarray  # int64 index into the list of texts
    start: np.ndarray  # int64
    end: np.ndarray  # int64
    kind: np.ndarray  # object: mention type (YEAR, NUMBER, ACRONYM, NAME, NAME2, NAME3 or a spaCy label)
    value: np.ndarray  # object: the mention's text

    def __len__(self) -> int:
        return len(self.text)

    @classmethod
    def from_lists(
        cls, text: list[int], start: list[int], end: list[int], kind: list[str], value: list[str]
    ) -> Mentions:
        return cls(
            np.asarray(text, dtype=np.int64),
            np.asarray(start, dtype=np.int64),
            np.asarray(end, dtype=np.int64),
            np.asarray(kind, dtype=object),
            np.asarray(value, dtype=object),
        )


class Extractor(Protocol):
    name: str  # recorded as the manifest's method ("builtin" or "spacy:<model>-<version>")

    def extract(self, texts: Sequence[str]) -> Mentions: ...


# Function words are never names when capitalised ("What Is The Best ..."); all-caps forms may be ("US").
_STOPWORDS = (
    "a|about|after|against|all|also|am|among|an|and|any|are|as|at|be|because|been|before|being|between|both|"
    "but|by|can|could|did|do|does|doing|done|during|each|either|every|few|for|from|had|has|have|having|he|"
    "her|here|hers|him|his|how|i|if|in|into|is|it|its|just|many|may|me|might|mine|more|most|much|must|my|"
    "neither|no|nor|not|of|on|onto|only|or|other|our|ours|over|own|per|same|shall|she|should|so|some|such|"
    "than|that|the|their|theirs|them|then|there|these|they|this|those|through|to|too|under|us|very|via|was|"
    "we|were|what|when|where|whether|which|while|who|whom|whose|why|will|with|within|without|would|yes|yet|"
    "you|your|yours"
)


def _trie_pattern(words: list[str]) -> str:
    """A regular expression matching exactly `words`, as a trie: it fails after the first letter that
    no word continues with, instead of trying every word in turn (several times faster)."""
    tree: dict[str, dict] = {}
    for word in words:
        node = tree
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def render(node: dict[str, dict]) -> str:
        branches = [re.escape(char) + render(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 and "" not in node else f"(?:{'|'.join(branches)})"
        return body + ("?" if "" in node else "")

    return render(tree)


_WORD = r"[A-Z][^\W_]+(?:[-&][^\W_]+)*"  # Python, USA, McDonald, Coca-Cola, AT&T
_NOT_STOPWORD = rf"(?!{_trie_pattern(_STOPWORDS.title().split('|'))}(?![^\W_]|[-&]))"
_RUN = re.compile(rf"(?<![\w&-]){_NOT_STOPWORD}{_WORD}(?: {_NOT_STOPWORD}{_WORD})*")  # capitalised words
_NUMBER = re.compile(r"\d(?<![\w.,]\d)\d*(?:[.,]\d+)*(?![\w]|[.,]\d)")  # 42, 1,000, 3.5; not 2.5GHz
_YEARS = (1500, 2099)  # four-digit numbers in this range are years
_SENTENCE_START = re.compile(r"[\n.?!:][ \t\"'“‘(\[]*")  # a match ends where a sentence starts
_SEPARATOR = "\n"  # before each text in the corpus string
# Counting words: punctuation becomes space, then str.split (much faster than a regex findall).
_PUNCTUATION_TO_SPACE = str.maketrans(
    dict.fromkeys(string.punctuation.replace("-", "").replace("&", "") + "“”‘’", " ")
)


class BuiltinExtractor:
    """Years, numbers and capitalised names, with name statistics gathered from the corpus itself."""

    name = "builtin"

    def extract(self, texts: Sequence[str]) -> Mentions:
        corpus = _SEPARATOR + _SEPARATOR.join(texts)
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        offsets = np.cumsum(np.concatenate([[1], lengths + len(_SEPARATOR)]))[:-1]
        name_starts, names, name_kinds = _names(corpus)
        number_starts, numbers = _matches(_NUMBER, corpus)
        number_kinds = np.where(_is_year(numbers), "YEAR", "NUMBER")

        absolute = np.concatenate([name_starts, number_starts])
        order = np.argsort(absolute, kind="stable")
        absolute = absolute[order]
        values = np.concatenate([names, numbers])[order]
        text_index = np.searchsorted(offsets, absolute, side="right") - 1
        start = absolute - offsets[text_index]
        end = start + np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        kinds = np.concatenate([name_kinds, number_kinds.astype(object)])[order]
        return Mentions(text_index.astype(np.int64), start, end, kinds, values)


def _matches(pattern: re.Pattern[str], corpus: str) -> tuple[np.ndarray, np.ndarray]:
    found = [(match.start(), match.group()) for match in pattern.finditer(corpus)]
    starts = np.fromiter((start for start, _ in found), dtype=np.int64, count=len(found))
    return starts, np.asarray([text for _, text in found], dtype=object).reshape(len(found))


def _is_year(numbers: np.ndarray) -> np.ndarray:
    digits = np.asarray(numbers, dtype=str).reshape(len(numbers))
    four_digits = (np.char.str_len(digits) == 4) & np.char.isdigit(digits)
    value = np.zeros(len(digits), dtype=np.int64)
    value[four_digits] = digits[four_digits].astype(np.int64)
    return (value >= _YEARS[0]) & (value <= _YEARS[1])


def _names(corpus: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start, text and type of every name: a run of capitalised words with at least one name in it."""
    starts, values = _matches(_RUN, corpus)
    sentence_starts = np.fromiter((match.end() for match in _SENTENCE_START.finditer(corpus)), dtype=np.int64)
    # The corpus starts with a separator, so there is at least one sentence start.
    at = np.minimum(np.searchsorted(sentence_starts, starts), len(sentence_starts) - 1)
    initial = sentence_starts[at] == starts

    # Capitalised occurrences away from a sentence start vs lower-case occurrences, over the whole corpus.
    tokens = Counter(corpus.translate(_PUNCTUATION_TO_SPACE).split())
    tokens.subtract(value.partition(" ")[0] for value in values[initial])
    words = set(" ".join(values).split(" "))
    is_name = {word: tokens[word] > tokens[word.lower()] for word in words}

    # One-word runs (most of them) in bulk; longer runs word by word.
    series = pd.Series(values, dtype=object)
    single = ~series.str.contains(" ", regex=False).to_numpy(dtype=bool)
    keep = np.zeros(len(values), dtype=bool)
    keep[single] = series[single].map(is_name).to_numpy(dtype=bool)
    kinds = np.where(series.str.isupper(), "ACRONYM", "NAME").astype(object)
    for position in np.flatnonzero(~single):
        run = values[position].split(" ")
        if initial[position]:  # capitalised because it starts a sentence: trim leading non-names
            while run and not is_name[run[0]]:
                starts[position] += len(run[0]) + 1
                run = run[1:]
        if any(is_name[word] for word in run):
            keep[position] = True
            values[position] = " ".join(run)
            kinds[position] = _name_kind(run)
    return starts[keep], values[keep], kinds[keep]


def _name_kind(words: list[str]) -> str:
    if len(words) == 1:
        return "ACRONYM" if words[0].isupper() else "NAME"
    return "NAME2" if len(words) == 2 else "NAME3"


class SpacyExtractor:
    """The named entities of a spaCy pipeline (only its NER runs)."""

    def __init__(self, model: str = DEFAULT_SPACY_MODEL, batch_size: int = 512):
        import spacy

        try:
            self._nlp = spacy.load(model, exclude=["parser", "lemmatizer", "tagger", "attribute_ruler"])
        except OSError as error:
            raise ConfigError(f"extractor {model!r}: cannot load the spaCy pipeline ({error})") from None
        if "ner" not in self._nlp.pipe_names:
            raise ConfigError(f"extractor {model!r}: the spaCy pipeline has no 'ner' component")
        meta = self._nlp.meta
        pipeline = f"{meta['lang']}_{meta['name']}" if "lang" in meta and "name" in meta else model
        self.name = f"spacy:{pipeline}-{meta.get('version', '?')}"  # e.g. spacy:en_core_web_sm-3.8.0
        self._batch_size = batch_size

    def extract(self, texts: Sequence[str]) -> Mentions:
        text: list[int] = []
        start: list[int] = []
        end: list[int] = []
        kind: list[str] = []
        value: list[str] = []
        for index, doc in enumerate(self._nlp.pipe(texts, batch_size=self._batch_size)):
            for entity in doc.ents:
                text.append(index)
                start.append(entity.start_char)
                end.append(entity.end_char)
                kind.append(entity.label_)
                value.append(entity.text)
        return Mentions.from_lists(text, start, end, kind, value)


def spacy_model_installed(model: str = DEFAULT_SPACY_MODEL) -> bool:
    if importlib.util.find_spec("spacy") is None:
        return False
    import spacy.util

    return bool(spacy.util.is_package(model))


def make_extractor(name: str = "auto") -> Extractor:
    """ "auto": spaCy's en_core_web_sm when installed, else the built-in extractor; "builtin"; or a
    spaCy pipeline name or path."""
    if name == "builtin" or (name == "auto" and not spacy_model_installed()):
        return BuiltinExtractor()
    if importlib.util.find_spec("spacy") is None:
        raise ConfigError(f"extractor {name!r} needs spaCy, which is not installed (or use 'builtin')")
    return SpacyExtractor(DEFAULT_SPACY_MODEL if name == "auto" else name)
