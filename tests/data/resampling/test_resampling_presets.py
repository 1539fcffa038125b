"""Targets of the Table 8 presets, from the input's own counts, and their overrides."""

from __future__ import annotations

import pytest

from dicelab.data.resampling import PRESETS, VARIANTS, resolve_target
from dicelab.data.resampling._presets import get_preset
from dicelab.errors import ConfigError

# The paper's full QQP training set: 363,871 examples, 37% positive.
QQP_P, QQP_N = 134_632, 229_239


def test_variant_names_are_the_papers() -> None:
    assert VARIANTS == ("original", "+positive", "+negative", "-negative", "+positive+negative")
    assert tuple(PRESETS) == VARIANTS


@pytest.mark.parametrize(
    ("variant", "positives", "negatives"),
    [
        ("original", QQP_P, QQP_N),
        ("+positive", QQP_N, QQP_N),  # 458,478 ex., 50% (paper: 458,477, 50%)
        ("+negative", QQP_P, 2 * QQP_N - QQP_P),  # 458,478 ex., 29.4% (paper: 21%, see README)
        ("-negative", QQP_P, QQP_P),  # 269,264 ex., 50% (paper: 269,165)
        ("+positive+negative", 169_637, 288_841),  # 458,478 ex. at the input's 37%
    ],
)
def test_default_targets_on_the_papers_qqp_counts(variant: str, positives: int, negatives: int) -> None:
    target = resolve_target(PRESETS[variant], QQP_P, QQP_N)
    assert (target.positives, target.negatives) == (positives, negatives)
    assert target.derived.startswith("preset:")


def test_plus_negative_adds_as_many_pairs_as_plus_positive() -> None:
    plus_positive = resolve_target(PRESETS["+positive"], QQP_P, QQP_N)
    plus_negative = resolve_target(PRESETS["+negative"], QQP_P, QQP_N)
    assert plus_positive.size == plus_negative.size == 458_478
    assert plus_negative.positive_rate == pytest.approx(0.2936, abs=1e-4)


def test_size_override_keeps_the_class_the_preset_keeps() -> None:
    target = resolve_target(PRESETS["+positive"], 300, 700, size=1200)
    assert (target.positives, target.negatives) == (500, 700)
    target = resolve_target(PRESETS["-negative"], 300, 700, size=800)
    assert (target.positives, target.negatives) == (300, 500)


def test_positive_rate_override() -> None:
    target = resolve_target(PRESETS["+positive"], 300, 700, positive_rate=0.4)
    assert (target.positives, target.negatives) == (467, 700)
    target = resolve_target(PRESETS["+positive+negative"], 300, 700, positive_rate=0.5)
    assert (target.positives, target.negatives) == (700, 700)  # size 2N from the preset
    target = resolve_target(PRESETS["+positive+negative"], 300, 700, size=1500, positive_rate=0.4)
    assert (target.positives, target.negatives) == (600, 900)


@pytest.mark.parametrize(
    ("variant", "options", "message"),
    [
        ("-negative", {"size": 1200}, "can only remove negatives"),
        ("+positive", {"positive_rate": 0.2}, "can only add positives"),
        ("original", {"size": 1200}, "keeps the 700 negatives"),
        ("+negative", {"size": 250}, "the target has -50 negatives"),
        ("+positive+negative", {"size": 900}, "can only add positives"),
    ],
)
def test_unreachable_targets_are_config_errors(variant: str, options: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve_target(PRESETS[variant], 300, 700, **options)


def test_defaults_need_positives_to_be_the_minority() -> None:
    with pytest.raises(ConfigError, match=r"fewer positives than negatives.*67\.4% positive"):
        resolve_target(PRESETS["+positive"], 2474, 1194)
    assert resolve_target(PRESETS["+negative"], 2474, 1194, positive_rate=0.5).negatives == 2474


@pytest.mark.parametrize(
    "options", [{"positive_rate": 0.0}, {"positive_rate": 1.0}, {"positive_rate": -0.2}, {"size": 0}]
)
def test_bad_options(options: dict) -> None:
    with pytest.raises(ConfigError, match=r"size|positive_rate"):
        resolve_target(PRESETS["+positive"], 300, 700, **options)


def test_unknown_variant_lists_the_allowed_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown variant 'positive' \(allowed: original, \+positive"):
        get_preset("positive")
