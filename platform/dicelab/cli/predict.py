"""`dicelab predict MODEL INPUT [--out FILE]`: a saved model's predictions, one JSON line per example.

MODEL: `models:/<model_id>`, `models:/<name>/<version>`, `runs:/<run_id>/model` (from the tracking store) or a
local directory (an MLflow model directory or a dicelab bundle). INPUT: a split file of the model's family
(TSV / CSV / JSON lines / Parquet / CoNLL / SQuAD / MRC-NER JSON), or for a tagging model plain text, one
sentence per line (`--format lines`). The output holds the task's prediction
records: labels and probabilities (pairs, sentences), tags (tagging), entity spans (mrc_ner), answers (span
extraction), with the gold fields when the input has them. Exit code 2, and no output file, on a bad model
or input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dicelab.errors import DataError, TrackingError
from dicelab.files import write_atomically

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
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def batch_size(text: str) -> int:
    """--batch-size's type: a positive number of examples."""
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"{number} is not a number of examples (1 or more)")
    return number


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
    records = model.predict(frame, batch_size=args.batch_size, progress=not args.quiet)
    lines = "".join(json.dumps(record, ensure_ascii=False, default=str) + "\n" for record in records)
    if args.out is None:
        sys.stdout.write(lines)
        return 0
    write_atomically(Path(args.out), lines)
    if not args.quiet:
        print(f"{len(records)} predictions -> {args.out}", file=sys.stderr)
    return 0


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
