"""Reading a text file as UTF-8 (byte-order mark dropped) with errors that name the file and line."""

from __future__ import annotations

from pathlib import Path

from dicelab.errors import DataError


def read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise DataError(f"{path}: cannot read ({error.strerror or error})") from None


def read_text(path: Path) -> str:
    data = read_bytes(path)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise DataError(f"{path}:{line}: cannot read (not UTF-8: {error.reason})") from None


def numbered_lines(text: str) -> list[tuple[int, str]]:
    """(1-based line number, line) for every line that is not blank; a "\\r" before the "\\n" is kept."""
    return [(number, line) for number, line in enumerate(text.split("\n"), start=1) if line.strip()]
