"""Variants on disk: atomic output, and the fingerprint-keyed cache used by trial configs."""

from __future__ import annotations

import json
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from dicelab.config import VariantOptions
from dicelab.data.resampling import materialize_variant, read_variant, resample_frame, write_variant
from dicelab.errors import ConfigError


def test_write_then_read_round_trip(pairs: pd.DataFrame, tmp_path: Path) -> None:
    result = resample_frame(pairs, "+negative")
    out = write_variant(result, tmp_path / "nested" / "variant")
    frame, manifest = read_variant(out)
    pd.testing.assert_frame_equal(frame, result.frame, check_dtype=False)
    assert manifest == result.manifest
    assert sorted(path.name for path in tmp_path.joinpath("nested").iterdir()) == ["variant"]


def test_an_interrupted_write_leaves_nothing(pairs: pd.DataFrame, tmp_path: Path, monkeypatch) -> None:
    result = resample_frame(pairs, "+positive")
    written = []
    write_table = pq.write_table

    def write_then_die(table, where, **options) -> None:
        write_table(table, where, **options)  # the Parquet file is complete ...
        written.append(where)
        raise KeyboardInterrupt  # ... and the run dies before the manifest

    monkeypatch.setattr(pq, "write_table", write_then_die)
    with pytest.raises(KeyboardInterrupt):
        write_variant(result, tmp_path / "out")
    assert written and not Path(written[0]).exists()
    assert list(tmp_path.iterdir()) == []  # neither the output nor its staging directory


def test_existing_output_needs_overwrite(pairs: pd.DataFrame, tmp_path: Path) -> None:
    out = write_variant(resample_frame(pairs, "original"), tmp_path / "out")
    with pytest.raises(ConfigError, match="exists"):
        write_variant(resample_frame(pairs, "-negative"), out)
    write_variant(resample_frame(pairs, "-negative"), out, overwrite=True)
    assert read_variant(out)[1]["variant"] == "-negative"
    assert [path.name for path in tmp_path.iterdir()] == ["out"]


def test_materialize_builds_once_per_fingerprint(pairs: pd.DataFrame, tmp_path: Path) -> None:
    options = VariantOptions(seed=1)
    frame, manifest = materialize_variant(pairs, "+positive", options, cache_dir=tmp_path)
    directory = tmp_path / "variants" / manifest["fingerprint"]
    stamp = os.stat(directory / "train.parquet").st_mtime_ns
    again, manifest_again = materialize_variant(pairs.copy(), "+positive", options, cache_dir=tmp_path)
    assert os.stat(directory / "train.parquet").st_mtime_ns == stamp  # read from the cache
    assert manifest_again == manifest and again.equals(frame)
    assert manifest == json.loads((directory / "manifest.json").read_text())
    _, other = materialize_variant(pairs, "+positive", VariantOptions(seed=2), cache_dir=tmp_path)
    _, rate = materialize_variant(pairs, "+positive", VariantOptions(positive_rate=0.4), cache_dir=tmp_path)
    assert len({manifest["fingerprint"], other["fingerprint"], rate["fingerprint"]}) == 3
    assert rate["output"]["counts"] == {"1": 280, "0": 420}
    assert len(list((tmp_path / "variants").iterdir())) == 3


def _materialize(frame: pd.DataFrame, cache_dir: str) -> str:
    _, manifest = materialize_variant(
        frame, "+positive+negative", VariantOptions(seed=5), cache_dir=cache_dir
    )
    return manifest["fingerprint"]


def test_processes_racing_for_one_variant_share_it(pairs: pd.DataFrame, tmp_path: Path) -> None:
    with ProcessPoolExecutor(max_workers=2) as pool:
        fingerprints = list(pool.map(_materialize, [pairs] * 4, [str(tmp_path)] * 4))
    assert len(set(fingerprints)) == 1
    assert [path.name for path in (tmp_path / "variants").iterdir()] == [fingerprints[0]]
