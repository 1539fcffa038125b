"""`dicelab server start|stop|status`: a team's MLflow tracking server on this machine (PostgreSQL and
`mlflow server` with basic auth, on 127.0.0.1; dicelab.tracking.team_server, docs/team-server.md)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from dicelab.tracking import team_server

DIR_VARIABLE = "DICELAB_SERVER_DIR"
DEFAULT_DIR = "/tmp/dicelab-team-server"  # below /tmp: as root, the PostgreSQL account must reach it


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=team_server.ACTIONS,
        help="start (initialised the first time; prints the client's environment), stop, or status",
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path(os.environ.get(DIR_VARIABLE) or DEFAULT_DIR),
        help=f"the server's database, artifacts, logs and process ids (default: ${DIR_VARIABLE}, "
        f"else {DEFAULT_DIR})",
    )


def run(args: argparse.Namespace) -> int:
    team_server.command(args.action, args.dir)
    return 0
