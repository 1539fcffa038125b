"""`python -m dicelab.cli ...` is the `dicelab` command (how a Ray Job's driver and the tests start it)."""

from dicelab.cli.dispatch import program

program()
