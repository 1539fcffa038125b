"""`dicelab validate CONFIG...`: load and validate configs (sweeps: every trial) without running.

Every config is checked, also after a bad one: each error is printed, and the exit code is 2 if any failed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dicelab.config import ExperimentConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("configs", nargs="+", type=Path, help="YAML config files")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")


def run(args: argparse.Namespace) -> int:
    from dicelab.errors import ConfigError
    from dicelab.experiment import load_experiment

    failed = 0
    for path in args.configs:
        try:
            config = load_experiment(path, args.overrides)
            kind = _kind(config, path)
        except ConfigError as error:
            print(f"dicelab validate: error: {error}", file=sys.stderr)
            failed += 1
            continue
        print(f"ok  {path}  ({kind} '{config.name}': {config.task.name}, loss {config.loss.name})")
    return ConfigError.exit_code if failed else 0


def _kind(config: ExperimentConfig, path: Path) -> str:
    """What running the config would start (a sweep's plan is built, so every trial is validated)."""
    if config.search is None:
        return "trial"
    from dicelab.sweeps.space import plan_sweep

    plan = plan_sweep(config, str(path))
    if plan.racing is not None:
        return f"seed race of at most {plan.num_trials} trials"
    return f"sweep of {plan.num_trials} trials"
