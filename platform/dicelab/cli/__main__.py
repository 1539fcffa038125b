"""`python -m dicelab.cli ...` is the `dicelab` command (how a Ray Job's driver and the tests start it)."""

import sys

from dicelab.cli.dispatch import main

sys.exit(main())
