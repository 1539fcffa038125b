"""The Python API and the quickstart notebook, on one sweep: docs/notebooks/quickstart.ipynb runs from top to
bottom in a real Jupyter kernel (nbclient, a private local Ray, a SQLite MLflow store under the copy's
.dicelab/), so it cannot rot; then, in the same kernel, its `result` is checked (runs, decision, winner,
cost, the winner's model), the exported winner is trained again with `dicelab.trial` and reproduces the
winner's best dev metric, and a warm-started sweep runs that winner first. Errors are exceptions, not exits.

One sweep serves both because a sweep's cost is its processes (a kernel or driver importing torch,
transformers, Tune and MLflow, Ray's daemons, the trials' workers), not its trials. The notebook runs as a
copy (read into memory, run in a temporary directory): the repository's notebook keeps no outputs and
the working tree stays clean."""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dicelab
from dicelab.errors import ConfigError, DicelabError
from dicelab.tracking import conventions as names

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]

NOTEBOOK = Path(__file__).resolve().parents[1] / "docs" / "notebooks" / "quickstart.ipynb"
NAME = "notebook-quickstart"  # the notebook's experiment
SWEEP_CELL = "result = dicelab.sweep(config)"
# The notebook's trials run one at a time here (its config says two, for a user's 2 cores): the test
# workers share the cores, and a second trial worker process would import torch & co. once more.
CONCURRENT = ('"max_concurrent": 2', '"max_concurrent": 1')
KEYS = ["loss.name", "loss.alpha"]  # the notebook's configurations: ce, and Tversky with two values of α
# A valid trial config but for one misspelled key (the errors' test)
TINY: dict[str, Any] = {
    "name": "api-tiny",
    "data": {"source": "synthetic_pairs", "synthetic": {"n_train": 320, "n_dev": 48}, "max_length": 32},
    "model": {"backbone": "tiny-bert", "tiny_bert": {"hidden_size": 64, "num_layers": 1, "num_heads": 2}},
    "train": {"epochs": 3, "batch_size": 16},
}


class Kernel:
    """The kernel that ran the notebook: runs more code in it and returns what that code printed as JSON."""

    def __init__(self, client: Any, notebook: Any, directory: Path) -> None:
        self.client, self.notebook, self.directory = client, notebook, directory
        # the notebook's own cells' outputs, before any code run here
        self.outputs = {index: list(cell.get("outputs", [])) for index, cell in enumerate(notebook.cells)}

    def run(self, code: str) -> Any:
        import nbformat

        cell = nbformat.v4.new_code_cell(textwrap.dedent(code))
        self.notebook.cells.append(cell)
        self.client.execute_cell(cell, len(self.notebook.cells) - 1)
        printed = "".join(output.get("text", "") for output in cell.outputs if output.get("name") == "stdout")
        return json.loads(printed.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    import nbformat
    from nbclient import NotebookClient

    directory = Path(os.path.realpath(tmp_path_factory.mktemp("notebook")))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    (config_cell,) = [cell for cell in notebook.cells if CONCURRENT[0] in cell.source]
    config_cell.source = config_cell.source.replace(*CONCURRENT)
    # The kernel's local Ray: its own session files, on a short path (Unix socket paths: 107 characters)
    ray_dir = tempfile.mkdtemp(prefix="dl-nb-", dir="/tmp")
    env = dict(os.environ, RAY_TMPDIR=ray_dir)
    env.pop("MLFLOW_TRACKING_URI", None)  # the store under the temporary directory's .dicelab/
    client = NotebookClient(
        notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(directory)}}
    )
    try:
        with client.setup_kernel(env=env):
            for index, cell in enumerate(notebook.cells):
                client.execute_cell(cell, index)
            yield Kernel(client, notebook, directory)
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)


def printed(output: Any) -> bool:
    """Whether a cell's output shows text: stdout, or a display with content."""
    if output.get("name") == "stdout":
        return True
    if output.output_type != "display_data":
        return False
    data = output.get("data", {})
    empty_html = not str(data.get("text/html", "")).strip()
    return not (empty_html and str(data.get("text/plain", "")).startswith("<IPython.core.display.HTML"))


def test_the_committed_notebook_has_no_outputs():
    import nbformat

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(not cell.outputs and cell.execution_count is None for cell in code)
    assert sum(CONCURRENT[0] in cell.source for cell in code) == 1  # what the kernel fixture changes


def test_the_quickstart_notebook_runs(kernel):
    outputs = [output for cells in kernel.outputs.values() for output in cells]
    assert not [output for output in outputs if output.output_type == "error"]
    shown = "".join(
        str(output.get("data", {}).get("text/plain", "")) + output.get("text", "") for output in outputs
    )
    assert "Decision" in shown and "notebook-quickstart-best" in shown
    assert any("image/png" in output.get("data", {}) for output in outputs)  # the sensitivity figure
    assert (kernel.directory / ".dicelab" / "mlflow.db").exists()


def test_a_sweep_returns_its_runs_decision_winner_and_cost(kernel):
    facts = kernel.run(
        """
        import json
        from mlflow import MlflowClient

        _client = MlflowClient(result.tracking_uri)
        _winner = _client.get_run(result.winner_run_id)
        print(json.dumps({
            "exit_code": result.exit_code, "interrupted": result.interrupted,
            "runs": result.runs[["outcome", "degenerate", "loss.name", "loss.alpha", "best_dev_f1"]]
                .to_dict("records"),
            "decision": result.decision, "cost": result.cost, "html": result._repr_html_(),
            "winner_model_uri": result.winner_model_uri, "warnings": result.warnings,
            "parent_tag": _client.get_run(result.parent_run_id).data.tags.get("dicelab.winner_model"),
            "winner_params": _winner.data.params, "winner_best": _winner.data.metrics["best_dev_f1"],
        }))
        """
    )
    import pandas as pd

    runs = pd.DataFrame(facts["runs"])
    assert facts["exit_code"] == 0 and not facts["interrupted"]
    assert len(runs) == 6  # ce, and Tversky at two values of α, on two seeds
    assert set(runs["outcome"]) == {names.COMPLETED}
    assert facts["decision"][0] == "Decision" and any("Best:" in line for line in facts["decision"])
    assert facts["cost"]["wall_seconds"] > 0 and facts["cost"]["cost/trials"] == 6
    (sweep_cell,) = [index for index, cell in enumerate(kernel.notebook.cells) if SWEEP_CELL in cell.source]
    # It printed nothing: no stdout, and no console rendered in the notebook (Tune's notebook reporter
    # displays an empty HTML element, which shows nothing), only the result's own display.
    assert not [output for output in kernel.outputs[sweep_cell] if printed(output)]
    assert "<table>" in facts["html"]

    # The winner's model: logged on its trial's run from its checkpointed best state, linked by the parent.
    assert facts["winner_model_uri"] is not None and facts["winner_model_uri"].startswith("models:/")
    assert facts["parent_tag"] == facts["winner_model_uri"]
    usable = runs[runs["degenerate"].isna()]  # a degenerate trial is never averaged in
    means = usable.groupby(KEYS, dropna=False)["best_dev_f1"].mean()
    best_name, best_alpha = means.idxmax()
    params = facts["winner_params"]
    assert params["loss.name"] == best_name
    if isinstance(best_alpha, float) and math.isnan(best_alpha):
        assert "loss.alpha" not in params
    else:
        assert float(params["loss.alpha"]) == best_alpha
    same = usable[
        (usable["loss.name"] == best_name)
        & (usable["loss.alpha"].isna() | (usable["loss.alpha"] == best_alpha))
    ]
    assert facts["winner_best"] == same["best_dev_f1"].max()
    assert facts["warnings"] == []


def test_load_sweep_of_the_finished_sweep_equals_what_sweep_returned(kernel):
    facts = kernel.run(
        """
        import json
        import yaml

        _again = dicelab.load_sweep(result.name, result.sweep_id, tracking_uri=result.tracking_uri)
        _newest = dicelab.load_sweep(result.name, tracking_uri=result.tracking_uri)
        _text = dicelab.export(result.name, sweep_id=result.sweep_id, tracking_uri=result.tracking_uri)
        print(json.dumps({
            "equal": _again == result, "newest": _newest == result, "sweep_id": _again.sweep_id,
            "best_config": result.best_config, "exported": yaml.safe_load(_text),
            "best_value": result.best_value, "metric": result.metric, "mode": result.mode,
            "winner_best": MlflowClient(result.tracking_uri).get_run(result.winner_run_id)
                .data.metrics["best_dev_" + result.metric],
            "verdicts": result.decision.verdicts.to_dict("records"), "best": result.decision.best,
            "lines": list(_again.decision), "trials": len(_again.trials),
        }))
        """
    )
    assert facts["equal"] and facts["newest"]
    assert facts["best_config"] == facts["exported"] and facts["best_config"]["train"]["seed"] >= 1
    assert (facts["metric"], facts["mode"]) == ("f1", "max")
    assert facts["best_value"] == facts["winner_best"]
    assert facts["trials"] == 6 and facts["lines"][0] == "Decision"
    assert all(
        {"difference", "low", "high", "p_value", "p_holm", "verdict"} <= set(row) for row in facts["verdicts"]
    )
    # a verdict row per comparison the lines speak of (none when a single configuration has usable seeds)
    compared = any(("beats" in line or "Undecided" in line) for line in facts["lines"])
    assert bool(facts["verdicts"]) == compared
    assert any(facts["best"] in line for line in facts["lines"])


def test_the_winners_model_predicts_with_mlflow_pyfunc(kernel):
    # `model`: the notebook's mlflow.pyfunc.load_model(result.winner_model_uri); `pairs`: two new pairs
    facts = kernel.run(
        """
        import json
        print(json.dumps({"predicted": len(model.predict(pairs)), "pairs": len(pairs)}))
        """
    )
    assert facts == {"predicted": 2, "pairs": 2}


def test_the_exported_winner_reproduces_its_best_dev_metric(kernel):
    facts = kernel.run(
        """
        import json
        from pathlib import Path
        import yaml
        from mlflow import MlflowClient

        _text = dicelab.export(result.name, out=Path("best.yaml"))
        _lines = []
        _again = dicelab.trial(Path("best.yaml"), track=False, progress=_lines.append)
        _winner = MlflowClient(result.tracking_uri).get_run(result.winner_run_id)
        print(json.dumps({
            "text": _text, "file": Path("best.yaml").read_text(),
            "outcome": _again.outcome, "run_id": _again.run_id, "lines": len(_lines), "best": _again.best,
            "winner_seed": _winner.data.params["train.seed"],
            "winner_best": _winner.data.metrics["best_dev_f1"],
        }))
        """
    )
    import yaml

    assert yaml.safe_load(facts["text"]) == yaml.safe_load(facts["file"])
    assert yaml.safe_load(facts["text"])["train"]["seed"] == int(facts["winner_seed"])
    assert facts["outcome"] == names.COMPLETED and facts["run_id"] is None and facts["lines"]
    assert facts["best"] == pytest.approx(facts["winner_best"], abs=1e-6)


def test_a_warm_started_sweep_runs_the_earlier_winner_first(kernel):
    # One trial worker (max_concurrent 1) and one epoch a trial: this sweep is about the order of its trials,
    # not concurrency or what the trials learn.
    facts = kernel.run(
        f"""
        import contextlib, io, json
        from mlflow import MlflowClient

        _search = {{
            "algorithm": "random",
            "num_samples": 1,
            "space": {{"loss.name": {{"choice": ["ce", "tversky"]}}}},
            "seeds": [1],
            "resources": {{"cpu": 1}},
            "max_concurrent": 1,
            "start_from": {{"experiment": {NAME!r}}},
            "save_model": "none",
        }}
        _train = {{**config["train"], "epochs": 1}}
        _lines, _printed = [], io.StringIO()
        with contextlib.redirect_stdout(_printed):
            _warm = dicelab.sweep(
                {{**config, "name": "notebook-warm", "train": _train, "search": _search}},
                progress=_lines.append,
            )
        _winner = MlflowClient(result.tracking_uri).get_run(result.winner_run_id)
        print(json.dumps({{
            "exit_code": _warm.exit_code, "runs": len(_warm.runs), "winner_model_uri": _warm.winner_model_uri,
            "lines": _lines, "printed": _printed.getvalue(),
            "first": _warm.runs.sort_values("trial_id").iloc[0]["loss.name"],
            "winner": _winner.data.params["loss.name"],
        }}))
        """
    )
    assert facts["exit_code"] == 0 and facts["runs"] == 2 and facts["winner_model_uri"] is None
    assert any(line.startswith(f"warm start: 1 configuration(s) of {NAME}") for line in facts["lines"])
    assert facts["first"] == facts["winner"]
    # The progress callback gets the sweep's lines; nothing is printed.
    assert any(line.startswith("trials: 2 completed") for line in facts["lines"])
    assert facts["printed"] == ""


def test_errors_are_exceptions_not_exits(tmp_path):
    with pytest.raises(ConfigError, match="trian"):
        dicelab.trial({**TINY, "trian": {}})
    with pytest.raises(DicelabError):
        dicelab.sweep(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="retry_failed"):
        dicelab.sweep(tmp_path / "missing.yaml", retry_failed=True)
