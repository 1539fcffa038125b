"""The `search:` section of a sweep config (typed; unknown keys are errors, like the rest of the config)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dicelab.config.reading import DIMENSION_KINDS


class _Strict(BaseModel):
    # finite numbers only, as in the rest of the config (a bound of .inf, a timeout of .inf)
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, allow_inf_nan=False)


class Dimension(_Strict):
    """One swept key: exactly one of `grid: [..]`, `choice: [..]`, `uniform: [lo, hi]`,
    `loguniform: [lo, hi]` or `int: [lo, hi]` (both bounds inclusive)."""

    grid: list[Any] | None = Field(None, min_length=1)
    choice: list[Any] | None = Field(None, min_length=1)
    uniform: tuple[float, float] | None = None
    loguniform: tuple[float, float] | None = None
    int_range: tuple[int, int] | None = Field(None, alias="int")

    @model_validator(mode="after")
    def _exactly_one(self) -> Dimension:
        given = [kind for kind in DIMENSION_KINDS if self.bounds_or_values(kind) is not None]
        if len(given) != 1:
            got = ", ".join(given) or "none"
            raise ValueError(f"give exactly one of {', '.join(DIMENSION_KINDS)} (got {got})")
        low_high = self.bounds
        if low_high is not None:
            low, high = low_high
            if not low <= high:
                raise ValueError(f"{self.kind}: lower bound {low} is above upper bound {high}")
            if self.kind == "loguniform" and low <= 0:
                raise ValueError(f"loguniform: bounds must be > 0 (got {low})")
        return self

    def bounds_or_values(self, kind: str) -> Any:
        return self.int_range if kind == "int" else getattr(self, kind)

    @property
    def kind(self) -> str:
        return next(kind for kind in DIMENSION_KINDS if self.bounds_or_values(kind) is not None)

    @property
    def values(self) -> list[Any] | None:
        """The listed values of a grid or choice dimension; None for ranges."""
        return self.grid if self.grid is not None else self.choice

    @property
    def bounds(self) -> tuple[float, float] | None:
        """(low, high) of a range dimension; None for lists."""
        return self.uniform or self.loguniform or self.int_range


class SpaceBlock(_Strict):
    """Dimensions, tied keys and named spaces; the shape of `search`, of each `search.conditional.<loss>`
    and of each shipped named space."""

    space: dict[str, Dimension] = Field(default_factory=dict)
    tied: dict[str, str] = Field(default_factory=dict)
    spaces: list[str] = Field(default_factory=list)


class NamedSpace(SpaceBlock):
    """A shipped space (platform/dicelab/sweeps/spaces/<name>.yaml)."""

    description: str
    loss: str | None = None  # the loss the space belongs to; it fixes loss.name when used at top level


class Scheduler(_Strict):
    name: Literal["fifo", "asha"] = "fifo"
    # ASHA, in evaluations (one Tune iteration = one dev evaluation): a trial runs at least grace_period
    # evaluations; rungs are at grace_period * reduction_factor**k up to max_t.
    grace_period: int = Field(1, ge=1)
    reduction_factor: float = Field(2.0, gt=1.0)
    max_t: int | None = Field(None, ge=1)  # None: train.epochs (when evaluating once per epoch)


class Resources(_Strict):
    """What Ray reserves for each trial. `gpu`: 0, 1 or a fraction in (0, 1); fractions share a GPU, 0.25
    packs four trials on one device. A trial trains on one device, so more than one GPU is refused: the
    models dicelab targets fit one GPU, and packing small trials gives more trials per hour than spreading
    one over several GPUs (docs/gpus.md, "GPUs in a Ray cluster")."""

    cpu: float = Field(1.0, gt=0.0)
    gpu: float = Field(0.0, ge=0.0)

    @field_validator("gpu")
    @classmethod
    def _at_most_one_gpu(cls, gpu: float) -> float:
        if gpu > 1:
            raise ValueError(
                f"{gpu:g} GPUs per trial: a dicelab trial trains on one device; ask for 1, or a fraction "
                "such as 0.25 to pack several trials on one GPU"
            )
        return gpu


class Racing(_Strict):
    """Seed racing (dicelab.sweeps.racing): seeds go only to configurations still in contention."""

    min_seeds: int = Field(3, ge=2)  # every configuration's first seeds (paired: the same seeds for all)
    max_seeds: int = Field(10, ge=2)  # a configuration never gets more
    confidence: float = Field(0.95, gt=0.0, lt=1.0)  # a drop needs Holm-corrected p < 1 - confidence
    test: Literal["t", "permutation"] = "t"  # paired t (decides from 2 seeds) or exact sign-flip (from 6)
    margin: float | None = Field(None, gt=0.0)  # end when all left are within +-margin (metric's logged unit)
    budget: int | None = Field(None, ge=1)  # at most this many trials in all
    first_seed: int = 1  # seeds are first_seed, first_seed + 1, ...


class StartFrom(_Strict):
    """Warm start: a finished sweep whose best configurations this sweep evaluates first."""

    experiment: str = Field(min_length=1)  # the earlier sweep's MLflow experiment (its name)
    sweep_id: str | None = None  # one invocation of it; None: its newest finished one
    top: int = Field(1, ge=1)  # how many of its best configurations (by mean over seeds) go first


class SearchConfig(SpaceBlock):
    algorithm: str = "grid"  # a name in dicelab.sweeps.algorithms.ALGORITHMS (checked by sweeps.space)
    num_samples: int | None = Field(None, ge=1)  # sampling algorithms: configurations to sample
    seed: int = 0  # seeds the random draws and Optuna's samplers
    # The dev metric to rank by (no "dev_" prefix): any dev metric the task logs (f1, accuracy, log_loss,
    # ...); auto: train.metric / the task's. The trials select their best evaluation on it too.
    metric: str = "auto"
    # Whether the best is the metric's highest value (a score) or its lowest (a loss such as log_loss): the
    # trials' best evaluation, Tune, the race, the winner, `dicelab export` and the analysis follow it.
    # None: train.mode, else max. It becomes every trial's train.mode.
    mode: Literal["max", "min"] | None = None
    # Seconds the sweep may take, from its start (the driver reading the config, so a slow Ray start counts).
    # A race hands out no seed that would not end within it (judged by its trials' durations so far) and its
    # running trials end as usual; a sweep that does not race passes what is left to Tune's own
    # `time_budget_s`, which stops the trials still running when it is spent.
    time_budget_s: float | None = Field(None, gt=0.0)
    seeds: list[int] | None = Field(None, min_length=1)  # every configuration runs once per seed (train.seed)
    racing: Racing | None = None  # instead of seeds: min_seeds for all, more only where undecided
    conditional: dict[str, SpaceBlock] = Field(default_factory=dict)  # loss name -> its own space
    scheduler: Scheduler = Field(default_factory=Scheduler)
    resources: Resources = Field(default_factory=Resources)
    max_concurrent: int | None = Field(None, ge=1)
    max_failures: int = Field(1, ge=0)  # retries of a crashed trial, each from its last checkpoint
    # A trial checkpoints with an evaluation once this many seconds have passed since its last checkpoint
    # (0: with every evaluation). Evaluations minutes apart are all checkpointed; second-long ones are not
    # each worth a save and Tune's bookkeeping of it. A crashed trial redoes the training since its last
    # checkpoint: up to this interval plus the time between two evaluations.
    checkpoint_interval_s: float = Field(10.0, ge=0.0)
    # A new trial takes a finished trial's worker (no second import of torch and transformers). Off: every
    # trial gets a worker of its own, on the node Ray reserved for it; Tune otherwise hands a trial whose own
    # worker is still starting to an idle one, wherever that is (docs/gpus.md, "Which node runs a trial").
    reuse_actors: bool = True
    storage: str | None = None  # Tune results and checkpoints; None: <cwd>/.dicelab/ray_results
    start_from: StartFrom | None = None  # warm start (see StartFrom; docs/using-results.md)
    # The sweep's model: the winner's (the best seed of the best configuration, or of the race's winner),
    # logged at the sweep's end from its trial's checkpointed best state; every trial's; or none.
    save_model: Literal["winner", "all", "none"] = "winner"


class SearchSection(BaseModel):
    """Wrapper so validation errors are located as `search.<key>`."""

    model_config = ConfigDict(extra="forbid")
    search: SearchConfig
