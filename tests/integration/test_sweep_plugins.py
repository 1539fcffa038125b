"""docs/plugins.md, run as a user runs it: its loss module and sweep config are taken from the page, then its
commands run in order on a private local Ray with the embedded SQLite store. A loss written outside the
repository races against dsc, is analysed and exported like a built-in, and the saved winner's model
predicts through `dicelab predict` with the plugin's file gone from where the sweep read it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from mlflow import MlflowClient

from dicelab.plugins.loading import digest_of
from dicelab.sweeps.winner_model import WINNER_MODEL
from dicelab.tracking import conventions as names

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

PAGE = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"
BLOCK = re.compile(r'^```(\w+)(?: title="([^"]+)")?\n(.*?)^```$', re.MULTILINE | re.DOTALL)


def page_blocks() -> tuple[dict[str, str], list[str]]:
    """The page's files (blocks with a title) and its commands (bash blocks), in order."""
    files, commands = {}, []
    for language, title, body in BLOCK.findall(PAGE.read_text()):
        if title:
            files[title] = body
        elif language == "bash":
            commands += [line for line in body.splitlines() if line.startswith("dicelab ")]
    return files, commands


def test_the_plugins_page_from_a_loss_module_to_a_predicting_winner(tmp_path: Path, sweep_tools) -> None:
    files, commands = page_blocks()
    assert set(files) == {"poly1.py", "poly1_vs_dsc.yaml"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    digest = digest_of(tmp_path / "poly1.py")
    uri = f"sqlite:///{tmp_path / '.dicelab' / 'mlflow.db'}"
    (tmp_path / "pairs.tsv").write_text(
        "text_a\ttext_b\nhow do I learn python quickly\twhat is the fastest way to learn python\n"
        "what is the capital of france\thow tall is mount everest\n"
    )
    check, sweep, analyze, export, predict = commands
    assert predict.startswith("dicelab predict models:/<model id> ")

    done = sweep_tools.run(check.split()[1:], tmp_path, timeout_s=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(line.startswith("pass  loss 'poly1': ") for line in done.stdout.splitlines()), done.stdout

    done = sweep_tools.run(sweep.split()[1:], tmp_path, timeout_s=700)
    assert done.returncode == 0, done.stdout + done.stderr
    parents, trials = sweep_tools.sweep_runs(uri, "poly1-vs-dsc")
    assert len(parents) == 1 and 4 <= len(trials) <= 6
    assert {run.data.params["loss.name"] for run in trials} == {"poly1", "dsc"}
    # every trial ran on a Ray worker that imported the driver's version of the plugin
    assert {run.data.tags.get("dicelab.plugins") for run in [*parents, *trials]} == {f"poly1={digest}"}
    assert {run.data.tags[names.OUTCOME] for run in trials} <= {names.COMPLETED, names.EARLY_STOPPED}
    assert "race:" in done.stdout and "dicelab.race.decision" in parents[0].data.tags

    # the analysis and the export in this process: they load no plugin (see SweepTools.run_here)
    done = sweep_tools.run_here(analyze.split()[1:], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    decision = done.stdout[done.stdout.index("Decision") :]
    assert "poly1" in decision and "dsc" in decision

    done = sweep_tools.run_here(export.split()[1:], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    best = yaml.safe_load((tmp_path / "best.yaml").read_text())
    assert best["plugins"] == [str(tmp_path / "poly1.py")]

    # The winner's model, saved from its trial: it carries the plugin, and predicts without the file
    model_uri = parents[0].data.tags[WINNER_MODEL]
    client = MlflowClient(uri)
    model_run = client.get_run(client.get_logged_model(model_uri.removeprefix("models:/")).source_run_id)
    winner = parents[0].data.tags[names.RACE_WINNER]  # e.g. "poly1" or "dsc level=batch"
    assert winner.split()[0] == model_run.data.params["loss.name"]  # poly1's model when poly1 wins
    (tmp_path / "poly1.py").rename(tmp_path / "poly1.py.moved")
    done = sweep_tools.run(
        ["predict", model_uri, "pairs.tsv", "--tracking-uri", uri], tmp_path, timeout_s=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    predictions = [json.loads(line) for line in done.stdout.splitlines()]
    assert [row["index"] for row in predictions] == [0, 1]
