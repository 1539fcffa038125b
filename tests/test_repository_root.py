"""A test run leaves the repository root as it found it (tests/conftest.py): an entry a test adds there, such
as MLflow's default ./mlruns artifact root, turns the run red and is named."""

from __future__ import annotations

from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parent / "conftest.py"

TESTS = """
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_writes_in_a_temporary_directory(tmp_path):
    (tmp_path / "mlruns").mkdir()


def test_writes_in_the_root():
    (ROOT / "mlruns").mkdir()
"""


@pytest.fixture
def repository(pytester: pytest.Pytester) -> Path:
    root = pytester.path / "repository"
    (root / "tests").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (root / "tests" / "conftest.py").write_text(CONFTEST.read_text(encoding="utf-8"))
    (root / "tests" / "test_writes.py").write_text(TESTS)
    return root


def test_a_run_that_writes_nothing_in_the_root_passes(pytester: pytest.Pytester, repository: Path) -> None:
    result = pytester.runpytest(str(repository / "tests"), "-p", "no:cacheprovider", "-k", "temporary")
    result.assert_outcomes(passed=1, deselected=1)
    assert result.ret == pytest.ExitCode.OK


def test_an_entry_left_in_the_root_fails_the_run_and_is_named(
    pytester: pytest.Pytester, repository: Path
) -> None:
    result = pytester.runpytest(str(repository / "tests"), "-p", "no:cacheprovider", "-k", "root")
    result.assert_outcomes(passed=1, deselected=1)  # the test passed; the run did not
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["ERROR: the tests left mlruns in the repository root *"])
