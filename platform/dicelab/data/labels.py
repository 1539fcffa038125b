"""The label set of a dataset, and checks that every example's labels belong to it."""

from __future__ import annotations

import pandas as pd

from dicelab.config import DataConfig
from dicelab.data.base import Family
from dicelab.data.iob import TagError, entity_types, iob2_labels, tag_set
from dicelab.data.provenance import where
from dicelab.errors import ConfigError, DataError

DEFAULT_POSITIVE_LABEL = "1"


def resolve_label_names(
    family: Family, train: pd.DataFrame, data: DataConfig, source_labels: list[str] | None = None
) -> list[str]:
    """`data.labels` when given, else the source's own label set, else the labels seen in training.

    pairs: binary label sets end with the positive label (`data.positive_label`, default "1");
    tagging: "O" comes first, in IOB2 like the tags (a set given as IOBES, BMES or BILOU becomes the IOB2
    set of its types); spans: no labels.
    """
    if family == "spans":
        return []
    names = list(data.labels or source_labels or [])
    if len(set(names)) != len(names):
        raise ConfigError(f"config key 'data.labels': labels repeat ({', '.join(names)})")
    if family == "tagging":
        if not names:
            names = tag_set(set().union(*map(entity_types, train["tags"])))
        if "O" not in names:
            raise ConfigError(f"config key 'data.labels': a tag set needs 'O' (got {', '.join(names)})")
        try:
            names = iob2_labels(names)
        except TagError as error:
            raise ConfigError(f"config key 'data.labels': {error}") from None
        return ["O", *(name for name in names if name != "O")]
    if not names:
        names = sorted(set(train["label"]), key=_natural_order)
    positive = data.positive_label
    if positive is not None and positive not in names:
        raise ConfigError(
            f"config key 'data.positive_label': {positive!r} is not a label ({', '.join(names)})"
        )
    if positive is None and len(names) == 2 and DEFAULT_POSITIVE_LABEL in names:
        positive = DEFAULT_POSITIVE_LABEL
    if positive is not None:
        names = [*(name for name in names if name != positive), positive]
    return names


def check_labels(frame: pd.DataFrame, family: Family, label_names: list[str]) -> None:
    """Raise DataError naming the first example (file:line) whose label is outside `label_names`."""
    allowed = set(label_names)
    shown = f"[{', '.join(label_names)}]"
    if family == "pairs":
        outside = ~frame["label"].isin(allowed)
        if outside.any():
            position = int(outside.to_numpy().argmax())
            label = frame["label"].iloc[position]
            raise DataError(
                f"{where(frame, frame.index[position])}: label {label!r} not in label set {shown}"
            )
    elif family == "tagging":
        for location, tags in zip(frame.index, frame["tags"], strict=True):
            for position, tag in enumerate(tags):
                if tag not in allowed:
                    raise DataError(
                        f"{where(frame, location, position)}: tag {tag!r} not in label set {shown}"
                    )


def _natural_order(label: str) -> tuple[int, int, str]:
    """Numeric labels in numeric order ("2" before "10"), then the others alphabetically."""
    return (0, int(label), "") if label.lstrip("-").isdigit() else (1, 0, label)
