"""Configs as users break them: every catalogue config in experiments/, mutated by hypothesis (keys dropped,
retyped, misspelt or moved to the wrong level, extreme numbers), is either valid or refused with a
ConfigError whose every line names a key; never a traceback or another exception.

A result goes through everything `dicelab validate` does: the YAML text is read back (YAML 1.2 numbers),
the schema and the registries check it, and a sweep's plan validates every trial it would start.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from dicelab.config import read_yaml
from dicelab.errors import ConfigError
from dicelab.experiment import load_experiment
from dicelab.sweeps.space import plan_sweep

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
CATALOGUE = {
    path.relative_to(EXPERIMENTS).as_posix(): read_yaml(path) for path in EXPERIMENTS.rglob("*.yaml")
}

EXTREME_NUMBERS = [0, -1, -(2**63), 2**63, 10**30, 0.0, -0.0, 1e-300, 1e308, -1e308]
EXTREME_NUMBERS += [math.inf, -math.inf, math.nan]
# A YAML scalar of each kind, as a user might type it where something else belongs.
SCALARS = st.one_of(
    st.sampled_from(EXTREME_NUMBERS),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=12),
    st.sampled_from(["1e-4", ".5", "+1e3", "yes", "null", "~", "", "auto", "ce", "grid"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)

Path_ = tuple[Any, ...]


def paths(node: Any, prefix: Path_ = ()) -> list[Path_]:
    """Every key / index path of a nested config, sections included."""
    found: list[Path_] = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        found.append((*prefix, key))
        found.extend(paths(value, (*prefix, key)))
    return found


def parent_of(data: Any, path: Path_) -> Any:
    for part in path[:-1]:
        data = data[part]
    return data


def misspell(key: str, draw: st.DrawFn) -> str:
    if not key:
        return "x"
    position = draw(st.integers(0, len(key) - 1))
    how = draw(st.sampled_from(["drop", "double", "swap", "case", "suffix"]))
    if how == "drop":
        return key[:position] + key[position + 1 :] or "x"
    if how == "double":
        return key[:position] + key[position] + key[position:]
    if how == "swap" and position + 1 < len(key):
        return key[:position] + key[position + 1] + key[position] + key[position + 2 :]
    if how == "case":
        return key.upper() if key != key.upper() else key.lower() + "_"
    return key + "s"


@st.composite
def mutated_configs(draw: st.DrawFn) -> tuple[str, dict[str, Any], list[str]]:
    name = draw(st.sampled_from(sorted(CATALOGUE)))
    data = yaml.safe_load(yaml.safe_dump(CATALOGUE[name]))  # a deep copy
    done: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(paths(data) or [("name",)]))
        parent = parent_of(data, where)
        key = where[-1]
        if key not in (parent if isinstance(parent, dict) else range(len(parent))):
            continue  # a path an earlier mutation removed
        how = draw(st.sampled_from(["drop", "retype", "misspell", "extreme", "nest", "unnest", "move"]))
        value = parent[key]
        if how == "drop":
            del parent[key]
        elif how == "retype":
            parent[key] = draw(VALUES)
        elif how == "extreme":
            parent[key] = draw(st.sampled_from(EXTREME_NUMBERS))
        elif how == "misspell" and isinstance(parent, dict) and isinstance(key, str):
            parent[misspell(key, draw)] = parent.pop(key)
        elif how == "nest":
            parent[key] = {draw(st.sampled_from([str(key), "value", "grid"])): value}
        elif how == "unnest" and isinstance(value, dict) and value and isinstance(parent, dict):
            # a section's keys one level too high: `train: {epochs: 2}` written as `epochs: 2`
            del parent[key]
            parent.update(value)
        elif how == "move" and isinstance(parent, dict) and len(where) >= 2:
            # a key in the wrong section: `train.dropout` instead of `model.dropout`
            sections = [section for section in data if isinstance(data[section], dict)]
            target = draw(st.sampled_from(sections)) if sections else None
            if target is not None:
                data[target][key] = parent.pop(key)
        else:
            continue
        done.append(f"{how} {'.'.join(map(str, where))}")
    return name, data, done


# "config key 'train.epochs': ..." (schema, registries; a key holding a ' is in double quotes, as Python's
# repr writes it) or a line that starts with the dotted key it is about ("search.conditional.dsc: loss 'dsc'
# is not among ...").
NAMES_A_KEY = re.compile(r"""config key (?:'[^']+'|"[^"]+")|^[a-z_]+(?:\.[\w\[\]-]+)+\b""")


def check(path: Path) -> None:
    """What `dicelab validate` does with a config file."""
    config = load_experiment(path)
    if config.search is not None:
        plan_sweep(config, str(path))


@settings(
    max_examples=100,  # about 0.1 s each on 2 cores, after the first (imports torch)
    deadline=None,
    derandomize=bool(os.environ.get("CI")),  # CI replays one fixed set; a developer's run explores new ones
    database=None,  # no .hypothesis/ in the repository; a failure prints the example to reproduce it
    # no shrinking (minutes at a tenth of a second per example): a failure names its config and mutations
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
@given(mutated_configs())
def test_a_mutated_catalogue_config_is_valid_or_one_line_per_error(
    tmp_path_factory: Any, case: tuple[str, dict[str, Any], list[str]]
) -> None:
    name, data, mutations = case
    path = tmp_path_factory.mktemp("fuzz") / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    try:
        check(path)
    except ConfigError as error:
        message = str(error)
        # "<file>: ..." or, for one trial of a sweep, "<file> (search point loss.name=dsc, ...): ..."
        where = re.match(rf"{re.escape(str(path))}(?: \(search point [^\n]*?\))?: ", message)
        assert where, (name, mutations, message)
        first, *more = message[where.end() :].splitlines()
        if more:
            assert first == f"{len(more)} config errors:", (name, mutations, message)
            assert all(line.startswith("  ") for line in more), (name, mutations, message)
        for line in more or [first]:
            assert NAMES_A_KEY.search(line.strip()), (name, mutations, line)
