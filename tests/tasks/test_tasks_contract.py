"""The contract every registered task passes (`dicelab.contracts.tasks`, the task-side twin of the
LossContract): `TaskContract` runs over `TASKS.names()`, so a task is in the suite once it is registered.
"""

from __future__ import annotations

import pytest

from dicelab.contracts.tasks import TaskCase, TaskContract, task_case
from dicelab.tasks import TASKS


@pytest.fixture(scope="module", params=TASKS.names())
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> TaskCase:
    return task_case(request.param, tmp_path_factory.mktemp(f"contract-{request.param}"))


class TestEveryRegisteredTask(TaskContract):
    """Runs the contract for every name in `TASKS` (the `case` fixture is parametrized over them)."""
