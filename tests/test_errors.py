"""first_line: the one-line form of an error used by every CLI message and FAILED run reason."""

from __future__ import annotations

from dicelab.errors import first_line


def test_first_non_blank_line_with_or_without_the_type() -> None:
    error = ValueError("\n  bad value for x  \ntraceback details\n")
    assert first_line(error) == "bad value for x"
    assert first_line(error, with_type=True) == "ValueError: bad value for x"


def test_an_empty_message_is_the_type() -> None:
    assert first_line(KeyboardInterrupt()) == "KeyboardInterrupt"
    assert first_line(OSError(" \n"), with_type=True) == "OSError"
