"""Every schema error of a config at once: one error is one line; several are a count, then a line per key."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dicelab.cli import main
from dicelab.config import ExperimentConfig, parse_config, read_config
from dicelab.config.yaml_loader import load_yaml
from dicelab.errors import ConfigError
from dicelab.experiment import experiment_from_dict
from dicelab.sweeps.space import plan_sweep


def error_lines(data: dict, source: str = "x.yaml") -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(data, source)
    return str(caught.value).splitlines()


def test_one_error_is_one_line() -> None:
    assert error_lines({"name": "x", "train": {"epochs": 0}}) == [
        "x.yaml: config key 'train.epochs': Input should be greater than or equal to 1 (got 0)"
    ]


def test_every_error_is_reported_with_its_key() -> None:
    data = {
        "train": {"epochs": 0, "lr": 0.1, "batching": "sorted"},
        "model": {"dropout": 1.5},
        "data": {"max_length": "long"},
    }
    header, *lines = error_lines(data)
    assert header == "x.yaml: 6 config errors:"
    keys = [line.split("'")[1] for line in lines]
    # in the schema's order: name, data, model, train
    assert keys == ["name", "data.max_length", "model.dropout", "train.epochs", "train.batching", "train.lr"]
    assert all(line.startswith("  config key '") for line in lines)
    assert "'name' is required" in lines[0]
    assert "'train.lr' is not allowed (allowed: " in lines[5] and "learning_rate" in lines[5]
    assert "(got 'sorted')" in lines[4]


def test_a_value_matching_no_member_of_a_union_is_one_line_under_the_users_key() -> None:
    # data.columns values are `str | int`: pydantic reports [1] once per member, under "...a.str", "...a.int".
    lines = error_lines({"name": "x", "data": {"columns": {"text_a": [1]}}})
    assert lines == [
        "x.yaml: config key 'data.columns.text_a': Input should be a valid string; "
        "Input should be a valid integer (got [1])"
    ]


def test_a_long_value_is_cut_short_on_its_line() -> None:
    (line,) = error_lines({"name": "x", "data": {"max_length": "y" * 500}})
    assert len(line) < 200 and line.endswith("...)")


def test_search_section_errors_all_at_once_with_their_allowed_keys() -> None:
    search = {
        "scheduler": {"name": "hyperband"},
        "space": {"loss.alpha": {"grid": [0.1], "int": [1, 2]}, "loss.gamma": {"grdi": [1.0]}},
        "max_failures": -1,
    }
    with pytest.raises(ConfigError) as caught:
        plan_sweep(
            experiment_from_dict({"name": "x", "loss": {"name": "focal"}, "search": search}, "x.yaml"),
            "x.yaml",
        )
    header, *lines = str(caught.value).splitlines()
    assert header == "x.yaml: 4 config errors:"
    text = "\n".join(lines)
    assert "config key 'search.scheduler.name'" in text and "'hyperband'" in text
    assert "config key 'search.space.loss.alpha'" in text and "exactly one of" in text
    # the allowed keys of a dimension, by the names a config uses ("int", not the field's "int_range")
    allowed = "(allowed: choice, grid, int, loguniform, uniform)"
    assert f"config key 'search.space.loss.gamma.grdi' is not allowed {allowed}" in text
    assert "config key 'search.max_failures'" in text


def test_the_registry_check_runs_after_a_clean_schema(tmp_path: Path) -> None:
    # the schema's errors come first and all together; a bad loss name alone is the registry's one line
    with pytest.raises(ConfigError, match=r"^x.yaml: config key 'loss.name': .*unknown") as caught:
        experiment_from_dict({"name": "x", "loss": {"name": "hinge"}}, "x.yaml")
    assert "\n" not in str(caught.value)


def test_overrides_errors_are_reported_with_the_files(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("name: c\ntrain: {epochs: 0}\n")
    with pytest.raises(ConfigError) as caught:
        read_config(path, ["train.batch_size=-1", "model.dropuot=0.2"])
    header, *lines = str(caught.value).splitlines()
    assert header == f"{path}: 3 config errors:"
    assert [line.split("'")[1] for line in lines] == ["model.dropuot", "train.epochs", "train.batch_size"]


@pytest.fixture
def validate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """`dicelab validate` of configs given as name=YAML text, in that order: (exit code, stdout, stderr,
    the configs' paths by name)."""
    monkeypatch.setattr(sys, "argv", sys.argv[:1])  # main() sets sys.argv: restored after the test

    def run(**configs: str) -> tuple[int, str, str, dict[str, Path]]:
        paths = {name: tmp_path / f"{name}.yaml" for name in configs}
        for name, text in configs.items():
            paths[name].write_text(text)
        code = main(["validate", *map(str, paths.values())])
        out, err = capsys.readouterr()
        return code, out, err, paths

    return run


def test_validate_prints_every_error_of_every_config_and_exits_2(validate) -> None:
    code, out, err, paths = validate(
        bad="name: bad\ntrain: {epochs: 0, learning_rate: -1e-4}\n",
        worse="name: worse\nloss: {name: hinge}\n",
        good="name: good\ntrain: {learning_rate: 3e-5}\n",
    )
    assert code == 2
    assert err.splitlines() == [
        f"dicelab validate: error: {paths['bad']}: 2 config errors:",
        "  config key 'train.epochs': Input should be greater than or equal to 1 (got 0)",
        "  config key 'train.learning_rate': Input should be greater than 0 (got -0.0001)",
        f"dicelab validate: error: {paths['worse']}: config key 'loss.name': unknown loss 'hinge' "
        + err.split("unknown loss 'hinge' ", 1)[1].splitlines()[0],
    ]
    assert out.startswith(f"ok  {paths['good']}  (trial 'good'")


def test_validate_names_the_losses_a_sweep_runs(validate) -> None:
    """Not the base config's loss alone: a sweep over losses says which it runs."""
    code, out, _, paths = validate(
        losses="name: losses\nsearch: {space: {loss.name: {grid: [ce, dice, dsc]}}}\n",
        alpha="name: alpha\nloss: {name: dsc}\nsearch: {space: {loss.alpha: {grid: [0.1, 0.5]}}}\n",
    )
    assert code == 0
    assert out.splitlines() == [
        f"ok  {paths['losses']}  (sweep of 3 trials 'losses': pair_classification, losses ce, dice, dsc)",
        f"ok  {paths['alpha']}  (sweep of 2 trials 'alpha': pair_classification, loss dsc)",
    ]


def test_a_label_written_as_a_number_is_its_text() -> None:
    # data files hold labels as text ("0", "1"): `positive_label: 1` is the label "1", not a type error
    config = read_config_text("data: {labels: [0, 1], positive_label: 1}")
    assert config.data.labels == ["0", "1"] and config.data.positive_label == "1"


@pytest.mark.parametrize(
    "text", ["data: {positive_label: yes}", "data: {labels: [no, yes], positive_label: 'yes'}"]
)
def test_a_bare_yes_or_no_label_says_to_quote_it_in_one_line(text: str) -> None:
    # YAML 1.1 reads a bare yes / no as a boolean: the word is gone, so the error says how to keep it
    with pytest.raises(ConfigError) as caught:
        read_config_text(text)
    message = str(caught.value)
    assert "config key 'data." in message and "quote the label" in message
    assert "Value error" not in message  # the validator's sentence, without pydantic's prefix


def read_config_text(text: str) -> ExperimentConfig:
    return parse_config({"name": "x", **load_yaml(text)})
