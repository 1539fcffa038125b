"""`dicelab submit CONFIG --address http://HEAD:8265`: run a sweep on a Ray cluster as a Ray Job."""

from __future__ import annotations

import argparse

from dicelab.plugins import add_plugin_option
from dicelab.sweeps.submit import SubmitOptions, submit


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="sweep config, inside the working directory (it is uploaded with it)")
    parser.add_argument("--address", required=True, help="the cluster's dashboard, e.g. http://HEAD:8265")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set train.epochs=2 (repeatable)",
    )
    add_plugin_option(parser)
    parser.add_argument("--name", help="sweep name (MLflow experiment); default: the config's name")
    parser.add_argument(
        "--tracking-uri",
        help="MLflow server the job records to, e.g. http://mlflow:5000 (reachable from the cluster)",
    )
    parser.add_argument(
        "--no-tracking-check",
        dest="check_tracking",
        action="store_false",
        help="do not check from here that the MLflow server answers (it is reachable from the cluster only)",
    )
    parser.add_argument("--follow", action="store_true", help="stream the job's logs; exit with its status")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the newest interrupted run of the sweep (on the cluster)",
    )
    parser.add_argument(
        "--working-dir", default=".", help="directory uploaded as the job's working directory (default: .)"
    )


def run(args: argparse.Namespace) -> int:
    return submit(
        SubmitOptions(
            config=args.config,
            address=args.address,
            overrides=args.overrides,
            plugins=args.plugin,
            name=args.name,
            tracking_uri=args.tracking_uri,
            follow=args.follow,
            resume=args.resume,
            working_dir=args.working_dir,
            check_tracking=args.check_tracking,
        )
    )
