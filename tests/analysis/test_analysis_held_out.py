"""Dev beside test, the Decision's comparisons repeated on test, and each loss against CE with a tuned
threshold: checked against dicelab.stats on the logged values."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dicelab.analysis import load_runs
from dicelab.analysis.comparisons import decisions
from dicelab.analysis.held_out import AT_DEFAULT, AT_TUNED, decision_statements, held_out
from dicelab.analysis.observations import AnalysisOptions
from dicelab.stats import BETTER, NO_DIFFERENCE, compare, holm

SEEDS = range(6)
# dev F1 / test F1 / CE's dev-tuned test F1 per loss and seed: dsc wins dev and test, beats CE at 0.5 on
# test, not CE with a tuned threshold; focal is worse on test than on dev
DEV = {"ce": 0.80, "dsc": 0.84, "focal": 0.83}
TEST = {"ce": 0.78, "dsc": 0.81, "focal": 0.79}
CE_TUNED = 0.81


def wobble(seed: int) -> float:
    return [0.0, 0.004, -0.003, 0.006, -0.005, 0.002][seed]


@pytest.fixture(scope="module")
def runs(module_sweep_log, module_tracking_uri):
    log = module_sweep_log("held-out")
    for loss in DEV:
        for seed in SEEDS:
            w = wobble(seed)
            metrics = {"test_f1": TEST[loss] + w + (0.002 * seed if loss == "ce" else 0.0)}
            metrics["test_f1_tuned"] = (CE_TUNED if loss == "ce" else TEST[loss]) + w + 0.001 * (seed % 2)
            metrics["best_dev_f1_tuned"] = DEV[loss] + 0.01 + w
            metrics["threshold"] = 0.3 + seed / 100
            run_id = log.trial(
                DEV[loss] + w + 0.001 * seed * (loss == "dsc"), loss=loss, seed=seed, metrics=metrics
            )
            log.client.log_text(run_id, predictions(seed), "predictions/test.jsonl")
    return load_runs("held-out", module_tracking_uri)


def predictions(seed: int) -> str:
    """Prediction records as the pair task writes them: P(positive) and the prediction at 0.5."""
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, 2, 60)
    probability = np.clip(0.4 * gold + rng.uniform(0, 0.6, 60), 0, 1).round(4)
    return "".join(
        json.dumps({"index": i, "label": str(g), "prediction": str(int(p > 0.5)), "probability": float(p)})
        + "\n"
        for i, (g, p) in enumerate(zip(gold, probability, strict=True))
    )


@pytest.fixture(scope="module")
def analysed(runs):
    options = AnalysisOptions(test="t")
    from dicelab.analysis.observations import observations

    found = decisions(runs, options)
    return found, held_out(observations(runs, options), found, runs, options), options


def per_seed(runs, loss, column):
    rows = runs.trials[runs.trials["loss.name"] == loss]
    return {int(s): 100 * float(v) for s, v in zip(rows["train.seed"], rows[column], strict=True)}


def test_each_configuration_has_its_test_mean_beside_its_dev_mean(runs, analysed):
    _, held, _ = analysed
    table = held.configurations.set_index("configuration")
    assert table.loc["dsc", "chosen"] and not table.loc["ce", "chosen"]
    for loss in DEV:
        dev, test = per_seed(runs, loss, "best_dev_f1"), per_seed(runs, loss, "test_f1")
        assert table.loc[loss, "dev_mean"] == pytest.approx(sum(dev.values()) / 6)
        assert table.loc[loss, "test_mean"] == pytest.approx(sum(test.values()) / 6)
        assert table.loc[loss, "drop"] == pytest.approx(
            table.loc[loss, "dev_mean"] - table.loc[loss, "test_mean"]
        )
    assert held.has_test


def test_the_decisions_comparisons_are_repeated_on_test_with_holm_over_the_same_family(runs, analysed):
    found, held, _ = analysed
    assert len(held.comparisons) == len(found.comparisons)
    expected = [
        compare(per_seed(runs, row.candidate, "test_f1"), per_seed(runs, row.reference, "test_f1"), test="t")
        for row in held.comparisons.itertuples()
    ]
    assert list(held.comparisons["difference"]) == pytest.approx([e.difference for e in expected])
    assert list(held.comparisons["p_holm"]) == pytest.approx(holm([e.p_value for e in expected]), nan_ok=True)


def test_each_loss_against_ce_at_half_and_with_a_tuned_threshold(runs, analysed):
    _, held, _ = analysed
    tuned = held.tuned
    assert set(tuned["split"]) == {"test"} and set(tuned["loss"]) == {"dsc", "focal"}
    for rival, column in ((AT_DEFAULT, "test_f1"), (AT_TUNED, "test_f1_tuned")):
        rows = tuned[tuned["rival"] == rival].set_index("loss")
        reference = per_seed(runs, "ce", column)
        expected = {
            loss: compare(per_seed(runs, loss, "test_f1"), reference, test="t") for loss in ("dsc", "focal")
        }
        adjusted = dict(zip(expected, holm([e.p_value for e in expected.values()]), strict=True))
        for loss, result in expected.items():
            assert rows.loc[loss, "difference"] == pytest.approx(result.difference)
            assert rows.loc[loss, "p_holm"] == pytest.approx(adjusted[loss])
            assert rows.loc[loss, "paired"] and rows.loc[loss, "n"] == 6
    by = tuned.set_index(["rival", "loss"])["verdict"]
    assert by[(AT_DEFAULT, "dsc")] == BETTER and by[(AT_TUNED, "dsc")] == NO_DIFFERENCE
    assert tuned.set_index(["rival", "loss"]).loc[(AT_TUNED, "dsc"), "threshold"] == pytest.approx(0.325)


def test_the_decision_says_the_winner_was_chosen_on_dev_and_its_drop(analysed):
    found, held, options = analysed
    statements = decision_statements(held, found.arenas.iloc[0], options)
    chosen = next(s for s in statements if s.startswith("**Chosen on dev"))
    drop = held.configurations.set_index("configuration").loc["dsc", "drop"]
    assert "`dsc`" in chosen and f"exceeds its test score by {drop:.2f} points" in chosen
    dsc = next(s for s in statements if s.startswith("`dsc` against `ce` with its threshold tuned"))
    assert "does not survive" in dsc


def test_without_a_test_split_ce_tuned_is_read_on_dev(sweep_log, tracking_uri):
    log = sweep_log("dev-only")
    for seed in range(3):
        log.trial(0.8 + seed / 100, loss="ce", seed=seed, metrics={"best_dev_f1_tuned": 0.82 + seed / 100})
        log.trial(0.83 + seed / 100, loss="dice", seed=seed, metrics={"best_dev_f1_tuned": 0.84})
        log.trial(
            None, loss="focal", seed=seed, outcome="failed", reason="RuntimeError: out of memory", history=[]
        )
    runs = load_runs("dev-only", tracking_uri)
    options = AnalysisOptions(test="t")
    from dicelab.analysis.observations import observations

    held = held_out(observations(runs, options), decisions(runs, options), runs, options)
    assert not held.has_test and held.comparisons.empty
    tuned = held.tuned[held.tuned["loss"] == "dice"].set_index("rival")
    assert set(held.tuned["split"]) == {"dev"}
    assert tuned.loc[AT_TUNED, "difference"] == pytest.approx(1.0)  # 83+s vs 82+s
    assert tuned.loc[AT_DEFAULT, "difference"] == pytest.approx(3.0)
    said = decision_statements(held, decisions(runs, options).arenas.iloc[0], options)
    assert said[0].startswith("**Chosen on dev, not judged on held-out data:** `dice` is the best of 3")
    assert said[-1] == (
        "`focal` against `ce` with its threshold tuned on dev: **not compared**, no usable seed "
        "(`focal`: 3 failed)."
    )


def test_the_report_puts_test_beside_dev_and_draws_the_threshold_figures(runs, tmp_path):
    from dicelab.analysis import build_report

    report = build_report(runs, tmp_path / "report", AnalysisOptions(test="t"), log_to_mlflow=False)
    text = report.markdown.read_text()
    assert "## Dev and test" in text and "## Against CE with a tuned threshold" in text
    assert "**Chosen on dev, judged on test:**" in text and "## Threshold and calibration" in text
    figures = sorted(path.name.split("_")[0] for path in (report.directory / "figures").glob("*.png"))
    assert {"threshold", "confusion", "reliability"} <= set(figures)
    assert (report.directory / "threshold_comparisons.csv").is_file()
    assert any("threshold tuned on dev" in line for line in report.decision)


def test_confusion_counts_at_each_trials_threshold():
    from sklearn.metrics import confusion_matrix

    from dicelab.analysis.threshold_figures import _confusion, _positive_label

    records = [json.loads(line) for line in predictions(3).splitlines()]
    assert _positive_label(records) == "1"
    gold = np.array([int(r["label"]) for r in records])
    probability = np.array([r["probability"] for r in records])
    at = _confusion([records, records], "1", [0.3, 0.7])
    expected = confusion_matrix(gold, probability >= 0.3) + confusion_matrix(gold, probability >= 0.7)
    np.testing.assert_array_equal(at, expected)
    as_reported = _confusion([records], "1", None)
    np.testing.assert_array_equal(as_reported, confusion_matrix(gold, probability > 0.5))


def test_the_sensitivity_table_compares_each_point_with_ce_tuned_on_dev(sweep_log, tracking_uri, tmp_path):
    from dicelab.analysis import sections
    from dicelab.analysis.context import ReportContext
    from dicelab.analysis.document import Table

    log = sweep_log("curve")
    for seed in range(3):
        log.trial(0.80 + seed / 100, loss="ce", seed=seed, metrics={"best_dev_f1_tuned": 0.82 + seed / 50})
        for alpha, base in ((0.1, 0.83), (0.5, 0.85)):
            log.trial(base + seed / 200, loss="dsc", seed=seed, params={"loss.alpha": alpha})
    runs = load_runs("curve", tracking_uri)
    options = AnalysisOptions(test="t")
    ctx = ReportContext(runs, options, tmp_path)
    tables = [block for block in sections.sensitivity(ctx) if isinstance(block, Table)]
    table = tables[0]
    column = list(table.header).index("Δ vs CE, threshold tuned on dev")
    ce_tuned = {seed: 82 + 2 * seed for seed in range(3)}
    expected = [
        compare({seed: 100 * (base + seed / 200) for seed in range(3)}, ce_tuned, test="t")
        for base in (0.83, 0.85)
    ]
    assert [row[column] for row in table.rows] == [f"{e.difference:+.2f}" for e in expected]
    adjusted = holm([e.p_value for e in expected])
    assert [row[column + 1] for row in table.rows] == [f"{p:.3g}" for p in adjusted]
