"""Search algorithms behind one interface, in one registry (`search.algorithm` names one).

An algorithm says which dimension kinds it takes and what it requires (`check`), how many configurations a
sweep tries (`num_configurations`: trial counting; seeds multiply it), and where the points come from:
either every point up front (`points`: grid, random; Tune runs them as a grid, each trial's config carries
its point) or a Tune searcher that proposes them while the sweep runs (`searcher`: optuna, gp; each trial's
config carries the searcher's parameters, and Tune saves the searcher's state with the experiment, which is
what `--resume` restores). Trials at start, the Tune searcher, Tune's param space and sample count, how a
trial's config becomes its point, and how a warm start enters all follow from these. Racing works with the
algorithms that know every point up front.

Adding an algorithm is one class registered here; `GaussianProcess` (Optuna's GPSampler) is such an addition,
and `tests/sweeps/test_sweep_algorithms.py` runs the same contract over every registered algorithm.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from dicelab.registry import Registry

if TYPE_CHECKING:
    from ray.tune.search import Searcher

# A dicelab.sweeps.space.SweepPlan, and a search dimension of dicelab.sweeps.schema: not imported, as both
# modules import this one.
SweepPlan = Any
Dimension = Any
Point = dict[str, Any]

POINT_KEY = "point"  # algorithms with points up front: the Tune config is {"point": {dotted key: value}}
Fail = Callable[[str, str], None]  # fail(config key, message): raises the config's one-line error


class SearchAlgorithm:
    """One way of choosing a sweep's configurations (see the module docstring)."""

    name: ClassVar[str]
    proposes_while_running: ClassVar[bool]  # a Tune searcher proposes the points (else known up front)
    # How search.conditional's losses become the dimension that picks one: "grid" (each loss) or "choice"
    loss_kind: ClassVar[str]
    supports_racing: ClassVar[bool]
    accepts_grid: ClassVar[bool]  # whether `grid` dimensions are allowed (each value, in every combination)
    draws_samples: ClassVar[bool] = True  # it tries search.num_samples configurations (required)

    def check(self, plan: SweepPlan, declared: dict[str, Dimension], fail: Fail) -> None:
        """What this algorithm requires of the `search:` section (declared: where -> dimension)."""
        search = plan.search
        if not self.accepts_grid:
            loss = plan.loss_dimension
            if loss is not None and loss.grid is not None:
                fail("search.space.loss.name", f"grid is not allowed with algorithm {self.name} (use choice)")
            for where, dimension in declared.items():
                if dimension.grid is not None:
                    fail(
                        where,
                        f"grid is not allowed with algorithm {self.name} "
                        "(use choice, or search.algorithm: grid)",
                    )
        if search.num_samples is None:
            fail("search.num_samples", f"is required with algorithm {self.name} (configurations to sample)")

    def num_configurations(self, plan: SweepPlan) -> int:
        """Configurations the sweep tries (its trials, without the seed repetition)."""
        assert plan.search.num_samples is not None  # checked by `check`
        return plan.search.num_samples

    def points(self, plan: SweepPlan) -> list[Point]:
        """Every configuration's point, up front, warm-start points first (no seeds)."""
        raise ValueError(f"algorithm {self.name} proposes its points while the sweep runs")

    def searcher(self, plan: SweepPlan, metric: str, mode: str) -> Searcher | None:
        """The Tune searcher that proposes the points (`metric`: Tune's, with its dev_ prefix); None: Tune
        runs `points` as a grid."""
        return None

    def max_warm_start(self, plan: SweepPlan) -> int | None:
        """How many warm-start configurations fit (None: any number)."""
        return None

    # -- what follows from the above ------------------------------------------------------------------------

    def param_space(self, plan: SweepPlan) -> dict[str, Any]:
        """Tune's param space: the points as a grid, or nothing for a searcher (or a race) to fill."""
        from ray import tune

        if self.proposes_while_running or plan.racing is not None:
            return {}
        return {POINT_KEY: tune.grid_search(plan.points())}

    def num_samples(self, plan: SweepPlan) -> int:
        """Tune's num_samples: the trials one by one for a searcher (or a race), else one pass of the grid."""
        return plan.num_trials if self.proposes_while_running or plan.racing is not None else 1

    def point_of(self, tune_config: dict[str, Any], plan: SweepPlan) -> Point:
        """A trial's point from its Tune config (a point up front, or the searcher's parameters)."""
        if not self.proposes_while_running:
            return dict(tune_config[POINT_KEY])
        from ray.tune.search.repeater import TRIAL_INDEX

        params = {key: value for key, value in tune_config.items() if key != TRIAL_INDEX}
        point = plan.point_from_params(params)
        if plan.seeds is not None:
            point = plan.race_seed_point(point, plan.seeds[tune_config.get(TRIAL_INDEX, 0)])
        return point


ALGORITHMS: Registry[SearchAlgorithm] = Registry("search algorithm", builtins="dicelab.sweeps.algorithms")


def algorithm(name: str) -> SearchAlgorithm:
    return ALGORITHMS.get(name)


def _register(cls: type[SearchAlgorithm]) -> type[SearchAlgorithm]:
    ALGORITHMS.register(cls.name)(cls())
    return cls


@_register
class Grid(SearchAlgorithm):
    """Every combination of the listed values (per loss, when `conditional` is used)."""

    name = "grid"
    draws_samples = False
    proposes_while_running = False
    loss_kind = "grid"
    supports_racing = True
    accepts_grid = True

    def check(self, plan: SweepPlan, declared: dict[str, Dimension], fail: Fail) -> None:
        if plan.search.num_samples is not None:
            fail("search.num_samples", "is for sampling algorithms (a grid runs each point once per seed)")
        for where, dimension in declared.items():
            if dimension.values is None:
                fail(where, f"algorithm grid needs a grid or choice list, not {dimension.kind}")

    def num_configurations(self, plan: SweepPlan) -> int:
        return len(self.points(plan))

    def points(self, plan: SweepPlan) -> list[Point]:
        return plan.warm_first(plan.grid_points())


@_register
class Random(SearchAlgorithm):
    """`num_samples` draws up front (numpy, seeded by search.seed), each crossed with the grid dimensions."""

    name = "random"
    proposes_while_running = False
    loss_kind = "grid"
    supports_racing = True
    accepts_grid = True

    def num_configurations(self, plan: SweepPlan) -> int:
        return len(self.points(plan))

    def points(self, plan: SweepPlan) -> list[Point]:
        return [*plan.warm, *plan.random_points()]


class OptunaSampler(SearchAlgorithm):
    """An Optuna sampler proposing points through `SweepPlan.suggest` (define-by-run: each loss has its own
    parameters), through Tune's OptunaSearch; `seeds` repeat each proposal (Tune's Repeater reports their
    mean back). A warm start's configurations are the sampler's first trials (Optuna's enqueued trials)."""

    proposes_while_running = True
    loss_kind = "choice"
    supports_racing = False
    accepts_grid = False

    def sampler(self, seed: int) -> Any:
        raise NotImplementedError

    def check(self, plan: SweepPlan, declared: dict[str, Dimension], fail: Fail) -> None:
        super().check(plan, declared, fail)
        if not declared and len(plan.branches) == 1:
            fail("search.space", f"algorithm {self.name} needs at least one dimension to search")

    def searcher(self, plan: SweepPlan, metric: str, mode: str) -> Searcher | None:
        from ray.tune.search.optuna import OptunaSearch

        return OptunaSearch(
            space=plan.suggest,
            metric=metric,
            mode=mode,
            sampler=self.sampler(plan.search.seed),
            points_to_evaluate=plan.optuna_points() or None,
        )

    def max_warm_start(self, plan: SweepPlan) -> int | None:
        return plan.search.num_samples


@_register
class TreeParzen(OptunaSampler):
    """Optuna's TPE sampler, seeded by search.seed."""

    name = "optuna"

    def sampler(self, seed: int) -> Any:
        from optuna.samplers import TPESampler

        return TPESampler(seed=seed)


@_register
class GaussianProcess(OptunaSampler):
    """Optuna's GPSampler (Gaussian-process Bayesian optimisation), seeded by search.seed: fewer trials than
    TPE on smooth, low-dimensional spaces such as a loss's alpha and gamma."""

    name = "gp"

    def sampler(self, seed: int) -> Any:
        from optuna.samplers import GPSampler

        return GPSampler(seed=seed)
