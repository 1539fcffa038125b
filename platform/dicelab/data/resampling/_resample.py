"""Build a Table 8 variant of a pairs training set: keep, drop or add examples of each class."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dicelab.data.hashing import frame_digest
from dicelab.data.provenance import origin_of, where
from dicelab.data.resampling._augment import Augmenter, MentionIndex, NewPairs, pair_key
from dicelab.data.resampling._mentions import Extractor, make_extractor
from dicelab.data.resampling._presets import Preset, Target, check_options, get_preset, resolve_target
from dicelab.errors import ConfigError, DataError

REQUIRED_COLUMNS = ("text_a", "text_b", "label")
ADDED_COLUMNS = ("origin", "template")  # "original" | "augmented"; the template's input row (-1: none)
_STREAMS = {"drop": 0, "positive": 1, "negative": 2}  # independent random streams per operation


@dataclass(frozen=True)
class ResampleResult:
    frame: pd.DataFrame  # text_a, text_b, label, the input's other columns, origin, template
    manifest: dict[str, Any]


@dataclass(frozen=True)
class Plan:
    """Everything decided before any work: the target counts, the method and the cache key."""

    frame: pd.DataFrame
    preset: Preset
    target: Target
    labels: np.ndarray  # str labels of the input rows
    positive_label: str
    negative_label: str
    positives: int  # in the input
    negatives: int
    size: int | None
    positive_rate: float | None
    seed: int
    extractor: Extractor | None  # None when the variant adds nothing
    input_fingerprint: str

    @property
    def method(self) -> str:
        return self.extractor.name if self.extractor is not None else "none"

    @property
    def fingerprint(self) -> str:
        """Identifies the variant's content: the cache key of `materialize_variant`."""
        from dicelab import __version__

        identity = {
            "input": self.input_fingerprint,
            "variant": self.preset.name,
            "size": self.size,
            "positive_rate": self.positive_rate,
            "seed": self.seed,
            "positive_label": self.positive_label,
            "method": self.method,
            "dicelab": __version__,
        }
        return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:32]


def plan_resample(
    frame: pd.DataFrame,
    variant: str,
    *,
    size: int | None = None,
    positive_rate: float | None = None,
    seed: int = 0,
    positive_label: str = "1",
    extractor: str = "auto",
) -> Plan:
    preset = get_preset(variant)
    check_options(size, positive_rate)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer (got {seed!r})")
    labels, negative_label = _binary_labels(frame, positive_label)
    positives = int((labels == positive_label).sum())
    negatives = len(labels) - positives
    target = resolve_target(preset, positives, negatives, size, positive_rate)
    adds = target.positives > positives or target.negatives > negatives
    return Plan(
        frame=frame,
        preset=preset,
        target=target,
        labels=labels,
        positive_label=positive_label,
        negative_label=negative_label,
        positives=positives,
        negatives=negatives,
        size=size,
        positive_rate=positive_rate,
        seed=seed,
        extractor=make_extractor(extractor) if adds else None,
        input_fingerprint=_content_fingerprint(frame, labels),
    )


def resample_frame(
    frame: pd.DataFrame,
    variant: str,
    *,
    size: int | None = None,
    positive_rate: float | None = None,
    seed: int = 0,
    positive_label: str = "1",
    extractor: str = "auto",
) -> ResampleResult:
    """The `variant` of a pairs frame (columns text_a, text_b, label; other columns are kept).

    Output rows: the kept input rows in input order (origin "original", template -1), then the new
    positives, then the new negatives (origin "augmented", template = the input row they were made from;
    the input's other columns are missing there). Same input, options and seed: same output.
    """
    plan = plan_resample(
        frame,
        variant,
        size=size,
        positive_rate=positive_rate,
        seed=seed,
        positive_label=positive_label,
        extractor=extractor,
    )
    return execute(plan)


def execute(plan: Plan) -> ResampleResult:
    frame, target = plan.frame, plan.target
    is_positive = plan.labels == plan.positive_label
    kept = np.sort(
        np.concatenate(
            [
                _sample(np.flatnonzero(is_positive), target.positives, plan, "positive"),
                _sample(np.flatnonzero(~is_positive), target.negatives, plan, "negative"),
            ]
        )
    )
    originals = frame.iloc[kept].reset_index(drop=True)
    originals["label"] = plan.labels[kept]
    originals["origin"] = "original"
    originals["template"] = np.int64(-1)

    added: dict[str, NewPairs] = {}
    need = {"positive": target.positives - plan.positives, "negative": target.negatives - plan.negatives}
    if plan.extractor is not None:  # the plan has one exactly when a class grows
        added = _augment(plan, plan.extractor, need, is_positive)
    parts = [originals]
    for name, label in (("positive", plan.positive_label), ("negative", plan.negative_label)):
        if name in added:
            parts.append(_new_rows(added[name], label))
    output = pd.concat(parts, ignore_index=True) if len(parts) > 1 else originals
    return ResampleResult(output, _manifest(plan, output, len(frame) - len(kept), added))


def _sample(rows: np.ndarray, want: int, plan: Plan, stream: str) -> np.ndarray:
    """All of `rows`, or a random `want` of them when the preset drops some."""
    if want >= len(rows):
        return rows
    rng = np.random.default_rng([plan.seed, _STREAMS["drop"], _STREAMS[stream]])
    return np.sort(rng.choice(rows, size=want, replace=False))


def _augment(
    plan: Plan, extractor: Extractor, need: dict[str, int], is_positive: np.ndarray
) -> dict[str, NewPairs]:
    frame = plan.frame
    texts_a: list[str] = frame["text_a"].astype(str).tolist()
    texts_b: list[str | None] = frame["text_b"].astype(object).where(frame["text_b"].notna(), None).tolist()
    mentions = extractor.extract(texts_a + [text or "" for text in texts_b])
    augmenter = Augmenter(MentionIndex(len(frame), mentions), texts_a, texts_b, _pair_keys(texts_a, texts_b))
    added: dict[str, NewPairs] = {}
    for name, templates in (("positive", is_positive), ("negative", ~is_positive)):
        if need[name] <= 0:
            continue
        rng = np.random.default_rng([plan.seed, _STREAMS[name]])
        # Duplicates stay duplicates only if both questions change the same way (see _augment).
        new = augmenter.augment(templates, need[name], shared=name == "positive", rng=rng)
        if new.stats.created < need[name]:
            stats = new.stats
            raise DataError(
                f"variant {plan.preset.name!r}: needs {need[name]} new {name} pairs but only "
                f"{stats.created} could be made ({stats.skipped_no_mention} of {stats.templates} {name} "
                f"templates have no replaceable mention, {stats.skipped_no_new_pair} gave no new pair); "
                "ask for a smaller size or positive_rate"
            )
        added[name] = new
    return added


def _pair_keys(texts_a: list[str], texts_b: list[str | None]) -> set[tuple[str, str]]:
    return {pair_key(text_a, text_b) for text_a, text_b in zip(texts_a, texts_b, strict=True)}


def _new_rows(new: NewPairs, label: str) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "text_a": new.text_a,
            "text_b": new.text_b,
            "label": label,
            "origin": "augmented",
            "template": np.asarray(new.template, dtype=np.int64),
        }
    )


def _binary_labels(frame: pd.DataFrame, positive_label: str) -> tuple[np.ndarray, str]:
    """The labels as strings, and the negative label; the input must have exactly two labels."""
    origin = origin_of(frame)
    missing = [column for column in REQUIRED_COLUMNS if column not in frame.columns]
    if missing:
        raise DataError(
            f"{origin}: pairs data needs columns {', '.join(REQUIRED_COLUMNS)}; missing {missing}"
        )
    clashing = [column for column in ADDED_COLUMNS if column in frame.columns]
    if clashing:
        raise DataError(f"{origin}: already has column(s) {', '.join(clashing)} (is it a resampled variant?)")
    for column in ("text_a", "label"):
        empty = np.flatnonzero(frame[column].isna().to_numpy())
        if len(empty):
            raise DataError(f"{where(frame, frame.index[empty[0]])}: {column} is missing")
    labels = frame["label"].astype(str).to_numpy(dtype=object)
    if positive_label not in labels:
        raise DataError(f"{origin}: no positives (no row has the positive label {positive_label!r})")
    others = labels[labels != positive_label]
    if not len(others):
        raise DataError(f"{origin}: no negatives (every row has the positive label {positive_label!r})")
    third = np.flatnonzero((labels != positive_label) & (labels != others[0]))
    if len(third):
        raise DataError(
            f"{where(frame, frame.index[third[0]])}: label {labels[third[0]]!r} makes the labels non-binary "
            f"(resampling needs two labels: {positive_label!r} and {others[0]!r})"
        )
    return labels, str(others[0])


def _content_fingerprint(frame: pd.DataFrame, labels: np.ndarray) -> str:
    """sha256 of the rows' content: canonical columns as plain strings (labels as str), so the same pairs
    give the same fingerprint whether they came as pandas "str" or object columns; the index is ignored."""
    canonical = frame.assign(label=labels).astype({column: object for column in REQUIRED_COLUMNS})
    return frame_digest(canonical)


def _counts(labels: pd.Series | np.ndarray, plan: Plan) -> dict[str, int]:
    labels = np.asarray(labels, dtype=object)
    positives = int((labels == plan.positive_label).sum())
    return {plan.positive_label: positives, plan.negative_label: len(labels) - positives}


def _manifest(plan: Plan, output: pd.DataFrame, dropped: int, added: dict[str, NewPairs]) -> dict[str, Any]:
    from dicelab import __version__

    output_counts = _counts(output["label"], plan)
    return {
        "variant": plan.preset.name,
        "fingerprint": plan.fingerprint,
        "seed": plan.seed,
        "positive_label": plan.positive_label,
        "negative_label": plan.negative_label,
        "input": {
            "fingerprint": plan.input_fingerprint,
            "rows": len(plan.labels),
            "counts": _counts(plan.labels, plan),
            "positive_rate": round(plan.positives / len(plan.labels), 6),
        },
        "target": {
            "size": plan.target.size,
            "positive_rate": round(plan.target.positive_rate, 6),
            "counts": {
                plan.positive_label: plan.target.positives,
                plan.negative_label: plan.target.negatives,
            },
            "derived": plan.target.derived,
            "requested": {"size": plan.size, "positive_rate": plan.positive_rate},
        },
        "output": {
            "rows": len(output),
            "counts": output_counts,
            "positive_rate": round(output_counts[plan.positive_label] / len(output), 6),
            "original_rows": len(output) - sum(len(new.template) for new in added.values()),
            "augmented_rows": sum(len(new.template) for new in added.values()),
            "dropped_rows": dropped,
        },
        "operations": {"positives": plan.preset.positives, "negatives": plan.preset.negatives},
        "method": plan.method,
        "augmentation": {
            (plan.positive_label if name == "positive" else plan.negative_label): {
                "replaceable_mention": "in both texts" if name == "positive" else "in either text",
                **new.stats.as_dict(),
            }
            for name, new in added.items()
        },
        "dicelab_version": __version__,
    }
