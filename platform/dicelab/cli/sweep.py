"""`dicelab sweep CONFIG`: run a sweep on a private local Ray, or on a cluster with --address."""

from __future__ import annotations

import argparse

from dicelab.config import read_config
from dicelab.errors import ConfigError
from dicelab.plugins import add_plugin_option


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="sweep config (YAML with a search: section)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set train.epochs=2 (repeatable)",
    )
    add_plugin_option(parser)
    parser.add_argument(
        "--address",
        help="Ray cluster to join: auto (the cluster on this machine) or HOST:PORT; "
        "default: $RAY_ADDRESS, else a new local Ray for this sweep",
    )
    parser.add_argument("--name", help="sweep name (MLflow experiment); default: the config's name")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the newest interrupted run of this sweep: finished trials are kept, "
        "unfinished ones continue from their last checkpoint",
    )
    parser.add_argument(
        "--retry-failed",
        action="store_true",
        help="with --resume: run failed trials again from their last checkpoint, in the same MLflow runs "
        "(after a full disk or a lost node)",
    )
    parser.add_argument(
        "--tracking-uri",
        help="MLflow tracking URI (default: tracking.uri, $MLFLOW_TRACKING_URI, "
        "sqlite:///<cwd>/.dicelab/mlflow.db)",
    )
    parser.add_argument(
        "--register",
        metavar="NAME",
        help="register the sweep's winner model in the MLflow Model Registry under NAME",
    )


def run(args: argparse.Namespace) -> int:
    if args.retry_failed and not args.resume:
        raise ConfigError("--retry-failed continues a sweep: use it with --resume")
    # The schema first, then the driver's imports (MLflow, Ray): a typo is reported in under a second.
    read_config(args.config, args.overrides, args.plugin)
    from dicelab.sweeps.driver import SweepOptions, run_sweep

    return run_sweep(
        SweepOptions(
            config=args.config,
            overrides=args.overrides,
            plugins=args.plugin,
            address=args.address,
            name=args.name,
            resume=args.resume,
            retry_failed=args.retry_failed,
            tracking_uri=args.tracking_uri,
            register=args.register,
        )
    )
