"""The report's opening "Decision" section (and `dicelab analyze`'s console summary): the best configuration,
what it beats and how surely, what is undecided and how many seeds would decide it, what the decision cost
and what those seeds would cost, how many trials fit on one GPU, a seed race's record."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from dicelab.analysis._format import interval, number, signed
from dicelab.analysis.comparisons import ALL_VARIANTS, BASELINE, BEST, RACE, Decisions, minimum_pairs
from dicelab.analysis.cost import memory_statements, next_step_statement, spent_statement
from dicelab.analysis.document import Block, Bullets, Heading, Table, Text
from dicelab.analysis.observations import TASK, VARIANT, AnalysisOptions, exclusion_reasons, metric_label
from dicelab.analysis.race import RaceRecord
from dicelab.stats import BETTER, NO_DIFFERENCE, WORSE
from dicelab.words import count

POWER = 0.8  # the power seeds are sized for
MAX_UNDECIDED = 12  # undecided comparisons spelled out per arena in the report (the table has them all)
MAX_UNDECIDED_CONSOLE = 3
# The eliminations' columns a reader needs (the CSV on the parent run has them all, with times and tests).
ELIMINATION_COLUMNS = (
    "trials_finished",
    "configuration",
    "leader",
    "n",
    "difference",
    "low",
    "high",
    "p_holm",
    "family",
    "why",
)


RACE_DIFFERENCES = ("difference", "low", "high")  # in the metric's raw unit in the CSV


@dataclass(frozen=True)
class _Oriented:
    """A comparison seen from one side: `ahead` is the configuration whose difference is reported."""

    ahead: str
    other: str
    difference: float
    low: float
    high: float
    verdict: str  # from `ahead`'s point of view
    row: pd.Series


def decision_blocks(
    decisions: Decisions,
    races: list[RaceRecord],
    options: AnalysisOptions,
    trials: pd.DataFrame | None = None,
    more: Callable[[pd.Series], list[str]] | None = None,
) -> list[Block]:
    """`trials`: the observations (a row per trial, with its cost metrics) the decision was made from; with
    them the section says what it cost, what the next seeds would cost, and how many trials fit on a GPU.
    `more`: an arena's further statements (held-out test, CE with a tuned threshold: analysis.held_out)."""
    blocks: list[Block] = [Heading("Decision")]
    arenas = decisions.arenas
    if arenas.empty:
        return [*blocks, Text("Nothing to decide: no configuration has a usable trial.")]
    titled = len(arenas) > 1
    for _, arena in arenas.iterrows():
        rows = _rows_of(decisions.comparisons, arena)
        if titled:
            blocks.append(Heading(_arena_title(arena), 3))
        blocks.append(Bullets(arena_statements(arena, rows, options, trials=trials) + _more(more, arena)))
        if len(rows):
            blocks.append(_table(rows, options))
    costs = cost_statements(trials)
    if costs:
        blocks.append(Bullets(costs))
    blocks.append(Text(method_text(decisions, options)))
    if decisions.notes:
        blocks.append(Bullets(decisions.notes))
    for race in races:
        blocks += _race_blocks(race, _scale_of(trials, race.experiment))
    return blocks


def _scale_of(trials: pd.DataFrame | None, experiment: str) -> float:
    """What the race's differences (in the metric's raw unit: F1 0.0092) are multiplied by to read in the
    report's unit (0.92 points): the experiment's one scale, 1 when it has none or several metrics."""
    if trials is None or "scale" not in trials or "experiment" not in trials:
        return 1.0
    scales = trials.loc[trials["experiment"] == experiment, "scale"].unique()
    return float(scales[0]) if len(scales) == 1 else 1.0


def decision_lines(
    decisions: Decisions,
    races: list[RaceRecord],
    options: AnalysisOptions,
    trials: pd.DataFrame | None = None,
    more: Callable[[pd.Series], list[str]] | None = None,
) -> list[str]:
    """The same decision as plain console lines."""
    lines = ["Decision"]
    titled = len(decisions.arenas) > 1
    for _, arena in decisions.arenas.iterrows():
        rows = _rows_of(decisions.comparisons, arena)
        if titled:
            lines.append(f"  {_plain(_arena_title(arena))}")
        statements = arena_statements(arena, rows, options, MAX_UNDECIDED_CONSOLE, trials) + _more(
            more, arena
        )
        lines += [f"  - {_plain(statement)}" for statement in statements]
    if decisions.arenas.empty:  # why, on the console too: the report lists the trials not counted
        why = exclusion_reasons(trials, options) if trials is not None else ""
        lines.append(f"  nothing to decide: no configuration has a usable trial{f' ({why})' if why else ''}")
    else:
        lines += [f"  - {_plain(statement)}" for statement in cost_statements(trials)]
        test = "exact sign-flip permutation test" if options.test == "permutation" else "paired t test"
        lines.append(
            f"  ({test} on paired seeds, Holm-corrected; p < {options.alpha:.2g} needs at least "
            f"{minimum_pairs(options)} pairs; details in the report)"
        )
        if (decisions.comparisons["against"] == RACE).any():
            lines.append(f"  ({_plain(RACE_NOTE)})")
    lines += [f"  note: {_plain(note)}" for note in decisions.notes]  # a --baseline no configuration has
    for race in races:
        lines.append(f"  seed race {race.sweep_id}: {race.decision}")
    return lines


def arena_statements(
    arena: pd.Series,
    rows: pd.DataFrame,
    options: AnalysisOptions,
    max_undecided: int = MAX_UNDECIDED,
    trials: pd.DataFrame | None = None,
) -> list[str]:
    """Sentences (with `names` marked) saying what the comparisons of one arena decided; with the `trials`
    (observations), what the seeds that would decide the rest would cost."""
    level = f"{options.confidence:.0%}"
    best = str(arena["best"])
    lowest = " (the lowest: the metric is minimised)" if arena.get("mode") == "min" else ""
    statements = [
        f"**Best: `{best}`**, mean {number(float(arena['best_mean']))}{lowest} over "
        f"{count(int(arena['best_n']), 'seed')}."
    ]
    if int(arena["configs"]) < 2:
        return [*statements, "It is the only configuration: there is nothing to compare it with."]
    involving = [
        _orient(row, best) for _, row in rows.iterrows() if best in (row["candidate"], row["reference"])
    ]
    beaten = sorted((o for o in involving if o.verdict == BETTER), key=lambda o: o.difference)
    if beaten:  # the closest first: a sweep of hundreds of configurations beats most of them by far
        said = "; ".join(_evidence(o, level) for o in beaten[:max_undecided])
        more = len(beaten) - max_undecided
        ending = f"; and {more} more (`comparisons.csv`)." if more > 0 else "."
        statements.append(f"It beats {said}{ending}")
    else:
        statements.append("It is not yet separated from any other configuration.")
    baseline = str(arena["baseline"])
    against_baseline = rows[rows["against"] == BASELINE]
    if len(against_baseline):
        verdicts = []
        for verdict in (BETTER, WORSE, NO_DIFFERENCE):
            names = [
                f"`{r}`" for r in against_baseline.loc[against_baseline["verdict"] == verdict, "candidate"]
            ]
            if names:
                verdicts.append(f"{verdict}: {_listed(names, 2 * max_undecided)}")
        which = f"`{baseline}`" if baseline else f"`{options.baseline}`"
        statements.append(f"Against the baseline {which}: " + "; ".join(verdicts) + ".")
    undecided = rows[rows["verdict"] == NO_DIFFERENCE]
    # the best's contenders first, the closest first: what is still open about the decision itself
    contender = (undecided["against"] == BEST) & (
        (undecided["candidate"] == best) | (undecided["reference"] == best)
    )
    undecided = undecided.assign(
        _order=~contender, _gap=undecided["difference"].abs().where(contender, 0.0)
    ).sort_values(["_order", "_gap"], kind="stable")
    for _, row in undecided.head(max_undecided).iterrows():
        statements.append(f"Undecided: {_undecided(row, level)}")
    if len(undecided) > max_undecided:
        statements.append(
            f"…and {len(undecided) - max_undecided} more undecided comparisons: see the table "
            "(`comparisons.csv`)."
        )
    if trials is not None:
        next_step = next_step_statement(rows, arena_trials(trials, arena))
        statements += [next_step] if next_step else []
    statements += _missing_and_unpaired(rows, max_undecided)
    if arena["not_compared"]:
        statements.append(f"Not compared, no usable seed: {arena['not_compared']}.")
    family = int(rows["family"].max()) if len(rows) else 1
    if family > 1:
        strictest = options.alpha / family
        statements.append(
            f"With {family} comparisons here, Holm's strictest step needs p < {strictest:.2g}: at least "
            f"{minimum_pairs(options, family)} paired seeds with this test (seeds needed are sized for it)."
        )
    return statements


def _more(more: Callable[[pd.Series], list[str]] | None, arena: pd.Series) -> list[str]:
    return more(arena) if more is not None else []


def cost_statements(trials: pd.DataFrame | None) -> list[str]:
    """What the decision's trials cost (every trial, failed ones too) and how many fit on one GPU."""
    if trials is None:
        return []
    spent = spent_statement(trials)
    return [*([spent] if spent else []), *memory_statements(trials)]


def arena_trials(trials: pd.DataFrame, arena: pd.Series) -> pd.DataFrame:
    """The trials of one arena (usable or not): its experiment, task, metric and variant."""
    mask = (
        (trials["experiment"] == arena["experiment"])
        & (trials[TASK] == arena["task"])
        & (trials["metric"] == arena["metric"])
    )
    if arena["variant"] != ALL_VARIANTS:
        mask &= trials[VARIANT] == arena["variant"]
    return trials[mask]


RACE_NOTE = (
    "A configuration the seed race dropped keeps the race's verdict (vs `race`): the race decided it worse "
    "than its leader of that moment with the same paired test, Holm-corrected over the configurations it "
    "compared with the leader at that look; tested again here within this table's larger family it could "
    "read as undecided, which is not what the race found."
)


def method_text(decisions: Decisions, options: AnalysisOptions) -> str:
    tests = sorted(set(decisions.comparisons["test"])) if len(decisions.comparisons) else []
    test = ", ".join(tests) if tests else "exact sign-flip permutation test (paired)"
    minimum = minimum_pairs(options)
    alpha = f"{options.alpha:.2g}"
    limit = (
        f"with n pairs its smallest two-sided p is 2/2^n, so p < {alpha} needs at least {minimum} "
        "paired seeds whatever the difference"
        if options.test == "permutation"
        else f"it assumes normal differences and can reach p < {alpha} from {minimum} pairs"
    )
    return (
        f"Each configuration is compared with the baseline ({options.baseline}) and with the best, "
        f"paired on the seeds both ran ({test}; {limit}); the interval is the paired t interval "
        f"({options.confidence:.0%}), Welch's when unpaired. p (Holm) is corrected over all comparisons of "
        f"a table; a verdict needs p (Holm) < {alpha}. Seeds needed: pairs for {POWER:.0%} power to detect "
        "the stated difference at Holm's strictest level (alpha over the number of comparisons), from the "
        "observed spread of the paired differences (statsmodels)."
        + (f" {RACE_NOTE}" if (decisions.comparisons["against"] == RACE).any() else "")
    )


def _rows_of(comparisons: pd.DataFrame, arena: pd.Series) -> pd.DataFrame:
    mask = pd.Series(True, index=comparisons.index)
    for key in ("experiment", "task", "metric", "variant"):
        mask &= comparisons[key] == getattr(arena, key)
    return comparisons[mask]


def _arena_title(arena: pd.Series) -> str:
    parts = [f"task `{arena['task']}`", metric_label(str(arena["metric"]))]
    if arena["variant"] != ALL_VARIANTS:
        parts.append(f"variant `{arena['variant']}`")
    return f"{arena['experiment']} · " + " · ".join(parts)


def _orient(row: pd.Series, ahead: str) -> _Oriented:
    if row["candidate"] == ahead:
        return _Oriented(
            ahead, row["reference"], row["difference"], row["low"], row["high"], row["verdict"], row
        )
    flipped = {BETTER: WORSE, WORSE: BETTER}.get(row["verdict"], row["verdict"])
    return _Oriented(ahead, row["candidate"], -row["difference"], -row["high"], -row["low"], flipped, row)


def _evidence(o: _Oriented, level: str) -> str:
    raced = (
        f", decided by the seed race: Holm over {count(int(o.row['family']), 'configuration')} at that look"
        if o.row["against"] == RACE
        else ""
    )
    return (
        f"`{o.other}` by {o.difference:+.2f} ({level} CI {interval(o.low, o.high, signed=True)}, "
        f"p (Holm) = {_p(o.row['p_holm'])}, {_sample(o.row)}{raced})"
    )


def _undecided(row: pd.Series, level: str) -> str:
    text = (
        f"`{row['candidate']}` vs `{row['reference']}`: {row['difference']:+.2f} "
        f"({level} CI {interval(row['low'], row['high'], signed=True)}, p (Holm) = {_p(row['p_holm'])}, "
        f"{_sample(row)})"
    )
    needed = row["seeds_needed"]
    size = f"{row['detect']:.2f}" + {"paper": " (the paper's difference)", "1 point": " (1 point)"}.get(
        row["detect_source"], ""
    )
    if pd.isna(needed):
        return f"{text}; the spread is unknown until both have 2 seeds in common"
    per = "paired seeds" if row["paired"] else "seeds per configuration"
    have = int(row["n"]) if row["paired"] else min(int(row["n_candidate"]), int(row["n_reference"]))
    if int(needed) <= have:
        return (
            f"{text}; {have} {per} already give {POWER:.0%} power against a difference of {size}, "
            "so a true difference that large is unlikely"
        )
    return f"{text}; about {int(needed)} {per} would detect a difference of {size} with {POWER:.0%} power"


def _missing_and_unpaired(rows: pd.DataFrame, limit: int) -> list[str]:
    """What limits the comparisons: seeds missing, comparisons unpaired and the notes of the others, each
    kind spelled out up to `limit` times and then counted (a large sweep has hundreds of each)."""
    missing: dict[str, int] = {}
    for _, row in rows.iterrows():
        for side in ("candidate", "reference"):
            missing[row[side]] = max(missing.get(row[side], 0), int(row[f"n_missing_{side}"]))
    statements = _at_most(
        [
            f"`{name}` misses {count(n, 'seed')} the others ran (failed, degenerate or no value): "
            "compared on the seeds it has."
            for name, n in missing.items()
            if n
        ],
        limit,
        "configurations miss seeds",
    )
    unpaired, noted = ~rows["paired"].astype(bool), rows["note"].astype(str) != ""
    untested = unpaired & rows["p_value"].isna() & noted
    said = []
    for index, row in rows[unpaired].iterrows():
        # a comparison that ran no test (one seed on a side) says why instead of naming the test it would use
        how = row["note"] if untested[index] else row["test"]
        said.append(
            f"`{row['candidate']}` vs `{row['reference']}` is unpaired (fewer than 2 seeds in common): {how}."
        )
    statements += _at_most(said, limit, "comparisons are unpaired")
    for note, group in rows[noted & ~untested].groupby("note", sort=False):
        pairs = [f"`{row['candidate']}` vs `{row['reference']}`" for _, row in group.iterrows()]
        if len(pairs) <= limit:
            statements += [f"{pair}: {note}." for pair in pairs]
        else:
            among = _listed(pairs, limit)
            statements.append(f"{count(len(pairs), 'comparison')}, among them {among}: {note}.")
    return statements


def _listed(names: list[str], limit: int) -> str:
    """The first `limit` of `names` and how many more (the comparisons table has them all)."""
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown} and {len(names) - limit} more"


def _at_most(statements: list[str], limit: int, what: str) -> list[str]:
    more = len(statements) - limit
    return statements if more <= 0 else [*statements[:limit], f"…and {more} more {what} (`comparisons.csv`)."]


def _table(rows: pd.DataFrame, options: AnalysisOptions) -> Table:
    level = f"{options.confidence:.0%}"
    return Table(
        ["vs", "comparison", "Δ", f"{level} CI", "p", "p (Holm)", "verdict", "n", "seeds needed"],
        [
            [
                r["against"],
                f"`{r['candidate']}` − `{r['reference']}`",
                signed(r["difference"]),
                interval(r["low"], r["high"], signed=True),
                _p(r["p_value"]),
                _p(r["p_holm"]),
                r["verdict"],
                _sample(r),
                "" if pd.isna(r["seeds_needed"]) else f"{int(r['seeds_needed'])} for Δ={r['detect']:.2f}",
            ]
            for _, r in rows.iterrows()
        ],
        caption=f"vs {BASELINE}: a configuration against the baseline; vs {BEST}: the best against another"
        + (
            f"; vs {RACE}: a configuration the seed race dropped, against its leader then (the race's test)"
            if (rows["against"] == RACE).any()
            else ""
        ),
    )


def _race_blocks(race: RaceRecord, scale: float = 1.0) -> list[Block]:
    blocks: list[Block] = [
        Heading(f"Seed race `{race.sweep_id}`", 3),
        Text(f"The race's decision (parent run `{race.parent_run_id}`): {race.decision}"),
    ]
    if race.eliminations is not None and len(race.eliminations):
        shown = [c for c in ELIMINATION_COLUMNS if c in race.eliminations]
        frame = (race.eliminations[shown] if shown else race.eliminations).copy()
        differences = [c for c in RACE_DIFFERENCES if c in frame] if scale != 1.0 else []
        caption = "eliminations, in order (race/eliminations.csv on the parent run"
        if differences:  # in the decision table's unit, rounded as it rounds them
            frame[differences] = frame[differences].astype(float) * scale
            caption += f"; its differences ×{scale:g} here, in the decision table's unit"
        blocks.append(
            Table(
                [str(c) for c in frame.columns],
                [
                    [
                        signed(float(v), missing="") if column in differences else _cell(v)
                        for column, v in zip(frame, row, strict=True)
                    ]
                    for row in frame.itertuples(index=False)
                ],
                caption=caption + ")",
            )
        )
    elif race.eliminations is not None:
        blocks.append(Text("No configuration was eliminated."))
    return blocks


def _sample(row: pd.Series) -> str:
    if row["paired"]:
        return f"paired, n={int(row['n'])}"
    return f"unpaired, {int(row['n_candidate'])} vs {int(row['n_reference'])}"


def _p(value: float) -> str:
    return "—" if not math.isfinite(value) else f"{value:.3g}"


def _cell(value: object) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def _plain(text: str) -> str:
    return text.replace("`", "").replace("**", "")
