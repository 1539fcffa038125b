"""New SQLite stores as copies of an empty one. MLflow creates a store's schema by running its ~100
migrations, about 3 CPU-seconds, in every new `.dicelab/mlflow.db` (each new project directory's first
`dicelab trial` or `dicelab sweep`). The empty schema is built once per MLflow version, by MLflow, into the
user's cache (`$XDG_CACHE_HOME/dicelab`, else `~/.cache/dicelab`), and a new store starts as a copy of it:
MLflow then finds its tables at the newest revision and adds only its Default experiment, with this store's
artifact location. Anything that goes wrong here leaves the store to MLflow's own creation."""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from importlib.metadata import version
from pathlib import Path

log = logging.getLogger(__name__)
CACHE_ENV = "XDG_CACHE_HOME"


def template_path() -> Path:
    """Where the empty schema of the installed MLflow version is kept."""
    cache = os.environ.get(CACHE_ENV) or str(Path.home() / ".cache")
    return Path(cache) / "dicelab" / f"mlflow-{version('mlflow')}-schema.db"


def start_from_template(path: Path) -> bool:
    """Create the missing SQLite store `path` as a copy of the empty schema (built first if missing). Returns
    whether it did; False (nothing at `path`) when the store exists or the template cannot be made or copied,
    and MLflow creates the schema itself."""
    if path.exists():
        return False
    try:
        template = _template()
        partial = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
        try:
            shutil.copyfile(template, partial)
            os.link(partial, path)  # unlike a rename, never replaces a store another process just made
        finally:
            partial.unlink(missing_ok=True)
    except FileExistsError:
        return False
    except Exception as error:  # an optimisation: MLflow's own creation still works
        log.debug("new SQLite store %s not made from the schema template: %s", path, error)
        return False
    return True


def _template() -> Path:
    template = template_path()
    if template.exists():
        return template
    from dicelab.tracking.mlflow_adapter import create_sqlite_schema

    template.parent.mkdir(parents=True, exist_ok=True)
    partial = template.with_name(f".{template.name}.{uuid.uuid4().hex}")
    try:
        create_sqlite_schema(f"sqlite:///{partial}")
        os.replace(partial, template)  # atomic: processes building it at once leave one whole file
    finally:
        partial.unlink(missing_ok=True)
    return template
