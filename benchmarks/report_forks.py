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

import sys

from command_ab import arguments, print_comparison

RUN = "from dicelab.cli.dispatch import program; program()"
NO_FORKS = "from dicelab import forking; forking.can_fork = lambda: False"
WAYS = {"no forks": f"{NO_FORKS}; {RUN}", "forked": RUN}


def main() -> int:
    parser, args = arguments(__doc__, "the `dicelab analyze` command's arguments (after --)", required=True)
    if args.command[0] != "analyze":
        parser.error(f"the command must be `analyze ...`, got `{args.command[0]}`")
    return print_comparison("report_forks.py", WAYS, args.command, args.pairs)


if __name__ == "__main__":
    sys.exit(main())
