"""Counts in words, as the console and the report write them: "1 trial", "4 seeds"."""

from __future__ import annotations


def count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
