"""benchmarks/results/: each Markdown file holds one script's current figures with the date, the machine and
the command that reproduces them, and docs/performance.md points to each file instead of repeating it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
FILES = sorted(path for path in RESULTS.glob("*.md") if path.name != "README.md")


# Results files that no benchmark script writes: the supported versions come from the nox sessions.
PRODUCERS = {"supported_versions.md": "noxfile.py"}


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.name)
def test_a_results_file_names_its_script_date_machine_and_command(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    script = PRODUCERS.get(path.name, f"benchmarks/{path.stem}.py")
    assert (ROOT / script).is_file(), f"{path.name}: no {script}"
    assert re.search(r"\b20\d\d-\d\d-\d\d\b", text), f"{path.name}: no date"
    assert "core" in text, f"{path.name}: no machine"
    commands = re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL)
    runs = "nox -s" if script == "noxfile.py" else script
    assert any(runs in command for command in commands), f"{path.name}: no command running {script}"


def test_the_performance_page_points_to_every_results_file() -> None:
    page = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    missing = [path.name for path in FILES if f"`{path.name}`" not in page]
    assert not missing, f"docs/performance.md does not name {missing}"
