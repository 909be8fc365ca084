"""Durations as the long commands say them in their projected time.

``train``, ``fidelity``, ``ablate`` and ``mixing`` each project their wall time from a short timed probe of their
real work and log ``projected <duration> in all`` before the work starts (``bench/projections.py`` measures how
close that is)."""

from __future__ import annotations

__all__ = ["duration"]


def duration(seconds: float) -> str:
    """``seconds`` in the unit a reader takes in at a glance.

    Example:
        >>> duration(0.0123), duration(42), duration(600), duration(9000)
        ('12 ms', '42.0 s', '10.0 min', '2.5 h')
    """
    if seconds < 1:
        return f"{1e3 * seconds:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
