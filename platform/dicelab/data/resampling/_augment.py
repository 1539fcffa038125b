"""New pairs from template pairs by entity-mention replacement, as the paper augments QQP for Table 8.

A new pair is a template pair with one of its mentions replaced, at every place the extractor found it in
either text, by another mention of the same type drawn from the corpus (frequency-weighted). A mention is
replaceable in a positive (duplicate) template only when it occurs in both texts, so both questions keep
asking about the same thing; in a negative template any mention is. The replacement never already occurs
in the template, and a new pair never equals an existing pair (same two texts, in either order), so a
pair is never identical to its template. Templates are used in a random order, each at most once per
round, and rounds repeat until enough pairs exist or a whole round makes none.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from dicelab.data.resampling._mentions import Mentions

DRAWS_PER_ATTEMPT = 8  # replacement candidates drawn per template and round


@dataclass
class AugmentStats:
    needed: int
    templates: int  # pairs with the label, all candidate templates
    created: int = 0
    skipped_no_mention: int = 0  # templates without a replaceable mention
    tried: int = 0  # templates used at least once
    used: int = 0  # templates that gave at least one new pair
    skipped_no_new_pair: int = 0  # tried, but every replacement gave an existing pair
    rounds: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class NewPairs:
    text_a: list[str]
    text_b: list[str | None]
    template: list[int]  # row of the template in the input
    stats: AugmentStats


def pair_key(text_a: str, text_b: str | None) -> tuple[str, str]:
    """Pairs are equal when they have the same two texts, in either order."""
    text_b = text_b or ""
    return (text_a, text_b) if text_a <= text_b else (text_b, text_a)


class MentionIndex:
    """The mentions of a set of pairs, indexed by (row, mention) and grouped by type for replacement.

    `mentions.text` indexes the concatenation texts_a + texts_b: text i < n is row i's text_a, else row
    i - n's text_b.
    """

    def __init__(self, n_rows: int, mentions: Mentions):
        row = mentions.text % n_rows
        side = mentions.text // n_rows
        kind_code, _ = pd.factorize(mentions.kind)
        value_code, values = pd.factorize(mentions.value)
        n_values = len(values) or 1
        # One id per distinct (type, text): "Apple" the ORG and "Apple" the PRODUCT are different mentions.
        mention_id, kind_value = pd.factorize(kind_code.astype(np.int64) * n_values + value_code)
        self.n_mentions = len(kind_value) or 1
        self.mention_value: list[str] = np.asarray(values, dtype=object)[kind_value % n_values].tolist()
        self.mention_kind = (kind_value // n_values).astype(np.int64)

        # The replacement pool: every occurrence's mention id, grouped by type (so draws follow frequency).
        occurrence_kind = self.mention_kind[mention_id]
        by_kind = np.argsort(occurrence_kind, kind="stable")
        self.pool = mention_id[by_kind]
        kinds = np.arange(int(self.mention_kind.max(initial=-1)) + 1)
        self.pool_start = np.searchsorted(occurrence_kind[by_kind], kinds, side="left")
        self.pool_size = np.searchsorted(occurrence_kind[by_kind], kinds, side="right") - self.pool_start

        # Occurrences sorted by (row, mention, side, start): one slice per (row, mention).
        key = row * self.n_mentions + mention_id
        order = np.lexsort((mentions.start, side, key))
        self.key = key[order]
        self.side = side[order]
        # Python lists for the per-pair loop (indexing numpy arrays one item at a time is slow).
        self.side_list: list[int] = self.side.tolist()
        self.start_list: list[int] = mentions.start[order].tolist()
        self.end_list: list[int] = mentions.end[order].tolist()

    def spans(self, first: int, last: int, side: int) -> list[tuple[int, int]]:
        """The (start, end) spans among occurrences first..last-1 that lie in text `side` (0: a, 1: b)."""
        return [
            (self.start_list[i], self.end_list[i]) for i in range(first, last) if self.side_list[i] == side
        ]

    def replaceable(self, rows: np.ndarray, shared: bool, has_text_b: np.ndarray) -> np.ndarray:
        """Sorted unique keys (row * n_mentions + mention) of the replaceable mentions of the rows in the
        boolean mask `rows`. With `shared`, a mention must occur in each text the pair has."""
        selected = rows[self.key // self.n_mentions]
        in_a = _distinct(self.key[selected & (self.side == 0)])
        in_b = _distinct(self.key[selected & (self.side == 1)])
        if not shared:
            return np.union1d(in_a, in_b)
        single_text = in_a[~has_text_b[in_a // self.n_mentions]]
        return np.union1d(np.intersect1d(in_a, in_b, assume_unique=True), single_text)


def _distinct(sorted_keys: np.ndarray) -> np.ndarray:
    first = np.ones(len(sorted_keys), dtype=bool)
    first[1:] = sorted_keys[1:] != sorted_keys[:-1]
    return sorted_keys[first]


class Augmenter:
    """Makes new pairs from template rows; `seen` holds the keys of every existing pair and grows."""

    def __init__(
        self,
        index: MentionIndex,
        texts_a: list[str],
        texts_b: list[str | None],
        seen: set[tuple[str, str]],
    ):
        self.index = index
        self.texts_a = texts_a
        self.texts_b = texts_b
        self.seen = seen
        self.has_text_b = np.fromiter((bool(text) for text in texts_b), dtype=bool, count=len(texts_b))

    def augment(
        self, templates: np.ndarray, need: int, *, shared: bool, rng: np.random.Generator
    ) -> NewPairs:
        """`need` new pairs from the rows in the boolean mask `templates` (fewer if the templates run out)."""
        keys = self.index.replaceable(templates, shared, self.has_text_b)
        rows, first, count = np.unique(keys // self.index.n_mentions, return_index=True, return_counts=True)
        stats = AugmentStats(needed=need, templates=int(templates.sum()))
        stats.skipped_no_mention = stats.templates - len(rows)
        new = NewPairs([], [], [], stats)
        spans_from = np.searchsorted(self.index.key, keys, side="left").tolist()
        spans_to = np.searchsorted(self.index.key, keys, side="right").tolist()
        tried = np.zeros(len(rows), dtype=bool)
        used = np.zeros(len(rows), dtype=bool)
        while len(new.template) < need and len(rows):
            stats.rounds += 1
            # Vectorised draws for the whole round: template order, one mention each, replacement candidates.
            order = rng.permutation(len(rows))
            choice = first[order] + (rng.random(len(order)) * count[order]).astype(np.int64)
            kind = self.index.mention_kind[keys[choice] % self.index.n_mentions]
            offsets = rng.random((len(order), DRAWS_PER_ATTEMPT)) * self.index.pool_size[kind][:, None]
            candidates = self.index.pool[self.index.pool_start[kind][:, None] + offsets.astype(np.int64)]
            made = 0
            for template, chosen, replacements in zip(
                order.tolist(), choice.tolist(), candidates.tolist(), strict=True
            ):
                if len(new.template) == need:
                    break
                tried[template] = True
                row = int(rows[template])
                spans = (
                    self.index.spans(spans_from[chosen], spans_to[chosen], 0),
                    self.index.spans(spans_from[chosen], spans_to[chosen], 1),
                )
                if self._replace(row, spans, replacements, new):
                    used[template] = True
                    made += 1
            if made == 0:
                break
        stats.created = len(new.template)
        stats.tried = int(tried.sum())
        stats.used = int(used.sum())
        stats.skipped_no_new_pair = stats.tried - stats.used
        return new

    def _replace(
        self,
        row: int,
        spans: tuple[list[tuple[int, int]], list[tuple[int, int]]],
        replacements: list[int],
        new: NewPairs,
    ) -> bool:
        text_a, text_b = self.texts_a[row], self.texts_b[row]
        for replacement in replacements:
            value = self.index.mention_value[replacement]
            if value in text_a or (text_b and value in text_b):
                continue  # also rules out the mention itself
            new_a = _substitute(text_a, spans[0], value)
            new_b = _substitute(text_b, spans[1], value)
            key = pair_key(new_a, new_b)
            if key in self.seen:
                continue
            self.seen.add(key)
            new.text_a.append(new_a)
            new.text_b.append(new_b)
            new.template.append(row)
            return True
        return False


def _substitute(text: str | None, spans: list[tuple[int, int]], value: str) -> str | None:
    if not spans or text is None:
        return text
    pieces = []
    position = 0
    for start, end in spans:  # sorted by start
        pieces.append(text[position:start])
        pieces.append(value)
        position = end
    pieces.append(text[position:])
    return "".join(pieces)
