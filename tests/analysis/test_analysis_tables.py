"""Sensitivity curves, ablation table and importance on a sweep with known values, checked numerically."""

import math

import pytest
from scipy import stats

from dicelab.analysis import (
    AnalysisOptions,
    ablation_table,
    load_runs,
    observations,
    parameter_importance,
    sensitivity_curves,
    swept_params,
)

T2 = stats.t.ppf(0.975, 2)  # two-sided 95% quantile with 3 seeds
PAPER = {
    "metric": "f1",
    "results": {"ce": {"original": 91.3, "+positive": 92.27}, "tversky": {"original": 92.0}},
    "sensitivity": {"tversky": {"0.6": 84.67}},
}
TVERSKY = {0.2: [0.70, 0.72, 0.74], 0.4: [0.80, 0.81, 0.82], 0.6: [0.78, 0.79, math.nan]}
CE = {"original": [0.75, 0.76, 0.77], "+positive": [0.78, 0.80, 0.82]}


@pytest.fixture(scope="module")
def runs(module_tracking_uri, module_sweep_log):
    log = module_sweep_log("table8", paper=PAPER)
    for alpha, values in TVERSKY.items():
        for seed, value in enumerate(values):
            params = {"loss.alpha": alpha, "loss.beta": round(1 - alpha, 6), "loss.gamma": 1.0}
            log.trial(value, loss="tversky", seed=seed, params=params)
    log.trial(None, loss="tversky", seed=3, params={"loss.alpha": 0.6, "loss.beta": 0.4, "loss.gamma": 1.0},
              outcome="non_finite", reason="loss became NaN at step 12", history=[])  # fmt: skip
    for variant, values in CE.items():
        for seed, value in enumerate(values):
            log.trial(value, loss="ce", variant=variant, seed=seed)
    for alpha, value in ((0.1, 0.74), (0.5, 0.77)):
        log.trial(value, loss="dsc", seed=0, params={"loss.alpha": alpha, "loss.gamma": 1.0})
    for seed, value in enumerate([61.0, 64.0, 67.0]):  # a second task whose metric is already in percent
        log.trial(value, loss="ce", seed=seed, task="span_extraction", metric="em")
    return load_runs("table8", module_tracking_uri)


def test_observations_scale_unit_metrics_to_percent_and_say_why_a_trial_is_out(runs):
    obs = (
        observations(runs, AnalysisOptions()).set_index(["task.name", "loss.name", "train.seed"]).sort_index()
    )
    assert sorted(obs.loc[("pair_classification", "ce", 0), "value"]) == pytest.approx([75.0, 78.0])
    assert set(obs.loc[("pair_classification", "ce", 0), "unit"]) == {"%"}
    # one row; `.item()` as the index is not unique (pandas 2 then returns a Series even for a unique key)
    assert obs.loc[[("span_extraction", "ce", 1)], "value"].item() == 64.0  # EM in 0..100 stays as it is
    assert obs.loc[[("span_extraction", "ce", 1)], "unit"].item() == ""
    tversky = obs.loc[("pair_classification", "tversky")]
    assert tversky.loc[2, "exclusion"].tolist().count("metric is NaN or inf") == 1
    assert tversky.loc[3, "exclusion"] == "non_finite" and not tversky.loc[3, "usable"]


def test_final_instead_of_best_uses_the_last_evaluation(runs):
    obs = observations(runs, AnalysisOptions(use="final"))
    row = obs[(obs["metric"] == "f1") & (obs["loss.name"] == "ce") & (obs["data.variant"] == "original")]
    row = row[row["train.seed"] == 0]
    assert row["value"].iloc[0] == pytest.approx(74.0)  # the fixture's last evaluation is best - 0.01


def test_tversky_is_swept_on_alpha_with_beta_following(runs):
    trials = runs.trials[runs.trials["loss.name"] == "tversky"]
    (param,) = swept_params(trials, runs.param_columns)
    assert param.name == "loss.alpha" and param.followers == ("loss.beta",)
    assert param.relation == "beta = 1 − alpha"


def test_sensitivity_points_intervals_optimum_and_paper(runs):
    curves = sensitivity_curves(runs)
    tversky = curves[curves["loss"] == "tversky"].set_index("x")
    assert set(curves["loss"]) == {"tversky", "dsc"}  # ce sweeps nothing
    assert list(tversky["param"].unique()) == ["loss.alpha"]
    assert tversky.loc[0.2, "n"] == 3
    assert tversky.loc[0.2, "mean"] == pytest.approx(72.0)
    assert tversky.loc[0.2, "std"] == pytest.approx(2.0)
    assert tversky.loc[0.2, "ci_low"] == pytest.approx(72.0 - T2 * 2.0 / math.sqrt(3))
    assert tversky.loc[0.2, "ci_high"] == pytest.approx(72.0 + T2 * 2.0 / math.sqrt(3))
    assert tversky.loc[0.4, "ci_high"] == pytest.approx(81.0 + T2 / math.sqrt(3))
    # alpha=0.6: one NaN value and one non-finite trial are counted, not averaged
    assert tversky.loc[0.6, "n"] == 2 and tversky.loc[0.6, "mean"] == pytest.approx(78.5)
    assert tversky.loc[0.6, "n_missing"] == 1 and tversky.loc[0.6, "n_failed"] == 1
    assert tversky["is_optimum"].tolist() == [False, True, False]
    assert tversky.loc[0.6, "paper"] == 84.67 and tversky[["paper"]].isna().sum().item() == 2
    assert tversky["relation"].iloc[0] == "beta = 1 − alpha"
    assert set(tversky["line"]) == {"original"}


def test_a_single_seed_has_no_interval(runs):
    curves = sensitivity_curves(runs)
    dsc = curves[curves["loss"] == "dsc"].set_index("x")
    assert dsc["n"].tolist() == [1, 1]
    assert dsc[["ci_low", "ci_high", "std"]].isna().all().all()
    assert dsc.loc[0.5, "is_optimum"] and dsc.loc[0.5, "mean"] == pytest.approx(77.0)


def test_ablation_cells_deltas_and_paper(runs):
    table = ablation_table(runs)
    f1 = table[table["task"] == "pair_classification"]
    assert list(zip(f1["loss"], f1["variant"], strict=True)) == [
        ("ce", "original"),
        ("ce", "+positive"),
        ("tversky", "original"),
        ("dsc", "original"),
    ]
    cells = f1.set_index(["loss", "variant"])
    ce = cells.loc[("ce", "original")]
    assert ce["mean"] == pytest.approx(76.0) and ce["ci_high"] - ce["mean"] == pytest.approx(
        T2 / math.sqrt(3)
    )
    assert (
        ce["delta"] == pytest.approx(0.0) and ce["paper"] == 91.3 and ce["paper_delta"] == pytest.approx(0.0)
    )
    assert cells.loc[("ce", "+positive"), "paper"] == 92.27

    tversky = cells.loc[("tversky", "original")]
    assert tversky["config"] == "alpha=0.4, beta=0.6" and tversky["configs"] == 3
    assert tversky["mean"] == pytest.approx(81.0) and tversky["n"] == 3
    # Welch: both sides have variance 1 and n = 3, so se = sqrt(2/3) and df = 4
    half = stats.t.ppf(0.975, 4) * math.sqrt(2 / 3)
    assert tversky["delta"] == pytest.approx(5.0)
    assert (tversky["delta_ci_low"], tversky["delta_ci_high"]) == pytest.approx((5.0 - half, 5.0 + half))
    assert tversky["paper"] == 92.0 and tversky["paper_delta"] == pytest.approx(0.7)

    dsc = cells.loc[("dsc", "original")]
    assert dsc["n"] == 1 and dsc["delta"] == pytest.approx(1.0) and math.isnan(dsc["delta_ci_low"])
    assert math.isnan(dsc["paper"])


def test_a_papers_test_numbers_sit_beside_the_cells_test_scores(module_tracking_uri, module_sweep_log):
    """Table 8 is on QQP's test set: with `test_f1` logged the paper's numbers are compared with it; a
    sweep without a test split says that its numbers are dev numbers."""
    paper = {"metric": "f1", "split": "test", "results": {"ce": {"original": 91.3}}}
    scored = module_sweep_log("table8-test", paper=paper)
    unscored = module_sweep_log("table8-dev", paper=paper)
    for seed, (dev, test) in enumerate([(0.75, 0.70), (0.76, 0.71), (0.77, 0.75)]):
        scored.trial(dev, loss="ce", seed=seed, metrics={"test_f1": test})
        unscored.trial(dev, loss="ce", seed=seed)
    ce = ablation_table(load_runs("table8-test", module_tracking_uri)).iloc[0]
    assert ce["mean"] == pytest.approx(76.0) and ce["paper_split"] == "test"
    assert ce["paper_mean"] == pytest.approx(72.0) and "`test_f1`" in ce["paper_note"]
    dev = ablation_table(load_runs("table8-dev", module_tracking_uri)).iloc[0]
    assert dev["paper_split"] == "dev" and dev["paper_mean"] == pytest.approx(76.0)
    assert "different splits" in dev["paper_note"]


def test_each_metric_gets_its_own_table(runs):
    table = ablation_table(runs)
    em = table[table["metric"] == "em"]
    assert em["task"].unique().tolist() == ["span_extraction"]
    assert em["mean"].iloc[0] == pytest.approx(64.0) and math.isnan(em["paper"].iloc[0])  # the paper is F1


def test_early_stopped_trials_count_unless_excluded_and_inf_never_does(tracking_uri, sweep_log):
    log = sweep_log("es")
    log.trial(0.8, seed=0)
    log.trial(0.6, seed=1, outcome="early_stopped", reason="ASHA")
    log.trial(math.inf, seed=2)  # MLflow stores inf as the largest float: still not a usable value
    counted = ablation_table(load_runs("es", tracking_uri))
    assert counted["n"].item() == 2 and counted["mean"].item() == pytest.approx(70.0)
    assert counted["n_missing"].item() == 1
    strict = ablation_table(load_runs("es", tracking_uri), AnalysisOptions(include_early_stopped=False))
    assert (
        strict["n"].item() == 1
        and strict["n_failed"].item() == 1
        and strict["mean"].item() == pytest.approx(80)
    )


def test_importance_ranks_alpha_above_the_seed_and_skips_small_scopes(runs):
    importance = parameter_importance(runs)
    tversky = importance.table[importance.table["scope"] == "tversky"]
    assert set(tversky["param"]) == {"loss.alpha", "train.seed"}
    for evaluator, scores in tversky.groupby("evaluator"):
        assert scores["importance"].sum() == pytest.approx(1.0), evaluator
    fanova = tversky[tversky["evaluator"] == "fANOVA"].set_index("param")["importance"]
    assert fanova["loss.alpha"] > fanova["train.seed"]
    assert any("dsc" in note and "2 usable trials" in note for note in importance.notes)


def test_compared_experiments_get_their_own_lines_and_tables(runs, module_tracking_uri, module_sweep_log):
    other = module_sweep_log("table8-minilm")
    for alpha, values in ((0.2, [0.75, 0.77]), (0.4, [0.83, 0.85])):
        for seed, value in enumerate(values):
            other.trial(
                value, loss="tversky", seed=seed, params={"loss.alpha": alpha, "loss.beta": 1 - alpha}
            )
    both = load_runs(["table8", "table8-minilm"], module_tracking_uri)
    assert both.report_run == runs.report_run  # the report belongs to the first experiment

    curves = sensitivity_curves(both)
    tversky = curves[curves["loss"] == "tversky"]
    assert set(tversky["line"]) == {"table8 · original", "table8-minilm · original"}
    minilm = tversky[tversky["experiment"] == "table8-minilm"].set_index("x")
    assert minilm.loc[0.4, "mean"] == pytest.approx(84.0) and minilm.loc[0.4, "is_optimum"]
    assert minilm["paper"].isna().all()  # its sweep config names no paper numbers

    table = ablation_table(both)
    row = table[(table["experiment"] == "table8-minilm") & (table["loss"] == "tversky")]
    assert row["config"].item() == "alpha=0.4, beta=0.6" and math.isnan(row["delta"].item())  # no CE there


def test_a_flat_curve_has_no_optimum(module_tracking_uri, module_sweep_log):
    log = module_sweep_log("flat")
    for alpha in (0.3, 0.7):
        for seed in range(2):
            log.trial(0.0, loss="tversky", seed=seed, params={"loss.alpha": alpha, "loss.beta": 1 - alpha})
    curves = sensitivity_curves(load_runs("flat", module_tracking_uri))
    assert curves["mean"].tolist() == [0.0, 0.0] and not curves["is_optimum"].any()
