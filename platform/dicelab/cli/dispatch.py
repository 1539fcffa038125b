"""The `dicelab` command: its table of sub-commands and the dispatch to them.

Each sub-command is one module of this package, named after the command (`dicelab trial` ->
`dicelab.cli.trial`); the commands sit on top of every other layer, so they may import any of them.

A sub-command module exposes `add_arguments(parser)` and `run(args) -> int`; it is imported only when
its command runs, so `dicelab --help` stays fast and a broken optional dependency hits only its command.
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib
import os
import select
import signal
import sys
from typing import NoReturn

import dicelab
from dicelab.errors import DicelabError
from dicelab.files import OutputError

# command -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "trial": ("dicelab.cli.trial", "run one trial locally, without Ray"),
    "sweep": ("dicelab.cli.sweep", "run a sweep on local Ray or a Ray cluster"),
    "submit": ("dicelab.cli.submit", "submit a sweep to a Ray cluster as a Ray Job"),
    "resample": ("dicelab.cli.resample", "build a resampled training set (Table 8 variants)"),
    "analyze": ("dicelab.cli.analyze", "sensitivity curves, ablation tables and a report from MLflow"),
    "export": ("dicelab.cli.export", "a sweep's winning configuration as a trial config"),
    "ui": ("dicelab.cli.ui", "start the MLflow UI on the configured store"),
    "server": ("dicelab.cli.server", "a team's MLflow tracking server on this machine (PostgreSQL + MLflow)"),
    "losses": ("dicelab.cli.losses", "loss utilities (plot: the paper's Figure 1)"),
    "validate": ("dicelab.cli.validate", "load and validate configs without running them"),
    "predict": ("dicelab.cli.predict", "predict with a saved model (models:/, runs:/ or a directory)"),
    "plugins": ("dicelab.cli.plugins", "check a plugin's losses, tasks, data sources and families"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dicelab", description=dicelab.__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"dicelab {dicelab.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        command_parser.set_defaults(_module=module_name)
        if _wants(name):
            importlib.import_module(module_name).add_arguments(command_parser)
    return parser


def _wants(name: str) -> bool:
    # Only the chosen sub-command's module is imported (heavy imports: torch, ray, mlflow).
    return name in sys.argv[1:2]


def enable_stack_dumps() -> None:
    """`kill -USR2 PID` prints the stack of every thread of a running command to its stderr, and the
    command goes on: where a driver that seems stuck is waiting. (Tune takes SIGUSR1 to stop a sweep.)
    Not where stderr is no file (a caller capturing the output of `main` in memory)."""
    if not hasattr(signal, "SIGUSR2"):
        return
    try:
        faulthandler.register(signal.SIGUSR2, file=sys.stderr, all_threads=True)
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both OSError and ValueError
        return


def program() -> NoReturn:
    """The `dicelab` program (its console script and `python -m dicelab.cli`): `main`, then Python's exit."""
    sys.exit(main())


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # run as the program (in-process callers pass their arguments)
        enable_stack_dumps()
    else:
        sys.argv = [sys.argv[0], *argv]
    parser = build_parser()
    args = parser.parse_args()
    try:
        code = int(importlib.import_module(args._module).run(args) or 0)
        sys.stdout.flush()  # a reader that left shows here, not as an error at the interpreter's exit
        return code
    except DicelabError as error:
        print(f"dicelab {args.command}: error: {error}", file=sys.stderr)
        return error.exit_code
    except OutputError as error:  # where the output was asked for: the user's to change
        print(f"dicelab {args.command}: error: {error.strerror}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"dicelab {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        if not _stdout_closed():
            raise  # a connection's, not the console's
        return 141  # as a command stopped by SIGPIPE: the reader of stdout left (`dicelab ... | head`)


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (the write end then polls as an error); if so, stdout
    is pointed at /dev/null, so that Python's flush at exit does not report the same broken pipe again."""
    try:
        descriptor = sys.stdout.fileno()
        poller = select.poll()
        poller.register(descriptor, select.POLLOUT)
        widowed = any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no file behind stdout (captured in memory)
        return False
    if widowed:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, descriptor)
        os.close(devnull)
    return widowed
