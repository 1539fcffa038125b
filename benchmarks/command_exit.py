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

import argparse
import json
import sys
from pathlib import Path

from command_ab import CommandFailed, alternate

WAYS = {
    "python's exit": "import sys; from dicelab.cli.dispatch import main; sys.exit(main())",
    "the program": "from dicelab.cli.dispatch import program; program()",
}
DEFAULT_COMMAND = ["validate", str(Path(__file__).resolve().parents[1] / "experiments" / "quickstart.yaml")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6, help="alternating runs of each way (default 6)")
    parser.add_argument("command", nargs="*", help="the dicelab command's arguments (after --)")
    args = parser.parse_args()
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    try:
        result = alternate(WAYS, args.command or DEFAULT_COMMAND, args.pairs)
    except CommandFailed as failed:
        print(f"command_exit.py: {failed}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
