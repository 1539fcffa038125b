"""A `dicelab analyze` command with its report's forked children (`dicelab.forking`: the importance computed
in one, the figures drawn in another) against the same command without them (the importance computed in
the report's process, the figures drawn by a process of its own, `python -m dicelab.figure_files`), ABBA in
fresh processes.

    .venv/bin/python benchmarks/report_forks.py --pairs 6 -- analyze --experiment scale-01-1000 \\
        --tracking-uri postgresql+psycopg://mlflow@127.0.0.1:PORT/mlflow --no-log --out /tmp/report

Per way: the wall seconds and the CPU seconds of the command and its children (medians), and the ratio of
the forked way's to the other's (below 1: faster with the forks). The reports are the same files either way
(tests/test_figure_files.py, tests/analysis/test_analysis_context.py). A command that fails stops the
benchmark with its last line, exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys

from command_ab import CommandFailed, alternate

RUN = "from dicelab.cli.dispatch import program; program()"
NO_FORKS = "from dicelab import forking; forking.can_fork = lambda: False"
WAYS = {"no forks": f"{NO_FORKS}; {RUN}", "forked": RUN}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6, help="alternating runs of each way (default 6)")
    parser.add_argument("command", nargs="+", help="the `dicelab analyze` command's arguments (after --)")
    args = parser.parse_args()
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    if args.command[0] != "analyze":
        parser.error(f"the command must be `analyze ...`, got `{args.command[0]}`")
    try:
        result = alternate(WAYS, args.command, args.pairs)
    except CommandFailed as failed:
        print(f"report_forks.py: {failed}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
