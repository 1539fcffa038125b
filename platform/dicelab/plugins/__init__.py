"""A user's own losses, tasks, data sources, backbone families and search algorithms, without forking:
plugin modules that register with the package's decorators, loaded from a config's `plugins:`, `--plugin`,
`DICELAB_PLUGINS` or installed distributions' `dicelab.plugins` entry points, and sent to every Ray worker
(docs: plugins)."""

from dicelab.plugins.loading import (
    ENTRY_POINT_GROUP,
    ENV_VAR,
    Plugin,
    PluginError,
    add_plugin_option,
    environment_entries,
    load_plugins,
    loaded,
    resolve_entries,
)
from dicelab.plugins.pins import PLUGINS_TAG, Pin, fingerprint, import_pinned, pins, py_modules

__all__ = [
    "ENTRY_POINT_GROUP",
    "ENV_VAR",
    "PLUGINS_TAG",
    "Pin",
    "Plugin",
    "PluginError",
    "add_plugin_option",
    "environment_entries",
    "fingerprint",
    "import_pinned",
    "load_plugins",
    "loaded",
    "pins",
    "py_modules",
    "resolve_entries",
]
