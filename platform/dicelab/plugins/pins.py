"""What a Ray worker is sent and checks: the driver's plugins as pins (module, source hash, path).

The driver ships each plugin's file or package directory to the cluster (Ray's runtime env `py_modules`;
a private local Ray's workers read the same files). A worker imports each pinned plugin before its trial
and compares the hash of what it imported with the pin: a different version (a file edited after the
sweep started, another copy first on the worker's path) fails the trial with a line saying so.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dicelab.plugins.loading import Plugin, PluginError, digest_of, load_module, load_path, loaded

PLUGINS_TAG = "dicelab.plugins"  # on runs: "module=hash;..." of the plugins the trial imported


@dataclass(frozen=True)
class Pin:
    module: str
    digest: str
    path: str  # the plugin's file or package directory on the driver's machine


def pins(plugins: Iterable[Plugin] | None = None) -> tuple[Pin, ...]:
    """The pins of `plugins` (default: every plugin this process has loaded)."""
    chosen = loaded() if plugins is None else plugins
    return tuple(Pin(plugin.module, plugin.digest, str(plugin.root)) for plugin in chosen)


def fingerprint(pinned: Sequence[Pin] | None = None) -> str:
    """ "poly1=3f2a...;lab_tasks=9c1d..." (module names and source hashes), "" without plugins."""
    chosen = pins() if pinned is None else pinned
    return ";".join(f"{pin.module}={pin.digest}" for pin in chosen)


def py_modules(pinned: Sequence[Pin]) -> list[str]:
    """The runtime env's `py_modules` entries that send the plugins to a cluster's workers."""
    return [pin.path for pin in pinned]


def import_pinned(pinned: Sequence[Pin]) -> None:
    """On a worker, before its trial: import each pinned plugin (by module name where the runtime env put
    it on the Python path, else from the driver's path: a private local Ray) and check its hash."""
    present = {plugin.module: plugin for plugin in loaded()}
    for pin in pinned:
        plugin = present.get(pin.module)
        if plugin is None:  # a copy the runtime env sent first, else the driver's file on a shared disk
            path = Path(pin.path)
            shipped = importlib.util.find_spec(pin.module.split(".")[0]) is not None
            same_file = (
                not shipped and "." not in pin.module and path.exists() and digest_of(path) == pin.digest
            )
            plugin = load_path(path) if same_file else load_module(pin.module)
        if plugin.digest != pin.digest:
            raise PluginError(
                f"plugin {pin.module}: this worker imported {plugin.root} (source hash {plugin.digest}), "
                f"not the version the driver validated ({pin.digest}): was it edited while the sweep ran?"
            )
