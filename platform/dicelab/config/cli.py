"""`dicelab validate CONFIG...`: load and validate configs (sweeps: every trial) without running."""

from __future__ import annotations

import argparse
from pathlib import Path

from dicelab.config.loading import load_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("configs", nargs="+", type=Path, help="YAML config files")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")


def run(args: argparse.Namespace) -> int:
    for path in args.configs:
        config = load_config(path, args.overrides)
        kind = "sweep" if config.search is not None else "trial"
        print(f"ok  {path}  ({kind} '{config.name}': {config.task.name}, loss {config.loss.name})")
    return 0
