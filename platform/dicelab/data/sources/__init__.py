"""Data sources: each reads the dataset that `config.data` names and returns it as a RawDataset.

A source returns every split of `data.splits` in the canonical columns of the task's family, indexed by
each example's location (see `dicelab.data.provenance`), with the label set it knows (empty when it must be
inferred from the data) and an empty fingerprint: `dicelab.data.load_raw_dataset` checks, limits,
resamples and fingerprints what every source returns.
Adding a source is one module here that registers a function with `@SOURCES.register(name)`.
"""

# Importing the source modules registers them.
from dicelab.data.sources import hub, local, synthetic_pairs, synthetic_spans, synthetic_tagging  # noqa: F401
from dicelab.data.sources.registry import SOURCES, Source

__all__ = ["SOURCES", "Source"]
