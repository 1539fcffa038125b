"""`dicelab trial CONFIG`: run one trial locally, without Ray, and print its dev metrics.

Exit codes: 0 completed or early-stopped; 1 the trial failed (non-finite loss, crash), with the reason on
stderr; 2 a config, data or tracking error, found before training. With --json the last stdout line is one
JSON object: outcome, reason, metric, steps, best_step, run_id, dev_<metric> (last evaluation) and
best_dev_<metric> (best evaluation).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from typing import Any

from rich.console import Console
from rich.table import Table

from dicelab.errors import DicelabError, TrialFailed
from dicelab.experiment import load_experiment
from dicelab.tracking import check_tracking, default_tracking_uri, resolve_tracking_uri
from dicelab.tracking import conventions as names
from dicelab.training.reporter import MultiReporter, Reporter, TrialResult


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
    parser.add_argument("--no-tracking", action="store_true", help="do not record the trial in MLflow")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line, last")
    parser.add_argument("--quiet", action="store_true", help="no progress output, only the result")


class _Outcome(Reporter):
    """Keeps the TrialResult, which a failed trial hands only to reporters."""

    result: TrialResult | None = None

    def on_end(self, result: TrialResult) -> None:
        self.result = result


def run(args: argparse.Namespace) -> int:
    config = load_experiment(args.config, args.set)
    # torch / transformers load after the config is valid: a config error is reported in under a second
    import datasets
    import transformers

    from dicelab.training.loop import run_trial
    from dicelab.training.reporters import ConsoleReporter, MlflowReporter

    outcome = _Outcome()
    reporters: list[Reporter] = []
    mlflow: MlflowReporter | None = None
    uri = None
    if (config.tracking.enabled or args.tracking_uri) and not args.no_tracking:
        uri = resolve_tracking_uri(args.tracking_uri, config)
        check_tracking(uri)  # before any data is loaded or step taken
        mlflow = MlflowReporter(
            uri,
            config.tracking.experiment or config.name,
            run_name=config.tracking.run_name,
            tags={names.TRIAL_ID: "local"},
            log_predictions=config.tracking.log_predictions,
        )
        reporters.append(mlflow)
    if args.quiet:
        datasets.disable_progress_bars()  # tokenizing and caching features
        transformers.utils.logging.disable_progress_bar()  # loading weights
    else:
        reporters.append(ConsoleReporter())
    reporters.append(outcome)

    try:
        run_trial(config, MultiReporter(reporters))
    except DicelabError:
        raise  # a config/data error: the CLI prints one line and exits 2
    except TrialFailed:
        pass  # non-finite loss: the reason is printed below
    except Exception:
        if outcome.result is None:
            raise  # failed before the trial started
        traceback.print_exc(file=sys.stderr)  # a crash inside the trial: its run is FAILED with the reason
    result = outcome.result
    assert result is not None  # run_trial returned or raised after on_end
    _print_result(result, config.tracking.experiment or config.name, uri, quiet=args.quiet)
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
        "metric": result.metric,
        "steps": result.steps,
        "best_step": result.best_step,
        "run_id": result.run_id,
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
