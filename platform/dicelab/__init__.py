"""dicelab: Ray-distributed sweeps and ablations for imbalance-aware NLP training losses.

The Python API (`dicelab.trial`, `dicelab.sweep`, `dicelab.load_sweep`, `dicelab.analyze`, `dicelab.export`;
see `dicelab.api`) is
imported on first use, so `import dicelab` (and the `dicelab` command's start) stays light; by name only
(`importlib`), so that lower layers importing `dicelab` for its version do not depend on the API's layer.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("dicelab")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0"

_API = ("trial", "sweep", "load_sweep", "analyze", "export", "TrialResult", "SweepResult", "Decision")
__all__ = [
    "Decision",
    "SweepResult",
    "TrialResult",
    "__version__",
    "analyze",
    "export",
    "load_sweep",
    "sweep",
    "trial",
]


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module("dicelab.api"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
