"""Entity-mention extractors: a spaCy pipeline when one is installed, else a built-in one for questions.

Both return every mention of a list of texts as parallel arrays (text index, character span, type,
surface string). The built-in extractor works on the whole corpus at once: one regular expression pass
finds numbers, years and runs of capitalised words, and corpus statistics decide which capitalised words
are names (a word is a name when, away from the start of a sentence, it is written capitalised at least as
often as it is written in lower case: "Python", "India", "USA" are; "Best", "Explain", "Way" are not).
"""

from __future__ import annotations

import importlib.util
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

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
_WORD = r"[A-Z][^\W_]+(?:[-&][^\W_]+)*"  # Python, USA, McDonald, Coca-Cola, AT&T
_NOT_STOPWORD = rf"(?!(?:{_STOPWORDS.title()})(?![^\W_]|[-&]))"
_PATTERN = re.compile(
    r"(?P<number>(?<![\w.,])\d+(?:[.,]\d+)*(?![\w]|[.,]\d))"
    rf"|(?P<run>(?<![\w&-]){_NOT_STOPWORD}{_WORD}(?: {_NOT_STOPWORD}{_WORD})*)"
)
_YEAR = re.compile(r"(?:1[5-9]|20)\d\d")
_LOWERCASE_WORD = re.compile(r"(?<![\w&-])[a-z][^\W_]*")
_SEPARATOR = "\n"  # between texts in the corpus string; also ends a sentence
_SENTENCE_END = frozenset("\n.?!:")
_OPENERS = frozenset(" \t\"'“‘([")


class BuiltinExtractor:
    """Years, numbers and capitalised names, with name statistics gathered from the corpus itself."""

    name = "builtin"

    def extract(self, texts: Sequence[str]) -> Mentions:
        corpus = _SEPARATOR.join(texts)
        offsets = np.zeros(len(texts), dtype=np.int64)
        if len(texts) > 1:
            offsets[1:] = np.cumsum([len(text) + 1 for text in texts[:-1]])

        numbers: list[tuple[int, str]] = []
        runs: list[tuple[int, str, bool]] = []
        capitalised = Counter()  # capitalised words away from a sentence start
        for match in _PATTERN.finditer(corpus):
            start = match.start()
            if match.lastgroup == "number":
                numbers.append((start, match.group()))
                continue
            words = match.group().split(" ")
            initial = _sentence_initial(corpus, start)
            runs.append((start, match.group(), initial))
            capitalised.update(words[1:] if initial else words)
        lowercase = Counter(_LOWERCASE_WORD.findall(corpus))

        is_name: dict[str, bool] = {}
        for word, count in capitalised.items():
            is_name[word] = count >= lowercase.get(word.lower(), 0)

        starts: list[int] = []
        kinds: list[str] = []
        values: list[str] = []
        for start, run, initial in runs:
            words = run.split(" ")
            if initial:  # capitalised because it starts a sentence: trim leading non-names
                while words and not is_name.get(words[0], False):
                    start += len(words[0]) + 1
                    words = words[1:]
            if not any(is_name.get(word, False) for word in words):
                continue
            starts.append(start)
            kinds.append(_name_kind(words))
            values.append(" ".join(words))
        for start, number in numbers:
            starts.append(start)
            kinds.append("YEAR" if _YEAR.fullmatch(number) else "NUMBER")
            values.append(number)

        absolute = np.asarray(starts, dtype=np.int64)
        order = np.argsort(absolute, kind="stable")
        absolute = absolute[order]
        text_index = np.searchsorted(offsets, absolute, side="right") - 1
        start_in_text = absolute - offsets[text_index]
        value_array = np.asarray(values, dtype=object)[order]
        lengths = np.fromiter((len(value) for value in value_array), dtype=np.int64, count=len(value_array))
        return Mentions(
            text_index.astype(np.int64),
            start_in_text,
            start_in_text + lengths,
            np.asarray(kinds, dtype=object)[order],
            value_array,
        )


def _sentence_initial(corpus: str, start: int) -> bool:
    index = start - 1
    while index >= 0 and corpus[index] in _OPENERS:
        index -= 1
    return index < 0 or corpus[index] in _SENTENCE_END


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
        self.name = f"spacy:{self._nlp.meta.get('name', model)}-{self._nlp.meta.get('version', '?')}"
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
