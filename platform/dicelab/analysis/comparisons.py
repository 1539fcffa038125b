"""Paired decisions: every configuration against the baseline and against the best, Holm over the family.

An arena is what can be compared seed by seed: one experiment, task, metric and data variant (trials of the
same `train.seed` there share data order and initialisation). Within it a configuration is one setting of
the loss and its swept hyperparameters. Each configuration is compared with the baseline configuration
(`--baseline KEY=VALUE`, CE by default) and the best one (highest mean) with `dicelab.stats.compare`:
paired on the seeds both have, unpaired (and said so) when they share fewer than 2. Holm's correction runs
over the arena's whole family of comparisons; a comparison not decided says how many seeds would decide it.
"Best" follows the trials' mode (`train.mode`): the highest mean, or the lowest for a loss.

A seed race decided as it went: each configuration it dropped was decided worse than the leader of that
moment, with the same paired test and Holm's correction over the configurations it compared at that look.
The Decision of one raced sweep keeps those drops as the race made them (`against` = "race": the race's
comparison, p and p (Holm), and its family), instead of testing them again against the final best within a
larger family, which could call undecided what the race decided; a dropped configuration is never the best.
"""

from __future__ import annotations

import difflib
import json
import math
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dicelab.analysis.design import config_label
from dicelab.analysis.observations import (
    LOSS,
    LOSS_ORDER,
    SEED,
    TASK,
    VARIANT,
    VARIANT_ORDER,
    AnalysisOptions,
    exclusion_reasons,
    hyperparameter_columns,
    observations,
    paper_order,
)
from dicelab.analysis.paper import PaperNumbers
from dicelab.analysis.runs import RunSet
from dicelab.errors import DicelabError
from dicelab.stats import (
    NO_DIFFERENCE,
    WORSE,
    Comparison,
    compare_many,
    holm,
    min_pairs_for_significance,
    seeds_needed_many,
)
from dicelab.stats import verdict as decide
from dicelab.stats.comparison import Test

BASELINE, BEST, RACE = "baseline", "best", "race"  # what a comparison is against
ALL_VARIANTS = "all"  # the arena's variant when the baseline itself is a data variant
ARENA_KEYS = ["experiment", "task", "metric", "variant"]
COMPARISON_COLUMNS = [
    *ARENA_KEYS,
    "unit",
    "against",
    "candidate",
    "reference",
    "paired",
    "test",
    "n",
    "n_candidate",
    "n_reference",
    "n_missing_candidate",
    "n_missing_reference",
    "difference",
    "low",
    "high",
    "std_difference",
    "p_value",
    "p_holm",
    "verdict",
    "min_n",
    "note",
    "family",  # comparisons with a p-value in this arena: Holm's strictest step tests at alpha / family
    "detect",
    "detect_source",
    "seeds_needed",  # pairs (per side unpaired) for 80% power at alpha / family; only when undecided
]
ARENA_COLUMNS = [
    *ARENA_KEYS,
    "unit",
    "configs",
    "best",
    "best_mean",
    "best_n",
    "baseline",
    "baseline_mean",
    "not_compared",  # configurations without a usable seed, with why: "`dsc · alpha=0.1` (3 degenerate)"
    "mode",  # max or min: whether the best mean is the highest or the lowest
]


# The columns the statistics read of a configuration's trials (seed_values, exclusion_counts). Grouping and
# slicing only these is what keeps hundreds of configurations cheap: a trial row has every param, tag and
# metric as a column (dozens of Arrow-backed strings), and taking rows of all of them cost milliseconds a
# configuration.
STATISTICS_COLUMNS = (SEED, "value", "usable", "outcome", "exclusion")


@dataclass(frozen=True, eq=False)  # compared by identity: it holds its trials
class Configuration:
    label: str  # "dsc · alpha=0.3"
    loss: str
    variant: str
    settings: dict[str, Any]  # config column -> value (NaN where the loss has no such param)
    trials: pd.DataFrame  # its trials, usable or not: STATISTICS_COLUMNS (those present), index as in obs
    mean: float  # over its usable trials; NaN when it has none
    n: int  # usable trials
    source: pd.DataFrame | None = None  # the frame the trials come from, with every column

    @property
    def rows(self) -> pd.DataFrame:
        """Its trials with every column of the frame they come from."""
        return self.trials if self.source is None else self.source.loc[self.trials.index]


@dataclass
class Decisions:
    comparisons: pd.DataFrame  # COMPARISON_COLUMNS, one row per comparison
    arenas: pd.DataFrame  # ARENA_COLUMNS, one row per arena
    notes: list[str]


def decisions(runs: RunSet, options: AnalysisOptions | None = None) -> Decisions:
    """Every configuration against the baseline and the best, per arena (see the module's docstring)."""
    options = options or AnalysisOptions()
    return decisions_from_observations(observations(runs, options), runs, options)


def decisions_from_observations(
    obs: pd.DataFrame, runs: RunSet, options: AnalysisOptions, finder: BaselineFinder | None = None
) -> Decisions:
    """`finder`: one built on the same observations and options, whose configurations are reused."""
    key = options.baseline_key
    if len(obs) and key not in obs:
        known = list(dict.fromkeys(c for c in [LOSS, VARIANT, *runs.param_columns] if c in obs and c != SEED))
        close = difflib.get_close_matches(key, known, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"params: {', '.join(known)}"
        raise DicelabError(f"--baseline {options.baseline}: no trial has a param {key!r} ({hint})")
    rows: list[dict[str, Any]] = []
    arenas: list[dict[str, Any]] = []
    notes: list[str] = []
    for arena, group in _arenas(obs, key):
        configs = (
            finder.configurations[tuple(arena.values())]
            if finder is not None
            else configurations(group, runs.param_columns)
        )
        ranked = [c for c in configs if c.n > 0]
        if not ranked:
            continue
        mode = arena_mode(group)
        drops = race_drops(group, configs)
        contenders = [c for c in ranked if c.label not in drops] or ranked
        best = (max if mode == "max" else min)(contenders, key=lambda c: c.mean)
        baselines = [c for c in configs if _matches(c.settings.get(key), options.baseline_value)]
        partner = {c.label: _partner(c, baselines, key) for c in configs}
        own = partner.get(best.label)
        arenas.append(
            {
                **arena,
                "unit": group["unit"].iloc[0],
                "configs": len(configs),
                "best": best.label,
                "best_mean": best.mean,
                "best_n": best.n,
                "baseline": own.label if own is not None else "",
                "baseline_mean": own.mean if own is not None else math.nan,
                "not_compared": "; ".join(_unusable(c, options) for c in configs if c.n == 0),
                "mode": mode,
            }
        )
        if not baselines and len(configs) > 1:
            where = " / ".join(str(v) for v in arena.values() if v != ALL_VARIANTS)
            notes.append(f"{where}: no configuration with {options.baseline}; compared with the best only")
        family = list(_family(configs, best, partner, drops))
        raced = [item for item in family if item[0] == RACE]
        family = [item for item in family if item[0] != RACE]
        results = compare_trials_many([(c.trials, r.trials) for _, c, r in family], options)
        adjusted = holm([result.p_value for result in results])
        family_size = max(1, sum(math.isfinite(result.p_value) for result in results))
        paper = runs.papers.get(str(arena["experiment"]))
        paper = paper if paper is not None and paper.applies_to(str(arena["metric"])) else None
        higher = mode == "max"
        for (against, candidate, reference), result, p_holm in zip(family, results, adjusted, strict=True):
            row = _row(
                arena,
                group,
                against,
                candidate,
                reference,
                result,
                p_holm,
                paper,
                options,
                family_size,
                higher,
            )
            rows.append(row)
        scale = float(group["scale"].iloc[0]) if "scale" in group else 1.0
        for _, leader, dropped in raced:
            event = drops[dropped.label][1]
            result = _race_comparison(event, dropped, scale)
            family_at_look = int(event.get("family") or 1)
            row = _row(
                arena,
                group,
                RACE,
                dropped,
                leader,
                result,
                float(event["p_holm"]),
                paper,
                options,
                family_at_look,
                higher,
            )
            row["verdict"] = WORSE  # as the race decided it: worse than its leader, or no usable seed
            rows.append(row)
    _seeds_needed(rows, options)
    return Decisions(
        pd.DataFrame(rows, columns=COMPARISON_COLUMNS), pd.DataFrame(arenas, columns=ARENA_COLUMNS), notes
    )


def _seeds_needed(rows: list[dict[str, Any]], options: AnalysisOptions) -> None:
    """Seeds needed, for each undecided comparison: sized for Holm's strictest step (alpha / family), enough
    seeds whatever the comparison's rank. One batched search for every row (`seeds_needed_many`)."""
    undecided = [row for row in rows if row["verdict"] == NO_DIFFERENCE]
    needed = seeds_needed_many(
        [row["std_difference"] for row in undecided],
        [row["detect"] for row in undecided],
        [options.alpha / row["family"] for row in undecided],
        [row["paired"] for row in undecided],
        test=options.test,
    )
    for row, n in zip(undecided, needed, strict=True):
        row["seeds_needed"] = n if n is not None else pd.NA


def configurations(group: pd.DataFrame, param_columns: list[str]) -> list[Configuration]:
    """The configurations of one arena, in the paper's order (losses, then variants, then params)."""
    columns = [LOSS, VARIANT, *hyperparameter_columns(group, param_columns)]
    several_variants = group[VARIANT].nunique() > 1
    narrow = group[[*columns, *(c for c in _statistics_columns(group) if c not in columns)]]
    found = []
    for values, trials in narrow.groupby(columns, dropna=False, sort=False):
        settings = dict(zip(columns, values, strict=True))
        params = [(c, settings[c]) for c in columns[2:] if pd.notna(settings[c])]
        parts = [
            str(settings[LOSS]),
            str(settings[VARIANT]) if several_variants else "",
            config_label(params),
        ]
        usable = trials.loc[trials["usable"], "value"]
        found.append(
            Configuration(
                label=" · ".join(part for part in parts if part),
                loss=str(settings[LOSS]),
                variant=str(settings[VARIANT]),
                settings=settings,
                trials=trials,
                mean=float(usable.mean()) if len(usable) else math.nan,
                n=len(usable),
                source=group,
            )
        )
    return sorted(
        found,
        key=lambda c: (
            paper_order(c.loss, LOSS_ORDER),
            paper_order(c.variant, VARIANT_ORDER),
            [_sortable(c.settings[k]) for k in columns[2:]],
        ),
    )


class BaselineFinder:
    """The baseline configuration any group of trials (a curve point) is compared with, arena by arena."""

    def __init__(self, obs: pd.DataFrame, param_columns: list[str], options: AnalysisOptions):
        self.options = options
        self.key = options.baseline_key
        # per arena, once: its configuration columns and baseline configurations (a curve asks per point)
        self._arenas: dict[tuple[Any, ...], tuple[list[str], list[Configuration]]] = {}
        self.configurations: dict[tuple[Any, ...], list[Configuration]] = {}  # every arena's, in order
        for arena, group in _arenas(obs, self.key):
            found = configurations(group, param_columns)
            self.configurations[tuple(arena.values())] = found
            baselines = [c for c in found if _matches(c.settings.get(self.key), options.baseline_value)]
            columns = [LOSS, VARIANT, *hyperparameter_columns(group, param_columns)]
            self._arenas[tuple(arena.values())] = (columns, baselines)

    def partner(self, rows: pd.DataFrame) -> Configuration | None:
        """None when `rows` are themselves baseline trials, or no baseline agrees with their settings."""
        return self.partners(rows, [np.arange(len(rows))])[0]

    def partners(self, rows: pd.DataFrame, cells: list[np.ndarray]) -> list[Configuration | None]:
        """`partner(rows.iloc[cell])` for each cell (positions into `rows`), reading each column of `rows`
        once: a curve asks for each of its points, and per-point pandas work cost milliseconds a point."""
        if self.key not in rows:
            return [None] * len(cells)
        experiments, tasks, metrics = (rows[c].to_numpy() for c in ("experiment", TASK, "metric"))
        variants = rows[VARIANT].to_numpy()
        is_baseline = rows[self.key].map(lambda value: _matches(value, self.options.baseline_value))
        is_baseline = is_baseline.to_numpy(dtype=bool)
        codes: dict[str, np.ndarray] = {}  # a column's values as integers: a cell has one value or several
        found: list[Configuration | None] = []
        for cell in cells:
            first = cell[0]
            variant = variants[first] if self.key != VARIANT else ALL_VARIANTS
            arena = self._arenas.get((experiments[first], tasks[first], metrics[first], variant))
            if arena is None or is_baseline[cell].any():
                found.append(None)
                continue
            columns, baselines = arena
            settings = {}
            for column in columns:
                if column not in codes:
                    codes[column] = pd.factorize(rows[column], use_na_sentinel=False)[0]
                own = codes[column][cell]
                if (own == own[0]).all():  # nunique(dropna=False) == 1
                    settings[column] = rows[column].iloc[first]
            found.append(_agreeing(settings, baselines, self.key))  # a point is never a baseline itself
        return found


def compare_trials(candidate: pd.DataFrame, reference: pd.DataFrame, options: AnalysisOptions) -> Comparison:
    """`dicelab.stats.compare` on two groups of trials' per-seed values (see compare_trials_many)."""
    return compare_trials_many([(candidate, reference)], options)[0]


def compare_trials_many(
    pairs: Sequence[tuple[pd.DataFrame, pd.DataFrame]], options: AnalysisOptions
) -> list[Comparison]:
    """`dicelab.stats.compare` of each (candidate, reference) pair of trial groups, those not remembered
    computed together (`compare_many`). Remembered: the decision, the ablation table and the sensitivity
    curves ask for many of the same comparisons, and an inexact permutation test (more than 16 pairs)
    costs most of a second."""
    keys = [
        (_frozen(seed_values(candidate)), _frozen(seed_values(reference)), options.confidence, options.test)
        for candidate, reference in pairs
    ]
    known = {key: _COMPARED[key] for key in keys if key in _COMPARED}
    missing = [key for key in dict.fromkeys(keys) if key not in known]
    if missing:
        computed = compare_many(
            [(_unfrozen(key[0]), _unfrozen(key[1])) for key in missing],
            confidence=options.confidence,
            test=options.test,
        )
        known |= dict(zip(missing, computed, strict=True))
    for key in keys:  # most recently used last; the oldest are forgotten past _REMEMBERED
        _COMPARED[key] = known[key]
        _COMPARED.move_to_end(key)
    while len(_COMPARED) > _REMEMBERED:
        _COMPARED.popitem(last=False)
    return [known[key] for key in keys]


_REMEMBERED = 4096  # comparisons kept between calls
_Frozen = tuple[tuple[int, float | None], ...]
_COMPARED: OrderedDict[tuple[_Frozen, _Frozen, float, Test], Comparison] = OrderedDict()


def arena_mode(group: pd.DataFrame) -> str:
    """ "max" or "min": the trials' train.mode (a sweep's search.mode is every trial's); max when none
    was recorded."""
    if "train.mode" not in group:
        return "max"
    modes = group["train.mode"].dropna().astype(str)
    modes = modes[modes.isin(["max", "min"])]
    return str(modes.iloc[0]) if len(modes) else "max"


def race_drops(group: pd.DataFrame, configs: list[Configuration]) -> dict[str, tuple[str, dict[str, Any]]]:
    """{dropped configuration: (the configuration it was dropped against, the race's evidence)} for the
    trials of ONE raced sweep (a pooled analysis of several sweeps tests them all afresh)."""
    if "race_elimination" not in group or "race_configuration" not in group:
        return {}
    if group["sweep_id"].nunique(dropna=True) != 1:
        return {}
    decision_label: dict[str, str] = {}  # race label -> the Decision's label of the same configuration
    for config in configs:
        for label in config.rows["race_configuration"].dropna().unique():
            decision_label[str(label)] = config.label
    drops = {}
    for config in configs:
        evidence = config.rows["race_elimination"].dropna()
        if not len(evidence):
            continue
        try:
            event = json.loads(str(evidence.iloc[0]))
        except ValueError:
            continue
        leader = decision_label.get(str(event.get("leader")))
        if leader is not None and leader != config.label and event.get("p_holm") is not None:
            drops[config.label] = (leader, event)
    return drops


def _race_comparison(event: dict[str, Any], dropped: Configuration, scale: float) -> Comparison:
    """The race's comparison of `dropped` with its leader at the drop (dropped - leader), in the arena's
    unit. Its spread was not kept: no seeds-needed for it (it is decided)."""

    def number(key: str) -> float:
        value = event.get(key)
        return float(value) * scale if isinstance(value, int | float) else math.nan

    n = int(event.get("n") or 0)
    return Comparison(
        paired=bool(event.get("paired", True)),
        test=str(event.get("test") or ""),
        n=n,
        n_candidate=n,
        n_reference=n,
        n_missing_candidate=0,
        n_missing_reference=0,
        difference=number("difference"),
        low=number("low"),
        high=number("high"),
        std_difference=math.nan,
        p_value=float(event["p"]) if isinstance(event.get("p"), int | float) else math.nan,
        min_n=0,
        note="" if event.get("why") == "decided worse than the leader" else str(event.get("why") or ""),
    )


def _statistics_columns(frame: pd.DataFrame) -> list[str]:
    return [column for column in STATISTICS_COLUMNS if column in frame]


def _frozen(values: dict[int, float]) -> _Frozen:
    # NaN never equals itself, so it would defeat the cache: missing seeds are keyed as None.
    return tuple(sorted((seed, value if math.isfinite(value) else None) for seed, value in values.items()))


def _unfrozen(values: _Frozen) -> dict[int, float]:
    return {seed: math.nan if value is None else value for seed, value in values}


def seed_values(rows: pd.DataFrame) -> dict[int, float]:
    """{train.seed: value} of a configuration's trials; a trial that is not usable is a missing seed (NaN).

    A seed run more than once (pooled sweep invocations) counts once, at the mean of its usable runs."""
    # A trial without a seed cannot be paired: it gets a key of its own (its row's unique index, negated).
    seeds = rows[SEED] if SEED in rows else pd.Series(math.nan, index=rows.index)
    values: dict[int, list[float]] = {}
    for index, seed, value, usable in zip(rows.index, seeds, rows["value"], rows["usable"], strict=True):
        key = -1 - int(index) if pd.isna(seed) else int(seed)
        values.setdefault(key, []).append(float(value) if usable else math.nan)
    return {seed: _mean_of_finite(found) for seed, found in values.items()}


def _mean_of_finite(values: list[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan


def _arenas(obs: pd.DataFrame, baseline_key: str) -> Iterator[tuple[dict[str, Any], pd.DataFrame]]:
    # Comparing data variants themselves (--baseline data.variant=...) pairs seeds across variants.
    by_variant = baseline_key != VARIANT
    keys = ["experiment", TASK, "metric", *([VARIANT] if by_variant else [])]
    groups = obs.groupby(keys, sort=True)
    ordered = sorted(groups, key=lambda item: (*item[0][:3], paper_order(str(item[0][-1]), VARIANT_ORDER)))
    for values, group in ordered:
        experiment, task, metric, *variant = values
        arena = {
            "experiment": experiment,
            "task": task,
            "metric": metric,
            "variant": variant[0] if variant else ALL_VARIANTS,
        }
        yield arena, group


def _unusable(config: Configuration, options: AnalysisOptions) -> str:
    """ "`dsc · alpha=0.1` (3 degenerate)": a configuration none of whose trials counts, and why."""
    return f"`{config.label}` ({exclusion_reasons(config.trials, options)})"


def _matches(value: Any, wanted: str) -> bool:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    if isinstance(value, int | float | np.number):
        try:
            return math.isclose(float(value), float(wanted), rel_tol=1e-9, abs_tol=1e-12)
        except ValueError:
            return False
    return str(value) == wanted


def _partner(config: Configuration, baselines: list[Configuration], key: str) -> Configuration | None:
    """The baseline configuration `config` is compared with: one that agrees with it on every setting both
    have, other than the baseline key itself (the best by mean if several); None for a baseline itself."""
    return None if config in baselines else _agreeing(config.settings, baselines, key)


def _agreeing(settings: dict[str, Any], baselines: list[Configuration], key: str) -> Configuration | None:
    """The best (by mean) of the baselines with a usable seed that agree with `settings` on every setting
    both have other than `key`; None if none does."""
    agreeing = [
        b
        for b in baselines
        if b.n > 0
        and all(
            _same(settings[c], b.settings[c])
            for c in settings
            if c != key and pd.notna(settings[c]) and pd.notna(b.settings.get(c))
        )
    ]
    return max(agreeing, key=lambda b: b.mean) if agreeing else None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float | np.number) and isinstance(b, int | float | np.number):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return str(a) == str(b)


def _family(
    configs: list[Configuration],
    best: Configuration,
    partner: dict[str, Configuration | None],
    drops: dict[str, tuple[str, dict[str, Any]]] | None = None,
) -> Iterator[tuple[str, Configuration, Configuration]]:
    """(against, candidate, reference): each configuration a seed race dropped with the leader it was
    dropped against (RACE: the race's comparison, yielded as (RACE, leader, dropped)), then each configuration
    vs its baseline, then the best vs each other configuration (best first, so a positive difference means
    the best is ahead); no pair twice, and no dropped configuration against the best again."""
    seen: set[frozenset[str]] = set()
    by_label = {config.label: config for config in configs}
    dropped: set[str] = set()
    for label, (leader, _event) in (drops or {}).items():
        if label in by_label and leader in by_label:
            dropped.add(label)
            seen.add(frozenset((label, leader)))
            yield RACE, by_label[leader], by_label[label]
    for config in configs:
        reference = partner[config.label]
        if reference is not None and config.n > 0:
            seen.add(frozenset((config.label, reference.label)))
            yield BASELINE, config, reference
    for config in configs:
        pair = frozenset((best.label, config.label))
        if config is not best and config.n > 0 and pair not in seen and config.label not in dropped:
            seen.add(pair)
            yield BEST, best, config


def _row(
    arena: dict[str, Any],
    group: pd.DataFrame,
    against: str,
    candidate: Configuration,
    reference: Configuration,
    result: Comparison,
    p_holm: float,
    paper: PaperNumbers | None,
    options: AnalysisOptions,
    family_size: int,
    higher_is_better: bool = True,
) -> dict[str, Any]:
    verdict = decide(result, p_holm, alpha=options.alpha, higher_is_better=higher_is_better)
    detect, source = _detect(candidate, reference, paper, options)
    return {
        **arena,
        "unit": group["unit"].iloc[0],
        "against": against,
        "candidate": candidate.label,
        "reference": reference.label,
        "paired": result.paired,
        "test": result.test,
        "n": result.n,
        "n_candidate": result.n_candidate,
        "n_reference": result.n_reference,
        "n_missing_candidate": result.n_missing_candidate,
        "n_missing_reference": result.n_missing_reference,
        "difference": result.difference,
        "low": result.low,
        "high": result.high,
        "std_difference": result.std_difference,
        "p_value": result.p_value,
        "p_holm": p_holm,
        "verdict": verdict,
        "min_n": result.min_n,
        "note": result.note,
        "family": family_size,
        "detect": detect,
        "detect_source": source,
        "seeds_needed": pd.NA,  # filled in for the undecided rows of every arena at once (_seeds_needed)
    }


def _detect(
    candidate: Configuration, reference: Configuration, paper: PaperNumbers | None, options: AnalysisOptions
) -> tuple[float, str]:
    """The difference worth detecting: --detect, else the paper's for these two losses, else 1 point."""
    if options.detect is not None:
        return options.detect, "--detect"
    if paper is not None:
        delta = abs(
            paper.result(candidate.loss, candidate.variant) - paper.result(reference.loss, reference.variant)
        )
        if math.isfinite(delta) and delta > 0:
            return delta, "paper"
    return 1.0, "1 point"


def minimum_pairs(options: AnalysisOptions, family_size: int = 1) -> int:
    """The smallest number of paired seeds at which the chosen test can reach p < alpha / family_size."""
    return min_pairs_for_significance(options.test, paired=True, alpha=options.alpha / family_size)


def _sortable(value: Any) -> tuple[int, Any]:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return (0, 0)
    return (1, value) if isinstance(value, int | float | np.number) else (2, str(value))
