"""The argparse value types every ``hybrid-attention`` subcommand shares for counts, sizes and scales: one helper per
kind of value, so that ``--n -3``, ``--problems 0`` or ``--scale 0`` are refused by the parser (exit status 2, one
line naming the flag, what it takes and what it got) instead of failing later or giving NaN.

* :func:`positive_int` (``>= 1``) and :func:`non_negative_int` (``>= 0``): an integer, also written as an integral
  number such as ``1e5`` (sizes that large are then checked against the memory budget by the command);
* :func:`positive_float`: a finite number ``> 0``;
* :func:`positive_ints`, :func:`non_negative_ints`, :func:`positive_floats`: comma-separated lists of those.

Imports nothing heavy (the recorded flags of :mod:`.cli_flags` resolve these by name when a value is parsed).

Example:
    >>> positive_int("1e5"), positive_ints("3,4, 5"), positive_float("0.5")
    (100000, [3, 4, 5], 0.5)
    >>> positive_int("-3")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected an integer >= 1, got '-3'
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

__all__ = [
    "positive_int",
    "non_negative_int",
    "positive_float",
    "positive_ints",
    "non_negative_ints",
    "positive_floats",
]


def _integer(text: str, minimum: int) -> int:
    expected = f"an integer >= {minimum}"
    try:
        value = int(text)
    except ValueError:
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not (math.isfinite(x) and x.is_integer()):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        value = int(x)
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer ``>= 1`` (``"8"``, ``"1e5"``)."""
    return _integer(text, 1)


def non_negative_int(text: str) -> int:
    """An integer ``>= 0`` (seeds, indices, counts where 0 means none)."""
    return _integer(text, 0)


def positive_float(text: str) -> float:
    """A finite number ``> 0``."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


def _list(one: Callable[[str], Any], text: str) -> list[Any]:
    items = [x.strip() for x in str(text).split(",") if x.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
    try:
        return [one(x) for x in items]
    except argparse.ArgumentTypeError as exc:
        if len(items) == 1:
            raise
        raise argparse.ArgumentTypeError(f"{exc} in the list {text!r}") from None


def positive_ints(text: str) -> list[int]:
    """Comma-separated integers ``>= 1`` (``"3,4,5"``)."""
    return _list(positive_int, text)


def non_negative_ints(text: str) -> list[int]:
    """Comma-separated integers ``>= 0``."""
    return _list(non_negative_int, text)


def positive_floats(text: str) -> list[float]:
    """Comma-separated finite numbers ``> 0``."""
    return _list(positive_float, text)
