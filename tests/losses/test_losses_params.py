"""Bad loss parameters raise ValueError (ConfigError) with one line that starts with the parameter's name,
both from `build_loss` and, before any data is loaded, from `validate_loss_params`."""

from __future__ import annotations

import math

import pytest
import torch

from dicelab.errors import ConfigError
from dicelab.losses import build_loss, validate_loss_params, wce_class_weights

BAD_PARAMS = [
    ("focal", {"gamma": -1}, "gamma", r"gamma must be in \[0, inf\), got -1"),
    ("focal", {"gamma": "2"}, "gamma", r"gamma must be a finite number, got '2'"),
    ("focal", {"alpha": 1.5}, "alpha", r"alpha must be in \[0, 1\], got 1.5"),
    ("focal", {"alpha": [0.5, -0.1]}, "alpha", r"alpha must be in \[0, inf\), got -0.1 \(entry 1\)"),
    ("focal", {"alpha": "high"}, "alpha", r"alpha must be a list of at least 2 numbers"),
    ("tversky", {"alpha": -0.1}, "alpha", r"alpha must be in \[0, 1\], got -0.1"),
    ("tversky", {"alpha": 1.5}, "alpha", r"alpha must be in \[0, 1\], got 1.5"),
    ("tversky", {"beta": -2}, "beta", r"beta must be in \[0, 1\], got -2"),
    ("tversky", {"alpha": 0, "beta": 0}, "alpha", r"alpha \+ beta must be > 0"),
    ("dsc", {"alpha": -0.5}, "alpha", r"alpha must be in \[0, inf\), got -0.5"),
    ("dsc", {"alpha": True}, "alpha", r"alpha must be a finite number, got True"),
    ("dice", {"smooth": -1e-3}, "smooth", r"smooth must be in \[0, inf\), got -0.001"),
    ("dice", {"smooth": math.nan}, "smooth", r"smooth must be a finite number, got nan"),
    ("dice", {"level": "token"}, "level", r"level must be one of example, batch, got 'token'"),
    ("dsc", {"class_reduction": "max"}, "class_reduction", r"class_reduction must be one of mean, sum"),
    (
        "dice",
        {"square_denominator": "yes"},
        "square_denominator",
        r"square_denominator must be true or false",
    ),
    ("ce", {"ignore_index": -100.5}, "ignore_index", r"ignore_index must be an integer, got -100.5"),
    ("wce", {"K": 0, "class_counts": [5, 5]}, "K", r"K must be in \(0, inf\), got 0"),
    (
        "wce",
        {"K": 0.5, "class_counts": [90, 10]},
        "K",
        r"K must make every class weight .* class 0 .* use K > 0\.8889",
    ),
    (
        "wce",
        {"class_counts": [5, 0]},
        "class_counts",
        r"class_counts must be in \(0, inf\), got 0 \(entry 1\)",
    ),
    ("wce", {"class_counts": [5]}, "class_counts", r"class_counts must be a list of at least 2 numbers"),
    ("wce", {"K": 2.0}, "class_counts", r"class_counts is required by loss 'wce'"),
    (
        "dice",
        {"gamma": 1.0},
        "gamma",
        r"gamma is not a parameter of loss 'dice' \(allowed: class_reduction, ",
    ),
]


@pytest.mark.parametrize(("name", "params", "key", "message"), BAD_PARAMS)
def test_build_loss_names_the_bad_parameter(name, params, key, message) -> None:
    with pytest.raises(ConfigError, match=f"^{message}") as error:
        build_loss(name, **params)
    assert isinstance(error.value, ValueError)
    assert "\n" not in str(error.value)
    assert str(error.value).split(" ", 1)[0] == key


@pytest.mark.parametrize(("name", "params", "key", "message"), BAD_PARAMS)
def test_config_validation_names_the_same_parameter(name, params, key, message) -> None:
    if name == "wce" and "class_counts" not in params:  # the trainer supplies the counts later
        validate_loss_params(name, params)
        return
    with pytest.raises(ValueError, match=f"^{message}"):
        validate_loss_params(name, params)


def test_unknown_loss_name() -> None:
    expected = "unknown loss 'foo' (allowed: ce, dice, dsc, focal, tversky, wce)"
    for check in (lambda: build_loss("foo"), lambda: validate_loss_params("foo", {})):
        with pytest.raises(ConfigError) as error:
            check()
        assert str(error.value) == expected


def test_wce_at_config_time_checks_k_only() -> None:
    validate_loss_params("wce", {"K": 0.1})  # would be too small for some counts: checked once they are known
    for bad in (0, -1.0, "1"):
        with pytest.raises(ValueError, match=r"^K must"):
            validate_loss_params("wce", {"K": bad})
    validate_loss_params("wce", {"K": 2.0, "class_counts": [80, 20]})
    with pytest.raises(ValueError, match=r"^K must make every class weight"):
        validate_loss_params("wce", {"K": 0.1, "class_counts": [80, 20]})


def test_good_configs_validate_and_build() -> None:
    configs = {
        "ce": {},
        "wce": {"K": 1.0, "class_counts": torch.tensor([30, 10, 5])},
        "focal": {"gamma": 0.0, "alpha": [1.0, 2.0, 0.5]},
        "dice": {"smooth": 0, "square_denominator": False, "level": "batch", "class_reduction": "sum"},
        "tversky": {"alpha": 0.0, "beta": 1.0},
        "dsc": {"alpha": 0.0, "ignore_index": 0},
    }
    for name, params in configs.items():
        validate_loss_params(name, params)
        assert build_loss(name, **params) is not None


def test_class_counts_must_match_the_number_of_classes() -> None:
    loss = build_loss("wce", class_counts=[3, 1])
    with pytest.raises(ValueError, match=r"^class_weights has 2 entries but the logits have 3 classes"):
        loss(torch.zeros(2, 3), torch.tensor([0, 2]))


def test_wce_class_weights_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match=r"^K must make every class weight"):
        wce_class_weights([10, 90], K=0.8)
    with pytest.raises(ValueError, match=r"^class_counts must"):
        wce_class_weights([[1, 2], [3, 4]], K=1.0)
