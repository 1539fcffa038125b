"""docs/notebooks/quickstart.ipynb runs from top to bottom (nbclient, a real kernel, local Ray and MLflow
store), so it cannot rot. It runs as a copy in a temporary directory: the repository's notebook keeps no
outputs and the working tree stays clean."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]

NOTEBOOK = Path(__file__).resolve().parents[1] / "docs" / "notebooks" / "quickstart.ipynb"


def test_the_committed_notebook_has_no_outputs():
    import nbformat

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(not cell.outputs and cell.execution_count is None for cell in code)


def test_the_quickstart_notebook_runs(tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    copy = tmp_path / NOTEBOOK.name
    shutil.copy(NOTEBOOK, copy)
    # The kernel's local Ray: its own session files, on a short path (Unix socket paths: 107 characters)
    ray_dir = tempfile.mkdtemp(prefix="dl-nb-", dir="/tmp")
    monkeypatch.setenv("RAY_TMPDIR", ray_dir)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # the store under the copy's .dicelab/
    notebook = nbformat.read(copy, as_version=4)
    client = NotebookClient(
        notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    try:
        client.execute()
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [output for output in outputs if output.output_type == "error"]
    shown = "".join(
        str(output.get("data", {}).get("text/plain", "")) + output.get("text", "") for output in outputs
    )
    assert "Decision" in shown and "notebook-quickstart-best" in shown
    assert any("image/png" in output.get("data", {}) for output in outputs)  # the sensitivity figure
    assert (tmp_path / ".dicelab" / "mlflow.db").exists()
