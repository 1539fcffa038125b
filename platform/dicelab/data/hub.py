"""Hugging Face hub datasets through `datasets.load_dataset`, mapped onto canonical columns.

Short names of the paper's datasets resolve to their current hub repositories ("glue/mrpc" ->
nyu-mll/glue, config mrpc); "REPO:CONFIG" names a config of any other repository, and a local directory
of data files in hub layout (train.parquet, validation.parquet, ...) is loaded the same way. A repository
whose main revision holds only a loading script (QuoRef), which `datasets` 4 and later refuse to run, is
read from the Parquet files the hub converts it to (`refs/convert/parquet`, one folder per config).
Classification labels stay their integer ids as strings ("0", "1"), as in the GLUE files, so a hub run
and a local-file run of one dataset see the same labels; tag ids become their ClassLabel names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from dicelab.data.base import Family
from dicelab.data.provenance import set_origin
from dicelab.data.readers._canonical import ColumnKey, resolve_columns, to_canonical
from dicelab.errors import DataError, first_line

if TYPE_CHECKING:
    import datasets

# lower-cased short name -> (hub repository, config)
HUB_ALIASES: dict[str, tuple[str, str | None]] = {
    "sst5": ("SetFit/sst5", None),
    "sst-5": ("SetFit/sst5", None),
    "conll2003": ("lhoestq/conll2003", None),  # parquet copy of the script-based eriktks/conll2003
    "squad": ("rajpurkar/squad", None),
    "squad_v2": ("rajpurkar/squad_v2", None),
    "quoref": ("allenai/quoref", None),
}
GLUE_REPOSITORY = "nyu-mll/glue"
# The hub's own Parquet conversion of a script-only repository: its revision, and the folder of the config
PARQUET_REVISION = "refs/convert/parquet"
# repository (as `load_dataset` gets it) -> the config folder of its Parquet conversion
PARQUET_CONVERSIONS: dict[str, str] = {"allenai/quoref": "default"}


def resolve_hub_name(name: str) -> tuple[str, str | None]:
    """(path for `load_dataset`, config name) of a dataset name.

    Only an explicit path (absolute, or starting with ./ ../ ~) is a local directory, so that a folder
    that happens to be called "glue/mrpc" in the working directory never shadows the hub dataset.
    """
    if name.startswith(("./", "../", "~")) or Path(name).is_absolute():
        return os.path.expanduser(name), None
    if ":" in name:
        repository, config = name.split(":", 1)
        return repository, config or None
    key = name.lower()
    if key in HUB_ALIASES:
        return HUB_ALIASES[key]
    if key.startswith("glue/"):
        return GLUE_REPOSITORY, key.split("/", 1)[1]
    return name, None


def load_hub_dataset(name: str, cache_dir: str | None = None) -> datasets.DatasetDict:
    """Every split of a hub dataset (downloaded once into the Hugging Face cache)."""
    import datasets

    path, config = resolve_hub_name(name)
    try:
        loaded = datasets.load_dataset(path, config, cache_dir=cache_dir, **parquet_conversion(path))
    except Exception as error:  # the hub raises many kinds (network, missing repo, bad config)
        raise DataError(f"hub dataset {name!r}: cannot load ({first_line(error, with_type=True)})") from error
    return loaded


def parquet_conversion(path: str) -> dict[str, str]:
    """`load_dataset` arguments that read `path` from the hub's Parquet conversion ({} for any other)."""
    folder = PARQUET_CONVERSIONS.get(path)
    return {"revision": PARQUET_REVISION, "data_dir": folder} if folder else {}


def hub_split_frame(
    loaded: datasets.DatasetDict,
    name: str,
    split: str,
    family: Family,
    columns: Mapping[str, ColumnKey] | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """One split in canonical columns (indexed by row number) and the label set its features declare.

    "dev" falls back to the hub's "validation" split when the dataset has no "dev" split.
    """
    hub_split = "validation" if split == "dev" and "dev" not in loaded and "validation" in loaded else split
    if hub_split not in loaded:
        raise DataError(f"hub dataset {name!r}: no split {split!r} (splits: {', '.join(loaded)})")
    dataset = loaded[hub_split]
    table = dataset.to_pandas()
    table.index = pd.RangeIndex(1, len(table) + 1)
    origin = f"{name}[{hub_split}]"
    set_origin(table, origin, "row")
    found = resolve_columns(table, family, columns or {})
    label_names: list[str] = []
    if family == "pairs":
        feature = dataset.features.get(found["label"])
        if _is_class_label(feature):
            label_names = [str(index) for index in range(feature.num_classes)]
    elif family == "tagging":
        feature = getattr(dataset.features.get(found["tags"]), "feature", None)
        if _is_class_label(feature):
            label_names = list(feature.names)
            table[found["tags"]] = [[label_names[index] for index in tags] for tags in table[found["tags"]]]
    return to_canonical(table, family, columns, origin, "row"), label_names


def read_hub_split(
    name: str,
    split: str,
    family: Family = "pairs",
    columns: Mapping[str, ColumnKey] | None = None,
    cache_dir: str | None = None,
) -> pd.DataFrame:
    """One split of a hub dataset in the canonical columns of `family`."""
    frame, _ = hub_split_frame(load_hub_dataset(name, cache_dir), name, split, family, columns)
    return frame.reset_index(drop=True)


def _is_class_label(feature: object) -> bool:
    import datasets

    return isinstance(feature, datasets.ClassLabel)
