"""Cross-checks of a parsed config against the registries (losses, tasks, data sources, variants)."""

from __future__ import annotations

from dicelab.config.schema import ExperimentConfig
from dicelab.errors import ConfigError


def check_registries(config: ExperimentConfig, source: str = "<config>") -> None:
    from dicelab.data.sources import SOURCES
    from dicelab.losses import validate_loss_params
    from dicelab.tasks import TASKS

    def fail(key: str, message: str) -> None:
        raise ConfigError(f"{source}: config key {key!r}: {message}")

    if config.data.source not in SOURCES:
        fail("data.source", f"unknown source {config.data.source!r} (allowed: {', '.join(SOURCES.names())})")
    if config.task.name not in TASKS:
        fail("task.name", f"unknown task {config.task.name!r} (allowed: {', '.join(TASKS.names())})")
    try:
        validate_loss_params(config.loss.name, config.loss.params)
    except ValueError as error:
        fail(f"loss.{_loss_key(str(error))}", str(error))
    if config.data.variant != "original":
        from dicelab.data.resampling import VARIANTS

        if config.data.variant not in VARIANTS:
            fail("data.variant", f"unknown variant {config.data.variant!r} (allowed: {', '.join(VARIANTS)})")
    if config.search is not None:
        from dicelab.sweeps.space import validate_search

        validate_search(config, source)


def _loss_key(message: str) -> str:
    # Loss errors start with the parameter they are about ("alpha must be ..."); "name" for unknown losses.
    first = message.split(" ", 1)[0].strip("'\":")
    return first if first.isidentifier() and first != "unknown" else "name"
