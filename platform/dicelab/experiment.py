"""Load an experiment: the config schema first, then the checks that need the registries.

`dicelab.config` knows only the schema (pydantic); whether `data.source`, `task.name`, `loss.*` and
`data.variant` name something registered is checked here, one layer above the sources, losses and tasks, so
no lower layer imports a higher one. A sweep's `search:` section is checked by `dicelab.sweeps.plan_sweep`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dicelab.config import ExperimentConfig, parse_config, read_config
from dicelab.errors import ConfigError


def load_experiment(
    path: str | Path, overrides: list[str] | None = None, plugins: list[str] | None = None
) -> ExperimentConfig:
    """Read, override and validate a config file, after loading its plugins (the config's `plugins:`,
    then `plugins`: `--plugin`, then `DICELAB_PLUGINS`). Raises ConfigError with a one-line message."""
    config = read_config(path, overrides, plugins)
    check_experiment(config, str(path))
    return config


def experiment_from_dict(data: dict[str, Any], source: str = "<config>") -> ExperimentConfig:
    config = parse_config(data, source)
    check_experiment(config, source)
    return config


def check_experiment(config: ExperimentConfig, source: str = "<config>") -> None:
    """Check the registry names and loss parameters of a schema-valid config (one-line ConfigError), once
    its plugins are loaded: they may register any of these names."""
    from dicelab.plugins import load_plugins

    load_plugins(config.plugins)

    def fail(key: str, message: str) -> None:
        raise ConfigError(f"{source}: config key {key!r}: {message}")

    # Imported here, after the schema passed: a typo in a key is reported before torch, pandas or transformers
    # load; the loss (the most common slip) needs only torch, and the task registry (transformers) comes last.
    from dicelab.losses import validate_loss_params

    try:
        validate_loss_params(config.loss.name, config.loss.params)
    except ValueError as error:
        fail(f"loss.{_loss_key(str(error))}", str(error))

    from dicelab.data.resampling import VARIANTS
    from dicelab.data.sources import SOURCES

    if config.data.source not in SOURCES:
        fail("data.source", f"unknown source {config.data.source!r} (allowed: {', '.join(SOURCES.names())})")
    if config.data.variant not in VARIANTS:
        fail("data.variant", f"unknown variant {config.data.variant!r} (allowed: {', '.join(VARIANTS)})")

    from dicelab.tasks import TASKS

    if config.task.name not in TASKS:
        fail("task.name", f"unknown task {config.task.name!r} (allowed: {', '.join(TASKS.names())})")
    metric = config.train.metric
    logged = getattr(TASKS.get(config.task.name), "metrics", None)  # a task that does not say: its first eval
    if metric != "auto" and logged is not None and metric not in logged:
        fail(
            "train.metric", f"{config.task.name} logs no dev metric {metric!r} (it logs: {', '.join(logged)})"
        )


def _loss_key(message: str) -> str:
    # Loss errors start with the parameter they are about ("alpha must be ..."); "name" for unknown losses.
    first = message.split(" ", 1)[0].strip("'\":")
    return first if first.isidentifier() and first != "unknown" else "name"
