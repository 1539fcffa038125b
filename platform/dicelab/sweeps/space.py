"""Search spaces: validate a sweep's `search:` section and expand it into trial configurations.

A *point* is what one trial varies: a flat dict of dotted config keys (`{"loss.name": "tversky",
"loss.alpha": 0.3, "train.seed": 1}`). `SweepPlan.trial_config(point)` applies it to the base config, adds
the tied keys and validates the result, so a sweep's trial is exactly a `dicelab trial` config.

- grid: the points are the cross product of every dimension (per loss, when `conditional` is used), times
  `seeds`.
- random: the points are drawn up front with numpy's seeded generator (`search.seed`): `num_samples` draws
  (per loss, when the losses are a grid or come from `conditional`), each crossed with the grid dimensions
  and `seeds`. Drawing up front means every point is validated before Ray starts and a sweep is reproducible.
- optuna (TPE) and gp (Gaussian process): an Optuna sampler (seeded) proposes points through
  `SweepPlan.suggest` (define-by-run, so each loss has its own parameters); `seeds` repeat each proposal (Ray
  Tune's `Repeater`, which reports the mean over seeds back to the sampler). Ranges are validated at their
  bounds and lists at every value.

Each algorithm is a class in `dicelab.sweeps.algorithms` (the registry `search.algorithm` names): what it
checks, how many configurations it tries, its points or its Tune searcher. The plan asks it.

Warm start (`search.start_from`): an earlier sweep's best configurations (`SweepPlan.warm`, read by
`dicelab.sweeps.start_from`) are evaluated first. grid: they must be points of this grid, which then runs
them first (nothing is added); random: they run first, in addition to the `num_samples` draws; optuna:
they are TPE's first trials (Optuna's enqueued trials, Tune's `points_to_evaluate`), within `num_samples`.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import json
import math
import time
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import numpy as np
from pydantic import ValidationError

from dicelab.config.reading import config_to_dict, format_validation_error, parse_override, set_dotted
from dicelab.config.schema import ExperimentConfig
from dicelab.config.yaml_loader import load_yaml
from dicelab.errors import ConfigError
from dicelab.experiment import experiment_from_dict
from dicelab.sweeps.algorithms import ALGORITHMS, SearchAlgorithm, algorithm
from dicelab.sweeps.schema import Dimension, NamedSpace, Racing, SearchConfig, SearchSection, SpaceBlock
from dicelab.sweeps.tied import TiedExpression, TiedExpressionError

LOSS_KEY = "loss.name"
SEED_KEY = "train.seed"
CONDITIONAL_SEPARATOR = ":"  # Optuna parameter of a per-loss key: "tversky:loss.alpha"

Point = dict[str, Any]


# ----------------------------------------------------------------------------------------------------------
# Named spaces


@functools.cache
def named_spaces() -> dict[str, NamedSpace]:
    """The shipped spaces, by name (platform/dicelab/sweeps/spaces/<name>.yaml)."""
    found: dict[str, NamedSpace] = {}
    for entry in resources.files("dicelab.sweeps").joinpath("spaces").iterdir():
        if entry.name.endswith(".yaml"):
            found[entry.name.removesuffix(".yaml")] = NamedSpace.model_validate(
                load_yaml(entry.read_text(encoding="utf-8"))
            )
    return dict(sorted(found.items()))


def named_space(name: str, where: str) -> NamedSpace:
    spaces = named_spaces()
    if name not in spaces:
        raise ConfigError(f"{where}: unknown named space {name!r} (allowed: {', '.join(spaces)})")
    return spaces[name]


# ----------------------------------------------------------------------------------------------------------
# Branches: one per loss when `conditional` is used, else one


@dataclass(frozen=True)
class Branch:
    loss: str | None  # the loss.name every point of this branch has (None: not fixed by the branch)
    dimensions: dict[str, Dimension]
    tied: dict[str, TiedExpression]
    origins: dict[str, str]  # key -> where it was declared ("search.conditional.dsc.space.loss.alpha")

    def is_shared(self, key: str) -> bool:
        """Declared at the top level, so the same dimension in every branch."""
        return not self.origins[key].startswith("search.conditional.")


@dataclass
class _Merged:
    dimensions: dict[str, tuple[Dimension, str]]  # key -> (dimension, where it was declared)
    tied: dict[str, tuple[TiedExpression, str]]
    loss: str | None = None  # set by named spaces that belong to a loss
    loss_from: str = ""

    def add_block(self, block: SpaceBlock, where: str) -> None:
        for index, name in enumerate(block.spaces):
            here = f"{where}.spaces[{index}]"
            named = named_space(name, here)
            if named.loss is not None:
                if self.loss not in (None, named.loss):
                    raise ConfigError(
                        f"{here}: named space {name!r} is for loss {named.loss!r}, but {self.loss_from} "
                        f"is for {self.loss!r} (sweep several losses with search.conditional)"
                    )
                self.loss, self.loss_from = named.loss, f"{here} ({name})"
            self.add_block(named, f"{here} ({name})")
        for key, dimension in block.space.items():
            self._claim(key, f"{where}.space.{key}")
            self.dimensions[key] = (dimension, f"{where}.space.{key}")
        for key, text in block.tied.items():
            self._claim(key, f"{where}.tied.{key}")
            try:
                self.tied[key] = (TiedExpression(text), f"{where}.tied.{key}")
            except TiedExpressionError as error:
                raise ConfigError(f"{where}.tied.{key}: {error}") from None

    def branch(self, loss: str | None) -> Branch:
        return Branch(
            loss,
            {key: dimension for key, (dimension, _) in self.dimensions.items()},
            {key: expression for key, (expression, _) in self.tied.items()},
            {key: where for key, (_, where) in {**self.dimensions, **self.tied}.items()},
        )

    def _claim(self, key: str, where: str) -> None:
        _check_key(key, where)
        previous = self.dimensions.get(key) or self.tied.get(key)
        if previous is not None:
            raise ConfigError(f"{where}: {key!r} is already swept by {previous[1]}")


def _check_key(key: str, where: str) -> None:
    parts = key.split(".")
    if len(parts) < 2 or not all(part.isidentifier() for part in parts):
        raise ConfigError(f"{where}: {key!r} is not a dotted config key such as loss.alpha or train.seed")
    if parts[0] in ("search", "paper", "name", "description"):
        raise ConfigError(f"{where}: {key!r} cannot be swept")


def _branches(search: SearchConfig) -> tuple[tuple[Branch, ...], Dimension | None]:
    """The sweep's branches, and the loss.name dimension that picks one (when there are several)."""
    top = _Merged({}, {})
    top.add_block(search, "search")
    if search.seeds is not None and SEED_KEY in {**top.dimensions, **top.tied}:
        raise ConfigError(f"search.space.{SEED_KEY}: remove it, search.seeds sets the seed of every trial")
    if not search.conditional:
        if top.loss is not None and LOSS_KEY in top.dimensions:
            raise ConfigError(f"search.space.{LOSS_KEY}: {top.loss_from} already fixes the loss ({top.loss})")
        branch = top.branch(top.loss)
        _check_tied(branch, "search")
        return (branch,), None

    if top.loss is not None:
        raise ConfigError(
            f"{top.loss_from}: a named space for loss {top.loss!r} belongs under "
            f"search.conditional.{top.loss} when search.conditional is used"
        )
    loss_dimension = top.dimensions.pop(LOSS_KEY, (None, ""))[0]
    if loss_dimension is None:
        losses = list(search.conditional)
        kind = algorithm(search.algorithm).loss_kind
        loss_dimension = Dimension.model_validate({kind: losses})
    elif loss_dimension.values is None:
        raise ConfigError(f"search.space.{LOSS_KEY}: the loss must be a grid or choice list, not a range")
    else:
        losses = list(loss_dimension.values)
        for name in losses:
            if not isinstance(name, str):
                raise ConfigError(f"search.space.{LOSS_KEY}: each value must be a loss name, got {name!r}")
        missing = [name for name in search.conditional if name not in losses]
        if missing:
            raise ConfigError(
                f"search.conditional.{missing[0]}: loss {missing[0]!r} is not among search.space.{LOSS_KEY} "
                f"({', '.join(map(str, losses))})"
            )
    branches = []
    for loss in losses:
        merged = _Merged(dict(top.dimensions), dict(top.tied))
        where = f"search.conditional.{loss}"
        block = search.conditional.get(loss)
        if block is not None:
            merged.add_block(block, where)
        if LOSS_KEY in merged.dimensions or LOSS_KEY in merged.tied:
            raise ConfigError(f"{where}: {LOSS_KEY} cannot be set inside a per-loss space")
        if merged.loss not in (None, loss):
            raise ConfigError(f"{merged.loss_from}: is a space for loss {merged.loss!r}, not {loss!r}")
        branch = merged.branch(loss)
        _check_tied(branch, where)
        branches.append(branch)
    return tuple(branches), loss_dimension


def _check_tied(branch: Branch, where: str) -> None:
    for key, expression in branch.tied.items():
        chained = sorted(expression.names & set(branch.tied))
        if chained:
            raise ConfigError(
                f"{branch.origins[key]}: refers to tied key {chained[0]!r} (tie it to swept keys instead)"
            )


# ----------------------------------------------------------------------------------------------------------
# The plan


def _grid_values(dimension: Dimension, where: str) -> list[Any]:
    if dimension.values is None:
        raise ConfigError(f"{where}: algorithm grid needs a grid or choice list, not {dimension.kind}")
    return list(dimension.values)


def _draw(dimension: Dimension, rng: np.random.Generator) -> Any:
    kind = dimension.kind
    if kind in ("grid", "choice"):
        return dimension.values[int(rng.integers(len(dimension.values)))]  # type: ignore[index]
    low, high = dimension.bounds  # type: ignore[misc]
    if kind == "uniform":
        return float(rng.uniform(low, high))
    if kind == "loguniform":
        return float(math.exp(rng.uniform(math.log(low), math.log(high))))
    return int(rng.integers(int(low), int(high) + 1))


def _inside(dimension: Dimension, value: Any) -> bool:
    """Whether a dimension can produce `value` (a listed value, or within a range's bounds)."""
    if dimension.values is not None:
        return value in dimension.values
    low, high = dimension.bounds  # type: ignore[misc]
    return isinstance(value, (int, float)) and low <= value <= high


def _product(dimensions: dict[str, list[Any]]) -> list[Point]:
    keys = list(dimensions)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*dimensions.values())]


def _describe(point: Point) -> str:
    return ", ".join(f"{key}={value}" for key, value in point.items())


@dataclass(frozen=True)
class SweepPlan:
    """Everything a sweep varies, resolved from the `search:` section; picklable (it travels to trials)."""

    search: SearchConfig
    base: dict[str, Any]  # the sweep config as a dict, without `search`: every trial starts from it
    branches: tuple[Branch, ...]
    loss_dimension: Dimension | None  # chooses the branch when there are several
    source: str
    warm: tuple[Point, ...] = ()  # search.start_from: configurations (no seed) evaluated first
    # time.monotonic() when the sweep's driver read its config: search.time_budget_s counts from here, so
    # a slow start (Ray, the inputs) is part of the budget the user waits for
    started: float = field(default_factory=time.monotonic, compare=False)
    # trial overrides (JSON) -> validated config: each trial config is validated once per sweep, and the
    # cache filled by `plan_sweep` travels with the plan to the trials
    _validated: dict[str, ExperimentConfig] = field(default_factory=dict, compare=False, repr=False)

    @property
    def metric(self) -> str | None:
        """The dev metric every trial selects on and the sweep ranks by (no "dev_" prefix); None: the
        task's primary metric. `plan_sweep` makes `search.metric` the trials' `train.metric`."""
        metric = self.base["train"]["metric"]
        return None if metric == "auto" else metric

    def time_left(self) -> float | None:
        """Seconds of search.time_budget_s left (None: no budget)."""
        budget = self.search.time_budget_s
        return None if budget is None else budget - (time.monotonic() - self.started)

    @property
    def mode(self) -> str:
        """ "max" or "min": whether the best value of `metric` is its highest or its lowest."""
        return str(self.base["train"].get("mode") or "max")

    @property
    def seeds(self) -> list[int] | None:
        return self.search.seeds

    @property
    def racing(self) -> Racing | None:
        return self.search.racing

    @property
    def algorithm(self) -> SearchAlgorithm:
        return algorithm(self.search.algorithm)

    @property
    def num_trials(self) -> int:
        """Trials the sweep runs; with racing, the most it can run (every configuration at max_seeds)."""
        if self.racing is not None:
            most = len(self.points()) * self.racing.max_seeds
            return min(most, self.racing.budget) if self.racing.budget else most
        if self.algorithm.proposes_while_running:
            return self.num_configurations * len(self.seeds or [0])
        return len(self.points())

    @property
    def trials_at_start(self) -> int:
        """Trials the sweep can run before any has a result: all of them, but a race's first seeds only."""
        if self.racing is not None:
            return min(self.num_trials, self.num_configurations * self.racing.min_seeds)
        return self.num_trials

    @property
    def num_configurations(self) -> int:
        """Trials without the seed repetition."""
        return self.algorithm.num_configurations(self)

    def race_seed_point(self, point: Point, seed: int) -> Point:
        """A raced configuration on one seed."""
        return {**point, SEED_KEY: seed}

    def set_in_every_trial(self, key: str) -> str | None:
        """Where the search sets `key` in every trial (so that a value given to it elsewhere is unused), or
        None when some trials keep the config's value."""
        if key == SEED_KEY and self.racing is not None:
            return "search.racing"
        if key == SEED_KEY and self.seeds is not None:
            return "search.seeds"
        if key == LOSS_KEY and self.loss_dimension is not None:
            return f"search.space.{LOSS_KEY}" if LOSS_KEY in self.search.space else "search.conditional"
        origins = [branch.origins.get(key) for branch in self.branches]
        return origins[0] if all(origins) else None

    def branch(self, point: Point) -> Branch:
        if len(self.branches) == 1:
            return self.branches[0]
        return next(branch for branch in self.branches if branch.loss == point[LOSS_KEY])

    # -- expansion -------------------------------------------------------------------------------------

    @functools.cached_property
    def _points(self) -> list[Point]:
        points = self.algorithm.points(self)
        if self.seeds is None:
            return points
        return [{**point, SEED_KEY: seed} for point in points for seed in self.seeds]

    def points(self) -> list[Point]:
        """Every trial's point, in launch order (seeds innermost), for an algorithm that knows them up
        front (grid, random)."""
        return self._points

    def warm_first(self, grid: list[Point]) -> list[Point]:
        """The grid with the warm-start configurations moved to its front, in their order."""
        first = []
        for point in self.warm:
            same = [candidate for candidate in grid if candidate == point]
            if not same:
                raise ConfigError(
                    f"{self.source}: config key 'search.start_from': {_describe(point)} is not a point of "
                    "this grid (a grid only reorders its own points; use random or optuna search to add it)"
                )
            first.append(same[0])
        return first + [point for point in grid if point not in first]

    def with_warm_start(self, points: list[Point]) -> SweepPlan:
        """This plan with `points` evaluated first (see the module docstring)."""
        most = self.algorithm.max_warm_start(self)
        if most is not None and len(points) > most:
            raise ConfigError(
                f"{self.source}: config key 'search.start_from.top': {len(points)} configurations to start "
                f"from, more than search.num_samples ({self.search.num_samples})"
            )
        return dataclasses.replace(self, warm=tuple(points), _validated=self._validated)

    def warm_point(self, params: dict[str, Any]) -> Point:
        """The point of this plan that a finished trial's params (flattened config, typed) describe: its
        loss and the values of the keys this plan varies for that loss."""
        loss = params.get(LOSS_KEY)
        branches = [b for b in self.branches if b.loss is None or b.loss == loss]
        if not branches:
            searched = ", ".join(str(b.loss) for b in self.branches)
            raise ConfigError(
                f"{self.source}: config key 'search.start_from': its configuration with loss {loss!r} is "
                f"not searched here (losses: {searched})"
            )
        branch = branches[0]
        missing = [key for key in branch.dimensions if key not in params]
        if missing:
            raise ConfigError(
                f"{self.source}: config key 'search.start_from': the earlier trial has no param "
                f"{missing[0]!r}"
            )
        for key, dimension in branch.dimensions.items():
            if not _inside(dimension, params[key]):
                raise ConfigError(
                    f"{self.source}: config key 'search.start_from': its {key}={params[key]!r} is outside "
                    f"this sweep's space ({branch.origins[key]})"
                )
        return self._with_loss(branch, {key: params[key] for key in branch.dimensions})

    def optuna_points(self) -> list[dict[str, Any]]:
        """The warm-start configurations as Optuna parameters (the names `suggest` gives them)."""
        found = []
        for point in self.warm:
            branch = self.branch(point)
            values = {LOSS_KEY: point[LOSS_KEY]} if len(self.branches) > 1 else {}
            for key in branch.dimensions:
                name = key if branch.is_shared(key) else f"{branch.loss}{CONDITIONAL_SEPARATOR}{key}"
                values[name] = point[key]
            found.append(values)
        return found

    @staticmethod
    def _with_loss(branch: Branch, point: Point) -> Point:
        return {LOSS_KEY: branch.loss, **point} if branch.loss is not None else point

    def grid_points(self) -> list[Point]:
        """Every combination of the listed values, per branch (grid search)."""
        points = []
        for branch in self.branches:
            lists = {key: _grid_values(d, branch.origins[key]) for key, d in branch.dimensions.items()}
            points += [self._with_loss(branch, point) for point in _product(lists)]
        return points

    def random_points(self) -> list[Point]:
        """`num_samples` draws per branch (or of the loss too), each crossed with the grid dimensions."""
        rng = np.random.default_rng(self.search.seed)
        samples = self.search.num_samples
        assert samples is not None  # checked by plan_sweep
        if self.loss_dimension is not None and self.loss_dimension.kind == "choice":
            # The loss is itself drawn: each draw picks a loss, then that loss's parameters.
            draws = []
            for _ in range(samples):
                loss = _draw(self.loss_dimension, rng)
                draws.append(next(branch for branch in self.branches if branch.loss == loss))
        else:
            draws = [branch for branch in self.branches for _ in range(samples)]
        points = []
        for branch in draws:
            grids = {key: list(d.grid) for key, d in branch.dimensions.items() if d.grid is not None}
            drawn = {key: _draw(d, rng) for key, d in branch.dimensions.items() if d.grid is None}
            for grid in _product(grids):
                values = {**drawn, **grid}
                points.append(self._with_loss(branch, {key: values[key] for key in branch.dimensions}))
        return points

    def probe_points(self) -> list[Point]:
        """The points checked before Ray starts: all of them when they are known up front; for a searcher
        every listed value and both bounds of every range, one dimension at a time (seeds: the first)."""
        if not self.algorithm.proposes_while_running:
            return self.points()
        seed = {SEED_KEY: self.seeds[0]} if self.seeds else {}
        points = [{**point, **seed} for point in self.warm]
        for branch in self.branches:
            start = {key: (d.values or d.bounds)[0] for key, d in branch.dimensions.items()}  # type: ignore[index]
            variations = [start]
            for key, dimension in branch.dimensions.items():
                others = dimension.values[1:] if dimension.values else [dimension.bounds[1]]  # type: ignore[index]
                variations += [{**start, key: value} for value in others]
            points += [{**self._with_loss(branch, point), **seed} for point in variations]
        return points

    # -- Optuna define-by-run space --------------------------------------------------------------------

    def suggest(self, trial: Any) -> None:
        """Optuna define-by-run space: the loss first (when several), then that loss's parameters.

        Per-loss parameters are named "<loss>:<key>" so TPE models each loss's alpha separately;
        `point_from_params` turns the names back into config keys.
        """
        branch = self.branches[0]
        if len(self.branches) > 1:
            loss = trial.suggest_categorical(LOSS_KEY, list(self.loss_dimension.values))  # type: ignore[union-attr]
            branch = self.branch({LOSS_KEY: loss})
        for key, dimension in branch.dimensions.items():
            name = key if branch.is_shared(key) else f"{branch.loss}{CONDITIONAL_SEPARATOR}{key}"
            kind = dimension.kind
            if kind == "choice":
                trial.suggest_categorical(name, list(dimension.values))  # type: ignore[arg-type]
            elif kind == "int":
                trial.suggest_int(name, *dimension.bounds)  # type: ignore[misc]
            else:
                trial.suggest_float(name, *dimension.bounds, log=kind == "loguniform")  # type: ignore[misc]

    @staticmethod
    def point_from_params(params: dict[str, Any]) -> Point:
        return {name.rpartition(CONDITIONAL_SEPARATOR)[2]: value for name, value in params.items()}

    # -- resolving a point -----------------------------------------------------------------------------

    def trial_data(self, point: Point) -> tuple[dict[str, Any], Point]:
        """(config dict of the trial, its full overrides: the point plus the tied keys)."""
        data = copy.deepcopy(self.base)
        loss = point.get(LOSS_KEY, data["loss"]["name"])
        if loss != data["loss"]["name"]:
            # Another loss than the base config's starts from that loss's own defaults.
            data["loss"] = {"name": loss}
        for key, value in point.items():
            set_dotted(data, key, value)
        overrides = dict(point)
        branch = self.branch(point)
        for key, expression in branch.tied.items():
            try:
                overrides[key] = expression.evaluate(functools.partial(_lookup, data))
            except TiedExpressionError as error:
                raise ConfigError(f"{self.source}: config key {branch.origins[key]!r}: {error}") from None
            set_dotted(data, key, overrides[key])
        return data, overrides

    def resolve(self, point: Point) -> tuple[ExperimentConfig, Point]:
        """The trial's validated config (a copy: callers may adjust it), and its overrides (the point plus
        the tied keys)."""
        data, overrides = self.trial_data(point)
        key = json.dumps(overrides, sort_keys=True, default=str)
        config = self._validated.get(key)
        if config is None:
            config = experiment_from_dict(data, f"{self.source} (search point {_describe(overrides)})")
            self._validated[key] = config
        return config.model_copy(deep=True), overrides

    def trial_config(self, point: Point) -> ExperimentConfig:
        return self.resolve(point)[0]


def _lookup(data: dict[str, Any], key: str) -> Any:
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(key)
        node = node[part]
    return node


# ----------------------------------------------------------------------------------------------------------
# Validation


def _parse(search: dict[str, Any], source: str) -> SearchConfig:
    try:
        parsed = SearchSection.model_validate({"search": search}).search
    except ValidationError as error:
        message = format_validation_error(error, SearchSection, {"search": search})
        raise ConfigError(f"{source}: {message}") from None
    if parsed.algorithm not in ALGORITHMS:
        raise ConfigError(
            f"{source}: config key 'search.algorithm': unknown search algorithm {parsed.algorithm!r} "
            f"(allowed: {', '.join(ALGORITHMS.names())})"
        )
    return parsed


def _check_combinations(search: SearchConfig, plan: SweepPlan, config: ExperimentConfig, source: str) -> None:
    def fail(key: str, message: str) -> None:
        raise ConfigError(f"{source}: config key {key!r}: {message}")

    # where each dimension was declared -> the dimension (a top-level one is checked once)
    declared = {branch.origins[key]: d for branch in plan.branches for key, d in branch.dimensions.items()}
    plan.algorithm.check(plan, declared, fail)
    racing = search.racing
    if racing is not None:
        if search.seeds is not None:
            fail(
                "search.racing",
                "chooses the seeds itself: remove search.seeds (racing uses min_seeds..max_seeds)",
            )
        if not plan.algorithm.supports_racing:
            fail("search.racing", f"is not supported with algorithm {search.algorithm} (use grid or random)")
        if racing.min_seeds > racing.max_seeds:
            fail("search.racing.min_seeds", f"{racing.min_seeds} is above max_seeds ({racing.max_seeds})")
        if SEED_KEY in {key for branch in plan.branches for key in (*branch.dimensions, *branch.tied)}:
            fail(f"search.space.{SEED_KEY}", "cannot be swept with racing (the race sets the seed)")
        if len(plan.points()) < 2:
            fail("search.racing", "needs at least two configurations to race")
        if racing.budget is not None and racing.budget < len(plan.points()) * racing.min_seeds:
            fail(
                "search.racing.budget",
                f"{racing.budget} trials cannot give all {len(plan.points())} configurations their "
                f"min_seeds ({racing.min_seeds})",
            )
    if search.seeds is not None and len(set(search.seeds)) != len(search.seeds):
        fail("search.seeds", f"repeats a seed ({search.seeds})")
    if search.scheduler.name == "asha":
        max_t = search.scheduler.max_t
        if max_t is None and config.train.eval_every_steps is not None:
            fail("search.scheduler.max_t", "is required with train.eval_every_steps (evaluations per trial)")
        if (max_t or config.train.epochs) < search.scheduler.grace_period:
            fail("search.scheduler.grace_period", f"is above max_t ({max_t or config.train.epochs})")
    if search.resources.gpu > 0 and config.train.device == "cpu":
        fail("search.resources.gpu", "asks for a GPU but train.device is cpu")
    if search.metric != "auto" and not search.metric.isidentifier():
        fail("search.metric", f"{search.metric!r} is not a metric name such as f1 or accuracy")


def _one_metric(search_metric: str, train_metric: str, source: str) -> str:
    """A trial selects its best evaluation (checkpoint, predictions) on the metric its sweep ranks by."""
    if search_metric == "auto" or train_metric == search_metric:
        return train_metric
    if train_metric != "auto":
        raise ConfigError(
            f"{source}: config key 'search.metric': {search_metric!r} differs from train.metric "
            f"{train_metric!r} (a trial and its sweep select on one metric: set one of them)"
        )
    return search_metric


def _one_mode(search_mode: str | None, train_mode: str | None, source: str) -> str:
    """A trial selects its best evaluation in the direction its sweep ranks by."""
    if search_mode is not None and train_mode is not None and search_mode != train_mode:
        raise ConfigError(
            f"{source}: config key 'search.mode': {search_mode!r} differs from train.mode {train_mode!r} "
            "(a trial and its sweep select in one direction: set one of them)"
        )
    return search_mode or train_mode or "max"


def parse_search(config: ExperimentConfig, source: str = "<config>") -> SearchConfig:
    """The `search:` section against its schema only (no trial config is built: no torch import)."""
    if config.search is None:
        raise ConfigError(f"{source}: a sweep config needs a search: section (see docs: sweeps)")
    return _parse(config.search, source)


def outline_sweep(config: ExperimentConfig, source: str = "<config>") -> SweepPlan:
    """The sweep's plan with its `search:` section checked, before any trial configuration is validated
    (no registry lookup, no torch import: milliseconds, so the driver has it before Ray starts)."""
    search = parse_search(config, source)
    try:
        branches, loss_dimension = _branches(search)
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None
    base = config_to_dict(config)
    base.pop("search")
    base["train"]["metric"] = _one_metric(search.metric, config.train.metric, source)
    base["train"]["mode"] = _one_mode(search.mode, config.train.mode, source)
    plan = SweepPlan(search, base, branches, loss_dimension, source)
    _check_combinations(search, plan, config, source)
    return plan


def check_overrides(plan: SweepPlan, overrides: list[str]) -> None:
    """A `--set` of a key the search sets in every trial is refused: its value would be replaced in each
    trial, so the sweep would silently run what the user meant to change."""
    for text in overrides:
        key, _ = parse_override(text)
        where = plan.set_in_every_trial(key)
        if where is not None:
            raise ConfigError(
                f"--set {key}: the search sets it in every trial ({where}), so this value would not be "
                f"used; change {where} instead"
            )


def plan_sweep(config: ExperimentConfig, source: str = "<config>") -> SweepPlan:
    """Parse and check the `search:` section and validate every trial configuration it can produce
    (grid / random: every trial; optuna: `probe_points`). `config` is already a validated experiment."""
    plan = outline_sweep(config, source)
    _check_logged_metric(plan, config, source)
    check_trials(plan)
    return plan


def _check_logged_metric(plan: SweepPlan, config: ExperimentConfig, source: str) -> None:
    """`search.metric` names a dev metric the trials' task logs (a typo would fail every trial instead)."""
    from dicelab.tasks import TASKS

    metric = plan.metric
    if metric is None or config.task.name not in TASKS:
        return
    logged = getattr(TASKS.get(config.task.name), "metrics", None)
    if logged is not None and metric not in logged:
        key = "search.metric" if plan.search.metric != "auto" else "train.metric"
        raise ConfigError(
            f"{source}: config key {key!r}: {config.task.name} logs no dev metric {metric!r} "
            f"(it logs: {', '.join(logged)})"
        )


def check_trials(plan: SweepPlan) -> None:
    """Validate every trial configuration the plan can produce (`plan_sweep`'s second half)."""
    for point in plan.probe_points():
        plan.trial_config(
            point if plan.racing is None else plan.race_seed_point(point, plan.racing.first_seed)
        )
