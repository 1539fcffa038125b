"""Stable fingerprints (sha256 hex) of config values, files and data frames, identical across processes.

Files are identified by their bytes, never by path + size + mtime: two byte-identical files share a
fingerprint and an edited file gets a new one even when its size and mtime survive the edit.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pydantic import BaseModel


def fingerprint(obj: Any) -> str:
    """sha256 of the canonical JSON of `obj` (dict keys sorted; Paths and DataFrames by content)."""
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()


def canonical_json(obj: Any) -> str:
    return json.dumps(_canonical(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def file_digest(path: str | Path) -> str:
    """sha256 of a file's bytes, streamed (never the whole file in memory)."""
    with open(path, "rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


def tree_digest(path: str | Path) -> str:
    """sha256 over the relative names and bytes of every file below a directory."""
    root = Path(path)
    entries = [
        (str(file.relative_to(root)), file_digest(file)) for file in sorted(root.rglob("*")) if file.is_file()
    ]
    return fingerprint(entries)


def frame_digest(frame: pd.DataFrame) -> str:
    """sha256 of a frame's columns and values (as one Arrow IPC stream; the index is ignored)."""
    table = pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(None).combine_chunks()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return hashlib.sha256(memoryview(sink.getvalue())).hexdigest()


def _canonical(obj: Any) -> Any:
    if obj is None or isinstance(obj, str | bool | int):
        return obj
    if isinstance(obj, float):
        # JSON has no NaN/inf; spell them so that they still hash distinctly and stably.
        return obj if math.isfinite(obj) else repr(obj)
    if isinstance(obj, dict):
        return {str(key): _canonical(value) for key, value in obj.items()}
    if isinstance(obj, list | tuple):
        return [_canonical(value) for value in obj]
    if isinstance(obj, set | frozenset):
        return sorted((_canonical(value) for value in obj), key=canonical_json)
    if isinstance(obj, Path):
        if obj.is_dir():
            return {"directory_sha256": tree_digest(obj)}
        return {"file_sha256": file_digest(obj)}
    if isinstance(obj, pd.DataFrame):
        return {"frame_sha256": frame_digest(obj)}
    if isinstance(obj, BaseModel):
        return _canonical(obj.model_dump(mode="json"))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _canonical(dataclasses.asdict(obj))
    if isinstance(obj, np.generic):
        return _canonical(obj.item())
    if isinstance(obj, np.ndarray):
        return _canonical(obj.tolist())
    if isinstance(obj, bytes):
        return {"bytes_sha256": hashlib.sha256(obj).hexdigest()}
    raise TypeError(f"cannot fingerprint a {type(obj).__name__} (use str, numbers, lists, dicts, Paths)")
