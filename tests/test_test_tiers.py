"""The tiers' rule (tests/conftest.py): integration tests are marked by what they use, and a unit test that
starts Ray or a server fails before the process starts."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parent / "conftest.py"

TESTS = """
import subprocess
import sys

import pytest


@pytest.fixture
def demo_server():
    return "http://127.0.0.1:9"


@pytest.fixture
def uses_the_server(demo_server):
    return demo_server


@pytest.fixture
def observer():  # "server" inside a word is no server
    return 1


def test_through_a_fixture(uses_the_server, request):
    assert request.node.get_closest_marker("xdist_group").args == ("integration",)


def test_plain(observer):
    subprocess.run([sys.executable, "-c", "pass"], check=True)  # any other process is fine


def test_starts_ray_unmarked():
    subprocess.run(["/nonexistent/bin/ray", "start", "--head"])  # refused before it would run


def test_starts_an_mlflow_server_unmarked():
    subprocess.Popen("/nonexistent/bin/mlflow server --port 0", shell=False)


def test_serves_a_model_unmarked():
    subprocess.Popen(["/nonexistent/bin/mlflow", "models", "serve", "-m", "models:/m-1"])


def test_asks_for_sweep_help():
    with pytest.raises(FileNotFoundError):  # --help starts nothing: not refused
        subprocess.run(["/nonexistent/bin/dicelab", "sweep", "--help"])


@pytest.mark.integration
def test_marked_by_hand(request):
    assert request.node.get_closest_marker("xdist_group").args == ("integration",)
"""


@pytest.fixture
def tiers(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST.read_text(encoding="utf-8"))
    pytester.makeini("[pytest]\nmarkers =\n    integration: starts Ray or a server\n    slow: slow\n")
    pytester.makepyfile(test_tiers=TESTS)
    return pytester


def test_integration_is_marked_through_fixtures_and_by_hand(tiers: pytest.Pytester) -> None:
    result = tiers.runpytest("-m", "integration", "--collect-only", "-q")
    selected = {line.split("::")[1] for line in result.outlines if "::" in line}
    assert selected == {"test_through_a_fixture", "test_marked_by_hand"}


def test_the_unit_tier_refuses_to_start_ray_or_a_server(tiers: pytest.Pytester) -> None:
    result = tiers.runpytest("-m", "not integration", "-q")
    result.assert_outcomes(passed=2, failed=3, deselected=2)
    text = result.stdout.str()
    assert "test_starts_ray_unmarked starts Ray but is not an integration test" in text
    assert "test_starts_an_mlflow_server_unmarked starts an MLflow server" in text
    assert "test_serves_a_model_unmarked starts an MLflow scoring server" in text


def test_integration_tests_share_one_xdist_group(tiers: pytest.Pytester) -> None:
    tiers.runpytest("-m", "integration", "-q").assert_outcomes(passed=2, deselected=5)


def test_every_file_in_the_run_order_exists():
    """LONGEST_FIRST orders files by name: a renamed or merged file would silently fall to the end."""
    tree = ast.parse(CONFTEST.read_text())
    order = next(
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "LONGEST_FIRST"
    )
    names = [ast.literal_eval(element) for element in order.elts]
    missing = [name for name in names if not (CONFTEST.parent / name).is_file()]
    assert names and not missing, f"tests/conftest.py LONGEST_FIRST names files that do not exist: {missing}"
