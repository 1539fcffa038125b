"""Source `local`: split files in the directory `data.path` (any format `read_split_file` reads)."""

from __future__ import annotations

from pathlib import Path

from dicelab.config import ExperimentConfig
from dicelab.data.base import Family, RawDataset
from dicelab.data.readers import FILE_SUFFIXES, read_located
from dicelab.data.readers._canonical import LABEL_NAMES
from dicelab.data.sources.registry import SOURCES
from dicelab.errors import ConfigError, DataError


@SOURCES.register("local")
def local(config: ExperimentConfig, family: Family) -> RawDataset:
    data = config.data
    if not data.path:
        raise ConfigError("config key 'data.path': a directory of split files is required for source 'local'")
    directory = Path(data.path)
    if not directory.is_dir():
        raise DataError(f"{directory}: cannot read (not a directory of split files)")
    splits = {
        split: read_located(split_file(directory, name), family, data.format, data.columns)
        for split, name in data.read_splits.items()
    }
    # A layout with a known label set (QQP, MRPC: 0/1) makes any other label an error, not a new class.
    label_names = splits["train"].attrs.get(LABEL_NAMES, []) if "train" in splits else []
    return RawDataset(
        family=family,
        splits=splits,
        label_names=label_names,
        fingerprint="",
        description=f"local {directory}",
    )


def split_file(directory: Path, name: str) -> Path:
    """`name` itself when it is a file, else the one file `name` + a known suffix (train -> train.tsv)."""
    exact = directory / name
    if exact.is_file():
        return exact
    candidates = [directory / f"{name}{suffix}" for suffix in FILE_SUFFIXES]
    found = [candidate for candidate in candidates if candidate.is_file()]
    if len(found) > 1:
        raise DataError(
            f"{directory}: several files for {name!r} ({', '.join(p.name for p in found)}); name one"
        )
    if not found:
        raise DataError(f"{exact}: cannot read (no such file; also tried {', '.join(FILE_SUFFIXES)})")
    return found[0]
