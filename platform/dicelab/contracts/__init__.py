"""The contract suites of dicelab's extension points, as importable code: every built-in passes them
(tests/ runs them with pytest) and `dicelab plugins check` runs them over a plugin's entries.

    from dicelab.contracts import check_plugin
    for result in check_plugin("my_losses.py"):
        print(result.line())
"""

from dicelab.contracts._running import CheckResult, raises, run_checks
from dicelab.contracts.plugin import check_plugin

__all__ = ["CheckResult", "check_plugin", "raises", "run_checks"]
