"""How the report writes numbers, intervals and file names (counts: `dicelab.words`)."""

from __future__ import annotations

import math
import re


def number(value: float) -> str:
    return f"{value:.2f}" if math.isfinite(value) else "—"


def signed(value: float, missing: str = "—") -> str:
    """A difference as the tables write it: +0.85 (`missing` when it is not finite)."""
    return f"{value:+.2f}" if math.isfinite(value) else missing


def interval(low: float, high: float, *, signed: bool = False) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return "—"
    return f"[{low:+.2f}, {high:+.2f}]" if signed else f"[{low:.2f}, {high:.2f}]"


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.+-]+", "-", text).strip("-") or "x"
