"""Load a user's plugin modules: each registers losses, tasks, data sources, backbone families or search
algorithms with the package's own decorators (`@LOSSES.register("poly1")`).

A plugin entry is an importable module name (`my_losses`, `lab.losses`), a `.py` file or a package
directory (a path: relative to the config that names it, or to the working directory for `--plugin` and
`DICELAB_PLUGINS`). Installed distributions declare theirs under the entry-point group `dicelab.plugins`;
those are loaded with the first plugin load of a process, every time (as pytest loads its plugins), so a
config may name their entries like built-ins.

A plugin that cannot be imported, names a missing file, or registers a name that is taken is a
`PluginError`: one line, exit 2, raised before anything is recorded.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import sys
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from dicelab.errors import ConfigError, first_line
from dicelab.registry import Registry, RegistryCollision

ENV_VAR = "DICELAB_PLUGINS"  # plugin entries, separated by os.pathsep
ENTRY_POINT_GROUP = "dicelab.plugins"


class PluginError(ConfigError):
    """A plugin cannot be loaded: the message names it and says why, on one line."""


@dataclass(frozen=True)
class Plugin:
    """A loaded plugin: its module name, the file or package directory it was imported from (what a Ray
    worker is sent) and a hash of its source (what the worker checks it imported)."""

    module: str
    root: Path
    digest: str


_LOADED: dict[str, Plugin] = {}  # module name -> plugin, in load order
_ENTRY_POINTS_LOADED = False


def add_plugin_option(parser: argparse.ArgumentParser) -> None:
    """`--plugin MODULE` (repeatable), for every command that reads a config."""
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="load a plugin first: a module name, .py file or package directory (repeatable)",
    )


def loaded() -> list[Plugin]:
    """The plugins this process has loaded, in load order."""
    return list(_LOADED.values())


def is_path(entry: str) -> bool:
    """A plugin entry is a path when it names a `.py` file or has a path separator; else a module name."""
    return entry.endswith(".py") or "/" in entry or os.sep in entry or entry in (".", "..")


def resolve_entries(entries: Iterable[str], base: Path) -> list[str]:
    """Entries as they are loaded from anywhere: paths made absolute against `base`, names unchanged."""
    return [str((base / entry).resolve()) if is_path(entry) else entry for entry in entries]


def environment_entries() -> list[str]:
    """`DICELAB_PLUGINS`' entries (os.pathsep-separated), paths relative to the working directory."""
    text = os.environ.get(ENV_VAR, "")
    return resolve_entries([part.strip() for part in text.split(os.pathsep) if part.strip()], Path.cwd())


def module_name(entry: str) -> str:
    """The name a plugin entry is imported as: a file's stem, a package directory's name, or the entry."""
    return Path(entry).stem if is_path(entry) else entry


def load_plugins(entries: Sequence[str]) -> list[Plugin]:
    """Import each entry once per process (an entry whose module is loaded already is skipped, also when
    its file is not on this machine: a Ray worker has it from the driver, see `pins`), after the installed
    plugins (`ENTRY_POINT_GROUP`). Returns every plugin loaded so far."""
    load_entry_points()
    for entry in entries:
        name = module_name(entry)
        if name in _LOADED:
            continue
        if is_path(entry):
            load_path(Path(entry))
        else:
            load_module(entry)
    return loaded()


def load_entry_points() -> None:
    """The plugins of installed distributions (entry-point group `dicelab.plugins`, value: a module)."""
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if point.module not in _LOADED:
            load_module(point.module, f"entry point {point.name!r} ({point.value})")


def load_module(name: str, described: str | None = None) -> Plugin:
    """Import the plugin module `name` (from the Python path) with its registrations attributed to it."""
    described = described or f"plugin {name}"
    if not all(part.isidentifier() for part in name.split(".")):
        raise PluginError(f"{described}: not a module name, a .py file or a package directory")
    if name.split(".")[0] == "dicelab":
        raise PluginError(f"{described}: module {name!r} is part of dicelab, not a plugin")
    if name in sys.modules:  # imported before it was named a plugin (a notebook's `import`): as it is
        return _record(name, sys.modules[name])
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError) as error:
        raise PluginError(f"{described}: cannot import module {name!r}: {first_line(error)}") from None
    if spec is None:
        raise PluginError(f"{described}: no module named {name!r} (not installed, not on the Python path)")
    with _importing(described, name, _spec_root(spec)):
        module = importlib.import_module(name)
    return _record(name, module)


def load_path(path: Path) -> Plugin:
    """Import the plugin file or package directory `path` as the module its name says (`poly1.py`:
    `poly1`), without putting its directory on the Python path."""
    described = f"plugin {path}"
    name = module_name(str(path))
    if not path.exists():
        raise PluginError(f"{described}: no such file or directory")
    if path.is_dir():
        init = path / "__init__.py"
        if not init.is_file():
            raise PluginError(f"{described}: a package directory needs an __init__.py")
        spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(path)])
    elif path.suffix == ".py":
        spec = importlib.util.spec_from_file_location(name, path)
    else:
        raise PluginError(f"{described}: a plugin file is a .py file")
    if not name.isidentifier():
        raise PluginError(f"{described}: {name!r} is not a valid module name")
    taken = sys.modules.get(name)
    if taken is not None:
        raise PluginError(f"{described}: module name {name!r} is taken by {_root_of(taken) or 'a built-in'}")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        with _importing(described, name, path):
            spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return _record(name, module)


class _importing:
    """Registrations are the plugin's; any error of its import becomes one `PluginError` line."""

    def __init__(self, described: str, name: str, root: Path | None):
        self.described, self.name, self.root = described, name, root
        self.scope = Registry.loading(name)

    def __enter__(self) -> None:
        self.scope.__enter__()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: object) -> bool:
        self.scope.__exit__(kind, error, tb)
        if error is None or not isinstance(error, Exception):
            return False
        if isinstance(error, RegistryCollision):
            raise PluginError(f"{self.described}: {error}") from None
        where = _where(error, self.root)
        raise PluginError(
            f"{self.described}: cannot import it: {first_line(error, with_type=True)}{where}"
        ) from None


def _where(error: BaseException, root: Path | None) -> str:
    """ " (file:line)" of the plugin's own line that raised (else the deepest frame outside importlib)."""
    if isinstance(error, SyntaxError) and error.filename:
        return f" ({error.filename}:{error.lineno})"
    frames = [
        frame for frame in traceback.extract_tb(error.__traceback__) if not frame.filename.startswith("<")
    ]
    if root is not None:
        mine = [frame for frame in frames if _inside(Path(frame.filename), root)]
        frames = mine or frames
    if not frames:
        return ""
    return f" ({frames[-1].filename}:{frames[-1].lineno})"


def _inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root.resolve())
    except OSError:
        return False


def _spec_root(spec: importlib.machinery.ModuleSpec) -> Path | None:
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(spec.origin) if spec.origin and spec.has_location else None


def _root_of(module: ModuleType) -> Path | None:
    """The file, or for a package its directory, a module was imported from."""
    file = getattr(module, "__file__", None)
    if file is None:
        return None
    path = Path(file).resolve()
    return path.parent if path.name == "__init__.py" else path


def _record(name: str, module: ModuleType) -> Plugin:
    # a module of a package (`lab.losses`) travels with its whole top-level package
    root = _root_of(sys.modules.get(name.split(".")[0], module))
    if root is None:
        raise PluginError(f"plugin {name}: module {name!r} has no source file to send to Ray's workers")
    plugin = Plugin(name, root, digest_of(root))
    _LOADED[name] = plugin
    return plugin


def digest_of(root: Path) -> str:
    """A hash of a plugin's source: the file, or every .py file below the package directory."""
    files = (
        [root] if root.is_file() else sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
    )
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.relative_to(root.parent if root.is_file() else root).as_posix().encode())
        digest.update(b"\0")
        digest.update(file.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:16]
