"""resample_frame on synthetic QQP-like pairs: counts, ratios, labels, uniqueness, determinism, errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from dicelab.data.resampling import VARIANTS, ResampleResult, resample_frame, write_variant
from dicelab.errors import ConfigError, DataError

P, N = 180, 420  # the `pairs` fixture: 600 pairs, 30% positive

EXPECTED = {  # variant -> (positives, negatives) of the output
    "original": (P, N),
    "+positive": (N, N),
    "+negative": (P, 2 * N - P),
    "-negative": (P, P),
    "+positive+negative": (252, 588),  # size 2N = 840 at the input's 30%
}


@pytest.fixture(scope="module")
def variants(pairs: pd.DataFrame) -> dict[str, ResampleResult]:
    return {variant: resample_frame(pairs, variant, seed=7) for variant in VARIANTS}


@pytest.mark.parametrize("variant", VARIANTS)
def test_counts_and_ratio_of_every_variant(variants: dict[str, ResampleResult], variant: str) -> None:
    result = variants[variant]
    positives, negatives = EXPECTED[variant]
    counts = result.frame["label"].value_counts().to_dict()
    assert counts == {"1": positives, "0": negatives}
    manifest = result.manifest
    assert manifest["output"]["counts"] == {"1": positives, "0": negatives}
    assert manifest["target"]["counts"] == {"1": positives, "0": negatives}
    assert manifest["output"]["positive_rate"] == round(positives / (positives + negatives), 6)
    assert manifest["input"]["counts"] == {"1": P, "0": N}
    added = positives + negatives - P - N if variant != "-negative" else 0
    assert manifest["output"]["augmented_rows"] == added == (result.frame["origin"] == "augmented").sum()
    assert manifest["method"] == ("none" if variant in ("original", "-negative") else "builtin")


def test_originals_are_kept_unchanged_and_in_order(pairs: pd.DataFrame, variants: dict) -> None:
    for variant in ("original", "+positive", "+negative", "+positive+negative"):
        frame = variants[variant].frame
        originals = frame[frame["origin"] == "original"]
        pd.testing.assert_frame_equal(originals[["text_a", "text_b", "label"]].reset_index(drop=True), pairs)
        assert (originals["template"] == -1).all()
    kept = variants["-negative"].frame
    assert (kept["origin"] == "original").all()
    merged = kept.merge(pairs.reset_index(), on=["text_a", "text_b", "label"], how="left")
    assert merged["index"].notna().all() and merged["index"].is_monotonic_increasing
    assert set(pairs.index[pairs["label"] == "1"]) <= set(merged["index"])  # every positive is kept


def _replacement(
    template: tuple[str, str], new: tuple[str, str], vocabulary: tuple[str, ...]
) -> tuple[str, str] | None:
    """The (mention, replacement) turning the template into the new pair, if one does."""
    for mention in vocabulary:
        if mention not in template[0] and mention not in template[1]:
            continue
        for replacement in vocabulary:
            if (template[0].replace(mention, replacement), template[1].replace(mention, replacement)) == new:
                return mention, replacement
    return None


@pytest.mark.parametrize("variant", ["+positive", "+negative", "+positive+negative"])
def test_new_pairs_replace_one_mention_consistently_and_keep_the_label(
    pairs: pd.DataFrame, variants: dict, variant: str, vocabulary: tuple[str, ...]
) -> None:
    frame = variants[variant].frame
    new = frame[frame["origin"] == "augmented"]
    assert len(new)
    for row in new.itertuples():
        template = pairs.iloc[row.template]
        assert row.label == template["label"]
        found = _replacement((template["text_a"], template["text_b"]), (row.text_a, row.text_b), vocabulary)
        assert found is not None, (template.tolist(), row)
        mention, replacement = found
        assert mention != replacement and replacement not in template["text_a"] + template["text_b"]
        if row.label == "1":  # a duplicate stays a duplicate: the mention changes in both questions
            assert mention in template["text_a"] and mention in template["text_b"]
            assert replacement in row.text_a and replacement in row.text_b


@pytest.mark.parametrize("variant", VARIANTS)
def test_no_new_pair_repeats_an_existing_one(pairs: pd.DataFrame, variants: dict, variant: str) -> None:
    frame = variants[variant].frame
    keys = [tuple(sorted(pair)) for pair in zip(frame["text_a"], frame["text_b"], strict=True)]
    assert len(set(keys)) == len(keys)  # the fixture's pairs are distinct, in either order
    new = frame[frame["origin"] == "augmented"]
    templates = pairs.iloc[new["template"]]
    same = (new["text_a"].to_numpy() == templates["text_a"].to_numpy()) & (
        new["text_b"].to_numpy() == templates["text_b"].to_numpy()
    )
    assert not same.any()


def test_same_seed_same_bytes_other_seed_other_pairs(pairs: pd.DataFrame, tmp_path: Path) -> None:
    first = write_variant(resample_frame(pairs, "+positive+negative", seed=3), tmp_path / "a")
    second = write_variant(resample_frame(pairs.copy(), "+positive+negative", seed=3), tmp_path / "b")
    other = write_variant(resample_frame(pairs, "+positive+negative", seed=4), tmp_path / "c")
    for name in ("train.parquet", "manifest.json"):
        assert (first / name).read_bytes() == (second / name).read_bytes()
    assert (first / "train.parquet").read_bytes() != (other / "train.parquet").read_bytes()
    assert resample_frame(pairs, "-negative", seed=3).frame.equals(
        resample_frame(pairs, "-negative", seed=3).frame
    )
    assert not resample_frame(pairs, "-negative", seed=3).frame.equals(
        resample_frame(pairs, "-negative", seed=4).frame
    )


def test_templates_without_a_replaceable_mention_are_skipped_and_counted(make_pairs: Callable) -> None:
    frame = make_pairs(400, 0.3, seed=1, no_mention_positives=30)
    manifest = resample_frame(frame, "+positive", seed=0).manifest
    stats = manifest["augmentation"]["1"]
    assert stats["templates"] == 120 and stats["skipped_no_mention"] == 30
    assert stats["created"] == stats["needed"] == 280 - 120
    assert stats["used"] <= stats["tried"] <= 90
    assert stats["skipped_no_new_pair"] == stats["tried"] - stats["used"]
    assert stats["rounds"] >= 2  # 160 new pairs from 90 usable templates: each used more than once


def test_running_out_of_new_pairs_is_a_data_error(make_pairs: Callable) -> None:
    frame = make_pairs(100, 0.3, seed=2, no_mention_positives=30)  # no positive has a mention
    with pytest.raises(DataError, match=r"needs 40 new positive pairs but only 0 could be made \(30 of 30"):
        resample_frame(frame, "+positive")


def test_extra_columns_are_kept_for_original_rows(pairs: pd.DataFrame) -> None:
    frame = pairs.assign(qid=range(len(pairs)))
    result = resample_frame(frame, "+positive").frame
    assert list(result.columns) == ["text_a", "text_b", "label", "qid", "origin", "template"]
    assert result.loc[result["origin"] == "original", "qid"].tolist() == list(range(len(pairs)))
    assert result.loc[result["origin"] == "augmented", "qid"].isna().all()


def test_another_positive_label(pairs: pd.DataFrame) -> None:
    frame = pairs.assign(label=pairs["label"].map({"1": "duplicate", "0": "different"}))
    result = resample_frame(frame, "+positive", positive_label="duplicate")
    assert result.frame["label"].value_counts().to_dict() == {"duplicate": N, "different": N}
    assert result.manifest["negative_label"] == "different"


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        (["1", "0", "2"], r"<data>: row 2: label '2' makes the labels non-binary"),
        (["0", "0", "0"], "no positives"),
        (["1", "1", "1"], "no negatives"),
    ],
)
def test_labels_must_be_binary(labels: list[str], message: str) -> None:
    frame = pd.DataFrame({"text_a": ["a", "b", "c"], "text_b": ["d", "e", "f"], "label": labels})
    with pytest.raises(DataError, match=message):
        resample_frame(frame, "-negative")


def test_bad_inputs_and_options(make_pairs: Callable) -> None:
    frame = make_pairs(50, 0.3)
    with pytest.raises(DataError, match="missing"):
        resample_frame(frame.drop(columns="text_b"), "+positive")
    with pytest.raises(DataError, match="resampled variant"):
        resample_frame(resample_frame(frame, "original").frame, "+positive")
    with pytest.raises(ConfigError, match="unknown variant"):
        resample_frame(frame, "+positives")
    with pytest.raises(ConfigError, match="positive_rate"):
        resample_frame(frame, "+positive", positive_rate=1.5)
    with pytest.raises(ConfigError, match="can only remove negatives"):
        resample_frame(frame, "-negative", size=100)
