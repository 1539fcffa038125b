"""NER-like sentences tagged in IOB2 with PER, LOC, ORG and MISC entities.

Sentences are built from clauses: clauses with entities in a telling context ("{PER} said", "police in
{LOC}", "{ORG} shares") and clauses without entities; some capitalised words are no entities (sentence
starts, weekdays, titles such as "Prime Minister").
Entities come from gazetteers, some names are both people and places (Jordan, Florence), organisations
embed place and person names ("Bank of Lyon", "Tanaka Motors") and lists ("{LOC} , {LOC} and {LOC}") carry
no cue but their neighbours, so a tagger needs context as well as the word lists.
Each next clause is the one of two clauses with and two without entities that brings the running share of
entity tokens closest to `entity_density`, so the share over a split matches it closely (reachable: about
0.01 to 0.45; beyond, the share stays near 0.46).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dicelab.data.iob import tag_set
from dicelab.data.synthetic._lexicon import (
    AMBIGUOUS_FIRST_NAMES,
    AMBIGUOUS_PLACES,
    CITIES,
    COUNTRIES,
    EVENTS,
    FEMALE_NAMES,
    MALE_NAMES,
    MULTIWORD_PLACES,
    NATIONALITIES,
    ORG_PATTERNS,
    ORG_SUFFIXES,
    SURNAMES,
    WEEKDAYS,
)
from dicelab.data.synthetic._random import pick

ENTITY_TYPES = ("LOC", "MISC", "ORG", "PER")
TAGS = tag_set(ENTITY_TYPES)

# Slots: {PER} {LOC} {ORG} {MISC} (a nationality), {EVENT} (a MISC event), {SURNAME} (a PER surname alone),
# {DAY} (a weekday, tagged O). Tokens are separated by spaces, punctuation included.
ENTITY_CLAUSES = (
    "{PER} said on {DAY} that the talks had failed",
    "according to {PER} , the deal was worth 40 million dollars",
    "the {MISC} delegation arrived in {LOC}",
    "{ORG} shares fell 3 percent",
    "{PER} , who works for {ORG} , declined to comment",
    "police in {LOC} arrested two men",
    "{PER} scored twice for {ORG}",
    "{PER} will travel to {LOC} next month",
    "a spokesman for {ORG} said",
    "Mr. {SURNAME} told reporters in {LOC}",
    "{LOC} and {LOC} signed a trade agreement",
    "{MISC} officials met {PER} in {LOC}",
    "the {MISC} champion {PER} retired",
    "{ORG} opened a new office in {LOC}",
    "{PER} won the {EVENT}",
    "visitors from {LOC} , {LOC} and {LOC}",
    "{PER} , {PER} and {PER} were named in the squad",
    "{ORG} and {ORG} agreed to merge",
    "the {EVENT} will be held in {LOC}",
    "{PER} joined {ORG} from {ORG}",
    "Ms. {SURNAME} of {ORG} was elected",
    "{MISC} troops left {LOC}",
    "the match between {ORG} and {ORG} ended in a draw",
    "{PER} was born in {LOC}",
    "Prime Minister {PER} said on {DAY} that {LOC} would not sign",
    "President {PER} arrived in {LOC} on {DAY}",
    # dense lines, like results and lists in news wires
    "{ORG} 2 {ORG} 1",
    "{PER} ( {LOC} )",
    "{PER} ( {ORG} ) and {PER} ( {ORG} )",
)
PLAIN_CLAUSES = (
    "the market closed higher after a quiet session",
    "prices rose sharply in the second quarter",
    "the meeting lasted three hours",
    "it was not immediately clear why",
    "officials declined to give details",
    "the report was published on {DAY}",
    "no one was injured in the incident",
    "analysts expect further gains this year",
    "the decision surprised many observers",
    "talks will resume on {DAY}",
    "the company did not say how many jobs would go",
    "results are due next week",
    "the government denied the claims",
    "heavy rain delayed the start of play",
    "the index gained 12 points",
    "shares were little changed in early trading",
    "the court will rule on {DAY}",
    "it was the third such attack this month",
)
CONNECTORS = (",", "and", ", while", ";", ", but")


def generate_tagging(n: int, entity_density: float, seed: int | list[int]) -> pd.DataFrame:
    """`n` sentences (tokens, tags) whose entity tokens make up about `entity_density` of all tokens."""
    rng = np.random.default_rng(seed)
    entity_tokens = total_tokens = 0
    rows = []
    for _ in range(n):
        tokens: list[str] = []
        tags: list[str] = []
        for position in range(int(rng.integers(1, 4))):
            connector = pick(rng, CONNECTORS).split() if position else []

            candidates = [random_clause(rng, ENTITY_CLAUSES) for _ in range(2)]
            candidates += [random_clause(rng, PLAIN_CLAUSES) for _ in range(2)]
            shares = [
                (entity_tokens + _entities(tags)) / (total_tokens + len(connector) + len(tokens))
                for tokens, tags in candidates
            ]
            best = int(np.argmin([abs(share - entity_density) for share in shares]))
            clause_tokens, clause_tags = candidates[best]
            tokens += connector + clause_tokens
            tags += ["O"] * len(connector) + clause_tags
            entity_tokens += _entities(clause_tags)
            total_tokens += len(connector) + len(clause_tokens)
        tokens[0] = tokens[0][0].upper() + tokens[0][1:]
        rows.append(([*tokens, "."], [*tags, "O"]))
        total_tokens += 1
    return pd.DataFrame(rows, columns=["tokens", "tags"])


def _entities(tags: list[str]) -> int:
    return sum(tag != "O" for tag in tags)


def random_clause(rng: np.random.Generator, templates: tuple[str, ...]) -> tuple[list[str], list[str]]:
    template = pick(rng, templates)
    tokens: list[str] = []
    tags: list[str] = []
    for word in template.split():
        if word.startswith("{") and word.endswith("}"):
            entity_type, words = random_entity(word[1:-1], rng)
            tokens += words
            tags += ["O"] * len(words) if entity_type == "O" else _iob2(entity_type, len(words))
        else:
            tokens.append(word)
            tags.append("O")
    return tokens, tags


def random_entity(slot: str, rng: np.random.Generator) -> tuple[str, list[str]]:
    """(entity type or "O", its words) for a template slot."""
    if slot == "DAY":
        return "O", [pick(rng, WEEKDAYS)]
    if slot == "SURNAME":
        return "PER", [pick(rng, SURNAMES)]
    if slot == "PER":
        first = (
            pick(rng, AMBIGUOUS_FIRST_NAMES) if rng.random() < 0.15 else pick(rng, FEMALE_NAMES + MALE_NAMES)
        )
        return "PER", [first, pick(rng, SURNAMES)] if rng.random() < 0.8 else [first]
    if slot == "LOC":
        roll = rng.random()
        if roll < 0.15:
            return "LOC", [pick(rng, AMBIGUOUS_PLACES)]
        if roll < 0.3:
            return "LOC", pick(rng, MULTIWORD_PLACES).split()
        return "LOC", [pick(rng, CITIES + COUNTRIES)]
    if slot == "ORG":
        name = pick(rng, ORG_PATTERNS).format(
            surname=pick(rng, SURNAMES),
            surname2=pick(rng, SURNAMES),
            city=pick(rng, CITIES + AMBIGUOUS_PLACES),
            suffix=pick(rng, ORG_SUFFIXES),
        )
        return "ORG", name.split()
    if slot == "MISC":
        return "MISC", [pick(rng, NATIONALITIES)]
    if slot == "EVENT":
        return "MISC", pick(rng, EVENTS).split()
    raise ValueError(f"unknown slot {slot!r}")


def _iob2(entity_type: str, length: int) -> list[str]:
    return [f"B-{entity_type}", *([f"I-{entity_type}"] * (length - 1))]
