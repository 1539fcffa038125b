"""Config reading: YAML, --set overrides, schema errors on one line naming the key, flattening."""

from __future__ import annotations

from pathlib import Path

import pytest

from dicelab.config import (
    ExperimentConfig,
    apply_overrides,
    config_to_yaml,
    flatten_config,
    parse_config,
    parse_override,
    read_config,
    read_yaml,
)
from dicelab.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


MINIMAL = """
name: unit
loss: {name: tversky, alpha: 0.3, beta: 0.7}
train: {epochs: 1, seed: 7}
"""


def test_minimal_config_gets_defaults(tmp_path: Path) -> None:
    config = read_config(write(tmp_path, MINIMAL))
    assert isinstance(config, ExperimentConfig)
    assert config.loss.name == "tversky"
    assert config.loss.params == {"alpha": 0.3, "beta": 0.7}
    assert config.train.epochs == 1
    assert config.tracking.experiment == "unit"
    assert config.data.source == "synthetic_pairs"


def test_overrides_are_parsed_as_yaml_values(tmp_path: Path) -> None:
    config = read_config(
        write(tmp_path, MINIMAL),
        [
            "train.learning_rate=3e-5",
            "loss.alpha=0.4",
            "loss.beta=0.6",
            "data.labels=[a, b]",
            "tracking.uri=null",
        ],
    )
    assert config.train.learning_rate == pytest.approx(3e-5)
    assert config.loss.params["alpha"] == 0.4
    assert config.data.labels == ["a", "b"]
    assert config.tracking.uri is None


def test_parse_override_rejects_missing_equals() -> None:
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_override("train.epochs")
    assert parse_override("a.b=1") == ("a.b", 1)


def test_unknown_key_names_the_key_and_allowed_values(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        read_config(write(tmp_path, MINIMAL), ["train.lr=1e-3"])
    message = str(error.value)
    assert "'train.lr'" in message and "learning_rate" in message
    assert "\n" not in message


def test_bad_value_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'train.epochs'"):
        read_config(write(tmp_path, MINIMAL), ["train.epochs=0"])
    with pytest.raises(ConfigError, match=r"'train.precision'.*'fp32'"):
        read_config(write(tmp_path, MINIMAL), ["train.precision=fp8"])


def test_registry_names_are_not_the_schemas_business(tmp_path: Path) -> None:
    # The schema layer knows no registry: dicelab.experiment checks the names (tests/test_experiment.py).
    config = read_config(write(tmp_path, MINIMAL), ["loss.name=hinge", "task.name=translation"])
    assert (config.loss.name, config.task.name) == ("hinge", "translation")


def test_unreadable_and_invalid_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        read_yaml(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match=r"config.yaml:\d+: invalid YAML"):
        read_yaml(write(tmp_path, "name: [unclosed\n"))
    with pytest.raises(ConfigError, match="empty"):
        read_yaml(write(tmp_path, ""))
    with pytest.raises(ConfigError, match="'name' is required"):
        parse_config({"train": {"epochs": 1}})


def test_override_into_a_value_is_an_error() -> None:
    with pytest.raises(ConfigError, match="is a value"):
        apply_overrides({"name": "x"}, ["name.sub=1"])


def test_overrides_reach_a_search_spaces_dotted_keys() -> None:
    """`search.space` and `search.tied` are keyed by dotted config keys: `--set` paths into them as a user
    writes it, a dimension's kind last (replacing the dimension), in a conditional space too."""
    data = {
        "name": "x",
        "search": {
            "space": {"loss.name": {"grid": ["ce"]}},
            "conditional": {"dsc": {"space": {"loss.alpha": {"grid": [0.1]}}}},
        },
    }
    done = apply_overrides(
        data,
        [
            "search.space.loss.name.grid=[ce, dice, dsc]",
            "search.space.train.learning_rate.loguniform=[1e-5, 1e-3]",
            "search.conditional.dsc.space.loss.alpha.choice=[0.1, 0.5]",
            "search.tied.loss.beta=1 - loss.alpha",
            "search.max_concurrent=2",
        ],
    )
    search = done["search"]
    assert search["space"] == {
        "loss.name": {"grid": ["ce", "dice", "dsc"]},
        "train.learning_rate": {"loguniform": [1e-5, 1e-3]},
    }
    assert search["conditional"]["dsc"]["space"] == {"loss.alpha": {"choice": [0.1, 0.5]}}
    assert search["tied"] == {"loss.beta": "1 - loss.alpha"} and search["max_concurrent"] == 2
    assert data["search"]["space"] == {"loss.name": {"grid": ["ce"]}}  # the input is not changed
    # a whole dimension, and a whole space, as YAML values
    whole = apply_overrides(data, ["search.space.loss.gamma={grid: [1, 2]}", "search.space={}"])
    assert whole["search"]["space"] == {}
    assert apply_overrides(data, ["search.space.loss.gamma={grid: [1, 2]}"])["search"]["space"] == {
        "loss.name": {"grid": ["ce"]},
        "loss.gamma": {"grid": [1, 2]},
    }


def test_flatten_and_round_trip(tmp_path: Path) -> None:
    config = read_config(write(tmp_path, MINIMAL))
    flat = flatten_config(config)
    assert flat["loss.name"] == "tversky"
    assert flat["loss.alpha"] == 0.3
    assert flat["train.seed"] == 7
    assert flat["data.variant"] == "original"
    assert "paper" not in flat and "search" not in flat
    again = read_config(write(tmp_path, config_to_yaml(config)))
    assert again == config


def test_extends_deep_merges_the_parent(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(MINIMAL)
    child = tmp_path / "child.yaml"
    child.write_text("extends: base.yaml\nname: child\ntrain: {epochs: 2}\nloss: {alpha: 0.4, beta: 0.6}\n")
    config = read_config(child)
    assert config.name == "child"
    assert config.train.epochs == 2 and config.train.seed == 7
    assert config.loss.name == "tversky" and config.loss.params == {"alpha": 0.4, "beta": 0.6}


def test_extends_cycle_and_bad_value(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("extends: b.yaml\nname: a\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\nname: b\n")
    with pytest.raises(ConfigError, match="extends itself"):
        read_yaml(tmp_path / "a.yaml")
    (tmp_path / "c.yaml").write_text("extends: [x]\nname: c\n")
    with pytest.raises(ConfigError, match="'extends' must be a file name"):
        read_yaml(tmp_path / "c.yaml")
    # a missing parent is named from the file whose `extends` names it: that is the line to fix
    (tmp_path / "d.yaml").write_text("extends: typo.yaml\nname: d\n")
    with pytest.raises(ConfigError, match=r"d\.yaml: config key 'extends': no such file .*typo\.yaml$"):
        read_yaml(tmp_path / "d.yaml")
