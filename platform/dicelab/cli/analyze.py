"""`dicelab analyze`: read a sweep's runs from MLflow and write the report (curves, tables, importance)."""

from __future__ import annotations

import argparse

from rich.console import Console

from dicelab.tracking.store import redact


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--experiment", required=True, metavar="NAME", help="the sweep's MLflow experiment")
    parser.add_argument(
        "--tracking-uri",
        metavar="URI",
        help="MLflow store (default: $MLFLOW_TRACKING_URI, else sqlite:///<cwd>/.dicelab/mlflow.db); a "
        "database URI is read with SQL, through MLflow's client with DICELAB_ANALYSIS_SQL=0",
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
        help="only the trials of this sweep invocation (repeatable; default: the newest one)",
    )
    parser.add_argument(
        "--all-sweeps",
        action="store_true",
        help="pool the trials of every sweep invocation of the experiment (default: the newest only)",
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


def run(args: argparse.Namespace) -> int:
    # imported here: MLflow, pandas and scipy cost seconds that `dicelab analyze --help` need not wait for
    from dicelab.analysis.analyze import analyze_experiment

    runs, report = analyze_experiment(
        args.experiment,
        args.tracking_uri,
        out=args.out,
        compare=args.compare,
        sweep_ids=args.sweep_ids,
        metric=args.metric,
        use=args.use,
        include_early_stopped=not args.exclude_early_stopped,
        confidence=args.confidence,
        baseline=args.baseline,
        detect=args.detect,
        test=args.test,
        log_to_mlflow=not args.no_log,
        console=Console(stderr=True),
        all_sweeps=args.all_sweeps,
    )
    outcomes = runs.trials["outcome"].value_counts()
    counts = ", ".join(f"{count} {outcome}" for outcome, count in outcomes.items()) or "no trials"
    print(f"{', '.join(runs.experiments)}: {len(runs.trials)} trials ({counts})")
    for note in report.notes:
        print(f"  note: {note.replace('`', '')}")
    print("\n".join(report.decision))
    print(f"report: {report.html}  (and {report.markdown.name} beside it)")
    if report.logged_run_id:
        where = "" if args.tracking_uri is None else f" --tracking-uri {redact(runs.tracking_uri)}"
        print(
            f"MLflow: run {report.logged_run_id}, Artifacts tab, report/  "
            f"(open it: dicelab ui --experiment {args.experiment}{where})"
        )
    print(f"\n{report.summary}")
    return 0
