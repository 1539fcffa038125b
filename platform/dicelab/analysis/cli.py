"""`dicelab analyze`: read a sweep's runs from MLflow and write the report (curves, tables, importance)."""

from __future__ import annotations

import argparse
import contextlib

from rich.console import Console

from dicelab.analysis.observations import AnalysisOptions
from dicelab.analysis.report import build_report
from dicelab.analysis.runs import RunSet, load_runs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--experiment", required=True, metavar="NAME", help="the sweep's MLflow experiment")
    parser.add_argument(
        "--tracking-uri",
        metavar="URI",
        help="MLflow store (default: $MLFLOW_TRACKING_URI, else sqlite:///<cwd>/.dicelab/mlflow.db)",
    )
    parser.add_argument("--out", metavar="DIR", help="report folder (default: .dicelab/reports/<experiment>)")
    parser.add_argument(
        "--compare", nargs="+", default=[], metavar="NAME", help="more experiments to show beside it"
    )
    parser.add_argument(
        "--sweep-id",
        action="append",
        dest="sweep_ids",
        metavar="ID",
        help="only the trials of this sweep invocation (repeatable; default: all of them)",
    )
    parser.add_argument(
        "--metric", help="dev metric to analyze, e.g. f1 (default: the metric each trial selected on)"
    )
    parser.add_argument(
        "--use",
        choices=["best", "final"],
        default="best",
        help="a trial's best dev value over its evaluations (default), or its last one",
    )
    parser.add_argument(
        "--exclude-early-stopped", action="store_true", help="count only trials that ran to the end"
    )
    parser.add_argument(
        "--confidence",
        type=float,
        default=0.95,
        help="interval level; 1 - it is the tests' alpha (default: 0.95)",
    )
    parser.add_argument(
        "--baseline",
        default="loss.name=ce",
        metavar="KEY=VALUE",
        help="the configuration every other one is compared with (default: loss.name=ce)",
    )
    parser.add_argument(
        "--detect",
        type=float,
        metavar="DELTA",
        help="difference (metric units) to size seeds for (default: the paper's delta, else 1 point)",
    )
    parser.add_argument(
        "--test",
        choices=["permutation", "t"],
        default=None,
        help="paired test: exact sign-flip permutation (needs 6 pairs for p < 0.05) or paired t; "
        "default: the test the sweep's seed race decided with, else permutation",
    )
    parser.add_argument(
        "--no-log", action="store_true", help="do not log the report to the sweep's MLflow run"
    )


def race_test(runs: RunSet) -> str | None:
    """The paired test the experiment's newest seed race decided with, if it was one: the analysis then
    judges by the same test as the race (a race on the t test would otherwise be re-read by a test that
    cannot decide below 6 seeds)."""
    own = runs.parents[runs.parents["experiment"] == runs.experiments[0]]
    tests = own["race_test"].dropna() if "race_test" in own else own.iloc[0:0]
    return str(tests.iloc[0]) if len(tests) else None


def run(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    interactive = console.is_terminal
    runs = load_runs(
        [args.experiment, *args.compare], args.tracking_uri, sweep_ids=args.sweep_ids, progress=interactive
    )
    options = AnalysisOptions(
        metric=args.metric,
        use=args.use,
        include_early_stopped=not args.exclude_early_stopped,
        confidence=args.confidence,
        baseline=args.baseline,
        detect=args.detect,
        test=args.test or race_test(runs) or "permutation",
    )
    with console.status("writing the report", spinner="dots") if interactive else contextlib.nullcontext():
        report = build_report(runs, args.out, options, log_to_mlflow=not args.no_log)
    outcomes = runs.trials["outcome"].value_counts()
    counts = ", ".join(f"{count} {outcome}" for outcome, count in outcomes.items()) or "no trials"
    print(f"{', '.join(runs.experiments)}: {len(runs.trials)} trials ({counts})")
    for note in report.notes:
        print(f"  note: {note.replace('`', '')}")
    print("\n".join(report.decision))
    print(f"report: {report.html}  (and {report.markdown.name} beside it)")
    if report.logged_run_id:
        where = "" if args.tracking_uri is None else f" --tracking-uri {runs.tracking_uri}"
        print(
            f"MLflow: run {report.logged_run_id}, Artifacts tab, report/  "
            f"(open it: dicelab ui --experiment {args.experiment}{where})"
        )
    return 0
