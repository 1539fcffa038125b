"""The task registry: each task module registers its class here under its config name (task.name)."""

from __future__ import annotations

from dicelab.registry import Registry
from dicelab.tasks.base import Task

TASKS: Registry[type[Task]] = Registry("task", builtins="dicelab.tasks")
