"""Data: sources (hub, local files, synthetic), checks, resampling variants, the tokenized-feature cache.

`load_raw_dataset(config, family)` gives the RawDataset a trial trains on (canonical columns, checked,
limited, resampled, fingerprinted; the family is the task's); `read_split_file(path)` and
`read_hub_split(name, split)` read one split; `dicelab.data.cache.cached_features` keeps tokenized features
on disk.
"""

from dicelab.data.base import CANONICAL_COLUMNS, Family, RawDataset
from dicelab.data.hashing import fingerprint
from dicelab.data.hub import read_hub_split
from dicelab.data.loading import load_raw_dataset
from dicelab.data.readers import read_split_file

__all__ = [
    "CANONICAL_COLUMNS",
    "Family",
    "RawDataset",
    "fingerprint",
    "load_raw_dataset",
    "read_hub_split",
    "read_split_file",
]
