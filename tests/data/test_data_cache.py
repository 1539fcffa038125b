"""Fingerprints (stable across processes, by content) and the Arrow feature cache (hit, miss, atomicity)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import datasets
import pandas as pd
import pytest

from dicelab.config import VariantOptions
from dicelab.data.cache import cached_features, fingerprint
from dicelab.data.hashing import file_digest, frame_digest


def features(n: int = 3) -> dict[str, datasets.Dataset]:
    return {
        "train": datasets.Dataset.from_dict(
            {"input_ids": [[1, 2, i] for i in range(n)], "labels": list(range(n))}
        ),
        "dev": datasets.Dataset.from_dict({"input_ids": [[3]], "labels": [0]}),
    }


class CountingBuild:
    def __init__(self, delay: float = 0.0):
        self.calls = 0
        self.delay = delay

    def __call__(self) -> dict[str, datasets.Dataset]:
        self.calls += 1
        time.sleep(self.delay)
        return features()


def test_fingerprint_is_canonical_and_stable_across_processes():
    key = {"b": [1, 2.5, None], "a": {"y": True, "x": "é"}, "options": VariantOptions(size=3)}
    assert fingerprint(key) == fingerprint(
        {"options": VariantOptions(size=3), "a": {"x": "é", "y": True}, "b": [1, 2.5, None]}
    )
    assert fingerprint(key) != fingerprint({**key, "b": [1, 2.5]})
    code = (
        "from dicelab.config import VariantOptions; from dicelab.data import fingerprint; "
        "print(fingerprint({'b': [1, 2.5, None], 'a': {'y': True, 'x': 'é'},"
        " 'options': VariantOptions(size=3)}))"
    )
    environment = {**os.environ, "PYTHONHASHSEED": "123"}  # another str hash seed than this process
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=environment
    )
    assert other.stdout.strip() == fingerprint(key)


def test_fingerprint_rejects_what_it_cannot_hash():
    with pytest.raises(TypeError, match="cannot fingerprint a object"):
        fingerprint({"x": object()})


def test_files_are_fingerprinted_by_their_bytes(tmp_path):
    first, second = tmp_path / "a.tsv", tmp_path / "b.tsv"
    first.write_text("x\t1\n")
    second.write_text("x\t1\n")
    assert fingerprint(first) == fingerprint(second) == fingerprint(Path(str(first)))
    assert file_digest(first) == file_digest(second)
    stat = second.stat()
    second.write_text("y\t1\n")  # same size, same mtime, other bytes
    os.utime(second, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert fingerprint(first) != fingerprint(second)


def test_frame_digest_follows_values_not_index():
    frame = pd.DataFrame({"tokens": [["a", "b"], ["c"]], "label": ["1", "0"]})
    assert frame_digest(frame) == frame_digest(frame.set_axis([5, 9]))
    assert frame_digest(frame) != frame_digest(frame.assign(label=["1", "1"]))


def test_miss_then_hit(tmp_path):
    build = CountingBuild()
    key = {"data": "abc", "max_length": 128}
    first, hit = cached_features(key, build, tmp_path)
    assert not hit and build.calls == 1
    second, hit = cached_features(dict(reversed(key.items())), build, tmp_path)
    assert hit and build.calls == 1
    assert list(second["train"]["labels"]) == [0, 1, 2] and list(second["dev"]["input_ids"]) == [[3]]
    assert first["train"].to_dict() == second["train"].to_dict()
    entry = tmp_path / "features" / fingerprint(key)
    assert (entry / "key.json").is_file()
    _, hit = cached_features({**key, "max_length": 64}, build, tmp_path)
    assert not hit and build.calls == 2


def test_a_build_prints_no_progress_bars_and_restores_them(tmp_path, capfd):
    import datasets.utils.logging as datasets_logging

    datasets_logging.enable_progress_bar()
    cached_features({"task": "quiet"}, CountingBuild(), tmp_path)
    assert "Saving the dataset" not in capfd.readouterr().err
    assert datasets_logging.is_progress_bar_enabled()  # the caller's setting is left as it was


def test_failed_build_leaves_nothing_that_looks_complete(tmp_path):
    def fail() -> dict[str, datasets.Dataset]:
        raise RuntimeError("tokenizer exploded")

    with pytest.raises(RuntimeError, match="exploded"):
        cached_features({"k": 1}, fail, tmp_path)
    assert [path.name for path in (tmp_path / "features").iterdir() if not path.name.endswith(".lock")] == []
    _, hit = cached_features({"k": 1}, CountingBuild(), tmp_path)
    assert not hit


def test_racing_trials_build_once(tmp_path):
    build = CountingBuild(delay=0.3)
    results: list[bool] = []

    def trial() -> None:
        results.append(cached_features({"shared": True}, build, tmp_path)[1])

    threads = [threading.Thread(target=trial) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert build.calls == 1
    assert sorted(results) == [False, True, True, True]


@pytest.mark.slow
def test_racing_processes_build_once(tmp_path):
    script = (
        "import sys, time, datasets\n"
        "from dicelab.data.cache import cached_features\n"
        "def build():\n"
        "    open(sys.argv[2], 'a').write('built\\n'); time.sleep(0.5)\n"
        "    return {'train': datasets.Dataset.from_dict({'x': [1, 2]})}\n"
        "features, hit = cached_features({'shared': 'process'}, build, sys.argv[1])\n"
        "print(hit, list(features['train']['x']))\n"
    )
    log = tmp_path / "builds.log"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path / "cache"), str(log)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = sorted(process.communicate(timeout=120)[0].strip() for process in processes)
    assert outputs == ["False [1, 2]", "True [1, 2]"]
    assert log.read_text() == "built\n"
