"""Paired decisions on sweeps in a real MLflow store, checked against scipy / statsmodels and by hand."""

import dataclasses
import itertools
import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from dicelab.analysis import AnalysisOptions, ablation_table, build_report, decisions, load_runs, observations
from dicelab.analysis.decision import arena_statements, decision_lines
from dicelab.cli import main
from dicelab.errors import DicelabError
from dicelab.tracking import conventions as names

PAPER = {"metric": "f1", "results": {"ce": {"original": 88.0}, "dsc": {"original": 88.92}}}
CE = [0.800, 0.812, 0.795, 0.821, 0.808, 0.790, 0.815, 0.803]  # seeds 0..7
DSC_GAIN = [0.020, 0.018, 0.025, 0.016, 0.022, 0.019, 0.021, 0.024]  # dsc - ce per seed; seed 3 fails
FOCAL_GAIN = [0.004, -0.006, 0.001, -0.003, 0.007, -0.002, 0.000, 0.005]  # seed 5 is degenerate


def exact_sign_flip_p(differences: np.ndarray) -> float:
    """Two-sided p of the mean paired difference over all 2^n sign patterns (the oracle, by enumeration)."""
    observed = abs(differences.mean())
    flips = [
        abs((differences * signs).mean()) for signs in itertools.product((1, -1), repeat=len(differences))
    ]
    return float(np.mean([flip >= observed - 1e-12 for flip in flips]))


@pytest.fixture(scope="module")
def runs(module_tracking_uri, module_sweep_log):
    log = module_sweep_log("decide", paper=PAPER)
    for seed, (ce, dsc, focal) in enumerate(zip(CE, DSC_GAIN, FOCAL_GAIN, strict=True)):
        log.trial(ce, loss="ce", seed=seed)
        if seed == 3:
            log.trial(None, loss="dsc", seed=seed, outcome="failed", reason="OOM", history=[])
        else:
            log.trial(ce + dsc, loss="dsc", seed=seed, params={"loss.alpha": 0.5})
        run_id = log.trial(ce + focal, loss="focal", seed=seed, params={"loss.gamma": 2.0})
        if seed == 5:
            log.client.set_tag(run_id, names.DEGENERATE, "predicts no positive on dev")
    return load_runs("decide", module_tracking_uri)


@pytest.fixture(scope="module")
def table(runs):
    return decisions(runs).comparisons.set_index(["candidate", "reference"])


def test_paired_difference_interval_and_exact_p_match_scipy_on_the_common_seeds(table):
    row = table.loc[("dsc", "ce")]
    seeds = [s for s in range(8) if s != 3]  # dsc's failed seed leaves 7 pairs
    x = np.array([100 * (CE[s] + DSC_GAIN[s]) for s in seeds])
    y = np.array([100 * CE[s] for s in seeds])
    expected = stats.ttest_rel(x, y).confidence_interval(0.95)
    assert row["paired"] and row["n"] == 7 and row["against"] == "baseline"
    assert row["n_missing_candidate"] == 1 and row["n_missing_reference"] == 0
    assert row["difference"] == pytest.approx((x - y).mean())
    assert (row["low"], row["high"]) == pytest.approx((expected.low, expected.high))
    assert row["p_value"] == pytest.approx(exact_sign_flip_p(x - y)) == pytest.approx(2 / 2**7)
    assert row["min_n"] == 6


def test_holm_runs_over_the_whole_family_like_statsmodels(table):
    raw = table["p_value"].to_numpy()
    assert table["p_holm"].to_numpy() == pytest.approx(multipletests(raw, method="holm")[1])
    assert len(table) == 3  # focal vs ce, dsc vs ce (baseline), dsc vs focal (best); dsc vs ce only once


def test_verdicts_and_the_seeds_needed_from_statsmodels_power(table):
    assert table.loc[("dsc", "ce"), "verdict"] == "better"

    # The best against the other: 6 pairs (dsc lost seed 3, focal seed 5), all ahead, so p = 2/2^6; Holm's
    # step-down doubles it (second smallest of 3) past 0.05.
    best = table.loc[("dsc", "focal")]
    assert best["n"] == 6 and best["p_value"] == pytest.approx(2 / 2**6)
    assert best["p_holm"] == pytest.approx(2 * 2 / 2**6) and best["verdict"] == "no detectable difference"
    focal = table.loc[("focal", "ce")]
    assert focal["verdict"] == "no detectable difference" and focal["n"] == 7  # the degenerate seed is out
    effect = focal["detect"] / focal["std_difference"]
    # Sized at Holm's strictest step, alpha / 3, where the sign-flip test needs 7 pairs (2/2^7 < 0.05/3).
    assert focal["family"] == 3
    solved = TTestPower().solve_power(effect_size=effect, alpha=0.05 / 3, power=0.8, alternative="two-sided")
    assert focal["detect"] == 1.0 and focal["detect_source"] == "1 point"  # the paper has no focal number
    assert focal["seeds_needed"] == max(math.ceil(solved), 7)
    assert pd.isna(table.loc[("dsc", "ce"), "seeds_needed"])  # decided: nothing to size


def test_the_detectable_difference_defaults_to_the_paper_and_follows_detect(runs):
    options = AnalysisOptions(detect=0.5)
    sized = decisions(runs, options).comparisons
    assert set(sized["detect"]) == {0.5} and set(sized["detect_source"]) == {"--detect"}
    only_ce_dsc = runs.trials[runs.trials["loss.name"] != "focal"]
    runs_ce_dsc = dataclasses.replace(runs, trials=only_ce_dsc)
    strict = decisions(runs_ce_dsc, AnalysisOptions(confidence=0.99)).comparisons  # 2/2^7 > 0.01
    row = strict.iloc[0]
    assert row["verdict"] == "no detectable difference"
    assert row["detect"] == pytest.approx(0.92) and row["detect_source"] == "paper"


def test_a_degenerate_trial_is_excluded_with_its_reason_and_counted(runs):
    obs = observations(runs, AnalysisOptions())
    focal = obs[(obs["loss.name"] == "focal") & (obs["train.seed"] == 5)].iloc[0]
    assert focal["exclusion"] == "degenerate" and not focal["usable"]
    cell = ablation_table(runs).set_index("loss").loc["focal"]
    assert cell["n"] == 7 and cell["n_degenerate"] == 1 and cell["n_missing"] == 0


def test_ablation_rows_carry_the_paired_comparison_with_ce(runs, table):
    cells = ablation_table(runs).set_index("loss")
    dsc = cells.loc["dsc"]
    assert dsc["paired"] and dsc["n_pairs"] == 7
    assert dsc["paired_delta"] == pytest.approx(table.loc[("dsc", "ce"), "difference"])
    assert dsc["paired_delta"] != pytest.approx(dsc["delta"])  # the Welch delta uses all 8 CE seeds
    raw = [cells.loc["focal", "p_value"], dsc["p_value"]]
    assert [cells.loc["focal", "p_holm"], dsc["p_holm"]] == pytest.approx(
        multipletests(raw, method="holm")[1]
    )
    assert dsc["verdict"] == "better" and cells.loc["ce", "verdict"] == ""


def sweep_of(log, values: dict[str, dict[int, float | None]], **trial) -> dict[tuple[str, int], str]:
    return {
        (loss, seed): log.trial(value, loss=loss, seed=seed, **trial)
        for loss, per_seed in values.items()
        for seed, value in per_seed.items()
    }


def test_identical_samples_are_no_difference(tracking_uri, sweep_log):
    sweep_of(sweep_log("same"), {"ce": {0: 0.8, 1: 0.82, 2: 0.79}, "dice": {0: 0.8, 1: 0.82, 2: 0.79}})
    (row,) = decisions(load_runs("same", tracking_uri)).comparisons.itertuples()
    assert row.difference == 0 and row.p_value == 1.0 and row.verdict == "no detectable difference"
    assert "identical" in row.note


@pytest.mark.parametrize(("seeds", "verdict"), [(3, "no detectable difference"), (6, "better")])
def test_a_constant_difference_is_decided_by_the_number_of_seeds_alone(
    tracking_uri, sweep_log, seeds, verdict
):
    base = {seed: 0.80 + seed / 1000 for seed in range(seeds)}
    sweep_of(sweep_log("constant"), {"ce": base, "dsc": {seed: v + 0.01 for seed, v in base.items()}})
    (row,) = decisions(load_runs("constant", tracking_uri)).comparisons.itertuples()
    assert row.difference == pytest.approx(1.0) and (row.low, row.high) == pytest.approx((1.0, 1.0))
    assert row.p_value == pytest.approx(2 / 2**seeds)  # every sign pattern but two gives a smaller mean
    assert row.verdict == verdict


def test_one_seed_gives_no_interval_no_test_and_says_so(tracking_uri, sweep_log, tmp_path):
    sweep_of(sweep_log("one"), {"ce": {0: 0.80}, "dsc": {0: 0.83}})
    runs = load_runs("one", tracking_uri)
    (row,) = decisions(runs).comparisons.itertuples()
    assert not row.paired and row.difference == pytest.approx(3.0)
    assert math.isnan(row.low) and math.isnan(row.p_value) and pd.isna(row.seeds_needed)
    assert row.verdict == "no detectable difference" and "one seed" in row.note
    markdown = build_report(runs, tmp_path / "r", log_to_mlflow=False).markdown.read_text(encoding="utf-8")
    assert (
        "unpaired (fewer than 2 seeds in common): one seed on a side: no spread, so no interval and no test"
        in (markdown)
    )
    assert "in common): exact" not in markdown  # no test named where none ran
    assert "the spread is unknown until both have 2 seeds in common" in markdown


def test_nan_seeds_are_missing_and_disjoint_seeds_fall_back_to_welch(tracking_uri, sweep_log):
    log = sweep_log("apart")
    sweep_of(log, {"ce": {0: 0.80, 1: 0.82, 2: 0.79, 3: math.nan}, "dsc": {10: 0.84, 11: 0.83, 12: 0.86}})
    (row,) = decisions(load_runs("apart", tracking_uri)).comparisons.itertuples()
    welch = stats.ttest_ind([84, 83, 86], [80, 82, 79], equal_var=False).confidence_interval(0.95)
    assert not row.paired and "unpaired" in row.test
    assert (row.n_candidate, row.n_reference, row.n_missing_reference) == (3, 3, 4)  # seed 3's NaN, 10-12
    assert (row.low, row.high) == pytest.approx((welch.low, welch.high))


def test_baseline_option_chooses_the_reference_and_rejects_unknown_keys(runs):
    focal = decisions(runs, AnalysisOptions(baseline="loss.name=focal")).comparisons
    assert set(focal.loc[focal["against"] == "baseline", "reference"]) == {"focal"}
    with pytest.raises(DicelabError, match=r"'loss\.nope'"):
        decisions(runs, AnalysisOptions(baseline="loss.nope=1"))
    with pytest.raises(DicelabError, match=r"'lossname' \(did you mean 'loss\.name'\?\)$"):
        decisions(runs, AnalysisOptions(baseline="lossname=ce"))
    with pytest.raises(DicelabError, match="KEY=VALUE"):
        AnalysisOptions(baseline="ce")


def test_a_metric_no_trial_logged_is_an_error_naming_the_logged_ones(runs):
    """--metric f2 on trials that logged f1: a typo, not a sweep whose every trial lacks a value."""
    with pytest.raises(DicelabError, match=r"^--metric f2: no trial logged best_dev_f2 \(the trials' dev m"):
        decisions(runs, AnalysisOptions(metric="f2"))
    with pytest.raises(DicelabError, match=r"no trial logged dev_f2 \(the trials' dev metrics: .*f1"):
        decisions(runs, AnalysisOptions(metric="f2", use="final"))
    assert len(decisions(runs, AnalysisOptions(metric="f1")).comparisons)


def test_the_report_opens_with_the_decision(runs, tmp_path):
    report = build_report(runs, tmp_path / "decide", log_to_mlflow=False)
    markdown = report.markdown.read_text(encoding="utf-8")
    headings = [line for line in markdown.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Decision"
    decision = markdown.split("## Decision", 1)[1].split("\n## ", 1)[0]
    assert "**Best: `dsc`**, mean" in decision and "over 7 seeds" in decision
    assert "It beats `ce` by +" in decision and "`focal` by +" not in decision.split("Against")[0]
    assert "Undecided: `focal` vs `ce`" in decision and "Undecided: `dsc` vs `focal`" in decision
    assert "`dsc` misses 1 seed" in decision
    assert "needs at least 6 paired seeds" in decision
    assert (
        "With 3 comparisons here, Holm's strictest step needs p < 0.017: at least 7 paired seeds" in decision
    )
    assert (
        "Undecided: `dsc` vs `focal`: +1.98" in decision and "about 7 paired seeds would detect" in decision
    )
    assert report.decision[0] == "Decision" and any("Best: dsc" in line for line in report.decision)
    assert (report.directory / "comparisons.csv").is_file()


def test_cli_prints_the_decision_and_rejects_a_bad_baseline(runs, module_tracking_uri, tmp_path, capsys):
    args = ["analyze", "--experiment", "decide", "--tracking-uri", module_tracking_uri, "--no-log"]
    options = ["--detect", "0.5", "--test", "t", "--baseline", "loss.name=wce"]
    assert main([*args, "--out", str(tmp_path / "a"), *options]) == 0
    printed = capsys.readouterr().out
    assert "Decision" in printed and "Best: dsc" in printed and "paired t test on paired seeds" in printed
    # a baseline no configuration has: said on the console too, not only in the report
    assert "note: decide / pair_classification / f1" in printed
    assert "no configuration with loss.name=wce; compared with the best only" in printed
    assert main([*args, "--out", str(tmp_path / "b"), "--baseline", "nope"]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "KEY=VALUE" in error


def test_a_seed_race_record_is_shown(tracking_uri, sweep_log, tmp_path):
    log = sweep_log("raced")
    sweep_of(log, {"ce": {1: 0.80, 2: 0.81, 3: 0.79}, "dsc": {1: 0.84, 2: 0.85, 3: 0.83}})
    log.client.set_tag(log.parent_id, names.RACE_DECISION, "separated: dsc after 3 seeds")
    eliminations = "time,trials_finished,configuration,leader,n,p_holm,test\n1.5,6,ce,dsc,3,0.04,t\n"
    log.client.log_text(log.parent_id, eliminations, "race/eliminations.csv")
    report = build_report(load_runs("raced", tracking_uri), tmp_path / "r", log_to_mlflow=False)
    markdown = report.markdown.read_text(encoding="utf-8")
    assert "### Seed race `sweep-1`" in markdown and "separated: dsc after 3 seeds" in markdown
    assert "| trials_finished | configuration | leader | n | p_holm |" in markdown  # time and test left out
    assert "| 6 | ce | dsc | 3 | 0.04 |" in markdown
    assert any("seed race sweep-1: separated: dsc after 3 seeds" in line for line in report.decision)


def test_a_races_differences_read_in_the_decision_tables_unit(tracking_uri, sweep_log, tmp_path):
    """The race tests F1 as a fraction (its CSV keeps it so); the report shows points, as the decision."""
    log = sweep_log("raced-points")
    sweep_of(log, {"ce": {1: 0.80, 2: 0.81, 3: 0.79}, "dsc": {1: 0.84, 2: 0.85, 3: 0.83}})
    log.client.set_tag(log.parent_id, names.RACE_DECISION, "separated: dsc after 3 seeds")
    eliminations = (
        "trials_finished,configuration,leader,n,difference,low,high,p_holm\n"
        "6,ce,dsc,3,-0.04,-0.0523,-0.0277,0.009097\n"
    )
    log.client.log_text(log.parent_id, eliminations, "race/eliminations.csv")
    report = build_report(load_runs("raced-points", tracking_uri), tmp_path / "r", log_to_mlflow=False)
    markdown = report.markdown.read_text(encoding="utf-8")
    assert "| 6 | ce | dsc | 3 | -4.00 | -5.23 | -2.77 | 0.009097 |" in markdown, markdown
    assert "its differences ×100 here, in the decision table's unit" in markdown
    assert "| baseline | `dsc` − `ce` | +4.00 |" in markdown  # the same unit as the decision's table


def test_undecided_comparisons_beyond_the_limit_are_counted_not_listed(runs):
    decided = decisions(runs)
    arena = decided.arenas.iloc[0]
    statements = arena_statements(arena, decided.comparisons, AnalysisOptions(), max_undecided=1)
    assert sum(s.startswith("Undecided:") for s in statements) == 1
    assert "…and 1 more undecided comparisons: see the table (`comparisons.csv`)." in statements


def test_a_configuration_without_a_usable_seed_is_named_not_compared(tracking_uri, sweep_log):
    log = sweep_log("all-degenerate")
    sweep_of(log, {"ce": {0: 0.80, 1: 0.82, 2: 0.79}, "dice": {0: 0.81, 1: 0.83, 2: 0.80}})
    for seed in range(3):  # every dsc seed predicts one class everywhere: F1 1/3 that means nothing
        run_id = log.trial(1 / 3, loss="dsc", seed=seed)
        log.client.set_tag(run_id, names.DEGENERATE, "predicts a single class (1) at its best evaluation")
    log.trial(None, loss="dsc", seed=3, outcome="failed", reason="OOM", history=[])
    decided = decisions(load_runs("all-degenerate", tracking_uri))
    assert "dsc" not in set(decided.comparisons["candidate"]) | set(decided.comparisons["reference"])
    arena = decided.arenas.iloc[0]
    assert arena["not_compared"] == "`dsc` (1 failed, 3 degenerate)"
    statements = arena_statements(arena, decided.comparisons, AnalysisOptions())
    assert "Not compared, no usable seed: `dsc` (1 failed, 3 degenerate)." in statements


def test_nothing_to_decide_says_why_on_the_console_without_the_tests_footnote(tracking_uri, sweep_log):
    log = sweep_log("none-usable")
    for seed in range(2):
        run_id = log.trial(1 / 3, loss="ce", seed=seed)
        log.client.set_tag(run_id, names.DEGENERATE, "predicts a single class (1) at its best evaluation")
    log.trial(None, loss="dice", seed=0, outcome="failed", reason="OOM", history=[])
    runs = load_runs("none-usable", tracking_uri)
    options = AnalysisOptions()
    lines = decision_lines(decisions(runs, options), [], options, observations(runs, options))
    assert lines[1] == "  nothing to decide: no configuration has a usable trial (1 failed, 2 degenerate)"
    assert not any("paired seeds" in line for line in lines)  # no test ran: its footnote would mislead


def test_analyze_judges_a_raced_sweep_by_the_race_test():
    from types import SimpleNamespace

    import pandas as pd

    from dicelab.analysis.analyze import race_test

    parents = pd.DataFrame(
        {"experiment": ["raced", "other"], "race_test": ["t", "permutation"], "run_id": ["a", "b"]}
    )
    assert race_test(SimpleNamespace(parents=parents, experiments=["raced"])) == "t"
    plain = pd.DataFrame({"experiment": ["plain"], "run_id": ["c"]})
    assert race_test(SimpleNamespace(parents=plain, experiments=["plain"])) is None
    unraced = pd.DataFrame({"experiment": ["x"], "race_test": [None], "run_id": ["d"]})
    assert race_test(SimpleNamespace(parents=unraced, experiments=["x"])) is None


def test_a_sweep_of_many_configurations_names_a_few_and_counts_the_rest(tracking_uri, sweep_log):
    """Each kind of statement is spelled out up to its limit and then counted: the configurations the best
    beats (the closest first), the names under a verdict against the baseline, and a note many comparisons
    share (a difference the same on every seed), which a 1,000-trial sweep printed hundreds of times."""
    from dicelab.analysis.summary import MAX_NAMED, summary_paragraph

    noise = [0.004, -0.003, 0.002, -0.001, 0.003, -0.005]
    base = {seed: 0.80 + n for seed, n in enumerate(noise)}
    values = {"ce": base}
    for step, loss in enumerate(["focal", "dice", "tversky", "wce"], 1):  # the same gain on every seed
        values[loss] = {seed: round(v + step * 0.0101, 6) for seed, v in base.items()}
    values["dsc"] = {seed: v + 0.2 + noise[seed] / 2 for seed, v in base.items()}  # far ahead, with spread
    for i in range(MAX_NAMED + 1):  # close to each other, far behind dsc: not separated from ce
        values[f"focal-{i + 1}"] = {seed: v + noise[(seed + i + 1) % 6] for seed, v in base.items()}
    log = sweep_log("many")
    for loss, per_seed in values.items():
        name, _, variant = loss.partition("-")
        for seed, value in per_seed.items():
            log.trial(value, loss=name, seed=seed, params={"loss.variant": variant or "0"})
    runs = load_runs("many", tracking_uri)
    options = AnalysisOptions(test="t")
    decided = decisions(runs, options)
    arena = decided.arenas.iloc[0]
    assert arena["best"].startswith("dsc")
    statements = arena_statements(arena, decided.comparisons, options, max_undecided=1)
    beats = next(s for s in statements if s.startswith("It beats "))
    assert beats.count(" by +") == 1 and beats.endswith(
        f"; and {int(arena['configs']) - 2} more (`comparisons.csv`)."
    )
    closest = sorted(
        row.difference if row.candidate == arena["best"] else -row.difference
        for row in decided.comparisons.itertuples()
        if arena["best"] in (row.candidate, row.reference) and row.verdict == "better"
    )
    assert f"by {closest[0]:+.2f} " in beats and f"by {closest[1]:+.2f} " not in beats
    against = next(s for s in statements if s.startswith("Against the baseline"))
    undecided = decided.comparisons.query("against == 'baseline' and verdict == 'no detectable difference'")
    assert len(undecided) == 4 and against.endswith(f"`, `{undecided['candidate'].iloc[1]}` and 2 more.")
    no_spread = [s for s in statements if "every seed gives the same difference" in s]
    assert len(no_spread) == 1 and no_spread[0].startswith("4 comparisons, among them ")
    assert (
        no_spread[0].count(" vs ") == 1 and "and 3 more: every seed gives the same difference" in no_spread[0]
    )
    assert not any(s.startswith("Undecided:") and "about 10000" in s for s in statements)

    # the exact test cannot separate anything with 6 seeds at Holm's 0.05 / 14: the paragraph names the
    # nearest configurations and counts the rest
    exact = AnalysisOptions()
    undecided = decisions(runs, exact)
    paragraph = summary_paragraph(undecided, exact, observations(runs, exact), "report.html", "dicelab ui")
    others = int(undecided.arenas.iloc[0]["configs"]) - 1
    assert f" and {others - MAX_NAMED} more; more seeds would decide." in paragraph
    named = [abs(float(d)) for d in re.findall(r"\(([+-][0-9.]+)\)", paragraph)]
    best, rows = undecided.arenas.iloc[0]["best"], undecided.comparisons
    sides = rows[(rows["candidate"] == best) | (rows["reference"] == best)]
    assert named == sorted(round(abs(d), 2) for d in sides["difference"])[:MAX_NAMED]  # the nearest
    # the Decision's undecided comparisons start with the best's closest contender, not the table's order
    nearest = sides.loc[sides["difference"].abs().idxmin()]
    (first, *_) = (
        s for s in arena_statements(undecided.arenas.iloc[0], rows, exact) if s.startswith("Undecided")
    )
    assert first.startswith(f"Undecided: `{nearest['candidate']}` vs `{nearest['reference']}`: "), first


def test_mode_min_makes_the_lowest_mean_the_best_and_lower_better(tracking_uri, sweep_log):
    log = sweep_log("minimised")
    sweep_of(
        log,
        {"ce": {1: 0.40, 2: 0.41, 3: 0.39, 4: 0.40}, "dsc": {1: 0.50, 2: 0.52, 3: 0.49, 4: 0.51}},
        metric="log_loss",
        params={"train.mode": "min"},
    )
    found = decisions(load_runs("minimised", tracking_uri), AnalysisOptions(test="t"))
    arena = found.arenas.iloc[0]
    assert (arena["best"], arena["mode"]) == ("ce", "min")
    row = found.comparisons.set_index(["candidate", "reference"]).loc[("dsc", "ce")]
    assert row["difference"] > 0 and row["verdict"] == "worse"  # a higher loss is worse


def test_a_configuration_the_race_dropped_is_never_undecided_in_the_decision(tracking_uri, sweep_log):
    """The race dropped ce against dsc at a look where ce was the only rival ready (paired t, Holm over a
    family of one: p = 0.034); the Decision's own family holds three comparisons, where the same pair would
    be undecided (3 x 0.034). It keeps the drop as the race made it."""
    log = sweep_log("raced-agree")
    values = {
        "ce": {1: 0.790, 2: 0.800, 3: 0.791},
        "focal": {1: 0.805, 2: 0.790, 3: 0.812, 4: 0.800},
        "dsc": {1: 0.800, 2: 0.812, 3: 0.797, 4: 0.806},
    }
    ids = sweep_of(log, values)
    ce, dsc = np.array(list(values["ce"].values())), np.array([values["dsc"][s] for s in (1, 2, 3)])
    test = stats.ttest_rel(ce, dsc)
    low, high = test.confidence_interval()
    event = {"leader": "dsc", "paired": True, "n": 3, "difference": float((ce - dsc).mean())}
    event |= {"low": float(low), "high": float(high), "p": float(test.pvalue), "p_holm": float(test.pvalue)}
    event |= {"family": 1, "test": "paired t test", "why": "decided worse than the leader"}
    for (loss, _seed), run_id in ids.items():
        log.client.set_tag(run_id, names.RACE_CONFIGURATION, loss)
        log.client.set_tag(run_id, names.RACE_STATUS, "dropped" if loss == "ce" else "undecided")
        if loss == "ce":
            log.client.set_tag(run_id, names.RACE_ELIMINATION, json.dumps(event))
    log.client.set_tag(log.parent_id, names.RACE_DECISION, "budget spent: dsc leads")
    runs = load_runs("raced-agree", tracking_uri)
    options = AnalysisOptions(test="t")
    found = decisions(runs, options)
    rows = found.comparisons
    with_ce = rows[(rows["candidate"] == "ce") | (rows["reference"] == "ce")]
    race_row = with_ce[with_ce["against"] == "race"].iloc[0]
    assert (race_row["candidate"], race_row["reference"], race_row["verdict"]) == ("ce", "dsc", "worse")
    assert race_row["p_holm"] == pytest.approx(test.pvalue) and test.pvalue < 0.05
    assert race_row["family"] == 1
    assert race_row["difference"] == pytest.approx(-0.93, abs=0.01)  # in the decision's unit (points)
    assert not ((with_ce["against"] == "best") & (with_ce["verdict"] == "no detectable difference")).any()
    assert found.arenas.iloc[0]["best"] == "dsc"
    lines = decision_lines(found, [], options, observations(runs, options))
    beats = next(line for line in lines if "It beats" in line)
    assert "ce by +0.93" in beats and "decided by the seed race" in beats, lines
    assert not any("Undecided" in line and " ce " in f"{line} " for line in lines), lines
    assert any("keeps the race's verdict" in line for line in lines)
    # tested afresh within the Decision's family of three, the same pair would be undecided
    untagged = dataclasses.replace(runs, trials=runs.trials.drop(columns="race_elimination"))
    again = decisions(untagged, options).comparisons.set_index(["candidate", "reference"])
    assert again.loc[("dsc", "ce"), "verdict"] == "no detectable difference"
