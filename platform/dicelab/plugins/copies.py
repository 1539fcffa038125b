"""A saved model's own copy of the plugins its config names: `dicelab predict` and the pyfunc model load the
model's plugins from the model itself, on any machine, in the version the trial trained with."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from dicelab.plugins.loading import PluginError, digest_of, loaded, module_name

PLUGINS_DIR = "plugins"  # in a saved model's bundle


def copy_plugins(entries: Sequence[str], directory: Path) -> list[str]:
    """Copy the loaded plugins that `entries` name into `directory`/plugins; their entries relative to
    `directory` (where the saved config lies, so they resolve against it). Raises PluginError when a
    plugin's files changed since it was loaded."""
    by_module = {plugin.module: plugin for plugin in loaded()}
    copied = []
    for entry in entries:
        plugin = by_module.get(module_name(entry).split(".")[0]) or by_module.get(module_name(entry))
        if plugin is None:
            raise PluginError(f"plugin {entry}: not loaded in this process, so not saved with the model")
        target = directory / PLUGINS_DIR / plugin.root.name
        if plugin.root.is_dir():
            shutil.copytree(plugin.root, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(plugin.root, target)
        if digest_of(target) != plugin.digest:
            raise PluginError(f"plugin {plugin.module}: {plugin.root} changed since it was loaded")
        copied.append(f"{PLUGINS_DIR}/{plugin.root.name}")
    return list(dict.fromkeys(copied))
