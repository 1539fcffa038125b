"""infra/scripts/install_torch.py: the files pip chose, as uv requirements, and its usage."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "infra" / "scripts" / "install_torch.py"


def _script():
    spec = importlib.util.spec_from_file_location("install_torch", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_file_pip_chose_is_one_requirement_by_name_and_url():
    # the shape of `pip install --dry-run --report` (pip's installation report, version 1)
    report = {
        "version": "1",
        "install": [
            {
                "metadata": {"name": "torch", "version": "2.13.0+cpu"},
                "download_info": {"url": "file:///opt/wheels/torch-2.13.0%2Bcpu-cp311-cp311-manylinux.whl"},
            },
            {
                "metadata": {"name": "sympy", "version": "1.14.0"},
                "download_info": {"url": "https://files.example/sympy-1.14.0-py3-none-any.whl"},
            },
        ],
    }
    assert _script().requirements(report) == [
        "torch @ file:///opt/wheels/torch-2.13.0%2Bcpu-cp311-cp311-manylinux.whl",
        "sympy @ https://files.example/sympy-1.14.0-py3-none-any.whl",
    ]
    assert _script().requirements({"version": "1", "install": []}) == []  # all there already


def test_without_exactly_one_spec_it_says_how_to_use_it():
    for args in ([], ["torch", "numpy"]):
        done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)
        assert done.returncode == 2 and done.stderr == "usage: python infra/scripts/install_torch.py SPEC\n"
