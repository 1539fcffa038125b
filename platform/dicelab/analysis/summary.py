"""The paragraph `dicelab analyze` ends with: what won, by how much, how sure, what it cost, where to look
next, in words a newcomer reads without the report's vocabulary."""

from __future__ import annotations

import pandas as pd

from dicelab.analysis._format import interval, number
from dicelab.analysis.comparisons import Decisions
from dicelab.analysis.cost import cost_of
from dicelab.analysis.decision import _listed, _orient, _rows_of, arena_trials
from dicelab.analysis.observations import AnalysisOptions, metric_label
from dicelab.stats import BETTER
from dicelab.words import count

MAX_NAMED = 5  # configurations named in a sentence, the nearest first


def summary_paragraph(
    decisions: Decisions, options: AnalysisOptions, trials: pd.DataFrame, report: str, ui: str
) -> str:
    """One paragraph for the first (or only) arena of the decision; `report`: the report's path, `ui`: the
    command that opens the trials in the MLflow UI."""
    look = f"Read the report ({report}) for the per-seed numbers and curves, or browse the trials: {ui}."
    if decisions.arenas.empty:
        return f"In short: no configuration has a usable trial, so nothing was decided. {look}"
    arena = decisions.arenas.iloc[0]
    rows = _rows_of(decisions.comparisons, arena)
    best, level = str(arena["best"]), f"{options.confidence:.0%}"
    metric = metric_label(str(arena["metric"]))
    said = [
        f"In short: `{best}` scored best, {metric} {number(float(arena['best_mean']))} averaged over "
        f"{count(int(arena['best_n']), 'seed')}."
    ]
    sides = rows[(rows["candidate"] == best) | (rows["reference"] == best)]
    others = [_orient(row, best) for _, row in sides.iterrows()]
    beaten = sorted((o for o in others if o.verdict == BETTER), key=lambda o: o.difference)
    close = sorted((o for o in others if o.verdict != BETTER), key=lambda o: abs(o.difference))
    if beaten:
        nearest = beaten[0]
        said.append(
            f"It is reliably better than {count(len(beaten), 'other configuration')}; the closest of "
            f"them, `{nearest.other}`, by {nearest.difference:+.2f} points ({level} confidence interval "
            f"{interval(nearest.low, nearest.high, signed=True)}, Holm-corrected p = "
            f"{float(nearest.row['p_holm']):.2g}, on {int(nearest.row['n'])} paired seeds)."
        )
    if close:
        # the nearest; a sweep of hundreds of configurations would list them all
        names = _listed([f"`{o.other}` ({o.difference:+.2f})" for o in close], MAX_NAMED)
        said.append(
            f"It is not separated from {names}: with these seeds those differences may be chance."
            if beaten
            else f"No difference is separated from chance yet: {names}; more seeds would decide."
        )
    cost = cost_of(arena_trials(trials, arena))
    if cost.trials:
        said.append(f"Running it took {count(cost.trials, 'trial')} ({cost.text()}).")
    return " ".join([*said, look]).replace("`", "")
