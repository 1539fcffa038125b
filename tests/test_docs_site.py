"""The documentation site builds with `mkdocs build --strict`: a broken link, a page missing from the nav (or
a nav entry without its page) or a docstring the API reference cannot render fails `make test`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_docs_site_builds_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    warnings = [line for line in result.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]
    details = "\n".join(warnings) or result.stderr[-3000:]
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{details}"
    assert (site / "index.html").is_file()
    assert (site / "api" / "losses" / "index.html").is_file()


def test_readme_is_short_and_its_links_resolve() -> None:
    readme = ROOT / "README.md"
    lines = readme.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; the docs site holds the details"
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme.read_text(encoding="utf-8")):
        if "://" in target:
            continue
        assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"
