"""The Decision's cost: what the trials cost, what the seeds the power analysis asks for would cost, how many
trials fit on one GPU; from runs in a real MLflow store logged as the trials log them."""

from __future__ import annotations

import pandas as pd
import pytest

from dicelab.analysis import AnalysisOptions, build_report, decisions, load_runs, observations
from dicelab.analysis.cost import GPU_TOTAL_MEMORY_MB, next_step_trials
from dicelab.analysis.decision import decision_lines
from dicelab.stats import BETTER, NO_DIFFERENCE
from dicelab.tracking import conventions as names

CE = [0.800, 0.812, 0.795]
DSC_GAIN = [0.010, -0.004, 0.012]  # three noisy pairs: undecided, the power analysis asks for more
H100_MB = 81_559.0


def _gpu_cost(wall_s: float, fraction: float, cpu_s: float, peak_mb: float | None) -> dict[str, float]:
    cost = {
        names.COST_WALL_SECONDS: wall_s,
        names.COST_CPU_SECONDS: cpu_s,
        names.COST_GPU_SECONDS: fraction * wall_s,
    }
    if peak_mb is not None:
        cost |= {names.GPU_PEAK_MEMORY_MB: peak_mb, GPU_TOTAL_MEMORY_MB: H100_MB}
    return cost


def _sweep(log, cost: dict[str, float] | None) -> None:
    for seed, (ce, gain) in enumerate(zip(CE, DSC_GAIN, strict=True)):
        log.trial(ce, loss="ce", seed=seed, metrics=cost)
        log.trial(ce + gain, loss="dsc", seed=seed, params={"loss.alpha": 0.5}, metrics=cost)


def _decision(uri: str, experiment: str) -> tuple[list[str], pd.DataFrame]:
    runs = load_runs(experiment, uri)
    options = AnalysisOptions()
    obs = observations(runs, options)
    found = decisions(runs, options)
    return decision_lines(found, [], options, obs), found.comparisons


def test_packed_gpu_trials_cost_gpu_hours_and_the_next_seeds_are_priced(tracking_uri, sweep_log):
    # six trials of an hour each at a quarter GPU: 1.5 GPU-hours; half a CPU-hour each: 3 CPU-hours
    log = sweep_log("gpu-cost")
    _sweep(log, _gpu_cost(3600.0, 0.25, 1800.0, peak_mb=1500.0))
    lines, comparisons = _decision(tracking_uri, "gpu-cost")
    text = "\n".join(lines)
    assert "This decision cost 1.5 GPU-hours (3 CPU-hours) over 6 trials." in text

    row = comparisons.iloc[0]
    assert row["verdict"] == NO_DIFFERENCE and row["seeds_needed"] > 3
    more = int(row["seeds_needed"]) - 3  # both configurations have 3 seeds
    assert (
        f"Next step: about {more} more paired seeds ({2 * more} trials), about "
        f"{2 * more * 0.25:.2g} GPU-hours at the measured mean of 0.25 GPU-hours per trial." in text
    )
    # 81,559 MiB / (1,500 MiB peak + 500 MiB CUDA context) = 40 trials; a share of 0.025 packs exactly 40
    assert (
        "GPU memory (backbone=tiny-bert): peak 1,500 MiB per trial (the highest of 6 trials): 40 trials of "
        "this configuration fit on one 81,559 MiB GPU (counting 500 MiB per trial for its CUDA context); "
        "search.resources.gpu: 0.025 packs 40 on one." in text
    )


def test_cpu_trials_are_priced_in_cpu_hours_and_say_nothing_about_gpu_memory(tracking_uri, sweep_log):
    log = sweep_log("cpu-cost")
    _sweep(log, _gpu_cost(600.0, 0.0, 1200.0, peak_mb=None))  # 2 CPUs busy for 10 minutes each
    lines, comparisons = _decision(tracking_uri, "cpu-cost")
    text = "\n".join(lines)
    assert "This decision cost 2 CPU-hours over 6 trials." in text
    more = int(comparisons.iloc[0]["seeds_needed"]) - 3
    assert f"about {2 * more / 3:.2g} CPU-hours at the measured mean of 0.33 CPU-hours per trial" in text
    assert "GPU" not in text


def test_runs_without_cost_metrics_get_no_cost_lines(tracking_uri, sweep_log):
    _sweep(sweep_log("no-cost"), None)
    lines, _ = _decision(tracking_uri, "no-cost")
    text = "\n".join(lines)
    assert "Next step" in text and "price is unknown" in text
    assert "This decision cost" not in text and "GPU memory" not in text


def test_the_report_decision_carries_the_cost(tracking_uri, sweep_log, tmp_path):
    _sweep(sweep_log("report-cost"), _gpu_cost(3600.0, 0.5, 900.0, peak_mb=30_000.0))
    report = build_report(load_runs("report-cost", tracking_uri), tmp_path / "report", log_to_mlflow=False)
    decision = report.markdown.read_text().split("## Decision", 1)[1].split("\n## ", 1)[0]
    assert "This decision cost 3 GPU-hours (1.5 CPU-hours) over 6 trials." in decision
    # 81,559 // 30,500 = 2 trials of this size on an H100
    assert "2 trials of this configuration fit on one 81,559 MiB GPU" in decision
    assert "`search.resources.gpu: 0.5` packs 2 on one" in decision
    assert any("This decision cost" in line for line in report.decision)  # analyze's console lines


def test_the_next_step_gives_each_configuration_the_most_seeds_its_comparisons_need():
    rows = pd.DataFrame(
        [
            # dsc vs ce needs 8 pairs, focal vs dsc needs 5: dsc runs to 8, ce to 8, focal to 5
            {"candidate": "dsc", "reference": "ce", "n_candidate": 3, "n_reference": 4, "seeds_needed": 8},
            {"candidate": "focal", "reference": "dsc", "n_candidate": 4, "n_reference": 3, "seeds_needed": 5},
            # decided, or already powered: no more seeds
            {"candidate": "wce", "reference": "ce", "n_candidate": 4, "n_reference": 4, "seeds_needed": None},
        ]
    ).assign(verdict=[NO_DIFFERENCE, NO_DIFFERENCE, BETTER])
    assert next_step_trials(rows) == (5, (8 - 3) + (8 - 4) + (5 - 4))


@pytest.mark.parametrize(("fit", "share", "packs"), [(1, 1.0, 1), (3, 0.3333, 3), (150, 0.0067, 149)])
def test_the_share_never_packs_more_than_fit(fit, share, packs):
    from dicelab.analysis.cost import _share

    assert _share(fit) == (share, packs)


def test_trials_that_fell_back_to_cpu_are_a_caveat(tracking_uri, sweep_log, tmp_path):
    log = sweep_log("fallback")
    for seed in range(2):
        run_id = log.trial(0.8, seed=seed, metrics=_gpu_cost(60.0, 0.25, 60.0, peak_mb=None))
        line = "GPU 0 was assigned but CUDA is not available: training on CPU in fp32"
        log.client.set_tag(run_id, names.DEVICE_FALLBACK, line)
    log.trial(0.8, seed=2, metrics=_gpu_cost(60.0, 0.25, 60.0, peak_mb=900.0))
    report = build_report(load_runs("fallback", tracking_uri), tmp_path / "report", log_to_mlflow=False)
    assert any(note.startswith("2 trials given a GPU that CUDA could not see") for note in report.notes)
