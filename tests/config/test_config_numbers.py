"""Numbers as users write them: `1e-4`, `3e-5`, `.5`, `+1e3` are floats (YAML 1.2) in every place a config
is read: config files, `extends:` parents, `--set` values, loss parameters, grid / choice values of a search
space, the shipped named spaces and the experiment catalogue."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from dicelab.config import parse_override, read_config
from dicelab.config.yaml_loader import load_yaml
from dicelab.errors import ConfigError
from dicelab.experiment import load_experiment
from dicelab.sweeps.space import named_spaces, plan_sweep

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("1e-4", 1e-4),
        ("3e-5", 3e-5),
        ("1E5", 1e5),
        ("+1e3", 1000.0),
        ("1e+4", 1e4),
        (".5", 0.5),
        ("-.5", -0.5),
        ("+.5e-3", 5e-4),
        ("1.0e-4", 1e-4),  # YAML 1.1's form still reads
        ("1.", 1.0),
        ("1_0.5", 10.5),  # and so do YAML 1.1's underscores
    ],
)
def test_yaml12_floats_are_floats(text: str, number: float) -> None:
    value = load_yaml(f"v: {text}")["v"]
    assert isinstance(value, float) and value == pytest.approx(number, rel=1e-12)


@pytest.mark.parametrize(
    ("text", "value"),
    [("10", 10), ("-3", -3), ("+1", 1), ("0x1F", 31), ("1_000", 1000), ("0", 0)],
)
def test_ints_stay_ints(text: str, value: int) -> None:
    loaded = load_yaml(f"v: {text}")["v"]
    assert type(loaded) is int and loaded == value


@pytest.mark.parametrize("text", ["1e", "e5", "1.2.3", "1e-", "0.1.", "v1e3", "1e3x"])
def test_what_is_no_number_stays_a_string(text: str) -> None:
    assert load_yaml(f"v: {text}")["v"] == text


def test_infinities_and_nan_keep_their_yaml_spelling() -> None:
    loaded = load_yaml("a: .inf\nb: -.Inf\nc: .nan\nd: inf\n")
    assert loaded["a"] == math.inf and loaded["b"] == -math.inf and math.isnan(loaded["c"])
    assert loaded["d"] == "inf"  # only YAML's dotted spelling is a number


def test_a_scalar_pyyaml_cannot_build_is_a_yaml_error() -> None:
    with pytest.raises(yaml.YAMLError, match="month"):
        load_yaml("v: 2001-13-01")
    with pytest.raises(yaml.YAMLError, match="digits"):
        load_yaml("v: " + "9" * 5000)


def test_config_file_and_its_parent(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text("name: base\nloss: {name: dice, smooth: 1e-4}\n")
    (tmp_path / "child.yaml").write_text("extends: base.yaml\nname: child\ntrain: {learning_rate: 3e-5}\n")
    config = read_config(tmp_path / "child.yaml")
    assert config.loss.params == {"smooth": 1e-4}
    assert isinstance(config.loss.params["smooth"], float)
    assert config.train.learning_rate == 3e-5


@pytest.mark.parametrize(
    ("text", "value"),
    [("loss.smooth=1e-4", 1e-4), ("a.b=+1e3", 1000.0), ("a.b=.5", 0.5), ("a.b=[1e-4, 1.0]", [1e-4, 1.0])],
)
def test_set_values(text: str, value: object) -> None:
    key, parsed = parse_override(text)
    assert parsed == value and key == text.split("=")[0]
    assert all(isinstance(number, float) for number in (parsed if isinstance(parsed, list) else [parsed]))


def test_loss_parameter_from_set_and_file_passes_the_loss_check(tmp_path: Path) -> None:
    # A loss parameter has no type in the schema: a string "1e-4" would reach the loss and be refused.
    path = tmp_path / "dice.yaml"
    path.write_text("name: dice\nloss: {name: dice, smooth: 1e-4}\n")
    assert load_experiment(path).loss.params["smooth"] == 1e-4
    assert load_experiment(path, ["loss.smooth=3e-5"]).loss.params["smooth"] == 3e-5


def test_grid_and_choice_values_in_a_search_space(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(
        "name: sweep\nloss: {name: dice}\n"
        "search:\n"
        "  space:\n"
        "    loss.smooth: {grid: [1e-4, .5, 1]}\n"
        "    train.learning_rate: {grid: [3e-5, +1e-3]}\n"
    )
    config = load_experiment(path)
    plan = plan_sweep(config, str(path))
    smooths = sorted({plan.trial_config(point).loss.params["smooth"] for point in plan.points()})
    rates = sorted({plan.trial_config(point).train.learning_rate for point in plan.points()})
    assert smooths == [1e-4, 0.5, 1] and rates == [3e-5, 1e-3]


def test_a_set_grid_of_yaml12_numbers(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text("name: sweep\nloss: {name: dice}\nsearch: {space: {loss.smooth: {choice: [1.0]}}}\n")
    # Dotted keys of a space cannot be reached by --set (a dot separates sections): the whole space is set.
    config = load_experiment(path, ["search.space={loss.smooth: {choice: [1e-4, 1e-2]}}"])
    assert config.search == {"space": {"loss.smooth": {"choice": [1e-4, 1e-2]}}}


def _strings(value: object) -> list[str]:
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return [value] if isinstance(value, str) else []


def _looks_like_a_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return text.strip().lower() not in ("inf", "-inf", "+inf", "nan", "infinity")


CATALOGUE = sorted((REPO / "experiments").rglob("*.yaml")) + sorted(
    (REPO / "platform" / "dicelab" / "sweeps" / "spaces").glob("*.yaml")
)


@pytest.mark.parametrize("path", CATALOGUE, ids=lambda path: path.relative_to(REPO).as_posix())
def test_no_number_in_the_catalogue_is_read_as_a_string(path: Path) -> None:
    data = load_yaml(path.read_text(encoding="utf-8"))
    assert not [text for text in _strings(data) if _looks_like_a_number(text)]


def test_named_spaces_are_read_with_yaml12_numbers() -> None:
    for name, space in named_spaces().items():
        for key, dimension in space.space.items():
            for value in dimension.values or []:
                assert not (isinstance(value, str) and _looks_like_a_number(value)), (name, key, value)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("train.learning_rate=.inf", "train.learning_rate"),  # would pass its bound (> 0)
        ("train.weight_decay=.inf", "train.weight_decay"),
        ("train.learning_rate=.nan", "train.learning_rate"),
        ("search={space: {train.learning_rate: {uniform: [1e-5, .inf]}}}", "uniform"),
        ("search={space: {train.learning_rate: {grid: [1e-5, .inf]}}}", "train.learning_rate"),
    ],
)
def test_an_infinite_or_nan_number_is_refused_naming_its_key(tmp_path: Path, override: str, key: str) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text("name: sweep\nsearch: {space: {loss.name: {grid: [ce]}}}\n")
    with pytest.raises(ConfigError, match="finite number") as raised:
        plan_sweep(load_experiment(path, [override]), str(path))
    assert key in str(raised.value) and "\n" not in str(raised.value)
