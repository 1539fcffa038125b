"""Dev-set metrics of the three task families. Every score is a fraction in [0, 1] (not a percentage).

Classification scores come from scikit-learn, entity scores from seqeval, SQuAD scores follow the official
evaluation scripts. Zero-division convention (scikit-learn's zero_division=0): precision is 0 when nothing
was predicted positive, recall is 0 when there is no gold positive, F1 is 0 when precision + recall is 0.
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Sequence

import numpy as np

PerClass = dict[str, dict[str, float]]


def classification_metrics(
    gold: Sequence[int] | np.ndarray,
    predicted: Sequence[int] | np.ndarray,
    label_names: Sequence[str],
    probabilities: np.ndarray | None = None,
) -> tuple[dict[str, float], PerClass]:
    """Sentence / pair classification scores and a per-class (one-vs-rest) report.

    Binary (two labels, the positive one last): `f1`, `precision`, `recall` of the positive class, `accuracy`.
    Multi-class: `accuracy` and `macro_f1`, the unweighted mean F1 over the classes present in the gold or
    predicted labels (scikit-learn's default label set). With `probabilities` (N, C), one row per example:
    `log_loss`, the dev set's cross entropy whatever loss the model trained with (lower is better).
    """
    # scikit-learn and seqeval where a score is computed: a sweep's driver imports the tasks without scoring
    from sklearn.metrics import accuracy_score, f1_score, log_loss, precision_recall_fscore_support

    gold, predicted = np.asarray(gold, dtype=np.int64), np.asarray(predicted, dtype=np.int64)
    if len(gold) == 0:
        per_class = {name: {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0} for name in label_names}
        zero = {"f1": 0.0, "precision": 0.0, "recall": 0.0} if len(label_names) == 2 else {"macro_f1": 0.0}
        return {**zero, "accuracy": 0.0}, per_class
    precision, recall, f1, support = precision_recall_fscore_support(
        gold, predicted, labels=np.arange(len(label_names)), zero_division=0
    )
    per_class = {
        name: {
            "precision": float(precision[k]),
            "recall": float(recall[k]),
            "f1": float(f1[k]),
            "support": int(support[k]),
        }
        for k, name in enumerate(label_names)
    }
    accuracy = float(accuracy_score(gold, predicted))
    losses = (
        {
            "log_loss": float(
                log_loss(gold, _rows_summing_to_one(probabilities), labels=range(len(label_names)))
            )
        }
        if probabilities is not None
        else {}
    )
    if len(label_names) == 2:
        positive = {"f1": float(f1[1]), "precision": float(precision[1]), "recall": float(recall[1])}
        return {**positive, "accuracy": accuracy, **losses}, per_class
    # without `labels`, scikit-learn averages over the classes present in the gold or predicted labels
    macro_f1 = float(f1_score(gold, predicted, average="macro", zero_division=0))
    return {"accuracy": accuracy, "macro_f1": macro_f1, **losses}, per_class


def _rows_summing_to_one(probabilities: np.ndarray) -> np.ndarray:
    """float32 softmax rows sum to 1 within rounding only; scikit-learn's log_loss wants them exact."""
    rows = np.asarray(probabilities, dtype=np.float64)
    return rows / rows.sum(axis=1, keepdims=True)


def tagging_metrics(gold: list[list[str]], predicted: list[list[str]]) -> tuple[dict[str, float], PerClass]:
    """Span-level micro `precision`, `recall`, `f1` over IOB2 tag sequences, and a per-entity-type report.

    seqeval's default mode, which scores like CoNLL's conlleval script (the paper's NER F1): an I-X that does
    not continue an X entity starts a new one, rather than being discarded as in seqeval's strict mode.
    """
    from seqeval import metrics as seqeval

    metrics = {
        "f1": float(seqeval.f1_score(gold, predicted, zero_division=0)),
        "precision": float(seqeval.precision_score(gold, predicted, zero_division=0)),
        "recall": float(seqeval.recall_score(gold, predicted, zero_division=0)),
    }
    if all(tag == "O" for tags in (*gold, *predicted) for tag in tags):
        return metrics, {}  # no entity anywhere (seqeval's report would average an empty list)
    report = seqeval.classification_report(gold, predicted, output_dict=True, zero_division=0)
    per_class = {
        entity: {
            "precision": float(scores["precision"]),
            "recall": float(scores["recall"]),
            "f1": float(scores["f1-score"]),
            "support": int(scores["support"]),
        }
        for entity, scores in report.items()
        if not entity.endswith(" avg")
    }
    return metrics, per_class


def normalize_answer(text: str) -> str:
    """The official SQuAD normalisation: lower case, drop punctuation and articles, squeeze whitespace."""
    text = "".join(character for character in text.lower() if character not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold_answers: Sequence[str], squad_v2: bool = True) -> float:
    """1.0 when the normalised prediction equals a normalised gold answer ("" for unanswerable questions).

    squad_v2=False scores as the SQuAD 1.1 script: gold answers that normalise to nothing still count.
    """
    golds = _golds(gold_answers, squad_v2)
    return max(float(normalize_answer(prediction) == normalize_answer(gold)) for gold in golds)


def token_f1(prediction: str, gold_answers: Sequence[str], squad_v2: bool = True) -> float:
    """Best bag-of-tokens F1 against the gold answers.

    An empty side scores 1 only if both are empty (SQuAD 2.0); the SQuAD 1.1 script (squad_v2=False) scores
    any pair without a common token 0, two empty ones included.
    """
    predicted = normalize_answer(prediction).split()
    golds = _golds(gold_answers, squad_v2)
    return max(_token_f1(predicted, normalize_answer(gold).split(), squad_v2) for gold in golds)


def squad_metrics(
    predictions: Sequence[str], gold_answers: Sequence[Sequence[str]], with_negative: bool
) -> dict[str, float]:
    """Mean `em` and `f1` over questions, scored as the official SQuAD 1.1 script (with_negative=False) or
    the SQuAD 2.0 one (with_negative=True).

    with_negative (SQuAD 2.0) adds `has_ans_em` / `has_ans_f1` and `no_ans_em` / `no_ans_f1` over the
    answerable and unanswerable questions (each only when the dev set has some).
    """
    pairs = list(zip(predictions, gold_answers, strict=True))
    em = np.array([exact_match(p, g, with_negative) for p, g in pairs])
    f1 = np.array([token_f1(p, g, with_negative) for p, g in pairs])
    metrics = {"em": _mean(em), "f1": _mean(f1)}
    if with_negative:
        answerable = np.array([len(g) > 0 for g in gold_answers], dtype=bool)
        for prefix, subset in (("has_ans", answerable), ("no_ans", ~answerable)):
            if subset.any():
                metrics[f"{prefix}_em"] = _mean(em[subset])
                metrics[f"{prefix}_f1"] = _mean(f1[subset])
    return metrics


_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def _golds(gold_answers: Sequence[str], squad_v2: bool) -> list[str]:
    # As the official SQuAD 2.0 script: answers that normalise to nothing ("the") do not count, and a question
    # without gold answers (unanswerable) is only answered right by the empty string.
    if not squad_v2:
        return list(gold_answers) or [""]
    return [gold for gold in gold_answers if normalize_answer(gold)] or [""]


def _token_f1(predicted: list[str], gold: list[str], squad_v2: bool) -> float:
    if squad_v2 and (not predicted or not gold):
        return float(predicted == gold)
    common = sum((collections.Counter(predicted) & collections.Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if len(values) else 0.0


# Expected calibration error: equal-width bins over [0, 1] (scikit-learn calibration_curve's "uniform"
# strategy), 15 of them as Guo et al. (2017, "On Calibration of Modern Neural Networks").
CALIBRATION_BINS = 15


def tuned_threshold(gold: Sequence[int] | np.ndarray, probability: Sequence[float] | np.ndarray) -> float:
    """The decision threshold on P(positive) that maximises F1 on (`gold`, `probability`): the point of
    scikit-learn's precision_recall_curve with the highest F1 (the lowest such threshold on a tie). A point
    predicts positive when probability >= threshold. 0.5 when `gold` has no positive (F1 is 0 everywhere)."""
    from sklearn.metrics import precision_recall_curve

    gold, probability = np.asarray(gold, dtype=np.int64), np.asarray(probability, dtype=np.float64)
    if not gold.any():
        return 0.5
    precision, recall, thresholds = precision_recall_curve(gold, probability)
    # the last point (precision 1, recall 0) has no threshold
    precision, recall = precision[:-1], recall[:-1]
    denominator = precision + recall
    f1 = np.divide(2 * precision * recall, denominator, out=np.zeros_like(denominator), where=denominator > 0)
    return float(thresholds[int(np.argmax(f1))])


def f1_at_threshold(
    gold: Sequence[int] | np.ndarray, probability: Sequence[float] | np.ndarray, threshold: float
) -> float:
    """F1 of the positive class when probability >= `threshold` predicts positive (scikit-learn f1_score)."""
    from sklearn.metrics import f1_score

    predicted = (np.asarray(probability, dtype=np.float64) >= threshold).astype(np.int64)
    return float(f1_score(np.asarray(gold, dtype=np.int64), predicted, zero_division=0))


def reliability_bins(
    outcome: Sequence[int] | np.ndarray,
    probability: Sequence[float] | np.ndarray,
    bins: int = CALIBRATION_BINS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(observed frequency, mean probability, count) of each non-empty bin: scikit-learn's calibration_curve
    (strategy "uniform": `bins` equal-width bins over [0, 1], each closed on the right, (0.2, 0.4], the first
    [0, 1/bins]) and the counts of the same bins, which calibration_curve does not return."""
    from sklearn.calibration import calibration_curve

    outcome, probability = np.asarray(outcome, dtype=np.int64), np.asarray(probability, dtype=np.float64)
    observed, predicted = calibration_curve(outcome, probability, n_bins=bins, strategy="uniform")
    edges = np.linspace(0.0, 1.0, bins + 1)
    counts = np.bincount(np.searchsorted(edges[1:-1], probability), minlength=bins)  # as calibration_curve
    return observed, predicted, counts[counts > 0]


def expected_calibration_error(
    outcome: Sequence[int] | np.ndarray,
    probability: Sequence[float] | np.ndarray,
    bins: int = CALIBRATION_BINS,
) -> float:
    """ECE: the mean over examples of |observed frequency - mean probability| of their bin
    (`reliability_bins`), i.e. the bins' gaps weighted by their share of the examples. For a binary task,
    `probability` is P(positive) and `outcome` the gold label; for a multi-class one, the probability of the
    predicted class and whether the prediction is right (top-label calibration)."""
    if len(outcome) == 0:
        return 0.0
    observed, predicted, counts = reliability_bins(outcome, probability, bins)
    return float(np.sum(counts * np.abs(observed - predicted)) / counts.sum())
