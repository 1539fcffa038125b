"""A `dicelab` command ending through its program (`dicelab.cli.program`: exit handlers, then the process
ends) against the same command ending through Python's own exit (`sys.exit(main())`: exit handlers, then
the teardown of every module and object), alternating, in fresh processes.

    .venv/bin/python benchmarks/command_exit.py                                   # validate the quickstart
    .venv/bin/python benchmarks/command_exit.py --pairs 8 -- analyze --experiment quickstart --no-log

Per way: the wall seconds and the CPU seconds of the command and its children (medians), and the ratio of
the program's to Python's exit (below 1: the program ends sooner). The commands' output is discarded; a
command that fails stops the benchmark with its last line, exit code 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

from command_ab import arguments, print_comparison

WAYS = {
    "python's exit": "import sys; from dicelab.cli.dispatch import main; sys.exit(main())",
    "the program": "from dicelab.cli.dispatch import program; program()",
}
DEFAULT_COMMAND = ["validate", str(Path(__file__).resolve().parents[1] / "experiments" / "quickstart.yaml")]


def main() -> int:
    _, args = arguments(__doc__, "the dicelab command's arguments (after --)", required=False)
    return print_comparison("command_exit.py", WAYS, args.command or DEFAULT_COMMAND, args.pairs)


if __name__ == "__main__":
    sys.exit(main())
