"""Data sources: each reads a dataset named by `config.data` and returns it as a RawDataset.

A source returns the splits in canonical columns, indexed by each example's location (see
`dicelab.data.provenance`), with the label set it knows (empty when it must be inferred) and an empty
fingerprint: `dicelab.data.load_raw_dataset` validates, limits and fingerprints what every source returns.
Adding a source is one module that registers a function with `@SOURCES.register(name)`.
"""

from dicelab.data.sources import _hub, _local, _synthetic_pairs, _synthetic_spans, _synthetic_tagging
from dicelab.data.sources._registry import SOURCES, Source

__all__ = ["SOURCES", "Source"]
del _hub, _local, _synthetic_pairs, _synthetic_spans, _synthetic_tagging
