"""`dicelab trial CONFIG`: run one trial locally, without Ray, and print its dev metrics.

Exit codes: 0 completed or early-stopped; 1 the trial failed (non-finite loss, crash), with the reason on
stderr; 2 a config, data or tracking error, found before training. With --json the last stdout line is one
JSON object: outcome, reason, degenerate, metric, steps, best_step, run_id, model_uri (the saved model,
train.save_model), dev_<metric> (last evaluation) and best_dev_<metric> (best evaluation).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from dicelab.errors import ConfigError
from dicelab.experiment import load_experiment
from dicelab.plugins import add_plugin_option
from dicelab.tracking import conventions as names
from dicelab.tracking import default_tracking_uri
from dicelab.training.reporter import TrialResult


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="experiment config (YAML)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key (repeatable)"
    )
    parser.add_argument(
        "--tracking-uri",
        help="MLflow store; tracks even when the config says tracking.enabled: false "
        "(default: config tracking.uri, env MLFLOW_TRACKING_URI, sqlite under ./.dicelab/)",
    )
    add_plugin_option(parser)
    parser.add_argument("--no-tracking", action="store_true", help="do not record the trial in MLflow")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line, last")
    parser.add_argument("--quiet", action="store_true", help="no progress output, only the result")
    parser.add_argument(
        "--register",
        metavar="NAME",
        help="register the trial's saved model (train.save_model) in the MLflow Model Registry as NAME",
    )


def run(args: argparse.Namespace) -> int:
    config = load_experiment(args.config, args.set, args.plugin)
    if args.register and (args.no_tracking or config.train.save_model == "none"):
        why = "--no-tracking" if args.no_tracking else "train.save_model: none"
        raise ConfigError(f"--register {args.register}: no model is saved with {why}")
    from dicelab.training.local import run_local_trial

    trial = run_local_trial(
        config,
        tracking_uri=args.tracking_uri,
        track=not args.no_tracking,
        console=Console(stderr=True, soft_wrap=True),
        quiet=args.quiet,
        register=args.register,
    )
    result = trial.result
    if trial.traceback is not None:
        print(trial.traceback, end="", file=sys.stderr)
    _print_result(result, trial.experiment, trial.tracking_uri, quiet=args.quiet)
    if args.json:
        print(json.dumps(_summary(result)), flush=True)
    if result.outcome in (names.FAILED, names.NON_FINITE):
        print(f"dicelab trial: trial failed: {result.reason}", file=sys.stderr)
        return 1
    return 0


def _summary(result: TrialResult) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "outcome": result.outcome,
        "reason": result.reason,
        "degenerate": result.degenerate,  # what the best evaluation collapsed to (one class...), or null
        "metric": result.metric,
        "steps": result.steps,
        "best_step": result.best_step,
        "run_id": result.run_id,
        "model_uri": result.model_uri,
    }
    summary.update({names.dev_metric(key): value for key, value in result.final_metrics.items()})
    summary.update({names.best_metric(key): value for key, value in result.best_metrics.items()})
    return summary


def _print_result(result: TrialResult, experiment: str, uri: str | None, *, quiet: bool) -> None:
    console = Console(soft_wrap=True)
    if result.final_metrics:
        table = Table(title=f"dev metrics ({result.outcome})", title_justify="left")
        table.add_column("metric")
        table.add_column(f"last (step {result.steps})", justify="right")
        table.add_column(f"best (step {result.best_step})", justify="right")
        for key, value in result.final_metrics.items():
            marker = " *" if key == result.metric else ""  # the metric the trial selects on
            best = result.best_metrics.get(key, float("nan"))
            table.add_row(f"{key}{marker}", f"{value:.4f}", f"{best:.4f}")
        console.print(table)
    if quiet and result.degenerate:  # without --quiet the console reporter has printed it
        print(f"warning: degenerate trial: {result.degenerate}", file=sys.stderr)
    if result.run_id is not None and uri is not None and not quiet:
        ui = "dicelab ui" if uri == default_tracking_uri() else f"dicelab ui --tracking-uri {uri}"
        console.print(
            f"MLflow: experiment {experiment!r}, run {result.run_id} in {uri} (browse: {ui})", highlight=False
        )
        if result.model_uri is not None:
            console.print(
                f"model: {result.model_uri} (dicelab predict {result.model_uri} INPUT)", highlight=False
            )
