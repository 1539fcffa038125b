"""Synthetic generators: deterministic by seed, exact imbalance, valid tags and offsets, not trivial."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from dicelab.data.iob import to_iob2
from dicelab.data.synthetic import TAGS, generate_pairs, generate_spans, generate_tagging


@pytest.mark.parametrize("generate", [generate_pairs, generate_tagging, generate_spans])
def test_deterministic_by_seed(generate):
    rate = 0.3
    first, again, other = generate(60, rate, [7, 0]), generate(60, rate, [7, 0]), generate(60, rate, [8, 0])
    assert first.equals(again)
    assert not first.equals(other)


@pytest.mark.parametrize(("n", "rate"), [(2000, 0.2), (501, 0.37), (10, 0.05), (7, 0.5)])
def test_pairs_positive_rate_is_exact(n, rate):
    frame = generate_pairs(n, rate, 0)
    assert (frame["label"] == "1").sum() == round(n * rate)
    assert set(frame["label"]) <= {"0", "1"}


def test_pairs_have_no_single_token_that_separates_the_classes():
    frame = generate_pairs(1000, 0.5, 1)
    with_word = {"1": Counter(), "0": Counter()}  # label -> word -> pairs containing it
    for a, b, label in zip(frame["text_a"], frame["text_b"], frame["label"], strict=True):
        with_word[label].update(set(re.findall(r"[\w.]+", f"{a} {b}".lower())))
    negatives = (frame["label"] == "0").sum()
    best = 0.0
    for word in with_word["1"] | with_word["0"]:
        # the rule "positive when the pair contains the word" (or its reverse)
        accuracy = (with_word["1"][word] + negatives - with_word["0"][word]) / len(frame)
        best = max(best, accuracy, 1 - accuracy)
    assert best < 0.65  # chance is 0.5; duplicates need comparing the two sentences


def test_pairs_look_like_sentences():
    frame = generate_pairs(50, 0.5, 2)
    for text in [*frame["text_a"], *frame["text_b"]]:
        assert (text[0].isupper() or text[0].isdigit()) and text.endswith(".") and "  " not in text
        assert 5 <= len(text.split()) <= 30


@pytest.mark.parametrize("density", [0.05, 0.15, 0.3])
def test_tagging_entity_density(density):
    frame = generate_tagging(500, density, 3)
    tags = [tag for sentence in frame["tags"] for tag in sentence]
    assert sum(tag != "O" for tag in tags) / len(tags) == pytest.approx(density, abs=0.01)


def test_tagging_is_valid_iob2_with_every_type():
    frame = generate_tagging(300, 0.15, 4)
    for tokens, tags in zip(frame["tokens"], frame["tags"], strict=True):
        assert len(tokens) == len(tags) and tags == to_iob2(tags)
        assert set(tags) <= set(TAGS)
    assert {tag for tags in frame["tags"] for tag in tags} == set(TAGS)


def test_tagging_names_are_ambiguous_between_people_and_places():
    frame = generate_tagging(2000, 0.3, 5)
    types: dict[str, set[str]] = {}
    for tokens, tags in zip(frame["tokens"], frame["tags"], strict=True):
        for token, tag in zip(tokens, tags, strict=True):
            if tag.startswith("B-"):
                types.setdefault(token, set()).add(tag[2:])
    assert {"PER", "LOC"} <= types["Jordan"]


@pytest.mark.parametrize("rate", [0.0, 0.33])
def test_spans_offsets_and_unanswerable_rate(rate):
    frame = generate_spans(300, rate, 6)
    assert sum(not texts for texts in frame["answer_texts"]) == round(300 * rate)
    assert frame["id"].is_unique
    for context, texts, starts in zip(
        frame["context"], frame["answer_texts"], frame["answer_starts"], strict=True
    ):
        assert len(texts) == len(starts)
        for text, start in zip(texts, starts, strict=True):
            assert context[start : start + len(text)] == text


@pytest.mark.parametrize(
    ("source", "task", "labels"),
    [
        ("synthetic_pairs", "pair_classification", ["0", "1"]),
        ("synthetic_tagging", "token_tagging", TAGS),
        ("synthetic_spans", "span_extraction", []),
    ],
)
def test_synthetic_sources(make_config, load_raw, source, task, labels):
    synthetic = {"n_train": 40, "n_dev": 10, "seed": 3, "unanswerable_rate": 0.2}
    raw = load_raw(make_config(task=task, source=source, synthetic=synthetic))
    assert raw.label_names == labels
    assert (len(raw.train), len(raw.dev)) == (40, 10)
    assert raw.fingerprint == load_raw(make_config(task=task, source=source, synthetic=synthetic)).fingerprint
    bigger = load_raw(make_config(task=task, source=source, synthetic={**synthetic, "n_train": 50}))
    assert bigger.dev.equals(raw.dev)  # dev does not depend on the size of train


def _overlap(a: str, b: str) -> float:
    words_a, words_b = set(a.lower().split()), set(b.lower().split())
    return len(words_a & words_b) / len(words_a | words_b)


def test_pairs_unrelated_negatives_are_the_easy_ones_and_off_by_default():
    hard = generate_pairs(400, 0.2, 3)
    assert hard.equals(generate_pairs(400, 0.2, 3, unrelated_rate=0.0))  # no extra draw: older data unchanged
    easy = generate_pairs(400, 0.2, 3, unrelated_rate=1.0)
    assert (easy["label"] == "1").sum() == 80  # the positive rate stays exact

    def negative_overlap(frame):
        negatives = frame[frame["label"] == "0"]
        return sum(
            _overlap(a, b) for a, b in zip(negatives["text_a"], negatives["text_b"], strict=True)
        ) / len(negatives)

    # unrelated events share few words; the hard negatives differ by one cue or detail
    assert negative_overlap(easy) < 0.25 < negative_overlap(hard)


VAGUE_TIMES = ("recently", "lately", "earlier this year", "some time ago")


def _is_vague(text: str) -> bool:
    return any(phrase in text.lower() for phrase in VAGUE_TIMES)


def test_pairs_ambiguous_share_is_exact_and_off_by_default():
    plain = generate_pairs(500, 0.2, 4)
    # no extra draw at 0: older data unchanged
    assert plain.equals(generate_pairs(500, 0.2, 4, ambiguous_rate=0.0))
    assert not any(map(_is_vague, [*plain["text_a"], *plain["text_b"]]))
    frame = generate_pairs(500, 0.2, 4, ambiguous_rate=0.2, ambiguous_positive_rate=0.4)
    vague = [_is_vague(a) or _is_vague(b) for a, b in zip(frame["text_a"], frame["text_b"], strict=True)]
    ambiguous = frame[vague]
    # positive_rate stays exact, the ambiguous positives count in it
    assert (frame["label"] == "1").sum() == 100
    assert len(ambiguous) == 100 and (ambiguous["label"] == "1").sum() == 40
    # exactly one sentence of an ambiguous pair is vague: it has no number, the other has one
    for a, b in zip(ambiguous["text_a"], ambiguous["text_b"], strict=True):
        assert _is_vague(a) != _is_vague(b)
        vague_text, precise = (a, b) if _is_vague(a) else (b, a)
        assert re.search(r"\d", precise) and not re.search(r"\d", vague_text)


def test_pairs_ambiguous_labels_do_not_depend_on_the_wording():
    frame = generate_pairs(4000, 0.2, 5, ambiguous_rate=0.3, ambiguous_positive_rate=0.4)
    vague = [_is_vague(a) or _is_vague(b) for a, b in zip(frame["text_a"], frame["text_b"], strict=True)]
    ambiguous = frame[vague]
    with_word = {"1": Counter(), "0": Counter()}
    for a, b, label in zip(ambiguous["text_a"], ambiguous["text_b"], ambiguous["label"], strict=True):
        with_word[label].update(set(re.findall(r"[a-z]+", f"{a} {b}".lower())))
    counts = ambiguous["label"].value_counts()
    for word in ("some", "several", "recently", "not", "never", "while", "also", "were", "reports"):
        shares = [with_word[label][word] / counts[label] for label in ("1", "0")]
        assert abs(shares[0] - shares[1]) < 0.08, word  # the same wordings in both labels


def test_pairs_ambiguous_share_that_does_not_fit_is_an_error():
    with pytest.raises(ValueError, match="ambiguous_rate"):
        generate_pairs(100, 0.1, 0, ambiguous_rate=0.5, ambiguous_positive_rate=0.4)  # 20 positives > 10
