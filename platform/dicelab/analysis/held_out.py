"""Chosen on dev, judged on held-out data; and the rival a loss must beat: CE with a tuned threshold.

The Decision picks its winner on dev, so the winner's dev score is a maximum over noisy estimates and biased
upwards. Where the trials scored a test split (`test_<metric>`, dicelab.training.held_out), every
configuration of the Decision gets its test mean beside its dev mean, the Decision's comparisons are repeated
on test (same pairs, seeds paired as on dev, Holm over the same family), and the winner's dev-to-test drop is
stated. Nothing here chooses anything: the winner stays the dev winner.

For a binary F1, each loss's best configuration (by dev mean) is compared with the baseline (CE) twice: at
CE's default threshold (0.5) and at CE's threshold tuned on dev (`test_f1_tuned`; without a test split
`best_dev_f1_tuned`, tuned and scored on dev, which favours CE). One family per arena and rival, Holm over
the losses.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dicelab.analysis._format import interval, number, signed
from dicelab.analysis.comparisons import Configuration, Decisions, compare_trials_many, configurations
from dicelab.analysis.document import Block, Heading, Table, Text
from dicelab.analysis.observations import TASK, VARIANT, AnalysisOptions, exclusion_reasons, metric_label
from dicelab.analysis.runs import RunSet
from dicelab.stats import BETTER, WORSE, holm
from dicelab.stats import verdict as decide
from dicelab.tracking import conventions as names

AT_DEFAULT, AT_TUNED = "CE at 0.5", "CE, threshold tuned on dev"
NOT_COMPARED = "not compared"  # a loss without a usable seed (failed, degenerate, no value)
ARENA_KEYS = ["experiment", "task", "metric", "variant"]


@dataclass
class HeldOut:
    configurations: pd.DataFrame  # per arena and configuration: dev and test means, the dev-to-test drop
    comparisons: pd.DataFrame  # the Decision's comparisons, repeated on test
    tuned: pd.DataFrame  # per arena, loss and rival (CE at 0.5, CE tuned): the paired comparison

    @property
    def has_test(self) -> bool:
        return bool(len(self.configurations)) and bool(self.configurations["test_n"].gt(0).any())


def held_out(obs: pd.DataFrame, decisions: Decisions, runs: RunSet, options: AnalysisOptions) -> HeldOut:
    config_rows: list[dict[str, Any]] = []
    comparison_rows: list[dict[str, Any]] = []
    tuned_rows: list[dict[str, Any]] = []
    for _, arena in decisions.arenas.iterrows():
        group = arena_rows(obs, arena)
        metric = str(arena["metric"])
        test = _valued(group, names.test_metric(metric))
        dev_configs = _by_label(configurations(group, runs.param_columns))
        test_configs = _by_label(configurations(test, runs.param_columns)) if test is not None else {}
        keys = {key: arena[key] for key in ARENA_KEYS}
        for label, config in dev_configs.items():
            on_test = test_configs.get(label)
            test_mean = on_test.mean if on_test is not None else math.nan
            config_rows.append(
                {
                    **keys,
                    "configuration": label,
                    "chosen": label == arena["best"],
                    "dev_mean": config.mean,
                    "dev_n": config.n,
                    "test_mean": test_mean,
                    "test_n": on_test.n if on_test is not None else 0,
                    "drop": config.mean - test_mean,
                }
            )
        if test_configs:
            comparison_rows += _on_test(keys, decisions.comparisons, test_configs, options)
        tuned_rows += _against_tuned(keys, arena, group, dev_configs, test is not None, runs, options)
    return HeldOut(pd.DataFrame(config_rows), pd.DataFrame(comparison_rows), pd.DataFrame(tuned_rows))


def arena_rows(obs: pd.DataFrame, arena: pd.Series) -> pd.DataFrame:
    mask = (obs["experiment"] == arena["experiment"]) & (obs[TASK] == arena["task"])
    mask &= obs["metric"] == arena["metric"]
    if arena["variant"] != "all":
        mask &= obs[VARIANT] == arena["variant"]
    return obs[mask]


def _valued(group: pd.DataFrame, column: str) -> pd.DataFrame | None:
    """`group` with `value` taken from `column` (in the dev value's unit) and usable where the trial is
    usable on dev and has a finite value there; None when no trial logged `column`."""
    if column not in group or not group["logged_metrics"].map(lambda logged: column in logged).any():
        return None
    raw = pd.to_numeric(group[column], errors="coerce").to_numpy(dtype=float)
    finite = np.isfinite(raw) & (np.abs(raw) < sys.float_info.max)
    value = np.where(finite, raw, math.nan) * group["scale"].to_numpy()
    return group.assign(value=value, usable=group["usable"].to_numpy() & finite)


def _by_label(found: list[Configuration]) -> dict[str, Configuration]:
    return {config.label: config for config in found}


def _on_test(
    keys: dict[str, Any], comparisons: pd.DataFrame, test: dict[str, Configuration], options: AnalysisOptions
) -> list[dict[str, Any]]:
    """The arena's comparisons of the Decision, on test: same pairs, Holm over the same family."""
    own = comparisons
    for key, value in keys.items():
        own = own[own[key] == value]
    pairs = [
        (row, test[row["candidate"]], test[row["reference"]])
        for _, row in own.iterrows()
        if row["candidate"] in test and row["reference"] in test
    ]
    results = compare_trials_many([(c.trials, r.trials) for _, c, r in pairs], options)
    adjusted = holm([result.p_value for result in results])
    return [
        {
            **keys,
            "against": row["against"],
            "candidate": row["candidate"],
            "reference": row["reference"],
            "dev_difference": row["difference"],
            "dev_p_holm": row["p_holm"],
            "dev_verdict": row["verdict"],
            **_result(result, p_holm, options),
        }
        for (row, _, _), result, p_holm in zip(pairs, results, adjusted, strict=True)
    ]


def _against_tuned(
    keys: dict[str, Any],
    arena: pd.Series,
    group: pd.DataFrame,
    dev_configs: dict[str, Configuration],
    with_test: bool,
    runs: RunSet,
    options: AnalysisOptions,
) -> list[dict[str, Any]]:
    """Each loss's best configuration against CE at 0.5 and against CE with its threshold tuned on dev."""
    metric, baseline = str(arena["metric"]), str(arena["baseline"])
    split = "test" if with_test else "dev"
    if metric != "f1":  # a threshold is tuned for a binary F1 only (dicelab.training.held_out)
        return []
    tuned = _valued(group, (names.test_metric if with_test else names.best_metric)(names.F1_TUNED))
    if tuned is None or baseline not in dev_configs:
        return []
    plain = _valued(group, names.test_metric(metric)) if with_test else group
    if plain is None:
        return []
    plain_configs = _by_label(configurations(plain, runs.param_columns))
    tuned_configs = _by_label(configurations(tuned, runs.param_columns))
    reference_loss = dev_configs[baseline].loss
    best_per_loss: dict[str, Configuration] = {}
    for config in dev_configs.values():  # the loss's best by dev mean: chosen on dev, as the winner is
        own = best_per_loss.get(config.loss)
        if config.loss != reference_loss and config.n > 0 and (own is None or config.mean > own.mean):
            best_per_loss[config.loss] = config
    candidates = [plain_configs[c.label] for c in best_per_loss.values() if c.label in plain_configs]
    rows: list[dict[str, Any]] = []
    for rival, reference in (
        (AT_DEFAULT, plain_configs.get(baseline)),
        (AT_TUNED, tuned_configs.get(baseline)),
    ):
        if reference is None or not candidates:
            continue
        results = compare_trials_many([(c.trials, reference.trials) for c in candidates], options)
        adjusted = holm([result.p_value for result in results])
        for candidate, result, p_holm in zip(candidates, results, adjusted, strict=True):
            rows.append(
                {
                    **keys,
                    "split": split,
                    "rival": rival,
                    "loss": candidate.loss,
                    "candidate": candidate.label,
                    "reference": baseline,
                    "candidate_mean": candidate.mean,
                    "reference_mean": reference.mean,
                    "threshold": _mean_threshold(reference),
                    "not_compared": "",
                    **_result(result, p_holm, options),
                }
            )
    unusable = {c.loss for c in dev_configs.values() if c.loss != reference_loss} - best_per_loss.keys()
    for loss in sorted(unusable):  # every loss gets its line: one without a usable seed says why
        own = [c for c in dev_configs.values() if c.loss == loss]
        why = "; ".join(f"`{c.label}`: {exclusion_reasons(c.trials, options)}" for c in own)
        rows.append(
            {
                **keys,
                "split": split,
                "rival": AT_TUNED,
                "loss": loss,
                "candidate": own[0].label,
                "reference": baseline,
                "candidate_mean": math.nan,
                "reference_mean": tuned_configs[baseline].mean if baseline in tuned_configs else math.nan,
                "threshold": _mean_threshold(tuned_configs[baseline])
                if baseline in tuned_configs
                else math.nan,
                "not_compared": why,
                "paired": False,
                "n": 0,
                **dict.fromkeys(("difference", "low", "high", "p_value", "p_holm"), math.nan),
                "verdict": NOT_COMPARED,
            }
        )
    return rows


def _mean_threshold(config: Configuration) -> float:
    rows = config.rows
    if names.THRESHOLD_METRIC not in rows:
        return math.nan
    values = pd.to_numeric(rows.loc[rows["usable"], names.THRESHOLD_METRIC], errors="coerce")
    return float(values.mean()) if values.notna().any() else math.nan


def _result(result: Any, p_holm: float, options: AnalysisOptions) -> dict[str, Any]:
    return {
        "paired": result.paired,
        "n": result.n if result.paired else min(result.n_candidate, result.n_reference),
        "difference": result.difference,
        "low": result.low,
        "high": result.high,
        "p_value": result.p_value,
        "p_holm": p_holm,
        "verdict": decide(result, p_holm, alpha=options.alpha),
    }


def decision_statements(held: HeldOut, arena: pd.Series, options: AnalysisOptions) -> list[str]:
    """The Decision's lines about held-out data and the tuned-threshold rival, for one arena."""
    keys = {key: arena[key] for key in ARENA_KEYS}
    statements: list[str] = []
    configs = _select(held.configurations, keys)
    chosen = configs[configs["chosen"]] if len(configs) else configs
    unit = " points" if _percent(arena) else ""
    if len(chosen) and chosen.iloc[0]["test_n"] > 0:
        row = chosen.iloc[0]
        statements.append(
            f"**Chosen on dev, judged on test:** `{row['configuration']}` was picked as the best of "
            f"{int(arena['configs'])} configurations by its dev mean, which makes that mean optimistic. On "
            f"the held-out test split it scores {number(row['test_mean'])} (dev {number(row['dev_mean'])}): "
            f"its dev score {'exceeds' if row['drop'] >= 0 else 'falls short of'} its test score by "
            f"{number(abs(row['drop']))}{unit} (dev − test = {signed(row['drop'])})."
        )
    elif len(chosen) and int(arena["configs"]) > 1:
        statements.append(
            "**Chosen on dev, not judged on held-out data:** "
            f"`{chosen.iloc[0]['configuration']}` is the best of {int(arena['configs'])} configurations by "
            "its dev mean, and that mean is optimistic (a maximum over noisy estimates); no test split was "
            "scored (`data.splits.test`, docs/data.md)."
        )
    tuned = _select(held.tuned, keys)
    for _, row in tuned[tuned["rival"] == AT_TUNED].iterrows() if len(tuned) else []:
        threshold = f", mean threshold {row['threshold']:.2f}" if math.isfinite(row["threshold"]) else ""
        if row["not_compared"]:
            statements.append(
                f"`{row['loss']}` against `{row['reference']}` with its threshold tuned on dev{threshold}: "
                f"**not compared**, no usable seed ({row['not_compared']})."
            )
            continue
        statements.append(
            f"`{row['candidate']}` against `{row['reference']}` with its threshold tuned on dev{threshold} "
            f"({row['split']} {metric_label(str(arena['metric']))}): {signed(row['difference'])} "
            f"({options.confidence:.0%} CI {interval(row['low'], row['high'], signed=True)}, p (Holm) = "
            f"{_p(row['p_holm'])}, {_sample(row)}): {_gain_survives(row, tuned)}"
        )
    return statements


def _gain_survives(row: pd.Series, tuned: pd.DataFrame) -> str:
    plain = tuned[(tuned["rival"] == AT_DEFAULT) & (tuned["candidate"] == row["candidate"])]
    before = plain.iloc[0]["verdict"] if len(plain) else ""
    if row["verdict"] == BETTER:
        return "**it beats CE with a tuned threshold too**." if before == BETTER else "**better**."
    if row["verdict"] == WORSE:
        return "**worse than CE with a tuned threshold**."
    if before == BETTER:
        return "**its gain over CE at 0.5 does not survive**: not separated from CE with a tuned threshold."
    return "not separated."


def blocks(held: HeldOut, options: AnalysisOptions) -> list[Block]:
    """The section "Dev and test" (when a test split was scored) and "Against CE with a tuned threshold"."""
    found: list[Block] = []
    level = f"{options.confidence:.0%}"
    if held.has_test:
        found += [
            Heading("Dev and test"),
            Text(
                "Every configuration was chosen and compared on dev; each trial was scored once on the "
                "held-out test split with the state it reports (its best dev evaluation). A dev mean that "
                "won is optimistic: the drop (dev − test) shows by how much. The comparisons below are "
                "the Decision's, repeated on test with the same seed pairs and Holm's correction."
            ),
            Table(
                ["configuration", "dev mean", "test mean", "dev − test", "n (dev / test)"],
                [
                    [
                        f"**`{r['configuration']}`** (chosen)" if r["chosen"] else f"`{r['configuration']}`",
                        number(r["dev_mean"]),
                        number(r["test_mean"]),
                        signed(r["drop"]),
                        f"{int(r['dev_n'])} / {int(r['test_n'])}",
                    ]
                    for _, r in held.configurations.iterrows()
                ],
                caption="means over seeds of each configuration, by split",
            ),
        ]
        if len(held.comparisons):
            found.append(
                Table(
                    [
                        "vs",
                        "comparison",
                        "Δ dev",
                        "verdict dev",
                        "Δ test",
                        f"{level} CI test",
                        "p (Holm) test",
                        "verdict test",
                        "n",
                    ],
                    [
                        [
                            r["against"],
                            f"`{r['candidate']}` − `{r['reference']}`",
                            signed(r["dev_difference"]),
                            r["dev_verdict"],
                            *_compared(r),
                        ]
                        for _, r in held.comparisons.iterrows()
                    ],
                    caption="the Decision's comparisons on dev and on test",
                )
            )
    if len(held.tuned):
        split = held.tuned["split"].iloc[0]
        found += [
            Heading("Against CE with a tuned threshold"),
            Text(
                "F1 rewards a decision threshold that fits the class balance, and CE at 0.5 may only have "
                "the wrong one. Each loss's best configuration (by dev mean) against CE at 0.5 and against "
                "CE with its threshold tuned on dev (the F1-optimal threshold of its best dev predictions), "
                f"on {split}"
                + (
                    "."
                    if split == "test"
                    else ": without a test split CE's tuned F1 is tuned and scored on the same dev "
                    "predictions, which favours CE."
                )
                + " Paired on seeds, Holm over the losses of each rival."
            ),
            Table(
                [
                    "loss",
                    "configuration",
                    "rival",
                    "rival mean",
                    "Δ",
                    f"{level} CI",
                    "p (Holm)",
                    "verdict",
                    "n",
                ],
                [
                    [
                        r["loss"],
                        f"`{r['candidate']}` ({number(r['candidate_mean'])})",
                        r["rival"],
                        number(r["reference_mean"]),
                        *_compared(r),
                    ]
                    for _, r in held.tuned.iterrows()
                ],
                caption=f"{split} F1; the rival is the baseline configuration",
            ),
        ]
    return found


def _compared(row: pd.Series) -> list[str]:
    """A comparison's cells: Δ, interval, p (Holm), verdict, sample."""
    if row.get("not_compared"):
        return ["", "", "", f"not compared: {row['not_compared']}", ""]
    low, high = row["low"], row["high"]
    return [
        signed(row["difference"]),
        interval(low, high, signed=True),
        _p(row["p_holm"]),
        row["verdict"],
        _sample(row),
    ]


def _select(frame: pd.DataFrame, keys: dict[str, Any]) -> pd.DataFrame:
    if frame.empty:
        return frame
    mask = pd.Series(True, index=frame.index)
    for key, value in keys.items():
        mask &= frame[key] == value
    return frame[mask]


def _percent(arena: pd.Series) -> bool:
    return str(arena.get("unit", "")) == "%"


def _sample(row: pd.Series) -> str:
    return f"paired, n={int(row['n'])}" if row["paired"] else f"unpaired, n={int(row['n'])}"


def _p(value: float) -> str:
    return "—" if not math.isfinite(value) else f"{value:.3g}"


def tuned_rival_deltas(
    rows: pd.DataFrame,
    lines: list[Any],
    obs: pd.DataFrame,
    decisions: Decisions,
    runs: RunSet,
    options: AnalysisOptions,
) -> pd.DataFrame | None:
    """For a sensitivity figure's points (`rows`, of the curve `lines`, dicelab.analysis.sensitivity): each
    point against CE with its threshold tuned on dev, on dev as the curve is (CE's tuned F1 is tuned and
    scored on the same predictions: it favours CE). Columns tuned_delta, tuned_low, tuned_high, tuned_paired,
    tuned_p_holm (Holm over the figure's points), indexed as `rows`; None when no rival applies."""
    if rows.empty or str(rows["metric"].iloc[0]) != "f1":
        return None
    by_label = {line.label: line for line in lines}
    rivals: dict[tuple[Any, ...], Configuration | None] = {}
    compared: list[tuple[Any, pd.DataFrame, pd.DataFrame]] = []
    for index, point in rows.iterrows():
        line = by_label.get(point["line"])
        if line is None:
            continue
        key = (line.experiment, line.task, line.metric, line.variant)
        if key not in rivals:
            rivals[key] = _dev_tuned_rival(key, obs, decisions, runs)
        rival = rivals[key]
        if rival is None:
            continue
        trials = line.trials
        cell = trials[trials[point["param"]] == point["x"]]
        compared.append((index, cell, rival.trials))
    if not compared:
        return None
    results = compare_trials_many([(cell, rival) for _, cell, rival in compared], options)
    adjusted = holm([result.p_value for result in results])
    return pd.DataFrame(
        [
            {
                "tuned_delta": result.difference,
                "tuned_low": result.low,
                "tuned_high": result.high,
                "tuned_paired": result.paired,
                "tuned_p_holm": p_holm,
            }
            for result, p_holm in zip(results, adjusted, strict=True)
        ],
        index=[index for index, _, _ in compared],
    ).reindex(rows.index)


def _dev_tuned_rival(
    key: tuple[Any, ...], obs: pd.DataFrame, decisions: Decisions, runs: RunSet
) -> Configuration | None:
    """The arena's baseline configuration valued at its dev-tuned F1 (best_dev_f1_tuned)."""
    experiment, task, metric, variant = key
    arenas = decisions.arenas
    own = arenas[
        (arenas["experiment"] == experiment)
        & (arenas["task"] == task)
        & (arenas["metric"] == metric)
        & arenas["variant"].isin([variant, "all"])
    ]
    if own.empty or not own.iloc[0]["baseline"]:
        return None
    arena = own.iloc[0]
    tuned = _valued(arena_rows(obs, arena), names.best_metric(names.F1_TUNED))
    if tuned is None:
        return None
    return _by_label(configurations(tuned, runs.param_columns)).get(str(arena["baseline"]))
