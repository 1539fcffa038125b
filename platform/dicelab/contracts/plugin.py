"""`check_plugin`: load a plugin and run the contract of each entry it registers."""

from __future__ import annotations

import tempfile
from pathlib import Path

from dicelab.contracts._running import CheckResult, run_checks
from dicelab.errors import first_line
from dicelab.plugins import load_plugins, resolve_entries
from dicelab.plugins.loading import module_name


def check_plugin(entry: str) -> list[CheckResult]:
    """One result per check of each loss, task, data source and backbone family the plugin `entry` (a
    module name, a .py file or a package directory) registers; a plugin that registers none of these is one
    failed result saying so. Raises `PluginError` when the plugin cannot be loaded."""
    from dicelab.contracts.families import FamilyContract
    from dicelab.contracts.losses import LossContract
    from dicelab.contracts.sources import SourceContract, declared_cases
    from dicelab.contracts.tasks import TaskContract, task_case
    from dicelab.data.sources import SOURCES
    from dicelab.losses import LOSSES
    from dicelab.tasks import TASKS
    from dicelab.tasks.families import FAMILIES

    (resolved,) = resolve_entries([entry], Path.cwd())
    name = module_name(resolved)
    plugin = next(plugin for plugin in load_plugins([resolved]) if plugin.module == name)

    def mine(registry) -> list[str]:
        return [entry for entry in registry.names() if registry.origin(entry) == plugin.module]

    results: list[CheckResult] = []
    with tempfile.TemporaryDirectory(prefix="dicelab-contracts-") as scratch:
        for name in mine(LOSSES):
            results += run_checks(LossContract.of(name), f"loss {name!r}")
        for name in mine(TASKS):
            label = f"task {name!r}"
            try:
                case = task_case(name, Path(scratch) / f"task-{name}")
            except Exception as error:  # the checks need the task's data, tokenizer and features
                results.append(
                    CheckResult(label, "encodes its family's data", False, first_line(error, with_type=True))
                )
                continue
            results += run_checks(TaskContract(), label, case=case)
        for name in mine(SOURCES):
            cases = declared_cases(name, Path(scratch) / f"source-{name}")
            results += run_checks(SourceContract(), f"data source {name!r}", cases=cases)
        for name in mine(FAMILIES):
            results += run_checks(FamilyContract(name), f"backbone family {name!r}")
    if not results:
        kinds = "loss, task, data source or backbone family"
        results.append(
            CheckResult(f"plugin {plugin.module}", f"registers a {kinds}", False, "it registers none")
        )
    return results
