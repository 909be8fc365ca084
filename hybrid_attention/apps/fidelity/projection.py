"""The projected wall time of a fidelity sweep, from a short timed probe of its real work, said before the sweep.

Points are grouped by ``(sampler, n)``. In each group the cheapest point (fewest ``shots x steps x budget``) is
measured in full first: that is real work, kept in the report, and its time is the group's unit. Whether cost grows
with the work of a point (shots, Trotter steps, moves per chain) is measured, not assumed: the first problem alone
is timed at the cheapest and at the costliest point of the group (the quicker of two timings each), after a
warm-up call per sampler (imports, templates, transpilation: paid once, never multiplied; a group of one point
needs none, it is measured and kept), and every other point is projected by interpolating that ratio linearly in
the work (samplers of :data:`LEDGER_SAMPLERS` excepted). The plots, drawn after the points, are projected from one
probe figure (:func:`~hybrid_attention.apps.fidelity.plots.plot_seconds`). A point the probe cannot measure (an
extra missing, an unreachable temperature) is left to the sweep, which records why it skipped it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from ..timing import duration
from .sweep import SweepPoint, UnreachableTemperature

__all__ = ["PROJECTION", "work", "project_sweep"]

#: the projected wall time, said before the sweep (``hybrid-attention fidelity`` shows it)
PROJECTION = logging.getLogger("hybrid_attention.apps.fidelity.projection")

_SKIPPED = (ImportError, UnreachableTemperature)
#: samplers whose every call is a job in the run's ledger (and on a device, paid): the probe makes no calls of its
#: own for them, only the cheapest point in full, and projects the others proportional to their work
LEDGER_SAMPLERS = frozenset({"ibm"})


def work(pt: SweepPoint) -> int:
    """The work of a point relative to others of its sampler and size: ``shots x steps x budget`` (1 if unset)."""
    return (pt.shots or 1) * (pt.steps or 1) * (pt.budget or 1)


def _timed(measure: Callable[[SweepPoint, Any], dict], pt: SweepPoint, problems: Any) -> tuple[dict, float]:
    t0 = time.perf_counter()
    res = measure(pt, problems)
    return res, time.perf_counter() - t0


def project_sweep(
    points: list[SweepPoint],
    problems_for: Callable[[int], Any],
    measure: Callable[[SweepPoint, Any], dict],
    keep: Callable[[str, dict], None],
    after: Callable[[], float] | None = None,
) -> tuple[dict[str, dict], float]:
    """Measure each group's cheapest point, time the probe problems, log the projection (module docstring).

    Args:
        points: the points still to measure; problems_for: ``n -> problems`` (batch shape ``(count,)``);
        measure: ``(point, problems) -> result`` (raises ``ImportError`` or ``UnreachableTemperature`` to skip);
        keep: ``(key, result)``, called as soon as a point is measured in full (the sweep saves it: an interrupted
            probe keeps every finished point).
        after: the projected seconds of the work after the points (the plots:
            :func:`~hybrid_attention.apps.fidelity.plots.plot_seconds`), itself a timed probe.

    Returns:
        ``(kept, seconds)``: the measured cheapest points by key, and the projected seconds of the rest.
    """
    groups: dict[tuple[str, int], list[SweepPoint]] = {}
    for pt in points:
        groups.setdefault((pt.sampler, pt.n), []).append(pt)
    kept: dict[str, dict] = {}
    total, warm = 0.0, set()
    t_start = time.perf_counter()
    for (name, n), pts in groups.items():
        lo, hi = min(pts, key=work), max(pts, key=work)
        first = problems_for(n)[:1]
        try:
            ratio = work(hi) / work(lo)  # a ledger sampler's (no probe calls of its own): proportional to the work
            if name not in LEDGER_SAMPLERS:
                if len(pts) > 1 and name not in warm:
                    measure(lo, first)  # one-off costs, paid once by the sweep as well: never multiplied
                ratio = 1.0
                if work(hi) > work(lo):  # the quicker of two timings each: a loaded machine only adds time
                    t_lo = min(_timed(measure, lo, first)[1] for _ in range(2))
                    t_hi = min(_timed(measure, hi, first)[1] for _ in range(2))
                    ratio = t_hi / t_lo
            warm.add(name)
            kept[lo.key], unit = _timed(measure, lo, problems_for(n))
        except _SKIPPED:
            continue
        keep(lo.key, kept[lo.key])
        for p in pts:
            if p is not lo:
                share = (work(p) - work(lo)) / (work(hi) - work(lo)) if work(hi) > work(lo) else 0.0
                total += unit * (1 + (ratio - 1) * share)
    plots = after() if after is not None else 0.0
    total += plots
    probe_s = time.perf_counter() - t_start
    PROJECTION.info(
        f"fidelity: {len(points)} points to measure, projected {duration(total)} in all for the "
        f"{len(points) - len(kept)} after the probe and the plots ({duration(plots)}) (probe: {duration(probe_s)}, "
        f"the cheapest point of each sampler and size measured and kept, one problem timed at the cheapest and "
        f"costliest, one figure drawn)"
    )
    return kept, total
