"""Extractive QA: short biographies of one to three people, one question each, SQuAD 2.0 style.

Answers (a city, a year, an employer, a job) are exact spans of the context with their character offsets.
Later sentences about a person say "he"/"she", other people's facts of the same kinds are distractors, and a
question may use only the surname, so that finding the answer takes reading, not string matching.
Unanswerable questions ask about a fact the context leaves out for that person, or about someone absent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dicelab.data.synthetic._lexicon import CITIES, FEMALE_NAMES, JOBS, MALE_NAMES, ORG_SUFFIXES, SURNAMES
from dicelab.data.synthetic._random import exact_shuffled_flags, pick

FACTS = ("born_city", "born_year", "employer", "job", "moved_city", "moved_year")
QUESTIONS: dict[str, tuple[str, ...]] = {
    "born_city": ("Where was {name} born?", "In which city was {name} born?"),
    "born_year": ("In which year was {name} born?", "When was {name} born?"),
    "employer": ("Which company does {name} work for?", "Who employs {name}?"),
    "job": ("What does {name} do for a living?", "What is the job of {name}?"),
    "moved_city": ("Where did {name} move in {moved_year}?", "To which city did {name} move?"),
    "moved_year": ("When did {name} move to {moved_city}?", "In which year did {name} move to {moved_city}?"),
}
DISTRACTORS = (
    "{employer} was founded in {year}. ",
    "{city} hosted a large trade fair in {year}. ",
    "The local newspaper wrote about {city} in {year}. ",
)


@dataclass
class Person:
    first: str
    surname: str
    female: bool
    facts: dict[str, str]  # fact -> value
    told: set[str] = field(default_factory=set)  # the facts the context states

    @property
    def full(self) -> str:
        return f"{self.first} {self.surname}"


class Context:
    """Text built piece by piece, remembering where each answer starts."""

    def __init__(self) -> None:
        self.text = ""
        self.answers: dict[tuple[str, str], tuple[str, int]] = {}  # (surname, fact) -> (text, start)

    def add(self, text: str, answer_of: tuple[str, str] | None = None) -> None:
        if answer_of is not None:
            self.answers[answer_of] = (text, len(self.text))
        self.text += text


def generate_spans(
    n: int, unanswerable_rate: float, seed: int | list[int], id_prefix: str = "q"
) -> pd.DataFrame:
    """`n` questions (id, question, context, answer_texts, answer_starts); round(n * rate) unanswerable."""
    rng = np.random.default_rng(seed)
    rows = []
    for number, unanswerable in enumerate(exact_shuffled_flags(n, unanswerable_rate, rng)):
        people = random_people(rng, int(rng.integers(1, 4)) + 1)
        absent, people = people[-1], people[:-1]
        context = write_context(people, rng)
        if unanswerable:
            question = unanswerable_question(people, absent, rng)
            texts, starts = [], []
        else:
            person = pick(rng, people)
            fact = pick(rng, sorted(person.told))
            question = ask(person, fact, rng)
            text, start = context.answers[(person.surname, fact)]
            texts, starts = [text], [start]
        rows.append((f"{id_prefix}{number:06d}", question, context.text.strip(), texts, starts))
    return pd.DataFrame(rows, columns=["id", "question", "context", "answer_texts", "answer_starts"])


def random_people(rng: np.random.Generator, count: int) -> list[Person]:
    surnames = rng.choice(SURNAMES, size=count, replace=False)
    people = []
    for surname in surnames:
        female = bool(rng.random() < 0.5)
        born = int(rng.integers(1940, 2000))
        first = pick(rng, FEMALE_NAMES if female else MALE_NAMES)
        facts = {
            "born_city": pick(rng, CITIES),
            "born_year": str(born),
            "employer": f"{pick(rng, SURNAMES + CITIES)} {pick(rng, ORG_SUFFIXES)}",
            "job": pick(rng, JOBS),
            "moved_city": pick(rng, CITIES),
            "moved_year": str(born + int(rng.integers(18, 40))),
        }
        people.append(Person(first, str(surname), female, facts))
    return people


def write_context(people: list[Person], rng: np.random.Generator) -> Context:
    context = Context()
    for person in people:
        if rng.random() < 0.3:
            year = int(rng.integers(1900, 2020))
            context.add(pick(rng, DISTRACTORS).format(**person.facts, city=pick(rng, CITIES), year=year))
        told = {fact for fact in ("born", "work", "moved") if rng.random() < 0.75} or {"born"}
        subject = person.full
        pronoun = "She" if person.female else "He"
        if "born" in told:
            context.add(f"{subject} was born in ")
            context.add(person.facts["born_city"], (person.surname, "born_city"))
            context.add(" in ")
            context.add(person.facts["born_year"], (person.surname, "born_year"))
            context.add(". ")
            person.told |= {"born_city", "born_year"}
            subject = pronoun
        if "work" in told:
            context.add(f"{subject} works for ")
            context.add(person.facts["employer"], (person.surname, "employer"))
            job = person.facts["job"]
            context.add(f" as {'an' if job[0] in 'aeiou' else 'a'} ")
            context.add(job, (person.surname, "job"))
            context.add(". ")
            person.told |= {"employer", "job"}
            subject = pronoun
        if "moved" in told:
            context.add("In ")
            context.add(person.facts["moved_year"], (person.surname, "moved_year"))
            context.add(f", {subject if subject == person.full else pronoun.lower()} moved to ")
            context.add(person.facts["moved_city"], (person.surname, "moved_city"))
            context.add(". ")
            person.told |= {"moved_city", "moved_year"}
    return context


def ask(person: Person, fact: str, rng: np.random.Generator) -> str:
    name = person.full if rng.random() < 0.7 else person.surname
    return pick(rng, QUESTIONS[fact]).format(name=name, **person.facts)


def unanswerable_question(people: list[Person], absent: Person, rng: np.random.Generator) -> str:
    """A fact the context leaves out for someone in it, else (or at random) any fact about someone absent."""
    untold = [(person, fact) for person in people for fact in FACTS if fact not in person.told]
    if untold and rng.random() < 0.5:
        person, fact = pick(rng, untold)
        return ask(person, fact, rng)
    return ask(absent, pick(rng, FACTS), rng)
