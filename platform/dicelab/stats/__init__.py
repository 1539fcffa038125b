"""Statistics for deciding between configurations trained on the same seeds (scipy / statsmodels only).

A bottom layer: the analysis (tables, report) and the sweeps (seed racing) both decide with it.

    from dicelab.stats import compare, holm, verdict, seeds_needed
    result = compare({1: 85.1, 2: 84.0, 3: 86.2}, {1: 84.0, 2: 83.9, 3: 85.0})   # paired on seeds 1-3
    adjusted = holm([result.p_value, ...])                                           # family of comparisons
    verdict(result, adjusted[0])                                                     # better / worse / ...
"""

from dicelab.stats.comparison import (
    BETTER,
    NO_DIFFERENCE,
    TESTS,
    WORSE,
    Comparison,
    compare,
    compare_many,
    min_pairs_for_significance,
    verdict,
)
from dicelab.stats.equivalence import equivalent
from dicelab.stats.multiple import holm
from dicelab.stats.power import seeds_needed, seeds_needed_many

__all__ = [
    "BETTER",
    "NO_DIFFERENCE",
    "TESTS",
    "WORSE",
    "Comparison",
    "compare",
    "compare_many",
    "equivalent",
    "holm",
    "min_pairs_for_significance",
    "seeds_needed",
    "seeds_needed_many",
    "verdict",
]
