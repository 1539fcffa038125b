"""A name registry per extension point (losses, tasks, data sources), AllenNLP style.

Adding a loss, task or source is one new module that registers itself with a decorator; a user's plugin
module (`dicelab.plugins`) registers with the same decorators. Each entry remembers where it came from:
built in (registered by a dicelab module), or the plugin being loaded at the time (`Registry.loading`).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Generic, TypeVar

T = TypeVar("T")

# The plugin whose module is being imported: what its registrations are attributed to (None: built-in code).
_LOADING: ContextVar[str | None] = ContextVar("dicelab_plugin_loading", default=None)


class RegistryCollision(ValueError):
    """A plugin registers a name that a built-in or another plugin holds already."""


class Registry(Generic[T]):
    """`builtins`: the module whose import registers the built-in entries; a plugin's registration imports
    it first, so that a name it takes from a built-in is found whatever the plugin imported."""

    def __init__(self, kind: str, builtins: str | None = None):
        self.kind = kind
        self.builtins = builtins
        self._entries: dict[str, T] = {}
        self._origins: dict[str, str] = {}  # name -> "built-in" or the plugin module that registered it

    def register(self, name: str) -> Callable[[T], T]:
        # dicelab's own modules register built-ins, also when a plugin's import imports them first
        frame = inspect.currentframe()  # None where Python keeps no frames: then the loading plugin's
        caller = frame.f_back.f_globals.get("__name__", "") if frame and frame.f_back else ""
        plugin = None if caller.split(".")[0] == "dicelab" else _LOADING.get() or caller
        if plugin is not None and self.builtins is not None:
            importlib.import_module(self.builtins)

        def add(entry: T) -> T:
            if name in self._entries:
                if plugin is None or _LOADING.get() is None:
                    raise RuntimeError(f"{self.kind} {name!r} is registered twice")
                holder = self._origins[name]
                holder = "a built-in" if holder == BUILT_IN else f"plugin {holder}"
                raise RegistryCollision(f"{self.kind} {name!r} of plugin {plugin} collides with {holder}")
            self._entries[name] = entry
            self._origins[name] = plugin or BUILT_IN
            return entry

        return add

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            raise ValueError(f"unknown {self.kind} {name!r} (allowed: {', '.join(self.names())})") from None

    def origin(self, name: str) -> str:
        """ "built-in", or the plugin module that registered `name`."""
        self.get(name)
        return self._origins[name]

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    @staticmethod
    @contextlib.contextmanager
    def loading(plugin: str) -> Iterator[None]:
        """Registrations inside this block are the plugin's: a name already taken is a `RegistryCollision`."""
        token = _LOADING.set(plugin)
        try:
            yield
        finally:
            _LOADING.reset(token)


BUILT_IN = "built-in"
