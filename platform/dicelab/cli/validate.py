"""`dicelab validate CONFIG...`: load and validate configs (sweeps: every trial) without running.

Every config is checked, also after a bad one: each error is printed, and the exit code is 2 if any failed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dicelab.plugins import add_plugin_option

if TYPE_CHECKING:
    from dicelab.config import ExperimentConfig
    from dicelab.sweeps.space import SweepPlan


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("configs", nargs="+", type=Path, help="YAML config files")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    add_plugin_option(parser)


def run(args: argparse.Namespace) -> int:
    from dicelab.errors import ConfigError
    from dicelab.experiment import load_experiment

    failed = 0
    for path in args.configs:
        try:
            config = load_experiment(path, args.overrides, args.plugin)
            summary = _summary(config, path, args.overrides)
        except ConfigError as error:
            print(f"dicelab validate: error: {error}", file=sys.stderr)
            failed += 1
            continue
        print(f"ok  {path}  ({summary})")
    return ConfigError.exit_code if failed else 0


def _summary(config: ExperimentConfig, path: Path, overrides: list[str]) -> str:
    """What running the config would start, e.g. "sweep of 12 trials 'x': pair_classification, losses ce,
    dice" (a sweep's plan is built, so every trial is validated)."""
    losses = [config.loss.name]
    if config.search is None:
        kind = "trial"
    else:
        from dicelab.sweeps.space import check_overrides, plan_sweep

        plan = plan_sweep(config, str(path))
        check_overrides(plan, overrides)
        losses = _swept_losses(plan) or losses
        kind = (
            f"seed race of at most {plan.num_trials} trials"
            if plan.racing is not None
            else f"sweep of {plan.num_trials} trials"
        )
    word = "loss" if len(losses) == 1 else "losses"
    return f"{kind} '{config.name}': {config.task.name}, {word} {', '.join(losses)}"


def _swept_losses(plan: SweepPlan) -> list[str]:
    """The losses a sweep runs, in the order declared: its branches' (`search.conditional`) or the values of
    a `loss.name` dimension (a grid or a choice)."""
    from dicelab.sweeps.space import LOSS_KEY

    found: list[str] = []
    for branch in plan.branches:
        dimension = branch.dimensions.get(LOSS_KEY)
        values = [branch.loss] if branch.loss is not None else []
        if dimension is not None:
            values = [str(value) for value in dimension.values or []]
        found += [value for value in values if value not in found]
    return found
