"""nox sessions. `nox -s next_ray` checks a Ray upgrade in one command: it installs dicelab with the first Ray
release after the one pyproject pins (when one is installable from the package index), then runs the Ray
adapter's contract tests and the sweep tests against it. `nox -s next_ray -- which` only says which release
that is. `nox -s next_ray -- integration` adds the integration sweep tests (each starts Ray; minutes each).
See docs/clusters.md ("Upgrading Ray")."""

from __future__ import annotations

import re
from pathlib import Path

import nox
from packaging.version import Version

nox.options.default_venv_backend = "venv"
nox.options.sessions = []  # nothing runs without `-s`

PYPROJECT = Path(__file__).parent / "pyproject.toml"
PINNED_RAY = Version(re.search(r'"ray\[default,tune\]==([^"]+)"', PYPROJECT.read_text()).group(1))
UNIT_TESTS = ["tests/sweeps"]  # the adapter's contract (tests/sweeps/test_ray_adapter.py) and the sweep units
INTEGRATION_TESTS = [
    "tests/integration/test_sweep_local.py",
    "tests/integration/test_sweep_cluster.py",
    "tests/integration/faults/test_fault_driver.py",
]


def next_release(available: list[str], pinned: Version = PINNED_RAY) -> Version | None:
    """The first final release after the pinned one, of those the index lists."""
    newer = [Version(v) for v in available if not Version(v).is_prerelease and Version(v) > pinned]
    return min(newer, default=None)


def _available(session: nox.Session) -> list[str]:
    """Ray's releases, as pip's own client lists them from the configured index."""
    listing = session.run("python", "-m", "pip", "index", "versions", "ray", silent=True) or ""
    found = re.search(r"Available versions:\s*(.+)", listing)
    return [v.strip() for v in found.group(1).split(",")] if found else []


@nox.session(name="next_ray", reuse_venv=True)
def next_ray(session: nox.Session) -> None:
    """The sweep tests against the next Ray release (skipped, saying so, when none is installable yet)."""
    target = next_release(_available(session))
    if target is None:
        session.skip(f"no Ray release after {PINNED_RAY} is installable yet")
    session.log(f"Ray {PINNED_RAY} is pinned; checking Ray {target}")
    if session.posargs == ["which"]:
        return
    session.install("-e", ".[dev]")
    # over the pin: pip warns that dicelab asks for the pinned release, which is the point of this session
    session.install(f"ray[default,tune]=={target}")
    session.run("python", "-c", "import ray; print('ray', ray.__version__)")
    pytest = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    session.run(*pytest, *UNIT_TESTS)
    if "integration" in session.posargs:
        for test_file in INTEGRATION_TESTS:  # one file at a time: each starts its own Ray
            session.run(*pytest, "-m", "integration", test_file)
