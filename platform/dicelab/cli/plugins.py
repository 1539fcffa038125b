"""`dicelab plugins check MODULE...`: run the contract suites over the entries each plugin registers.

One line per check (`pass` or `FAIL`, the entry, the check, why it failed); exit 1 when a check fails, 2
when a plugin cannot be loaded (one line).
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    check = sub.add_parser(
        "check",
        help="run the losses', tasks', data sources' and backbone families' contracts on a plugin's entries",
    )
    check.add_argument(
        "modules", nargs="+", metavar="MODULE", help="module name, .py file or package directory"
    )


def run(args: argparse.Namespace) -> int:
    from dicelab.contracts import check_plugin

    failed = 0
    for module in args.modules:
        for result in check_plugin(module):
            print(result.line(), flush=True)
            failed += not result.passed
    return 1 if failed else 0
