"""`dicelab export`: the winner (the decision's best configuration, or a race's winner; its best seed) as a
runnable trial config; bad input is one line, exit code 2, and no file. That `dicelab trial` on the exported
file reproduces the winner's metric is tested on a real sweep in tests/test_api.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dicelab.analysis.export import find_winner, winner_config
from dicelab.cli import main
from dicelab.tracking import conventions as names


def trial_config(loss: str, seed: int) -> str:
    return yaml.safe_dump(
        {"name": "exp", "loss": {"name": loss}, "train": {"seed": seed}, "tracking": {"experiment": "exp"}}
    )


def three_losses(sweep_log) -> dict[tuple[str, int], str]:
    """ce mean 0.61, dice mean 0.65 (seeds 0.66 / 0.64), focal one lucky seed 0.70 but mean 0.60."""
    log = sweep_log("exp")
    values = {"ce": (0.60, 0.62), "dice": (0.66, 0.64), "focal": (0.70, 0.50)}
    ids = {}
    for loss, pair in values.items():
        for seed, value in enumerate(pair, 1):
            run_id = log.trial(value, loss=loss, seed=seed)
            log.client.log_text(run_id, trial_config(loss, seed), names.CONFIG_ARTIFACT)
            ids[loss, seed] = run_id
    return ids


def test_the_winner_is_the_best_seed_of_the_best_configuration_by_mean(tracking_uri, sweep_log):
    ids = three_losses(sweep_log)
    winner = find_winner("exp", tracking_uri)
    assert (winner.run_id, winner.configuration, winner.seed) == (ids["dice", 1], "dice", 1)
    assert winner.value == pytest.approx(0.66) and winner.mean == pytest.approx(65.0) and winner.seeds == 2
    exported = yaml.safe_load(winner_config(winner))
    assert exported["loss"] == {"name": "dice"} and exported["train"]["seed"] == 1
    assert exported["name"] == "exp-best" and exported["tracking"]["experiment"] is None
    assert "# The winner of experiment 'exp'" in winner_config(winner)
    # the mean in the report's percent, the seed's value as logged: each says which
    assert winner.unit == "%" and "(mean dev f1 65.00% over 2 seeds)" in winner_config(winner)
    assert "best dev f1 0.660000" in winner_config(winner)


def test_a_decided_race_exports_its_winner(tracking_uri, sweep_log):
    ids = three_losses(sweep_log)
    log = sweep_log("exp", parent=False)  # the store's client: tag the sweep as a race that chose ce
    client = log.client
    parent = client.search_runs(
        [log.experiment_id], filter_string=f"tags.`{names.ROLE}` = '{names.ROLE_PARENT}'"
    )[0]
    for tag, value in {names.RACE_DECISION: "ce is separated", names.RACE_WINNER: "ce"}.items():
        client.set_tag(parent.info.run_id, tag, value)
    for seed in (1, 2):
        client.set_tag(ids["ce", seed], names.RACE_STATUS, "winner")
    winner = find_winner("exp", tracking_uri, sweep_id=parent.data.tags[names.SWEEP_ID])
    assert (winner.run_id, winner.race_winner, winner.configuration) == (ids["ce", 2], True, "ce")
    assert "the configuration its seed race chose" in winner_config(winner)


def test_export_writes_the_file(tracking_uri, sweep_log, tmp_path, capsys):
    ids = three_losses(sweep_log)
    out = tmp_path / "best.yaml"
    assert main(["export", "--experiment", "exp", "--tracking-uri", tracking_uri, "--out", str(out)]) == 0
    assert yaml.safe_load(out.read_text())["loss"]["name"] == "dice"
    assert ids["dice", 1] in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--experiment", "nope"], "no experiment 'nope'"),
        (["--experiment", "exp", "--sweep-id", "zzz"], "no sweep with id 'zzz'"),
        (["--experiment", "empty"], "experiment 'empty' has no usable trial to choose from: 1 failed"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_no_file(tracking_uri, sweep_log, tmp_path, capsys, args, expected):
    three_losses(sweep_log)
    sweep_log("empty").trial(None, outcome=names.FAILED)
    out = tmp_path / "best.yaml"
    code = main(["export", *args, "--tracking-uri", tracking_uri, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and expected in err and len(err.strip().splitlines()) == 1
    assert not out.exists() and not list(Path(tmp_path).glob(".best.yaml.*"))


def test_an_out_that_cannot_be_written_is_one_line_exit_2(tracking_uri, sweep_log, tmp_path, capsys):
    three_losses(sweep_log)
    (tmp_path / "afile").write_text("")
    out = tmp_path / "afile" / "best.yaml"
    assert main(["export", "--experiment", "exp", "--tracking-uri", tracking_uri, "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error == [f"dicelab export: error: {out}: cannot write there (Not a directory)"]


def test_no_store_is_one_line_exit_2(tmp_path, capsys):
    out = tmp_path / "best.yaml"
    uri = f"sqlite:///{tmp_path / 'missing' / 'mlflow.db'}"
    assert main(["export", "--experiment", "exp", "--tracking-uri", uri, "--out", str(out)]) == 2
    assert "no MLflow store" in capsys.readouterr().err and not out.exists()


def test_mode_min_exports_the_lowest_configuration_and_its_lowest_seed(tracking_uri, sweep_log):
    """A sweep that minimised the dev cross entropy (search.mode: min, every trial's train.mode)."""
    log = sweep_log("loss-min")
    values = {"ce": (0.41, 0.39), "dice": (0.55, 0.50), "focal": (0.30, 0.60)}  # focal: one lucky seed
    ids = {}
    for loss, pair in values.items():
        for seed, value in enumerate(pair, 1):
            run_id = log.trial(value, loss=loss, seed=seed, metric="log_loss", params={"train.mode": "min"})
            log.client.log_text(run_id, trial_config(loss, seed), names.CONFIG_ARTIFACT)
            ids[loss, seed] = run_id
    winner = find_winner("loss-min", tracking_uri)
    assert (winner.run_id, winner.configuration, winner.seed, winner.mode) == (ids["ce", 2], "ce", 2, "min")
    assert winner.value == pytest.approx(0.39) and winner.metric == "log_loss"
    assert "(the lowest: mode min)" in winner_config(winner)
