"""dicelab: Ray-distributed sweeps and ablations for imbalance-aware NLP training losses."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dicelab")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0"
