"""Which family of canonical columns a task consumes."""

from __future__ import annotations

from dicelab.data.base import Family
from dicelab.errors import ConfigError

TASK_FAMILY: dict[str, Family] = {
    "pair_classification": "pairs",
    "token_tagging": "tagging",
    "span_extraction": "spans",
}


def family_of(task_name: str) -> Family:
    """The family of a task: the built-in ones by name, any other from its registered Task's `family`."""
    if task_name in TASK_FAMILY:
        return TASK_FAMILY[task_name]
    from dicelab.tasks import TASKS  # imported late: tasks build on data

    if task_name not in TASKS:
        raise ConfigError(f"config key 'task.name': unknown task {task_name!r} (allowed: {', '.join(TASKS)})")
    return TASKS.get(task_name).family
