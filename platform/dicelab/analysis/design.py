"""What a sweep varied: the swept hyperparameters of a group of trials, and which of them move together."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dicelab.analysis.observations import hyperparameter_columns
from dicelab.words import format_value

_SHORT_NAMES = {"loss.name": "loss", "data.variant": "variant"}


@dataclass(frozen=True)
class SweptParam:
    name: str  # the flattened config key, e.g. "loss.alpha"
    numeric: bool
    followers: tuple[str, ...] = ()  # params set one-to-one with this one (loss.beta with loss.alpha)
    relation: str = ""  # how the followers follow, e.g. "beta = 1 − alpha"


def swept_params(frame: pd.DataFrame, param_columns: Sequence[str]) -> list[SweptParam]:
    """The independent hyperparameters varied within `frame`; each dependent one is folded into its leader.

    A Tversky sweep with beta = 1 - alpha has one swept parameter, loss.alpha, with relation
    "beta = 1 − alpha", so it is plotted against alpha alone.
    """
    leaders: list[SweptParam] = []
    for column in hyperparameter_columns(frame, list(param_columns)):
        index = next((i for i, lead in enumerate(leaders) if _moves_with(frame, lead.name, column)), None)
        if index is None:
            leaders.append(SweptParam(column, pd.api.types.is_numeric_dtype(frame[column])))
            continue
        lead = leaders[index]
        relation = _relation(frame, lead.name, column)
        leaders[index] = SweptParam(
            lead.name,
            lead.numeric,
            (*lead.followers, column),
            f"{lead.relation}; {relation}" if lead.relation else relation,
        )
    return leaders


def short_name(key: str) -> str:
    """loss.alpha -> alpha, loss.name -> loss, data.variant -> variant; others keep their section."""
    return _SHORT_NAMES.get(key, key.removeprefix("loss."))


def config_label(values: Iterable[tuple[str, Any]]) -> str:
    """[("loss.alpha", 0.3), ("loss.beta", 0.7)] -> "alpha=0.3, beta=0.7"."""
    return ", ".join(f"{short_name(key)}={format_value(value)}" for key, value in values)


def _moves_with(frame: pd.DataFrame, lead: str, other: str) -> bool:
    """True when `other` is a one-to-one function of `lead` (and both are logged on the same trials).

    Two numbers must also lie on a line (beta = 1 − alpha, a tie of `search.tied` such as 2 × alpha): values
    drawn independently (random or Optuna search over gamma and the learning rate) are one-to-one by chance,
    each draw being new, and stay two parameters. Two distinct points always lie on a line, so they fold."""
    if (frame[lead].isna() != frame[other].isna()).any():
        return False
    pairs = frame[[lead, other]].dropna().drop_duplicates()
    if not len(pairs) == pairs[lead].nunique() == pairs[other].nunique():
        return False
    numeric = pd.api.types.is_numeric_dtype(pairs[lead]) and pd.api.types.is_numeric_dtype(pairs[other])
    if not numeric or len(pairs) < 3:
        return True
    x, y = pairs[lead].to_numpy(dtype=float), pairs[other].to_numpy(dtype=float)
    slope, intercept = np.polyfit(x, y, 1)
    return bool(
        np.allclose(slope * x + intercept, y, rtol=1e-6, atol=1e-9 * max(1.0, float(np.abs(y).max())))
    )


def _relation(frame: pd.DataFrame, lead: str, follower: str) -> str:
    a, b = short_name(lead), short_name(follower)
    if pd.api.types.is_numeric_dtype(frame[lead]) and pd.api.types.is_numeric_dtype(frame[follower]):
        pairs = frame[[lead, follower]].dropna()
        x, y = pairs[lead].to_numpy(dtype=float), pairs[follower].to_numpy(dtype=float)
        if np.allclose(y, 1.0 - x):
            return f"{b} = 1 − {a}"
        if np.allclose(y, x):
            return f"{b} = {a}"
    return f"{b} set with {a}"
