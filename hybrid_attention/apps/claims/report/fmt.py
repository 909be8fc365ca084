"""How numbers and intervals read in the claims report (one place, so every table and verdict prints them alike)."""

from __future__ import annotations

import math

from ..stats import PairedResult

__all__ = ["fmt", "ci", "ci_short"]


def fmt(x: float | None, nd: int = 2) -> str:
    """``x`` with ``nd`` decimals; ``"n/a"`` for ``None`` or nan."""
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def ci(res: PairedResult, nd: int = 2) -> str:
    """``"mean [lo, hi] (n = k)"``."""
    return f"{fmt(res.mean, nd)} [{fmt(res.lo, nd)}, {fmt(res.hi, nd)}] (n = {res.n})"


def ci_short(res: PairedResult) -> str:
    """``"mean [lo, hi]"`` with one decimal."""
    return f"{fmt(res.mean, 1)} [{fmt(res.lo, 1)}, {fmt(res.hi, 1)}]"
