"""The `dicelab` command and its sub-commands, one module per command (`dicelab.cli.trial`, ...).

The top layer: a sub-command module may import any other layer, and no other layer imports this package.
"""

from dicelab.cli.dispatch import COMMANDS, build_parser, main, program

__all__ = ["COMMANDS", "build_parser", "main", "program"]
