"""`dicelab export`: the winner of a tracked sweep as a runnable trial config (`dicelab.analysis.export`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dicelab.files import write_atomically


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--experiment", required=True, metavar="NAME", help="the sweep's MLflow experiment")
    parser.add_argument(
        "--sweep-id",
        metavar="ID",
        help="only this sweep invocation's trials (default: all of the experiment's)",
    )
    parser.add_argument(
        "--out",
        default="best.yaml",
        metavar="FILE",
        help="where to write the config (default: best.yaml; - for stdout)",
    )
    parser.add_argument(
        "--tracking-uri",
        metavar="URI",
        help="MLflow store (default: $MLFLOW_TRACKING_URI, else sqlite:///<cwd>/.dicelab/mlflow.db)",
    )


def run(args: argparse.Namespace) -> int:
    from dicelab.analysis.export import find_winner, winner_config  # MLflow: seconds `--help` need not wait

    winner = find_winner(args.experiment, args.tracking_uri, sweep_id=args.sweep_id)
    text = winner_config(winner)
    if args.out == "-":
        sys.stdout.write(text)
        return 0
    out = Path(args.out)
    write_atomically(out, text)
    seed = f", seed {winner.seed}" if winner.seed is not None else ""
    print(
        f"{out}: {winner.configuration}{seed} (best dev {winner.metric} {winner.value:.4f}, "
        f"run {winner.run_id}); run it: dicelab trial {out}"
    )
    return 0
