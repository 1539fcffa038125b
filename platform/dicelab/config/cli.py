"""`dicelab validate CONFIG...`: load and validate configs (sweeps: every trial) without running."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("configs", nargs="+", type=Path, help="YAML config files")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")


def run(args: argparse.Namespace) -> int:
    from dicelab.experiment import load_experiment
    from dicelab.sweeps.space import plan_sweep

    for path in args.configs:
        config = load_experiment(path, args.overrides)
        if config.search is None:
            kind = "trial"
        else:
            plan = plan_sweep(config, str(path))
            kind = (
                f"seed race of at most {plan.num_trials} trials"
                if plan.racing is not None
                else f"sweep of {plan.num_trials} trials"
            )
        print(f"ok  {path}  ({kind} '{config.name}': {config.task.name}, loss {config.loss.name})")
    return 0
