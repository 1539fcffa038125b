"""The paper's reference numbers, read from the free-form `paper:` section of a sweep config.

Supported layout (numbers in the paper's unit, e.g. F1 in percent):

    paper:
      metric: f1                      # the metric the numbers are comparable to
      split: test                     # the split the paper reports (test or dev), where it says
      results:                        # Table 8 style: loss -> data variant -> number
        ce: {original: 91.3, "+positive": 92.27}
        dsc: {original: 92.11}
      sensitivity:                    # Table 10 style: loss -> hyperparameter value -> number
        tversky: {"0.6": 84.67, "0.4": 84.52}   # Chinese OntoNotes 4.0 (QuoRef at 0.4: 68.44)
      baselines:                      # the table's other printed rows: model -> number (no dots in names)
        BERT-Tagger: 92.8

When the paper reports test numbers and the trials were scored on a test split (`test_<metric>`), the
paper's numbers are compared with those; otherwise with the dev numbers, and the report says that the two
come from different splits (`compared_with`).

Other keys (a citation, a table number) are allowed and ignored. Malformed entries are skipped with a note; a
null entry (`dsc: null`) means "not recorded" and is skipped silently, so a config that `extends:` another can
drop a number it would otherwise inherit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from dicelab.config.yaml_loader import load_yaml

SPLITS = ("test", "dev")
SPLIT_ALIASES = {"test": "test", "dev": "dev", "validation": "dev"}
TEST_PREFIX = "test_"  # a trial's score on the held-out split, once with its best dev state


@dataclass(frozen=True)
class PaperNumbers:
    metric: str | None = None
    results: dict[str, dict[str, float]] = field(default_factory=dict)  # loss -> variant -> number
    sensitivity: dict[str, dict[float, float]] = field(default_factory=dict)  # loss -> value -> number
    split: str | None = None  # the split the paper's numbers are on ("test" or "dev"); None: not stated
    baselines: dict[str, float] = field(default_factory=dict)  # the table's other rows: model -> number

    def applies_to(self, metric: str) -> bool:
        return self.metric is None or self.metric == metric

    def result(self, loss: str, variant: str) -> float:
        return self.results.get(loss, {}).get(variant, math.nan)

    def sensitivity_at(self, loss: str, value: float) -> float:
        for key, number in self.sensitivity.get(loss, {}).items():
            if math.isclose(key, value, rel_tol=1e-9, abs_tol=1e-12):
                return number
        return math.nan

    def __bool__(self) -> bool:
        return bool(self.results or self.sensitivity or self.baselines)


@dataclass(frozen=True)
class Comparand:
    """What the paper's numbers are set beside: dicelab's metric column and a sentence saying so."""

    column: str
    split: str  # "test" or "dev": the split of `column`
    note: str


def compared_with(paper: PaperNumbers, metric: str, dev_column: str, logged: set[str]) -> Comparand:
    """The column the paper's numbers of `metric` are compared with.

    A paper that reports test numbers is compared with the trials' `test_<metric>` when they logged it
    (a test split was evaluated); else with `dev_column`, and the note says the splits differ.
    """
    test_column = f"{TEST_PREFIX}{metric}"
    if paper.split == "test" and test_column in logged:
        return Comparand(
            test_column,
            "test",
            f"The paper's numbers are test-set numbers, set beside dicelab's `{test_column}` (each trial "
            "scored once on the test split with its best dev state).",
        )
    if paper.split == "test":
        return Comparand(
            dev_column,
            "dev",
            f"The paper's numbers are test-set numbers; dicelab's are dev numbers (`{dev_column}`: no test "
            "split was evaluated), so the two columns come from different splits.",
        )
    if paper.split == "dev":
        return Comparand(
            dev_column, "dev", f"The paper's numbers and dicelab's (`{dev_column}`) are dev numbers."
        )
    return Comparand(
        dev_column,
        "dev",
        "The sweep config does not say which split the paper's numbers are on; dicelab's are dev numbers "
        f"(`{dev_column}`).",
    )


def paper_from_config(section: Any) -> tuple[PaperNumbers, list[str]]:
    """Parse a `paper:` mapping; returns the numbers and notes about what was skipped."""
    if not isinstance(section, Mapping):
        return PaperNumbers(), [
            f"the sweep config's paper section is a {type(section).__name__}, not a mapping"
        ]
    notes: list[str] = []
    metric = section.get("metric")
    if metric is not None and not isinstance(metric, str):
        notes.append(
            f"paper.metric {metric!r} is not a metric name; the paper's numbers are shown for any metric"
        )
        metric = None
    split = _split(section.get("split"), notes)
    baselines = _numbers({"baselines": section.get("baselines")}, "paper", notes).get("baselines", {})
    results = {
        str(loss): {str(variant): number for variant, number in entries.items()}
        for loss, entries in _numbers(section.get("results"), "paper.results", notes).items()
    }
    sensitivity: dict[str, dict[float, float]] = {}
    for loss, entries in _numbers(section.get("sensitivity"), "paper.sensitivity", notes).items():
        for key, number in entries.items():
            value = _as_number(key)
            if value is None:
                notes.append(
                    f"paper.sensitivity.{loss}.{key}: the key must be a hyperparameter value; skipped"
                )
            else:
                sensitivity.setdefault(str(loss), {})[value] = number
    return (
        PaperNumbers(
            metric=metric,
            results=results,
            sensitivity=sensitivity,
            split=split,
            baselines={str(name): number for name, number in baselines.items()},
        ),
        notes,
    )


def _split(value: Any, notes: list[str]) -> str | None:
    if value is None:
        return None
    split = SPLIT_ALIASES.get(str(value).strip().lower())
    if split is None:
        notes.append(f"paper.split {value!r} is not one of {', '.join(SPLITS)}; ignored")
    return split


def paper_from_params(params: Mapping[str, str]) -> tuple[PaperNumbers, list[str]]:
    """The same section logged as flattened run params: `paper.metric`, `paper.results.ce.original`, ..."""
    section: dict[str, Any] = {}
    for key, text in params.items():
        parts = key.split(
            ".", 3
        )  # hyperparameter values like "0.6" keep their dot: paper.sensitivity.tversky.0.6
        if parts[0] != "paper" or len(parts) < 2:
            continue
        node = section
        for part in parts[1:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                break
        else:
            node[parts[-1]] = _parse_value(text)
    return paper_from_config(section) if section else (PaperNumbers(), [])


def _numbers(table: Any, where: str, notes: list[str]) -> dict[Any, dict[Any, float]]:
    """A two-level mapping of numbers; entries that are not numbers are skipped with a note."""
    if table is None:
        return {}
    if not isinstance(table, Mapping):
        notes.append(f"{where} is not a mapping; skipped")
        return {}
    parsed: dict[Any, dict[Any, float]] = {}
    for outer, inner in table.items():
        if inner is None:  # not recorded (hides an inherited entry)
            continue
        if not isinstance(inner, Mapping):
            notes.append(f"{where}.{outer} is not a mapping; skipped")
            continue
        for key, number in inner.items():
            if number is None:  # not recorded
                continue
            value = _as_number(number)
            if value is None:
                notes.append(f"{where}.{outer}.{key}: {number!r} is not a number; skipped")
            else:
                parsed.setdefault(outer, {})[key] = value
    return parsed


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _parse_value(text: str) -> Any:
    try:
        return load_yaml(text)  # a param logged as 1e-05 is a number
    except yaml.YAMLError:
        return text
