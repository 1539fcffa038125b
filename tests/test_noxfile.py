"""noxfile.py: the versions its `oldest` and `newest` sessions install are the ends of pyproject's ranges, and
`next_ray` picks the first release after the newest."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def noxfile():
    spec = importlib.util.spec_from_file_location("noxfile", ROOT / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    writes, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ in the repository root
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = writes
    return module


@pytest.mark.parametrize("package", ["ray", "mlflow"])
def test_the_sessions_install_versions_inside_pyprojects_range(noxfile, package):
    spec = noxfile.requirement(package).specifier
    oldest, newest = noxfile.ENDS["oldest"][package], noxfile.ENDS["newest"][package]
    assert spec.contains(oldest) and spec.contains(newest)
    assert Version(oldest) < Version(newest)


def test_ray_range_covers_2_55_through_2_60(noxfile):
    spec = noxfile.requirement("ray").specifier
    assert all(spec.contains(f"2.{minor}.0") for minor in range(55, 61))


def test_next_release_is_the_first_final_release_after_the_newest(noxfile):
    available = ["2.62.0", "2.61.0rc1", "2.61.1", "2.60.0", "2.55.1"]
    assert noxfile.next_release(available, newest="2.60.0") == Version("2.61.1")
    assert noxfile.next_release(["2.60.0", "2.59.0"], newest="2.60.0") is None
