"""Install PyTorch into this interpreter's environment: the files pip chooses, installed by uv.

    python infra/scripts/install_torch.py "torch==2.13.0"

pip chooses, because it reads the machine's pip configuration (local wheel folders, extra indexes, a
constraints file) where the CPU build of torch may be; uv reads none of it and would fetch the default,
multi-GB CUDA build. uv installs, because it unpacks and byte-compiles in parallel: on the 2-core AMD EPYC
(2026-11-28) torch and its dependencies took 48 s with pip, 23 s with uv, plus 5 s for pip to choose.
Anything that fails falls back to a plain `pip install` of the spec. `make` calls it once per new `.venv`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def requirements(report: dict[str, Any]) -> list[str]:
    """`name @ url` of every file a `pip install --dry-run --report` chose to install."""
    return [f"{item['metadata']['name']} @ {item['download_info']['url']}" for item in report["install"]]


def with_uv(spec: str) -> bool:
    """Install `spec` as pip would choose it, with uv; False when any step fails (nothing is half-done that a
    pip install of the same files would not redo)."""
    uv = Path(sys.executable).with_name("uv")
    if not uv.is_file():
        return False
    with tempfile.TemporaryDirectory(prefix="install-torch-") as tmp:
        report = Path(tmp) / "report.json"
        pip = [sys.executable, "-m", "pip", "install", "--quiet"]
        if subprocess.run([*pip, "--dry-run", "--report", str(report), spec]).returncode != 0:
            return False
        files = requirements(json.loads(report.read_text()))
    if not files:  # already installed
        return True
    install = [str(uv), "pip", "install", "--quiet", "--no-deps", "--compile-bytecode"]
    return subprocess.run([*install, "--python", sys.executable, *files]).returncode == 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python infra/scripts/install_torch.py SPEC", file=sys.stderr)
        return 2
    if with_uv(argv[0]):
        return 0
    print("install_torch: installing with pip instead", file=sys.stderr)
    return subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", argv[0]]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
