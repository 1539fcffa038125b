"""Paraphrase-like sentence pairs: label "1" when both sentences describe the same event.

An event has an agent, an action, a quantity of objects, a place and a time. Both sentences of a pair are
realised independently (synonyms, word order, active or passive voice, an optional lead-in, sometimes one
detail left out), so surface overlap is alike for both labels. A hard negative describes the same event
with exactly one detail changed (another person, number, place, day, object or a contrasting action),
an easy negative two unrelated events: telling duplicates from hard negatives needs comparing the two
sentences detail by detail, never a single word.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from dicelab.data.synthetic._lexicon import CITIES, COUNTRIES, FEMALE_NAMES, MALE_NAMES, MONTHS, SURNAMES, WEEKDAYS
from dicelab.data.synthetic._random import exact_shuffled_flags, pick

EASY_NEGATIVE_SHARE = 0.2  # of the negatives; the rest are hard negatives
DROP_DETAIL_RATE = 0.2  # a sentence leaves out the place or the time (both labels alike)

# action -> (active forms, passive participles); actions of one kind contrast with each other
ACTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "buy": (("bought", "purchased", "acquired"), ("bought", "purchased", "acquired")),
    "sell": (("sold", "offloaded"), ("sold", "offloaded")),
    "order": (("ordered", "requested"), ("ordered", "requested")),
    "rent": (("rented", "leased"), ("rented", "leased")),
    "hire": (("hired", "recruited", "took on"), ("hired", "recruited", "taken on")),
    "dismiss": (("laid off", "dismissed", "let go"), ("laid off", "dismissed", "let go")),
    "train": (("trained", "coached"), ("trained", "coached")),
    "build": (("built", "constructed"), ("built", "constructed")),
    "demolish": (("demolished", "tore down"), ("demolished", "torn down")),
    "open": (("opened", "launched"), ("opened", "launched")),
    "close": (("closed", "shut down"), ("closed", "shut down")),
}
# kind -> (its actions, its objects as synonym sets)
KINDS: dict[str, tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]] = {
    "goods": (
        ("buy", "sell", "order", "rent"),
        (
            ("cars", "vehicles", "automobiles"), ("laptops", "notebook computers"), ("trucks", "lorries"),
            ("bicycles", "bikes"), ("phones", "handsets", "mobile phones"), ("tractors", "farm tractors"),
            ("boats", "vessels"), ("buses", "coaches"), ("printers", "printing machines"),
            ("generators", "power generators"), ("drones", "unmanned aircraft"), ("tablets", "tablet computers"),
        ),
    ),
    "staff": (
        ("hire", "dismiss", "train"),
        (
            ("workers", "employees", "staff members"), ("engineers", "technicians"), ("nurses", "care workers"),
            ("drivers", "chauffeurs"), ("teachers", "instructors"), ("pilots", "aviators"),
            ("cooks", "chefs"), ("guards", "security officers"), ("clerks", "office workers"),
        ),
    ),
    "sites": (
        ("build", "demolish", "open", "close"),
        (
            ("schools", "school buildings"), ("warehouses", "depots"), ("clinics", "health centres"),
            ("stores", "shops"), ("factories", "plants"), ("offices", "branch offices"), ("hotels", "inns"),
            ("bridges", "footbridges"), ("libraries", "public libraries"), ("stadiums", "sports grounds"),
        ),
    ),
}
ORGANISATION_SUFFIXES = ("Group", "Holdings", "Corp", "Industries", "Partners", "Logistics", "Foods")
LEAD_INS = ("", "", "", "According to officials, ", "Reports say that ", "It was announced that ")


@dataclass(frozen=True)
class Event:
    agent: tuple[str, str]  # (full name, short form: "Ms. Lopez" / "Lopez Group")
    kind: str
    action: str
    objects: tuple[str, ...]  # synonyms
    quantity: int
    place: str
    time: str  # "on Monday" / "in March"


def generate_pairs(n: int, positive_rate: float, seed: int | list[int]) -> pd.DataFrame:
    """`n` pairs (text_a, text_b, label), round(n * positive_rate) of them labelled "1"."""
    rng = np.random.default_rng(seed)
    rows = []
    for positive in exact_shuffled_flags(n, positive_rate, rng):
        event = random_event(rng)
        if positive:
            other = event
        elif rng.random() < EASY_NEGATIVE_SHARE:
            other = random_event(rng)
        else:
            other = change_one_detail(event, rng)
        rows.append((realise(event, rng), realise(other, rng), "1" if positive else "0"))
    return pd.DataFrame(rows, columns=["text_a", "text_b", "label"])


def random_event(rng: np.random.Generator) -> Event:
    kind = pick(rng, tuple(KINDS))
    actions, objects = KINDS[kind]
    return Event(
        agent=random_agent(rng),
        kind=kind,
        action=pick(rng, actions),
        objects=pick(rng, objects),
        quantity=random_quantity(rng),
        place=pick(rng, CITIES + COUNTRIES),
        time=random_time(rng),
    )


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


def change_one_detail(event: Event, rng: np.random.Generator) -> Event:
    """The same event with one detail changed to a different value (a hard negative)."""
    detail = pick(rng, ("agent", "action", "objects", "quantity", "place", "time"))
    actions, objects = KINDS[event.kind]
    while True:
        if detail == "agent":
            changed = replace(event, agent=random_agent(rng))
            if changed.agent[1].split()[-1] != event.agent[1].split()[-1]:
                return changed  # a different surname, so even the short forms differ
            continue
        changed = {
            "action": lambda: replace(event, action=pick(rng, actions)),
            "objects": lambda: replace(event, objects=pick(rng, objects)),
            "quantity": lambda: replace(event, quantity=random_quantity(rng)),
            "place": lambda: replace(event, place=pick(rng, CITIES + COUNTRIES)),
            "time": lambda: replace(event, time=random_time(rng)),
        }[detail]()
        if changed != event:
            return changed


def realise(event: Event, rng: np.random.Generator) -> str:
    """One sentence for `event`, with randomly chosen wording and order."""
    active, passive = ACTIONS[event.action]
    agent = event.agent[0] if rng.random() < 0.7 else event.agent[1]
    objects = f"{event.quantity} {pick(rng, event.objects)}"
    place, time = f"in {event.place}", event.time
    dropped = pick(rng, ("place", "time")) if rng.random() < DROP_DETAIL_RATE else None
    place, time = ("" if dropped == "place" else place), ("" if dropped == "time" else time)
    form = int(rng.integers(4))
    if form == 0:
        words = [agent, pick(rng, active), objects, place, time]
    elif form == 1:
        words = [time + "," if time else "", agent, pick(rng, active), objects, place]
    elif form == 2:
        words = [place + "," if place else "", agent, pick(rng, active), objects, time]
    else:
        words = [objects, "were", pick(rng, passive), "by", agent, place, time]
    sentence = " ".join(word for word in words if word)
    if form in (0, 3):  # forms that read well after "Reports say that"
        sentence = pick(rng, LEAD_INS) + sentence
    return sentence[0].upper() + sentence[1:] + "."
