"""Paraphrase-like sentence pairs: label "1" when both sentences report the same event.

An event has an agent, an action, a quantity of objects, a place and a time; it may be negated ("did not
buy") and may carry a second, extra action ("and 20 trucks were also sold"). The two sentences of a pair
are worded independently (synonyms, word order, active or passive voice, a lead-in, sometimes the place or
time left out). A negative pair is, like the non-paraphrases of MRPC and QQP:
- "negated": one sentence denies what the other reports ("did not buy", "refused to buy", ...),
- "extra": one sentence reports an extra action the other lacks ("..., while 20 trucks were sold"),
- "detail": one detail changed (another person, number, place, day, object or contrasting action).
Positives are negated or carry an extra action too, in both sentences, and every cue has several wordings,
so no single word tells the classes apart (the best one-word rule is right for 57% of balanced pairs).
Changed details must be compared sentence to sentence, which a small model from scratch barely learns:
they are the hard tenth of the negatives that keeps F1 below 1.

Optionally (`ambiguous_rate`, 0 by default) a share of the pairs restate one event, once precisely and once
vaguely ("45 cars in Oslo on Monday" / "some vehicles recently"): whether that is the same event is a matter
of judgement, and like annotators who disagree, a share `ambiguous_positive_rate` of them is labelled "1",
drawn independently of the wording. Their P(y=1|x) is that share for any model: the paper's case where
positives are a minority and a decision threshold of one half and an F1-optimal one disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from dicelab.data.synthetic._lexicon import (
    CITIES,
    COUNTRIES,
    FEMALE_NAMES,
    MALE_NAMES,
    MONTHS,
    SURNAMES,
    WEEKDAYS,
)
from dicelab.data.synthetic._random import exact_shuffled_flags, pick

NEGATIVE_KINDS = {"negated": 0.45, "extra": 0.45, "detail": 0.1}  # shares of the negatives
NEGATED_RATE = 0.1  # events (of both labels) that are negated in both sentences
EXTRA_RATE = 0.1  # events (of both labels) with an extra action in both sentences
DROP_DETAIL_RATE = 0.2  # a sentence leaves out the place or the time (both labels alike)

Verb = tuple[str, str, str]  # base, past, participle
# action -> its synonymous verbs; the actions of one kind contrast with each other
ACTIONS: dict[str, tuple[Verb, ...]] = {
    "buy": (("buy", "bought", "bought"), ("purchase", "purchased", "purchased"),
            ("acquire", "acquired", "acquired")),
    "sell": (("sell", "sold", "sold"), ("offload", "offloaded", "offloaded")),
    "order": (("order", "ordered", "ordered"), ("request", "requested", "requested")),
    "rent": (("rent", "rented", "rented"), ("lease", "leased", "leased")),
    "hire": (("hire", "hired", "hired"), ("recruit", "recruited", "recruited"),
             ("take on", "took on", "taken on")),
    "dismiss": (("lay off", "laid off", "laid off"), ("dismiss", "dismissed", "dismissed"),
                ("fire", "fired", "fired")),
    "train": (("train", "trained", "trained"), ("coach", "coached", "coached")),
    "build": (("build", "built", "built"), ("construct", "constructed", "constructed")),
    "demolish": (("demolish", "demolished", "demolished"), ("tear down", "tore down", "torn down")),
    "open": (("open", "opened", "opened"), ("launch", "launched", "launched")),
    "close": (("close", "closed", "closed"), ("shut down", "shut down", "shut down")),
}  # fmt: skip
# kind -> (its actions, its objects as synonym sets)
KINDS: dict[str, tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]] = {
    "goods": (
        ("buy", "sell", "order", "rent"),
        (
            ("cars", "vehicles", "automobiles"),
            ("laptops", "notebook computers"),
            ("trucks", "lorries"),
            ("bicycles", "bikes"),
            ("phones", "handsets", "mobile phones"),
            ("tractors", "farm tractors"),
            ("boats", "vessels"),
            ("buses", "coaches"),
            ("printers", "printing machines"),
            ("generators", "power generators"),
            ("drones", "unmanned aircraft"),
            ("tablets", "tablet computers"),
        ),
    ),
    "staff": (
        ("hire", "dismiss", "train"),
        (
            ("workers", "employees", "staff members"),
            ("engineers", "technicians"),
            ("nurses", "care workers"),
            ("drivers", "chauffeurs"),
            ("teachers", "instructors"),
            ("pilots", "aviators"),
            ("cooks", "chefs"),
            ("guards", "security officers"),
            ("clerks", "office workers"),
        ),
    ),
    "sites": (
        ("build", "demolish", "open", "close"),
        (
            ("schools", "school buildings"),
            ("warehouses", "depots"),
            ("clinics", "health centres"),
            ("stores", "shops"),
            ("factories", "plants"),
            ("offices", "branch offices"),
            ("hotels", "inns"),
            ("bridges", "footbridges"),
            ("libraries", "public libraries"),
            ("stadiums", "sports grounds"),
        ),
    ),
}
ORGANISATION_SUFFIXES = ("Group", "Holdings", "Corp", "Industries", "Partners", "Logistics", "Foods")
NEGATIONS = ("did not {base}", "never {past}", "refused to {base}", "failed to {base}", "declined to {base}")
PASSIVE_NEGATIONS = ("were not", "were never")
EXTRAS = (
    ", and {objects} were also {participle}",
    ", while {objects} were {participle}",
    "; another {objects} were {participle} as well",
    ", after {objects} had been {participle}",
)
LEAD_INS = ("", "", "", "According to officials, ", "Reports say that ", "It was announced that ")
VAGUE_QUANTITIES = ("some", "several", "a number of", "a few", "dozens of")
VAGUE_TIMES = ("recently", "lately", "earlier this year", "some time ago")


@dataclass(frozen=True)
class Action:
    action: str
    objects: tuple[str, ...]  # synonyms
    quantity: int


@dataclass(frozen=True)
class Event:
    agent: tuple[str, str]  # (full name, short form: "Ms. Lopez" / "the Lopez company")
    kind: str
    main: Action
    place: str
    time: str  # "on Monday" / "in March"
    negated: bool = False
    extra: Action | None = None


def generate_pairs(
    n: int,
    positive_rate: float,
    seed: int | list[int],
    unrelated_rate: float = 0.0,
    ambiguous_rate: float = 0.0,
    ambiguous_positive_rate: float = 0.4,
) -> pd.DataFrame:
    """`n` pairs (text_a, text_b, label), round(n * positive_rate) of them labelled "1". A share
    `unrelated_rate` of the negatives pairs two independent events (the easy negatives of QQP-like data, told
    apart by word overlap); the others are the hard kinds of NEGATIVE_KINDS. round(n * ambiguous_rate) pairs
    are ambiguous (one sentence vague), round(that * ambiguous_positive_rate) of them labelled "1"; they count
    in positive_rate."""
    rng = np.random.default_rng(seed)
    kinds, shares = list(NEGATIVE_KINDS), list(NEGATIVE_KINDS.values())
    rows = []
    for positive, ambiguous in _labels(n, positive_rate, ambiguous_rate, ambiguous_positive_rate, rng):
        event = random_event(rng)
        if ambiguous:
            precise, vague = realise(event, rng), realise(event, rng, vague=True)
            if rng.random() < 0.5:
                precise, vague = vague, precise
            rows.append((precise, vague, "1" if positive else "0"))
            continue
        if positive:
            other = event
        elif unrelated_rate and rng.random() < unrelated_rate:  # no draw at 0: older data stays the same
            other = random_event(rng)
        else:
            other = make_negative(event, kinds[rng.choice(len(kinds), p=shares)], rng)
        if rng.random() < 0.5:
            event, other = other, event  # the odd sentence is as often first as second
        rows.append((realise(event, rng), realise(other, rng), "1" if positive else "0"))
    return pd.DataFrame(rows, columns=["text_a", "text_b", "label"])


def _labels(
    n: int,
    positive_rate: float,
    ambiguous_rate: float,
    ambiguous_positive_rate: float,
    rng: np.random.Generator,
) -> list[tuple[bool, bool]]:
    """(positive, ambiguous) per pair, in random order, every count exact."""
    if not ambiguous_rate:  # no extra draw: older data stays the same
        return [(positive, False) for positive in exact_shuffled_flags(n, positive_rate, rng)]
    positives, ambiguous = round(n * positive_rate), round(n * ambiguous_rate)
    ambiguous_positives = round(ambiguous * ambiguous_positive_rate)
    if ambiguous_positives > positives or ambiguous - ambiguous_positives > n - positives:
        raise ValueError(
            f"{ambiguous} ambiguous pairs with {ambiguous_positives} positives do not fit in {n} pairs with "
            f"{positives} positives: lower ambiguous_rate"
        )
    labels = (
        [(True, True)] * ambiguous_positives
        + [(False, True)] * (ambiguous - ambiguous_positives)
        + [(True, False)] * (positives - ambiguous_positives)
        + [(False, False)] * (n - positives - ambiguous + ambiguous_positives)
    )
    return [labels[index] for index in rng.permutation(n)]


def random_event(rng: np.random.Generator) -> Event:
    kind = pick(rng, tuple(KINDS))
    return Event(
        agent=random_agent(rng),
        kind=kind,
        main=random_action(kind, rng),
        place=pick(rng, CITIES + COUNTRIES),
        time=random_time(rng),
        negated=bool(rng.random() < NEGATED_RATE),
        extra=random_action(kind, rng) if rng.random() < EXTRA_RATE else None,
    )


def random_action(kind: str, rng: np.random.Generator) -> Action:
    actions, objects = KINDS[kind]
    return Action(pick(rng, actions), pick(rng, objects), random_quantity(rng))


def random_agent(rng: np.random.Generator) -> tuple[str, str]:
    surname = pick(rng, SURNAMES)
    if rng.random() < 0.35:
        return f"{surname} {pick(rng, ORGANISATION_SUFFIXES)}", f"the {surname} company"
    if rng.random() < 0.5:
        return f"{pick(rng, FEMALE_NAMES)} {surname}", f"Ms. {surname}"
    return f"{pick(rng, MALE_NAMES)} {surname}", f"Mr. {surname}"


def random_quantity(rng: np.random.Generator) -> int:
    return int(rng.choice([rng.integers(2, 20), rng.integers(20, 100), rng.integers(100, 1000)]))


def random_time(rng: np.random.Generator) -> str:
    return f"on {pick(rng, WEEKDAYS)}" if rng.random() < 0.6 else f"in {pick(rng, MONTHS)}"


def make_negative(event: Event, kind: str, rng: np.random.Generator) -> Event:
    """An event that `event` does not paraphrase, of the given kind of negative."""
    if kind == "negated":
        return replace(event, negated=not event.negated)
    if kind == "extra":
        return replace(event, extra=None if event.extra else random_action(event.kind, rng))
    return change_one_detail(event, rng)


def change_one_detail(event: Event, rng: np.random.Generator) -> Event:
    """The same event with one detail changed to a different value."""
    detail = pick(rng, ("agent", "action", "objects", "quantity", "place", "time"))
    actions, objects = KINDS[event.kind]
    while True:
        if detail == "agent":
            changed = replace(event, agent=random_agent(rng))
            if changed.agent[1].split()[-1] != event.agent[1].split()[-1]:
                return changed  # a different surname, so even the short forms differ
            continue
        changed = {
            "action": lambda: replace(event, main=replace(event.main, action=pick(rng, actions))),
            "objects": lambda: replace(event, main=replace(event.main, objects=pick(rng, objects))),
            "quantity": lambda: replace(event, main=replace(event.main, quantity=random_quantity(rng))),
            "place": lambda: replace(event, place=pick(rng, CITIES + COUNTRIES)),
            "time": lambda: replace(event, time=random_time(rng)),
        }[detail]()
        if changed != event:
            return changed


def realise(event: Event, rng: np.random.Generator, vague: bool = False) -> str:
    """One sentence for `event`, with randomly chosen wording and order; `vague`: no number, place or day."""
    base, past, participle = pick(rng, ACTIONS[event.main.action])
    agent = event.agent[0] if rng.random() < 0.7 else event.agent[1]
    quantity = pick(rng, VAGUE_QUANTITIES) if vague else event.main.quantity
    objects = f"{quantity} {pick(rng, event.main.objects)}"
    if vague:
        place, time = "", pick(rng, VAGUE_TIMES)
    else:
        place, time = f"in {event.place}", event.time
        dropped = pick(rng, ("place", "time")) if rng.random() < DROP_DETAIL_RATE else None
        place, time = ("" if dropped == "place" else place), ("" if dropped == "time" else time)
    verb = pick(rng, NEGATIONS).format(base=base, past=past) if event.negated else past
    form = int(rng.integers(4))
    if form == 0:
        words = [agent, verb, objects, place, time]
    elif form == 1:
        words = [time + "," if time else "", agent, verb, objects, place]
    elif form == 2:
        words = [place + "," if place else "", agent, verb, objects, time]
    else:
        were = pick(rng, PASSIVE_NEGATIONS) if event.negated else "were"
        words = [objects, were, participle, "by", agent, place, time]
    sentence = " ".join(word for word in words if word)
    if form in (0, 3):  # forms that read well after "Reports say that"
        sentence = pick(rng, LEAD_INS) + sentence
    if event.extra is not None:
        extra_participle = pick(rng, ACTIONS[event.extra.action])[2]
        extra_quantity = pick(rng, VAGUE_QUANTITIES) if vague else event.extra.quantity
        extra_objects = f"{extra_quantity} {pick(rng, event.extra.objects)}"
        sentence += pick(rng, EXTRAS).format(objects=extra_objects, participle=extra_participle)
    return sentence[0].upper() + sentence[1:] + "."
