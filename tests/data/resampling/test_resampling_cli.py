"""`dicelab resample` on QQP-layout files (with and without header, stray whitespace), MRPC, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from dicelab.cli import main

MRPC_TRAIN = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "mrpc" / "train.tsv"


@pytest.fixture
def dicelab(monkeypatch: pytest.MonkeyPatch) -> Callable[..., int]:
    """Runs `dicelab ARGS...` in this process and returns its exit code."""

    def run(*args: str | Path) -> int:
        monkeypatch.setattr(sys, "argv", list(sys.argv))  # main() replaces it
        return main([str(arg) for arg in args])

    return run


@pytest.mark.parametrize(
    "layout", [{"header": True}, {"header": False}, {"header": True, "stray_whitespace": True}]
)
def test_qqp_tsv_to_parquet_and_manifest(
    dicelab: Callable[..., int],
    pairs: pd.DataFrame,
    write_qqp_tsv: Callable[..., Path],
    tmp_path: Path,
    layout: dict,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = write_qqp_tsv(pairs, tmp_path / "train.tsv", **layout)
    assert (
        dicelab("resample", source, "--variant", "+positive", "--out", tmp_path / "out", "--seed", "3") == 0
    )
    frame = pd.read_parquet(tmp_path / "out" / "train.parquet")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["manifest.json", "train.parquet"]
    assert manifest["input"]["counts"] == {"1": 180, "0": 420}
    assert manifest["output"]["counts"] == {"1": 420, "0": 420}
    assert frame["label"].value_counts().to_dict() == {"1": 420, "0": 420}
    originals = frame[frame["origin"] == "original"]
    assert originals["text_a"].tolist() == pairs["text_a"].tolist()  # stray whitespace stripped
    # The same pairs give the same variant, whatever the file's layout.
    assert manifest["input"]["fingerprint"] == _expected_fingerprint(pairs)
    # the console wraps long paths (pytest-xdist's temp dirs are longer): compare without line breaks
    assert "manifest.json" in capsys.readouterr().out.replace("\n", "")


def _expected_fingerprint(pairs: pd.DataFrame) -> str:
    from dicelab.data.resampling import resample_frame

    return resample_frame(pairs, "original").manifest["input"]["fingerprint"]


def test_minus_negative_as_a_separate_argument(
    dicelab: Callable[..., int], pairs: pd.DataFrame, write_qqp_tsv: Callable[..., Path], tmp_path: Path
) -> None:
    source = write_qqp_tsv(pairs, tmp_path / "train.tsv")
    assert dicelab("resample", source, "--variant", "-negative", "--out", tmp_path / "a") == 0
    assert dicelab("resample", source, "--variant=-negative", "--out", tmp_path / "b") == 0
    for name in ("a", "b"):
        manifest = json.loads((tmp_path / name / "manifest.json").read_text())
        assert manifest["variant"] == "-negative" and manifest["output"]["counts"] == {"1": 180, "0": 180}


def test_malformed_file_is_rejected_with_file_and_line(
    dicelab: Callable[..., int],
    pairs: pd.DataFrame,
    write_qqp_tsv: Callable[..., Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = write_qqp_tsv(pairs.head(20), tmp_path / "train.tsv")
    lines = source.read_text().splitlines()
    lines[7] = lines[7].rsplit("\t", 1)[0]  # a row without its label, on line 8
    source.write_text("\n".join(lines) + "\n")
    assert dicelab("resample", source, "--variant", "+positive", "--out", tmp_path / "out") == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and f"{source}:8:" in error
    assert not (tmp_path / "out").exists()


def test_non_binary_label_names_the_line(
    dicelab: Callable[..., int],
    pairs: pd.DataFrame,
    write_qqp_tsv: Callable[..., Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    frame = pairs.head(20).copy()
    frame.loc[12, "label"] = "2"
    source = write_qqp_tsv(frame, tmp_path / "train.tsv")  # header on line 1: row 12 is on line 14
    assert dicelab("resample", source, "--variant", "-negative", "--out", tmp_path / "out") == 2
    assert f"{source}:14: label '2' makes the labels non-binary" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--variant", "+positives"], "unknown variant '+positives' (allowed: original, +positive"),
        (
            ["--variant", "+positive", "--positive-rate", "1.2"],
            "positive_rate must be strictly between 0 and 1",
        ),
        (["--variant", "-negative", "--size", "10000"], "can only remove negatives"),
        (["--variant"], "--variant needs a value"),
    ],
)
def test_bad_options_exit_2_with_one_line(
    dicelab: Callable[..., int],
    pairs: pd.DataFrame,
    write_qqp_tsv: Callable[..., Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    arguments: list[str],
    message: str,
) -> None:
    source = write_qqp_tsv(pairs, tmp_path / "train.tsv")
    assert dicelab("resample", source, *arguments, "--out", tmp_path / "out") == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and message in error
    assert list(tmp_path.iterdir()) == [source]


def test_missing_file_and_existing_output(
    dicelab: Callable[..., int],
    pairs: pd.DataFrame,
    write_qqp_tsv: Callable[..., Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert dicelab("resample", tmp_path / "nope.tsv", "--variant", "original", "--out", tmp_path / "o") == 2
    assert "nope.tsv: no such file" in capsys.readouterr().err
    source = write_qqp_tsv(pairs, tmp_path / "train.tsv")
    (tmp_path / "o").mkdir()
    assert dicelab("resample", source, "--variant", "original", "--out", tmp_path / "o") == 2
    assert "output directory exists" in capsys.readouterr().err
    assert dicelab("resample", source, "--variant", "original", "--out", tmp_path / "o", "--overwrite") == 0


def test_an_out_that_cannot_be_written_is_one_line_and_leaves_nothing(
    dicelab: Callable[..., int],
    pairs: pd.DataFrame,
    write_qqp_tsv: Callable[..., Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = write_qqp_tsv(pairs, tmp_path / "train.tsv")
    (tmp_path / "afile").write_text("")
    for out in (tmp_path / "afile" / "o", tmp_path / "afile" / "sub" / "o"):
        assert dicelab("resample", source, "--variant", "original", "--out", out) == 2
        error = capsys.readouterr().err.strip().splitlines()
        assert error == [f"dicelab resample: error: {out}: cannot write the variant there (Not a directory)"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["afile", "train.tsv"]


def test_exit_code_2_from_the_installed_command(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tsv"
    bad.write_text("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n1\t1\t2\tWhy?\tHow?\t0\n")
    result = subprocess.run(
        [sys.executable, "-m", "dicelab.cli", "resample", str(bad), "--variant", "+positive", "--out", "x"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == f"dicelab resample: error: {bad}: no positives (no row has the positive label '1')"
    )


def test_hub_layout_directory_with_split(
    dicelab: Callable[..., int], pairs: pd.DataFrame, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hub path (`datasets.load_dataset`) on a local directory laid out like glue/qqp."""
    datasets = pytest.importorskip("datasets")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    features = datasets.Features(
        {
            "question1": datasets.Value("string"),
            "question2": datasets.Value("string"),
            "label": datasets.ClassLabel(names=["not_duplicate", "duplicate"]),
            "idx": datasets.Value("int32"),
        }
    )
    rows = {
        "question1": pairs["text_a"].tolist(),
        "question2": pairs["text_b"].tolist(),
        "label": pairs["label"].astype(int).tolist(),
        "idx": list(range(len(pairs))),
    }
    (tmp_path / "qqp").mkdir()
    datasets.Dataset.from_dict(rows, features=features).to_parquet(str(tmp_path / "qqp" / "train.parquet"))
    out = tmp_path / "out"
    assert (
        dicelab("resample", tmp_path / "qqp", "--split", "train", "--variant", "-negative", "--out", out) == 0
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["input"]["counts"] == {"1": 180, "0": 420}
    assert manifest["output"]["counts"] == {"1": 180, "0": 180}


@pytest.mark.skipif(not MRPC_TRAIN.exists(), reason="../shared/data is not here")
def test_real_mrpc(dicelab: Callable[..., int], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # MRPC is 67% positive: the presets' defaults assume a positive minority, explicit targets work.
    assert dicelab("resample", MRPC_TRAIN, "--variant", "+positive", "--out", tmp_path / "a") == 2
    assert "give size and/or positive_rate" in capsys.readouterr().err
    out = tmp_path / "b"
    assert (
        dicelab("resample", MRPC_TRAIN, "--variant", "+negative", "--positive-rate", "0.5", "--out", out) == 0
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["input"]["counts"] == {"1": 2474, "0": 1194}
    assert manifest["output"]["counts"] == {"1": 2474, "0": 2474}
    assert manifest["method"] == "builtin" and manifest["augmentation"]["0"]["created"] == 1280
