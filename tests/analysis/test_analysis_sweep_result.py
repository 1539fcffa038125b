"""The sweep result object read back from MLflow (`dicelab.load_sweep`): the winner's exported config, its
value, the Decision with its verdicts, the trials and the cost, equal however often it is read. That
`dicelab.sweep` returns an equal object for a real sweep is tested in tests/test_api.py."""

from __future__ import annotations

import pytest
import yaml

import dicelab
from dicelab.analysis.export import find_winner, winner_config
from dicelab.errors import TrackingError
from dicelab.tracking import conventions as names


def trial_config(loss: str, seed: int, mode: str = "max") -> str:
    return yaml.safe_dump(
        {"name": "res", "loss": {"name": loss}, "train": {"seed": seed, "mode": mode}, "tracking": {}}
    )


def logged_sweep(sweep_log, experiment: str, values: dict[str, list[float]], **trial) -> dict:
    log = sweep_log(experiment, **({"sweep_id": trial.pop("sweep_id")} if "sweep_id" in trial else {}))
    mode = trial.get("params", {}).get("train.mode", "max")
    ids = {}
    for loss, per_seed in values.items():
        for seed, value in enumerate(per_seed, 1):
            run_id = log.trial(value, loss=loss, seed=seed, **trial)
            log.client.log_text(run_id, trial_config(loss, seed, mode), names.CONFIG_ARTIFACT)
            ids[loss, seed] = run_id
    log.client.log_batch(log.parent_id, metrics=[])
    # ended on the log's clock, which runs a second a run ahead of the real one
    log.client.set_terminated(log.parent_id, "FINISHED", end_time=log._tick())
    return ids


def test_a_finished_sweep_reads_back_as_the_same_result(tracking_uri, sweep_log):
    ce, dice = [0.70, 0.72, 0.71, 0.69, 0.70, 0.71], [0.80, 0.83, 0.81, 0.82, 0.79, 0.81]
    ids = logged_sweep(sweep_log, "res", {"ce": ce, "dice": dice})
    result = dicelab.load_sweep("res", "sweep-1", tracking_uri)
    assert result == dicelab.load_sweep("res", tracking_uri=tracking_uri)  # its newest sweep
    assert (result.metric, result.mode, result.exit_code) == ("f1", "max", 0)
    assert result.winner_run_id == ids["dice", 2] and result.best_value == pytest.approx(0.83)
    assert result.best_config == yaml.safe_load(winner_config(find_winner("res", tracking_uri)))
    assert result.best_config["name"] == "res-best" and result.best_configuration == "dice"
    assert len(result.trials) == 12 and result.runs is result.trials
    assert result.decision[0] == "Decision" and result.decision.best == "dice"
    verdict = result.decision.verdicts.set_index(["candidate", "reference"]).loc[("dice", "ce")]
    assert verdict["verdict"] == "better" and verdict["difference"] == pytest.approx(10.5, abs=0.01)
    assert result.cost["wall_seconds"] > 0 and result.winner_model_uri is None


def test_mode_min_reads_back_the_lowest(tracking_uri, sweep_log):
    values = {"ce": [0.40, 0.38, 0.41], "dice": [0.52, 0.50, 0.55]}
    ids = logged_sweep(sweep_log, "lossy", values, metric="log_loss", params={"train.mode": "min"})
    result = dicelab.load_sweep("lossy", tracking_uri=tracking_uri)
    assert (result.metric, result.mode) == ("log_loss", "min")
    assert result.winner_run_id == ids["ce", 2] and result.best_value == pytest.approx(0.38)
    assert result.best_config["train"]["mode"] == "min"


def test_two_results_differ_when_the_sweep_changed(tracking_uri, sweep_log):
    logged_sweep(sweep_log, "grown", {"ce": [0.70, 0.72], "dice": [0.80, 0.83]})
    before = dicelab.load_sweep("grown", tracking_uri=tracking_uri)
    sweep_log("grown", sweep_id="sweep-2").trial(0.9, loss="dice", seed=3)  # a newer sweep of it
    assert dicelab.load_sweep("grown", "sweep-1", tracking_uri) == before
    assert dicelab.load_sweep("grown", tracking_uri=tracking_uri) != before


def test_an_unknown_sweep_is_an_error(tracking_uri, sweep_log):
    logged_sweep(sweep_log, "known", {"ce": [0.7, 0.71]})
    with pytest.raises(TrackingError, match="no sweep with id 'nope'"):
        dicelab.load_sweep("known", "nope", tracking_uri)
