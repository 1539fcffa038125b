"""The backbone family contract: every family of `dicelab.tasks.families` with every registered task.

A tiny random-initialised encoder of each family and its own tokenizer class
(tests/tasks/families_fixtures.py) load through the real `model.backbone: <directory>` path (AutoTokenizer /
AutoModel), as a hub id would. For every family and every task, on the task's synthetic data:
(a) padding invariance: an example's scores alone and in a batch that pads it by 17 or more tokens agree
    within 1e-5 (eval mode);
(b) the sentence head pools the family's summary token ([CLS] first, XLNet's <cls> last), and the encoder
    sees exactly what the tokenizer's own padding gives (pad id, padding side, segment ids where it has them);
(c) a short training run on one batch lowers the loss with finite values and gradients throughout;
(d) on a CUDA GPU (skipped without one), a batch of examples of different lengths gets the CPU's scores in
    fp32, and finite scores close to them under bf16 and fp16 autocast.
The old rule, the first position for every family, fails (b) for XLNet and only for XLNet.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets
import pandas as pd
import pytest
import torch
import yaml
from tests.tasks.families_fixtures import FAMILY_MODEL_TYPES, save_backbone
from torch import nn
from transformers import AutoConfig, AutoTokenizer, MPNetConfig

from dicelab.cli import main
from dicelab.config import ExperimentConfig, ModelConfig
from dicelab.contracts.tasks import assert_loss_falls
from dicelab.data import RawDataset, load_raw_dataset
from dicelab.errors import ConfigError
from dicelab.losses import build_loss
from dicelab.tasks import TASKS
from dicelab.tasks._batching import padding_shift, roll_rows
from dicelab.tasks._heads import model_inputs, summary_positions
from dicelab.tasks._mrc_ner import MrcNerModel
from dicelab.tasks.backbones import backbone_source, build_encoder, load_tokenizer, tokenizer_identity
from dicelab.tasks.families import FAMILIES
from dicelab.tracking import conventions as names

SYNTHETIC_SOURCE = {"pairs": "synthetic_pairs", "tagging": "synthetic_tagging", "spans": "synthetic_spans"}
MAX_LENGTH = 96
EXTRA_PADDING = 17
TOLERANCE = 1e-5
BATCH = 8


def task_config(task_name: str, backbone: str, cache_dir: Path) -> ExperimentConfig:
    family = TASKS.get(task_name).family
    return ExperimentConfig.model_validate(
        {
            "name": f"family-{task_name}",
            "task": {"name": task_name, "doc_stride": 32},
            "data": {
                "source": SYNTHETIC_SOURCE[family],
                "synthetic": {"n_train": 24, "n_dev": 12, "seed": 3},
                "max_length": MAX_LENGTH,
                "cache_dir": str(cache_dir),
            },
            "model": {"backbone": backbone},
        }
    )


@pytest.fixture(scope="session")
def family_directories(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One saved tiny model per family, its vocabulary trained on every task's synthetic texts."""
    root = tmp_path_factory.mktemp("families")
    texts: list[str] = []
    for task_name in TASKS.names():
        task = TASKS.get(task_name)()
        raw = load_raw_dataset(task_config(task_name, "tiny-bert", root / "cache"), task.family)
        texts += [*task.texts(raw.train), *task.texts(raw.dev)]
    return {family: save_backbone(family, texts, root / family) for family in FAMILY_MODEL_TYPES}


@dataclass
class FamilyCase:
    family: str
    task: Any
    config: ExperimentConfig
    raw: RawDataset
    tokenizer: Any
    features: dict[str, datasets.Dataset]

    _evaluated: nn.Module | None = None

    def model(self, seed: int = 0) -> nn.Module:
        torch.manual_seed(seed)
        return self.task.build_model(self.config, self.raw.label_names, self.tokenizer)

    def eval_model(self) -> nn.Module:
        """One model in eval mode, shared by the checks that do not train it."""
        if self._evaluated is None:
            self._evaluated = self.model().eval()
        return self._evaluated

    def encode(self, frame: pd.DataFrame) -> datasets.Dataset:
        return self.task.encode(
            frame.reset_index(drop=True), self.tokenizer, self.config, self.raw.label_names
        )


@pytest.fixture(scope="module")
def cases(
    family_directories: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str, str], FamilyCase]:
    built: dict[tuple[str, str], FamilyCase] = {}

    def case(family: str, task_name: str) -> FamilyCase:
        if (family, task_name) not in built:
            task = TASKS.get(task_name)()
            cache = tmp_path_factory.mktemp(f"{family}-{task_name}")
            config = task_config(task_name, str(family_directories[family]), cache)
            raw = load_raw_dataset(config, task.family)
            tokenizer = load_tokenizer(
                config.model, lambda: pytest.fail("texts read for a saved model"), cache
            )
            features = {
                split: task.encode(raw.splits[split], tokenizer, config, raw.label_names)
                for split in ("train", "dev")
            }
            built[family, task_name] = FamilyCase(family, task, config, raw, tokenizer, features)
        return built[family, task_name]

    return case


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


every_family = pytest.mark.parametrize("family", FAMILY_MODEL_TYPES)
every_task = pytest.mark.parametrize("task_name", TASKS.names())


def test_every_registered_family_has_a_tiny_model_here() -> None:
    assert tuple(FAMILIES.names()) == FAMILY_MODEL_TYPES


@every_family
def test_the_saved_model_loads_as_its_family(family: str, family_directories: dict[str, Path]) -> None:
    source = backbone_source(ModelConfig(backbone=str(family_directories[family])))
    assert source.family.model_type == family and source.commit is None  # a local directory has no commit


# (a) padding invariance ----------------------------------------------------------------------------------


def lengthened(frame: pd.DataFrame, family: str) -> pd.DataFrame:
    """Examples made longer with their own text (still valid examples of their task)."""
    longer = frame.copy()
    if family == "pairs":
        longer["text_b"] = longer["text_b"] + " " + longer["text_a"] + " " + longer["text_b"]
    elif family == "tagging":
        for column in ("tokens", "tags"):
            longer[column] = longer[column].map(lambda values: list(values) * 3)
    else:  # spans: the answer's first occurrence keeps its character offset
        longer["context"] = longer["context"] + " " + longer["context"]
    return longer


def row_scores(model: nn.Module, batch: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """Every score the model gives each row's real positions, flattened per row."""
    lengths = batch["attention_mask"].sum(dim=1).tolist()
    output = model(**model_inputs(model, batch))
    if isinstance(model, MrcNerModel):
        hidden, boundaries = output
        rows = []
        for row, length in enumerate(lengths):  # boundary scores and the match score of every short span
            starts, ends = zip(
                *[(i, j) for i in range(length) for j in range(i, min(length, i + 3))], strict=True
            )
            index = torch.full((len(starts),), row, device=hidden.device)
            starts, ends = (
                torch.tensor(starts, device=hidden.device),
                torch.tensor(ends, device=hidden.device),
            )
            match = model.match_scores(hidden, index, starts, ends)
            rows.append(torch.cat([boundaries[row, :length].flatten(), match]))
        return rows
    if output.dim() == 2:  # one score vector per sequence
        return list(output)
    return [output[row, :length].flatten() for row, length in enumerate(lengths)]


@every_family
@every_task
@torch.no_grad()
def test_a_batch_padding_an_example_by_17_tokens_gives_its_scores(
    family: str, task_name: str, cases: Callable[[str, str], FamilyCase]
) -> None:
    case = cases(family, task_name)
    model = case.eval_model()
    features = case.features["dev"]
    lengths = [len(ids) for ids in features["input_ids"]]
    row = features[lengths.index(min(lengths))]  # the shortest feature (a window, a type's query)
    longest = _examples(features)[lengths.index(max(lengths))]
    longer = list(case.encode(lengthened(case.raw.dev.iloc[[longest]], case.task.family)))
    padding = max([*longer, *features], key=lambda candidate: len(candidate["input_ids"]))
    assert len(padding["input_ids"]) - len(row["input_ids"]) >= EXTRA_PADDING
    (alone,) = row_scores(model, case.task.collate([row]))
    first = row_scores(model, case.task.collate([row, padding]))[0]
    second = row_scores(model, case.task.collate([padding, row]))[1]
    for batched in (first, second):
        assert (batched - alone).abs().max().item() <= TOLERANCE


def _examples(features: datasets.Dataset) -> list[int]:
    """The example (row of the raw frame) of each feature: windows and entity-type queries share one."""
    for column in ("example_index", "sentence_index"):
        if column in features.column_names:
            return list(features[column])
    return list(range(len(features)))


@every_family
@every_task
@torch.no_grad()
def test_evaluation_does_not_depend_on_how_examples_are_batched(
    family: str, task_name: str, cases: Callable[[str, str], FamilyCase]
) -> None:
    """The decoding path (word ids, offsets, spans) sees the same scores batched by 8 or one at a time."""
    case = cases(family, task_name)
    model = case.eval_model()
    frame, labels = case.raw.dev.iloc[:3], case.raw.label_names
    features = case.encode(frame)
    rows = list(features)
    by_eight = [case.task.collate(rows[start : start + BATCH]) for start in range(0, len(rows), BATCH)]
    one_by_one = [case.task.collate([row]) for row in rows]
    batched = case.task.evaluate(model, by_eight, features, frame, labels)
    single = case.task.evaluate(model, one_by_one, features, frame, labels)
    assert len(batched.predictions) == len(frame)
    assert batched.metrics == pytest.approx(single.metrics)
    assert _decisions(batched.predictions) == _decisions(single.predictions)


def _decisions(predictions: list[dict[str, Any]]) -> list[Any]:
    """What was predicted (probabilities and span scores differ in the last float digits)."""
    keys = ("prediction", "predicted")
    return [[record[key] for key in keys if key in record] for record in predictions]


# (b) the summary token and the encoder's inputs ----------------------------------------------------------


def assert_pools_the_summary_token(
    pooled: torch.Tensor, hidden: torch.Tensor, batch: dict[str, torch.Tensor], tokenizer: Any
) -> None:
    """Row b of `pooled` is the hidden state at the row's summary token, found by its id (cls_token_id)
    among the row's real tokens (the batch is padded on the right)."""
    lengths = batch["attention_mask"].sum(dim=1).tolist()
    for row, (ids, length) in enumerate(zip(batch["input_ids"].tolist(), lengths, strict=True)):
        ids = ids[:length]
        assert ids.count(tokenizer.cls_token_id) == 1, f"row {row}: not one {tokenizer.cls_token!r}"
        position = ids.index(tokenizer.cls_token_id)
        nearest = int((hidden[row] - pooled[row]).abs().amax(dim=-1).argmin())
        token = tokenizer.convert_ids_to_tokens(ids[nearest])
        assert torch.allclose(pooled[row], hidden[row, position], atol=1e-6), (
            f"row {row} pools position {nearest} ({token!r}), not its summary token "
            f"{tokenizer.cls_token!r} at position {position} of {length}"
        )


def pooled_and_hidden(model: nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """What the sentence head scores (captured at its input) and the hidden states of every position."""
    seen: list[torch.Tensor] = []
    hook = model.head.register_forward_pre_hook(lambda module, args: seen.append(args[0]))
    try:
        model(**model_inputs(model, batch))
    finally:
        hook.remove()
    return seen[0], model.hidden_states(**model_inputs(model, batch))


@every_family
@torch.no_grad()
def test_the_sentence_head_scores_the_family_summary_token(
    family: str, cases: Callable[[str, str], FamilyCase]
) -> None:
    case = cases(family, "pair_classification")
    model = case.eval_model()
    batch = case.task.collate(list(case.features["dev"])[:BATCH])
    assert batch["attention_mask"].sum(dim=1).unique().numel() > 1  # rows of different lengths: padded
    pooled, hidden = pooled_and_hidden(model, batch)
    assert_pools_the_summary_token(pooled, hidden, batch, case.tokenizer)
    expected = "last" if family == "xlnet" else "first"
    assert model.family.summary_token == expected


@every_family
@torch.no_grad()
def test_the_old_first_token_rule_breaks_the_contract_for_xlnet_only(
    family: str, cases: Callable[[str, str], FamilyCase]
) -> None:
    """dicelab before the family registry scored hidden[:, 0] for every model: right for BERT-style encoders,
    XLNet's first word for XLNet (whose <cls> comes last)."""
    case = cases(family, "pair_classification")
    model = case.eval_model()
    batch = case.task.collate(list(case.features["dev"])[:BATCH])
    hidden = model.hidden_states(**model_inputs(model, batch))
    old_rule = hidden[:, 0]
    if family != "xlnet":
        assert_pools_the_summary_token(old_rule, hidden, batch, case.tokenizer)
        return
    with pytest.raises(AssertionError, match=r"pools position 0 .* not its summary token '<cls>'"):
        assert_pools_the_summary_token(old_rule, hidden, batch, case.tokenizer)


@every_family
@every_task
@torch.no_grad()
def test_the_encoder_sees_what_the_tokenizer_pads(
    family: str, task_name: str, cases: Callable[[str, str], FamilyCase]
) -> None:
    """The encoder's inputs are the tokenizer's own padding of the batch (its pad id and side), segment ids
    only where the model has segments; its hidden states come back in the batch's layout."""
    case = cases(family, task_name)
    model = case.eval_model()
    rows = list(case.features["dev"])[:BATCH]
    seen: dict[str, torch.Tensor] = {}
    hook = model.encoder.register_forward_pre_hook(
        lambda module, args, kwargs: seen.update(kwargs), with_kwargs=True
    )
    try:
        model(**model_inputs(model, case.task.collate(rows)))
    finally:
        hook.remove()
    columns = ["input_ids", "attention_mask", "token_type_ids"]
    padded = case.tokenizer.pad([{key: row[key] for key in columns} for row in rows], return_tensors="pt")
    assert case.tokenizer.padding_side == ("left" if family == "xlnet" else "right")
    assert torch.equal(seen["input_ids"], padded["input_ids"])
    assert torch.equal(seen["attention_mask"], padded["attention_mask"])
    takes_segments = family in ("albert", "bert", "electra", "xlnet")  # RoBERTa, DistilBERT, DeBERTa-v3: none
    assert ("token_type_ids" in seen) == takes_segments
    if takes_segments:
        assert torch.equal(seen["token_type_ids"], padded["token_type_ids"])


def test_cached_features_do_not_depend_on_the_padding_side(cases: Callable[[str, str], FamilyCase]) -> None:
    """Features are stored unpadded and the model pads: a tokenizer's padding side is rightly not part of the
    feature-cache key (its identity), while its vocabulary and pre-processing are."""
    case = cases("xlnet", "pair_classification")
    flipped = AutoTokenizer.from_pretrained(case.tokenizer.name_or_path, padding_side="right")
    assert (flipped.padding_side, case.tokenizer.padding_side) == ("right", "left")
    assert tokenizer_identity(flipped) == tokenizer_identity(case.tokenizer)
    encoded = case.task.encode(case.raw.dev, flipped, case.config, case.raw.label_names)
    assert encoded.to_dict() == case.features["dev"].to_dict()
    other = cases("albert", "pair_classification").tokenizer  # another Unigram vocabulary and normaliser
    assert tokenizer_identity(other) != tokenizer_identity(case.tokenizer)


def test_rolling_rows_to_either_side_and_back() -> None:
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 1, 1, 0]])
    values = torch.arange(15).view(3, 5)
    left = roll_rows(values, padding_shift(mask, "left"))
    assert left.tolist() == [[3, 4, 0, 1, 2], [5, 6, 7, 8, 9], [14, 10, 11, 12, 13]]
    right = roll_rows(values, padding_shift(mask, "right"))
    assert right[:, :2].tolist() == [[0, 1], [5, 6], [12, 13]]
    hidden = torch.randn(3, 5, 4)
    shift = padding_shift(mask, "left")
    assert torch.equal(roll_rows(roll_rows(hidden, shift), -shift), hidden)
    left_mask = roll_rows(mask, shift)
    assert summary_positions(left_mask, "last").tolist() == [4, 4, 4]
    assert summary_positions(left_mask, "first").tolist() == [2, 0, 3]
    assert summary_positions(mask, "last").tolist() == [2, 4, 3]
    assert summary_positions(mask, "first").tolist() == [0, 0, 2]


# (c) a short trial trains ---------------------------------------------------------------------------------


@every_family
@every_task
def test_a_short_training_run_lowers_the_loss(
    family: str, task_name: str, cases: Callable[[str, str], FamilyCase]
) -> None:
    case = cases(family, task_name)
    batch = case.task.collate(list(case.features["train"])[:4])
    assert_loss_falls(case.task, case.model(), batch, build_loss("ce"), steps=10, factor=0.9)


@every_family
@torch.no_grad()
def test_data_max_length_is_refused_past_the_longest_sequence_the_encoder_runs(
    family: str, family_directories: dict[str, Path]
) -> None:
    """The family's `positions` is the longest sequence the encoder runs (RoBERTa and XLM-R count positions
    from pad_token_id + 1, so a table of 130 holds 128 tokens); data.max_length past it is a config error,
    not an index error mid-training. XLNet's and DeBERTa-v3's positions are relative: no limit."""
    directory = str(family_directories[family])
    encoder_config = AutoConfig.from_pretrained(directory)
    limit = FAMILIES.get(encoder_config.model_type).positions(encoder_config)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    model = ModelConfig(backbone=directory)
    token = next(i for i in range(len(tokenizer)) if i not in tokenizer.all_special_ids)

    def run(encoder: nn.Module, length: int) -> None:
        ids = torch.full((1, length), token)
        encoder(input_ids=ids, attention_mask=torch.ones_like(ids))

    if limit is None:
        assert family in ("xlnet", "deberta-v2")  # the tiny DeBERTa is a v3: position_biased_input off
        run(build_encoder(model, tokenizer, max_positions=4 * MAX_LENGTH).eval(), 4 * MAX_LENGTH)
        return
    encoder = build_encoder(model, tokenizer, max_positions=limit).eval()
    run(encoder, limit)  # every position of the table a token may take
    if family != "modernbert":  # rotary positions: no table to run past (its limit is its trained context)
        with pytest.raises((IndexError, RuntimeError)):
            run(encoder, limit + 1)
    with pytest.raises(
        ConfigError, match=rf"^data\.max_length: {limit + 1} exceeds the {limit} positions of "
    ):
        build_encoder(model, tokenizer, max_positions=limit + 1)


# (d) on a CUDA GPU ----------------------------------------------------------------------------------------

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
# CPU and CUDA fp32 run different kernels (attention included): equal to float32 rounding
CUDA_FP32_TOLERANCE = 1e-4
# autocast keeps 8 (bf16) or 11 (fp16) bits of mantissa in every matrix product of two layers
HALF_TOLERANCE = 5e-2


def _on_cuda(batch: dict[str, Any]) -> dict[str, Any]:
    return {key: value.cuda() if isinstance(value, torch.Tensor) else value for key, value in batch.items()}


@needs_cuda
@every_family
@every_task
@torch.no_grad()
def test_on_cuda_a_padded_batch_gets_the_cpu_scores(
    family: str, task_name: str, cases: Callable[[str, str], FamilyCase]
) -> None:
    case = cases(family, task_name)
    on_cpu = case.eval_model()
    on_gpu = copy.deepcopy(on_cpu).cuda()
    rows = list(case.features["dev"])[:BATCH]
    assert len({len(row["input_ids"]) for row in rows}) > 1  # the batch pads some of its rows
    batch = case.task.collate(rows)
    expected = row_scores(on_cpu, batch)

    in_fp32 = row_scores(on_gpu, _on_cuda(batch))
    for row, (gpu, cpu) in enumerate(zip(in_fp32, expected, strict=True)):
        torch.testing.assert_close(
            gpu.cpu(), cpu, rtol=CUDA_FP32_TOLERANCE, atol=CUDA_FP32_TOLERANCE, msg=f"row {row}"
        )
    for dtype in (torch.bfloat16, torch.float16):
        with torch.autocast("cuda", dtype=dtype):
            in_half = row_scores(on_gpu, _on_cuda(batch))
        for row, (gpu, cpu) in enumerate(zip(in_half, expected, strict=True)):
            assert torch.isfinite(gpu).all(), f"{dtype} row {row}"
            torch.testing.assert_close(
                gpu.float().cpu(), cpu, rtol=HALF_TOLERANCE, atol=HALF_TOLERANCE, msg=f"{dtype} row {row}"
            )


@needs_cuda
@every_family
@every_task
def test_on_cuda_a_bf16_training_step_has_finite_gradients_close_to_fp32(
    family: str, task_name: str, cases: Callable[[str, str], FamilyCase]
) -> None:
    case = cases(family, task_name)
    model, loss_fn = case.model().cuda().eval(), build_loss("ce")  # eval: no dropout between the two
    batch = _on_cuda(case.task.collate(list(case.features["train"])[:4]))
    in_fp32 = case.task.training_loss(model, batch, loss_fn)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        in_bf16 = case.task.training_loss(model, batch, loss_fn)
    assert in_bf16.dtype == torch.float32  # the losses compute outside autocast
    assert in_bf16.item() == pytest.approx(in_fp32.item(), rel=HALF_TOLERANCE)
    in_bf16.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


# Bad backbones: one line naming the key, exit 2, nothing written ------------------------------------------


def _trial(tmp_path: Path, backbone: str, *overrides: str) -> tuple[int, Path]:
    cache = tmp_path / "cache"
    config = task_config("pair_classification", backbone, cache).model_dump(mode="json")
    path = tmp_path / "trial.yaml"
    path.write_text(yaml.safe_dump(config))
    return main(["trial", str(path), "--no-tracking", *overrides]), cache


def test_an_unknown_family_is_a_one_line_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "mpnet"
    MPNetConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2).save_pretrained(
        directory
    )
    with pytest.raises(ConfigError) as error:
        load_tokenizer(ModelConfig(backbone=str(directory)), [], tmp_path)
    message = str(error.value)
    assert message.startswith("model.backbone: ") and "'mpnet'" in message and "\n" not in message
    assert all(family in message for family in FAMILY_MODEL_TYPES)
    monkeypatch.setattr(sys, "argv", sys.argv[:1])
    code, cache = _trial(tmp_path, str(directory))
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "'mpnet' model" in err
    assert not cache.exists()  # no data read, no features cached


def test_a_directory_that_is_not_a_model_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "empty"
    directory.mkdir()
    monkeypatch.setattr(sys, "argv", sys.argv[:1])
    code, cache = _trial(tmp_path, str(directory))
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "model.backbone" in err and "not a model" in err
    assert not cache.exists()


def test_a_revision_applies_to_hub_ids_only(
    tmp_path: Path, family_directories: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    for backbone in ("tiny-bert", str(family_directories["bert"])):
        with pytest.raises(ConfigError, match=r"^model\.revision: 'v1' applies to hub ids only"):
            backbone_source(ModelConfig(backbone=backbone, revision="v1"))
    monkeypatch.setattr(sys, "argv", sys.argv[:1])
    code, cache = _trial(tmp_path, "tiny-bert", "--set", "model.revision=main")
    assert code == 2 and "model.revision" in capsys.readouterr().err and not cache.exists()


# A hub id, offline: the real hub path reading a Hugging Face cache -----------------------------------------

HUB_TRIAL = """
import contextlib, io, json, sys
from dicelab.cli import main
results = []
for args in sys.argv[1:]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()) as out:
        code = main(json.loads(args))
    results.append({"code": code, "out": out.getvalue(), "err": err.getvalue()})
print(json.dumps(results))
"""


@pytest.mark.slow  # a trial in a fresh interpreter (the hub client reads its cache settings at import)
def test_a_hub_revision_resolves_to_its_commit_and_is_recorded_on_the_run(
    tmp_path: Path, family_directories: dict[str, Path]
) -> None:
    """`model.backbone: <hub id>` at `model.revision: main`, served offline from a Hugging Face cache laid
    out as the hub client writes it: the trial loads the snapshot `main` points to and its run records the
    commit; a revision the cache does not have is a one-line config error, exit 2, nothing cached."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repository = tmp_path / "hub" / "models--dicelab-test--tiny-xlnet"
    shutil.copytree(family_directories["xlnet"], repository / "snapshots" / commit)
    (repository / "refs").mkdir()
    (repository / "refs" / "main").write_text(commit)
    config = task_config("pair_classification", "dicelab-test/tiny-xlnet", tmp_path / "cache").model_dump()
    config["model"]["revision"] = "main"
    config["train"].update(max_steps=2, batch_size=8)
    path = tmp_path / "trial.yaml"
    path.write_text(yaml.safe_dump(config))
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    good = ["trial", str(path), "--tracking-uri", store, "--json", "--quiet"]
    bad = [
        "trial",
        str(path),
        "--no-tracking",
        "--set",
        "model.revision=v9",
        "--set",
        f"data.cache_dir={tmp_path}/c2",
    ]
    environment = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    completed = subprocess.run(
        [sys.executable, "-c", HUB_TRIAL, json.dumps(good), json.dumps(bad)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
        check=True,
    )
    trained, refused = json.loads(completed.stdout.strip().splitlines()[-1])
    assert trained["code"] == 0, trained["err"]
    from mlflow import MlflowClient  # here: the rest of the module runs on a GPU machine without MLflow

    run = MlflowClient(store).get_run(json.loads(trained["out"].strip().splitlines()[-1])["run_id"])
    assert run.data.tags[names.BACKBONE_COMMIT] == commit
    assert run.data.params["model.revision"] == "main"
    assert refused["code"] == 2 and len(refused["err"].strip().splitlines()) == 1
    assert "model.revision 'v9'" in refused["err"] and not (tmp_path / "c2").exists()
