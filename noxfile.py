"""nox sessions: dicelab against the ends of the Ray and MLflow ranges pyproject.toml supports.

    .venv/bin/nox -s oldest     # Ray 2.55.1, MLflow 3.10.1 (the oldest supported)
    .venv/bin/nox -s newest     # Ray 2.60.0, MLflow 3.17.2 (what `make test` installs)
    .venv/bin/nox -s next_ray   # the first Ray release above the range, when the index has one

Each session makes its own venv (`.nox/<name>`), installs CPU torch as `make` does (infra/scripts/
install_torch.py), dicelab with its dev extra and the session's Ray and MLflow, then runs the unit tier
(`make check`'s tests) and one real local-Ray sweep, the quickstart, plus `dicelab analyze` of it, in a
temporary directory. `-- unit` runs the unit tier only, `-- sweep` the sweep and analysis only; `next_ray`
adds `-- integration` for the sweep integration tests. docs/development.md ("Supported versions") records
which versions passed; docs/clusters.md ("Upgrading Ray") says how a team matches its cluster's Ray.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import nox
from packaging.requirements import Requirement
from packaging.version import Version

nox.options.default_venv_backend = "venv"
nox.options.sessions = []  # nothing runs without `-s`

ROOT = Path(__file__).parent
PYPROJECT = ROOT / "pyproject.toml"
TORCH_SPEC = "torch==2.13.0"  # the CPU wheel, as the Makefile's TORCH_SPEC
# The ends of pyproject's ranges that a session installs (tests/test_noxfile.py checks they are inside them)
ENDS = {
    "oldest": {"ray": "2.55.1", "mlflow": "3.10.1"},
    "newest": {"ray": "2.60.0", "mlflow": "3.17.2"},
}
UNIT_TIER = ["-m", "not integration and not slow"]
INTEGRATION_TESTS = [
    "tests/integration/test_sweep_local.py",
    "tests/integration/test_sweep_cluster.py",
    "tests/integration/faults/test_fault_driver.py",
]


def requirement(name: str) -> Requirement:
    """pyproject's dependency on `name`."""
    text = PYPROJECT.read_text()
    block = text[text.index("dependencies = [") : text.index("]\n", text.index("dependencies = ["))]
    for line in re.findall(r'"([^"]+)"', block):
        if Requirement(line).name == name:
            return Requirement(line)
    raise KeyError(name)


def next_release(available: list[str], newest: str = ENDS["newest"]["ray"]) -> Version | None:
    """The first final release after the newest supported one, of those the index lists."""
    newer = [Version(v) for v in available if not Version(v).is_prerelease and Version(v) > Version(newest)]
    return min(newer, default=None)


def _install(session: nox.Session, ray: str, mlflow: str) -> None:
    session.install("uv")  # `nox -R` (reuse the venv, no installs) skips these three
    session.run_install("python", "infra/scripts/install_torch.py", TORCH_SPEC)
    uv = ["uv", "pip", "install", "--quiet", "--python", str(Path(session.bin) / "python")]
    session.run_install(*uv, "-e", ".[dev]", f"ray[default,tune]=={ray}", f"mlflow[auth]=={mlflow}")
    versions = "import ray, mlflow; print('ray', ray.__version__, 'mlflow', mlflow.__version__)"
    session.run("python", "-c", versions)


def _unit(session: nox.Session) -> None:
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", *UNIT_TIER)


# Ray's fixed start-up waits, raised as the test suite raises them (tests/conftest.py RAY_START_UP_WAITS):
# on a loaded 2-core machine the raylet missed its wait for the agents' ports (Ray 2.55). Only waits.
START_UP_WAITS = {
    "RAY_gcs_server_port_wait_time_s": "120",
    "RAY_NUM_REDIS_GET_RETRIES": "120",
    "RAY_raylet_start_wait_time_s": "120",
    "RAY_worker_register_timeout_seconds": "180",
    "RAY_agent_register_timeout_ms": "180000",  # the raylet's wait for its agents' port files
}


def _sweep_and_analyze(session: nox.Session) -> None:
    """The quickstart sweep on a private local Ray, tracked in a new SQLite store, then its analysis."""
    with tempfile.TemporaryDirectory(prefix=f"nox-{session.name}-") as tmp, session.chdir(tmp):
        session.run("dicelab", "sweep", str(ROOT / "experiments" / "quickstart.yaml"), env=START_UP_WAITS)
        session.run("dicelab", "analyze", "--experiment", "quickstart", "--out", "report")
        session.run("python", "-c", "import pathlib; assert any(pathlib.Path('report').iterdir())")


def _ends(session: nox.Session, end: str) -> None:
    versions = ENDS[end]
    _install(session, versions["ray"], versions["mlflow"])
    if "sweep" not in session.posargs:
        _unit(session)
    if "unit" not in session.posargs:
        _sweep_and_analyze(session)


@nox.session(name="oldest")
def oldest(session: nox.Session) -> None:
    """The unit tier and the quickstart sweep + analyze with the oldest supported Ray and MLflow."""
    _ends(session, "oldest")


@nox.session(name="newest")
def newest(session: nox.Session) -> None:
    """The same with the newest supported Ray and MLflow."""
    _ends(session, "newest")


def _available(session: nox.Session) -> list[str]:
    """Ray's releases, as pip's own client lists them from the configured index."""
    listing = session.run("python", "-m", "pip", "index", "versions", "ray", silent=True) or ""
    found = re.search(r"Available versions:\s*(.+)", listing)
    return [v.strip() for v in found.group(1).split(",")] if found else []


@nox.session(name="next_ray", reuse_venv=True)
def next_ray(session: nox.Session) -> None:
    """The sweep tests against the first Ray release above the range (skipped, saying so, when none is
    installable yet): over the range, so pip warns that dicelab asks for another Ray, which is the point."""
    target = next_release(_available(session))
    if target is None:
        session.skip(f"no Ray release after {ENDS['newest']['ray']} is installable yet")
    session.log(f"checking Ray {target}")
    if session.posargs == ["which"]:
        return
    _install(session, str(target), ENDS["newest"]["mlflow"])
    pytest = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    session.run(*pytest, "tests/sweeps")
    if "integration" in session.posargs:
        for test_file in INTEGRATION_TESTS:  # one file at a time: each starts its own Ray
            session.run(*pytest, "-m", "integration", test_file)
