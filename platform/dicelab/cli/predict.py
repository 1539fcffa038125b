"""`dicelab predict MODEL INPUT [--out FILE]`: a saved model's predictions, one JSON line per example.

MODEL: `models:/<model_id>`, `models:/<name>/<version>`, `runs:/<run_id>/model` (from the tracking store) or a
local directory (an MLflow model directory or a dicelab bundle). INPUT: a split file of the model's family
(TSV / CSV / JSON lines / Parquet / CoNLL / SQuAD / MRC-NER JSON), or for a tagging model plain text, one
sentence per line (`--format lines`). The output holds the task's prediction
records: labels and probabilities (pairs, sentences), tags (tagging), entity spans (mrc_ner), answers (span
extraction), with the gold fields when the input has them. Exit code 2, and no output file, on a bad model
or input.

An input with gold labels is also scored, as a sweep scores its test split (dicelab.training.held_out): the
task's metrics, and for a binary classifier its calibration error (`ece`) and, at a decision threshold,
`f1_tuned`; the threshold is `--threshold`, else the one the model's trial tuned on dev (its run's
`threshold` metric, for a runs:/ or models:/ model). The metrics go to stderr after the predictions, or with
`--metrics` to stdout as one JSON object instead of the predictions.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dicelab.errors import DataError, TrackingError
from dicelab.files import write_atomically
from dicelab.tracking import conventions as names

if TYPE_CHECKING:
    import pandas as pd

    from dicelab.models.saved import SavedModel

FORMATS = ("auto", "tsv", "csv", "jsonl", "parquet", "conll", "squad", "mrc_ner", "lines")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="models:/…, runs:/…/model or a local model directory")
    parser.add_argument("input", help="a data file of the model's task family")
    parser.add_argument("--out", help="write the JSON lines here (default: stdout)")
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="auto",
        help="INPUT's format (default: suffix); lines: one sentence per line (tagging models)",
    )
    parser.add_argument(
        "--tracking-uri",
        help="MLflow store of models:/ and runs:/ URIs "
        "(default: env MLFLOW_TRACKING_URI, sqlite under ./.dicelab/)",
    )
    parser.add_argument(
        "--batch-size", type=batch_size, help="examples per batch (default: the trial's eval batch)"
    )
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--quiet", action="store_true", help="no progress bar, no metrics on stderr")
    parser.add_argument(
        "--metrics",
        action="store_true",
        help="a labelled INPUT's metrics as one JSON object on stdout, instead of the predictions",
    )
    parser.add_argument(
        "--threshold",
        type=probability,
        help="binary classifiers, labelled INPUT: also score at this threshold on P(positive) "
        "(default: the one the model's trial tuned on dev, when its run logged it)",
    )


def batch_size(text: str) -> int:
    """--batch-size's type: a positive number of examples."""
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"{number} is not a number of examples (1 or more)")
    return number


def probability(text: str) -> float:
    """--threshold's type: a probability."""
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{value} is not a probability (0 to 1)")
    return value


def run(args: argparse.Namespace) -> int:
    source = Path(args.input).expanduser()
    if not source.is_file():
        raise DataError(f"{source}: no such file")
    if args.out is not None and Path(args.out).is_dir():  # found now, not after loading and predicting
        raise DataError(f"--out {args.out}: is a directory (give a file name)")
    tracking_uri = _store(args.model, args.tracking_uri)
    from dicelab.models.inputs import read_input
    from dicelab.models.loading import load_model

    if args.quiet:
        import transformers

        transformers.utils.logging.disable_progress_bar()  # "Loading weights" of a pretrained encoder
    model = load_model(args.model, tracking_uri=tracking_uri, device=args.device)
    frame = read_input(source, model.family, model.task_name, args.format, model.config.data.columns)
    if frame.empty:  # an empty file, or a header alone: most likely the wrong file, not zero predictions
        raise DataError(f"{source}: no examples to predict on")
    complete, has_gold = model.complete(frame)
    if args.metrics and not has_gold:
        raise DataError(f"{source}: --metrics needs gold labels in the input, and it has none")
    if has_gold:
        records, metrics = _scored(model, complete, args.batch_size, not args.quiet)
        metrics |= _threshold_metrics(records, model, args.threshold, args.model, tracking_uri)
    else:
        records, metrics = model.predict(frame, batch_size=args.batch_size, progress=not args.quiet), {}
    if args.metrics:
        print(json.dumps(metrics))
        return 0
    lines = "".join(json.dumps(record, ensure_ascii=False, default=str) + "\n" for record in records)
    if args.out is None:
        sys.stdout.write(lines)
    else:
        write_atomically(Path(args.out), lines)
        if not args.quiet:
            print(f"{len(records)} predictions -> {args.out}", file=sys.stderr)
    if metrics and not args.quiet:
        shown = "  ".join(f"{key} {value:.4f}" for key, value in metrics.items())
        print(f"metrics on {source.name} ({len(records)} examples): {shown}", file=sys.stderr)
    return 0


def _scored(
    model: SavedModel, frame: pd.DataFrame, batch_size: int | None, progress: bool
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The records and metrics of the task's evaluation on a labelled frame (what SavedModel.predict runs,
    keeping the metrics)."""
    import torch

    from dicelab.models.saved import ProgressBatches

    features = model.task.encode(frame, model.tokenizer, model.config, model.label_names)
    size = batch_size or model.config.train.eval_batch_size
    batches = ProgressBatches(features, model.task.collate, size, progress=progress)
    with torch.inference_mode():
        result = model.task.evaluate(model.model, batches, features, frame, model.label_names)
    return result.predictions, dict(result.metrics)


def _threshold_metrics(
    records: list[dict[str, Any]], model: SavedModel, threshold: float | None, uri: str, store: str | None
) -> dict[str, float]:
    """ece, and threshold / f1_tuned at `threshold` (else the trial's), of a binary classifier's records."""
    from dicelab.tasks.metrics import expected_calibration_error, f1_at_threshold
    from dicelab.training.held_out import classifier_scores

    scores = classifier_scores(records, model.label_names)
    if scores is None:
        return {}
    metrics = {names.ECE: expected_calibration_error(*scores.calibration)}
    threshold = threshold if threshold is not None else _trial_threshold(uri, store)
    if scores.binary and threshold is not None:
        metrics[names.THRESHOLD_METRIC] = threshold
        metrics[names.F1_TUNED] = f1_at_threshold(scores.gold, scores.probability, threshold)
    return metrics


def _trial_threshold(model: str, tracking_uri: str | None) -> float | None:
    """The `threshold` metric of the run a runs:/ or models:/ model comes from, if it logged one."""
    if tracking_uri is None:
        return None
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    client = MlflowClient(tracking_uri)
    path = model.removeprefix("runs:/").removeprefix("models:/")
    try:
        if model.startswith("runs:/"):
            run_id = path.split("/", 1)[0]
        elif "/" not in path:  # models:/<model_id>
            run_id = client.get_logged_model(path).source_run_id
        else:  # models:/<name>/<version>
            name, version = path.rsplit("/", 1)
            run_id = client.get_model_version(name, version).run_id
        value = client.get_run(run_id).data.metrics.get(names.THRESHOLD_METRIC) if run_id else None
    except MlflowException as error:  # the model loaded: its trial's threshold is optional
        print(f"dicelab predict: no trial threshold ({error.message.splitlines()[0]})", file=sys.stderr)
        return None
    return float(value) if value is not None and math.isfinite(value) else None


def _store(model: str, cli_uri: str | None) -> str | None:
    """The tracking store for an MLflow URI (None for a local directory); a missing SQLite file is an error
    (MLflow would create an empty store and then find no model in it)."""
    if not model.startswith(("models:/", "runs:/")):
        return None
    from dicelab.tracking import resolve_tracking_uri
    from dicelab.tracking.store import require_store_file

    uri = resolve_tracking_uri(cli_uri)
    try:
        require_store_file(uri)
    except TrackingError as error:
        raise TrackingError(f"model {model}: {error}") from None
    return uri
