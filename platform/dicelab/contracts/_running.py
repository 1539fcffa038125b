"""Running a contract without pytest: each `test_*` method is one check, passed or failed with its reason."""

from __future__ import annotations

import contextlib
import inspect
import re
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dicelab.errors import first_line


@dataclass(frozen=True)
class CheckResult:
    contract: str  # e.g. "loss 'poly1'"
    check: str  # the check's name, in words: "ignored positions change nothing"
    passed: bool
    reason: str = ""  # why it failed, one line

    def line(self) -> str:
        verdict = "pass" if self.passed else "FAIL"
        why = f": {self.reason}" if self.reason else ""
        return f"{verdict}  {self.contract}: {self.check}{why}"


@contextlib.contextmanager
def raises(kind: type[BaseException], match: str) -> Iterator[None]:
    """Like `pytest.raises(kind, match=...)`, without pytest: the block must raise `kind` matching `match`."""
    try:
        yield
    except kind as error:
        if not re.search(match, str(error)):
            raised = f"{type(error).__name__}({str(error)!r})"
            raise AssertionError(f"raised {raised}, expected a match of {match!r}") from None
        return
    raise AssertionError(f"did not raise {kind.__name__} (expected a match of {match!r})")


def _line(error: BaseException) -> str:
    """The failing statement of a bare `assert`, as its source line."""
    frames = traceback.extract_tb(error.__traceback__)
    return f"failed: {frames[-1].line}" if frames and frames[-1].line else "an assertion failed"


def checks_of(contract: Any) -> list[str]:
    return [name for name in dir(contract) if name.startswith("test_") and callable(getattr(contract, name))]


def run_checks(contract: Any, label: str, **fixtures: Any) -> list[CheckResult]:
    """Every check of `contract` (an instance), each given the `fixtures` its signature names."""
    results = []
    for name in checks_of(contract):
        method = getattr(contract, name)
        wanted = {key: fixtures[key] for key in inspect.signature(method).parameters if key in fixtures}
        words = name.removeprefix("test_").replace("_", " ")
        try:
            method(**wanted)
        except AssertionError as error:
            reason = first_line(error) if str(error) else _line(error)
            results.append(CheckResult(label, words, False, reason))
        except Exception as error:
            results.append(CheckResult(label, words, False, first_line(error, with_type=True)))
        else:
            results.append(CheckResult(label, words, True))
    return results
