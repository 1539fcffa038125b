"""A variant on disk: `<dir>/train.parquet` + `<dir>/manifest.json`, published atomically.

Both files are written into a hidden temporary directory beside the destination, which is then renamed
into place: a reader (or an interrupted writer) never sees half a variant, and when two processes build
the same cached variant at once, the first rename wins and the other process uses its result.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dicelab.config.schema import VariantOptions
from dicelab.data.resampling._resample import ResampleResult, execute, plan_resample
from dicelab.errors import ConfigError, DataError
from dicelab.files import unwritable_reason

VARIANT_FILE = "train.parquet"
MANIFEST_FILE = "manifest.json"


def write_variant(result: ResampleResult, out_dir: str | Path, *, overwrite: bool = False) -> Path:
    """Write the variant's Parquet file and manifest to `out_dir`, which must not exist unless `overwrite`."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not overwrite:
        raise ConfigError(f"{out_dir}: output directory exists (choose another --out, or --overwrite)")
    try:
        staging = _stage(result, out_dir)
    except OSError as error:  # the place asked for, not the resampling: its folder, permissions, space
        raise DataError(f"{out_dir}: cannot write the variant there ({unwritable_reason(error)})") from None
    try:
        if out_dir.exists():
            _replace(staging, out_dir)
        else:
            os.rename(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out_dir


def read_variant(directory: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    directory = Path(directory)
    try:
        manifest = json.loads((directory / MANIFEST_FILE).read_text(encoding="utf-8"))
        frame = pq.read_table(directory / VARIANT_FILE).to_pandas()
    except (OSError, ValueError, pa.ArrowException) as error:
        raise DataError(f"{directory}: cannot read the resampled variant ({error})") from None
    return frame, manifest


def materialize_variant(
    frame: pd.DataFrame,
    variant: str,
    options: VariantOptions | None = None,
    *,
    cache_dir: str | Path,
    positive_label: str = "1",
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The variant of a training frame, built once and cached under `<cache_dir>/variants/<fingerprint>/`.

    The fingerprint covers the frame's content, the variant, its options, the positive label, the
    extraction method and the dicelab version. Safe when several processes ask for it at once.
    """
    options = options or VariantOptions()
    plan = plan_resample(
        frame,
        variant,
        size=options.size,
        positive_rate=options.positive_rate,
        seed=options.seed,
        positive_label=positive_label,
    )
    directory = Path(cache_dir) / "variants" / plan.fingerprint
    if not (directory / MANIFEST_FILE).exists():
        staging = _stage(execute(plan), directory)
        try:
            os.rename(staging, directory)
        except OSError as error:
            if error.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            # Another process published the same variant first; its content is the same.
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return read_variant(directory)


def _stage(result: ResampleResult, destination: Path) -> Path:
    """Write both files into a new hidden directory beside `destination` and return it."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(
        tempfile.mkdtemp(prefix=f".{destination.name}.", suffix=".partial", dir=destination.parent)
    )
    try:
        table = pa.Table.from_pandas(result.frame, preserve_index=False)
        pq.write_table(table, staging / VARIANT_FILE, compression="zstd")
        (staging / MANIFEST_FILE).write_text(
            json.dumps(result.manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        os.chmod(staging, 0o755)  # mkdtemp makes it private; the published directory should not be
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging


def _replace(staging: Path, out_dir: Path) -> None:
    """Swap a staged directory in for an existing one; the old one is deleted only after the swap."""
    retired = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".old", dir=out_dir.parent))
    os.rmdir(retired)
    os.rename(out_dir, retired)
    try:
        os.rename(staging, out_dir)
    except BaseException:
        with contextlib.suppress(OSError):
            os.rename(retired, out_dir)
        raise
    shutil.rmtree(retired, ignore_errors=True)
