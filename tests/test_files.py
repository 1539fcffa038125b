"""dicelab.files: an output file appears whole or not at all, and a place that cannot hold it is named."""

from __future__ import annotations

import pytest

from dicelab.files import OutputError, write_atomically


def test_the_file_is_written_whole_and_nothing_else_is_left(tmp_path):
    write_atomically(tmp_path / "sub" / "out.yaml", "a: 1\n")
    write_atomically(tmp_path / "sub" / "out.yaml", "a: 2\n")  # replaced
    assert (tmp_path / "sub" / "out.yaml").read_text() == "a: 2\n"
    assert [path.name for path in (tmp_path / "sub").iterdir()] == ["out.yaml"]


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        ("afile/out.yaml", "Not a directory"),
        ("afile/sub/out.yaml", "Not a directory"),
        ("adir", "Is a directory"),
    ],
)
def test_a_place_that_cannot_hold_the_file_is_an_output_error_naming_it(where, reason, tmp_path):
    (tmp_path / "afile").write_text("")
    (tmp_path / "adir").mkdir()
    with pytest.raises(OutputError) as raised:
        write_atomically(tmp_path / where, "a: 1\n")
    assert raised.value.strerror == f"{tmp_path / where}: cannot write there ({reason})"
    assert isinstance(raised.value, OSError)  # what callers that catch OSError expect
    assert sorted(path.name for path in tmp_path.iterdir()) == ["adir", "afile"]
    assert not any((tmp_path / "adir").iterdir())
