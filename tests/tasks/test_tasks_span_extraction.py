"""Span extraction: doc-stride windows, answer positions, both loss formulations, decoding round trips."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from dicelab.errors import ConfigError, DataError
from dicelab.losses import build_loss
from dicelab.tasks import TASKS, SpanExtraction
from dicelab.tasks._span_extraction import SpanDecoding, _best_spans

GREEK = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau "
    "upsilon phi chi psi omega"
)


@pytest.fixture
def window_frame() -> pd.DataFrame:
    """Two questions on one long context (4 windows of 25 context tokens overlapping by 8 at max_length 32):
    "pi rho sigma" (tokens 18-21) lies in the overlap of windows 1 and 2; "tau upsilon phi" (tokens 22-26)
    is cut by the end of window 1 and whole in window 2."""
    context = f"{GREEK} {GREEK}"
    answers = ["pi rho sigma", "tau upsilon phi"]
    return pd.DataFrame(
        {
            "id": ["in-two-windows", "cut-by-a-window"],
            "question": ["what is one ?", "what is two ?"],  # distinct: the oracle tells windows by their ids
            "context": [context, context],
            "answer_texts": [[answer] for answer in answers],
            "answer_starts": [[context.index(answer)] for answer in answers],
        }
    )


def context_range(offsets: list[list[int]]) -> tuple[int, int]:
    inside = [offset for offset in offsets if offset != [-1, -1]]
    return inside[0][0], inside[-1][1]


def test_registered_with_its_family():
    assert TASKS.get("span_extraction") is SpanExtraction
    assert (SpanExtraction.name, SpanExtraction.family) == ("span_extraction", "spans")


def test_windows_overlap_by_doc_stride(config, minilm_tokenizer, window_frame):
    features = SpanExtraction().encode(window_frame, minilm_tokenizer, config, [])
    first = [row for row in features if row["example_index"] == 0]
    assert len(first) == 4 and {row["example_id"] for row in first} == {"in-two-windows"}
    for previous, current in itertools.pairwise(first):
        assert len(previous["input_ids"]) <= config.data.max_length
        previous_context = [offset for offset in previous["offsets"] if offset != [-1, -1]]
        current_context = [offset for offset in current["offsets"] if offset != [-1, -1]]
        assert previous_context[-config.task.doc_stride :] == current_context[: config.task.doc_stride]


def test_answer_positions_in_every_window(config, minilm_tokenizer, window_frame):
    features = SpanExtraction().encode(window_frame, minilm_tokenizer, config, [])
    windows_with_answer = {0: 0, 1: 0}
    cut_windows = 0
    for row in features:
        example = row["example_index"]
        context = window_frame["context"][example]
        answer = window_frame["answer_texts"][example][0]
        answer_start = window_frame["answer_starts"][example][0]
        answer_end = answer_start + len(answer)
        first, last = context_range(row["offsets"])
        if row["start_positions"] != row["cls_index"]:
            windows_with_answer[example] += 1
            text = context[
                row["offsets"][row["start_positions"]][0] : row["offsets"][row["end_positions"]][1]
            ]
            assert text == answer
        else:
            assert row["end_positions"] == row["cls_index"] == 0
            assert not (first <= answer_start and answer_end <= last)  # [CLS] only when not whole inside
            cut_windows += first < answer_end and answer_start < last  # overlapping, but cut
    assert windows_with_answer == {0: 2, 1: 1}
    assert cut_windows == 1


def test_candidates_are_cls_and_context(config, minilm_tokenizer, window_frame):
    task = SpanExtraction()
    features = task.encode(window_frame, minilm_tokenizer, config, [])
    row = features[0]
    pieces = minilm_tokenizer.convert_ids_to_tokens(row["input_ids"])
    candidates = [piece for piece, mask in zip(pieces, row["candidate_mask"], strict=True) if mask]
    assert candidates[0] == "[CLS]" and "what" not in candidates and "[SEP]" not in candidates
    assert len(candidates) == 1 + sum(offset != [-1, -1] for offset in row["offsets"])
    candidates_total = sum(sum(mask) for mask in features["candidate_mask"])
    assert task.class_counts(features, []) == [2 * candidates_total - 2 * len(features), 2 * len(features)]


def test_long_questions_are_cut_to_max_query_length(config, minilm_tokenizer, window_frame):
    frame = window_frame.assign(question=" ".join(["question"] * 20))
    features = SpanExtraction().encode(frame, minilm_tokenizer, config, [])
    pieces = minilm_tokenizer.convert_ids_to_tokens(features[0]["input_ids"])
    assert pieces[: pieces.index("[SEP]")] == ["[CLS]"] + ["question"] * config.task.max_query_length


def test_settings_and_data_errors(config, minilm_tokenizer, window_frame):
    task = SpanExtraction()
    config.task.doc_stride = 24  # 32 - 8 - 3 = 21 context tokens per window at most
    with pytest.raises(ConfigError, match=r"task\.doc_stride: 24 must be below the 21"):
        task.encode(window_frame, minilm_tokenizer, config, [])
    config.task.doc_stride = 8
    shifted = window_frame.assign(answer_starts=[[3], [5]])
    with pytest.raises(
        DataError, match=r"'pi rho sigma' of row 0 \(id 'in-two-windows'\) is not at character 3"
    ):
        task.encode(shifted, minilm_tokenizer, config, [])


def oracle_scores(features) -> dict[tuple[int, ...], torch.Tensor]:
    """Start / end scores that point at each window's gold positions ([CLS] when it holds no answer)."""
    scores = {}
    for row in features:
        row_scores = torch.zeros(len(row["input_ids"]), 2)
        row_scores[row["start_positions"], 0] = 10.0
        row_scores[row["end_positions"], 1] = 10.0
        scores[tuple(row["input_ids"])] = row_scores
    return scores


def test_decoding_gold_scores_gives_exact_answers(
    config, minilm_tokenizer, window_frame, spans_frame, oracle, batches
):
    task = SpanExtraction()
    frame = pd.concat([window_frame, spans_frame[spans_frame["id"] != "q-none"]], ignore_index=True)
    features = task.encode(frame, minilm_tokenizer, config, [])
    model = oracle(oracle_scores(features), decoding=SpanDecoding(max_answer_length=30, with_negative=False))
    result = task.evaluate(model, batches(task, features, size=3), features, frame, [])
    expected = ["pi rho sigma", "tau upsilon phi", "mu nu xi", "last"]
    assert [prediction["prediction"] for prediction in result.predictions] == expected
    assert result.metrics == {"em": 1.0, "f1": 1.0}
    assert result.predictions[0] == {
        "id": "in-two-windows",
        "prediction": "pi rho sigma",
        "answers": ["pi rho sigma"],
    }


def test_decoding_respects_max_answer_length(config, minilm_tokenizer, spans_frame, oracle, batches):
    task = SpanExtraction()
    frame = spans_frame[spans_frame["id"] == "q-mid"].reset_index(drop=True)
    features = task.encode(frame, minilm_tokenizer, config, [])
    model = oracle(oracle_scores(features), decoding=SpanDecoding(max_answer_length=2, with_negative=False))
    result = task.evaluate(model, batches(task, features), features, frame, [])
    prediction = result.predictions[0]["prediction"]
    assert prediction in "mu nu xi" and 1 <= len(prediction.split()) <= 2  # the gold 3-token span is too long
    assert 0 < result.metrics["f1"] < 1


def test_squad_v2_no_answer_decoding(config, minilm_tokenizer, spans_frame, oracle, batches):
    task = SpanExtraction()
    features = task.encode(spans_frame, minilm_tokenizer, config, [])
    model = oracle(oracle_scores(features), decoding=SpanDecoding(max_answer_length=30, with_negative=True))
    result = task.evaluate(model, batches(task, features), features, spans_frame, [])
    assert [p["prediction"] for p in result.predictions] == ["mu nu xi", "last", ""]
    assert result.metrics == {
        "em": 1.0,
        "f1": 1.0,
        "has_ans_em": 1.0,
        "has_ans_f1": 1.0,
        "no_ans_em": 1.0,
        "no_ans_f1": 1.0,
    }
    # SQuAD 1.1 decoding never abstains: the unanswerable question gets its best span.
    model.decoding = SpanDecoding(max_answer_length=30, with_negative=False)
    result = task.evaluate(model, batches(task, features), features, spans_frame, [])
    assert result.predictions[2]["prediction"] != ""
    assert result.metrics["em"] == pytest.approx(2 / 3)


def test_ce_is_a_softmax_over_candidate_positions(config, tiny_tokenizer, spans_frame):
    task = SpanExtraction()
    tokenizer = tiny_tokenizer(list(task.texts(spans_frame)))
    features = task.encode(spans_frame, tokenizer, config, [])
    batch = task.collate([features[i] for i in range(len(features))])
    torch.manual_seed(0)
    model = task.build_model(config, [], tokenizer).eval()
    scores = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    candidates = batch["candidate_mask"].bool()
    expected = torch.stack(
        [
            F.cross_entropy(scores[..., k].masked_fill(~candidates, float("-inf")), batch[positions])
            for k, positions in enumerate(["start_positions", "end_positions"])
        ]
    ).mean()
    assert task.training_loss(model, batch, build_loss("ce")).item() == pytest.approx(
        expected.item(), rel=1e-5
    )


def test_other_losses_see_one_binary_example_per_candidate_position(config, tiny_tokenizer, spans_frame):
    task = SpanExtraction()
    tokenizer = tiny_tokenizer(list(task.texts(spans_frame)))
    features = task.encode(spans_frame, tokenizer, config, [])
    batch = task.collate([features[i] for i in range(len(features))])
    torch.manual_seed(0)
    model = task.build_model(config, [], tokenizer).eval()
    scores = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    targets = torch.zeros_like(scores)
    rows = torch.arange(len(features))
    targets[rows, batch["start_positions"], 0] = 1.0
    targets[rows, batch["end_positions"], 1] = 1.0
    kept = batch["candidate_mask"].bool().unsqueeze(-1).expand_as(scores)
    expected = F.binary_cross_entropy_with_logits(scores[kept], targets[kept])
    # focal with gamma 0 is binary cross entropy: the binary formulation, computed independently here.
    assert task.training_loss(model, batch, build_loss("focal", gamma=0.0)).item() == pytest.approx(
        expected.item(), rel=1e-5
    )


def test_best_span_search_is_exact():
    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(6, 20, 2, generator=generator)
    candidates = (torch.rand(6, 20, generator=generator) < 0.7).long()
    candidates[:, 0] = 1  # [CLS]
    candidates[5, 1:] = 0  # a window without context: no valid span
    batch = {"candidate_mask": candidates, "cls_index": torch.zeros(6, dtype=torch.long)}
    best, starts, ends, null = _best_spans(
        scores, batch, SpanDecoding(max_answer_length=4, with_negative=True)
    )
    for row in range(6):
        context = [t for t in range(1, 20) if candidates[row, t]]
        spans = [(s, e) for s in context for e in context if 0 <= e - s < 4]
        assert null[row] == pytest.approx((scores[row, 0, 0] + scores[row, 0, 1]).item())
        if not spans:
            assert best[row] == -float("inf")
            continue
        expected = max(spans, key=lambda span: (scores[row, span[0], 0] + scores[row, span[1], 1]).item())
        assert (starts[row].item(), ends[row].item()) == expected
        assert best[row] == pytest.approx((scores[row, expected[0], 0] + scores[row, expected[1], 1]).item())
