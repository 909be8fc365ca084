"""The per-run cost table of a plan: measured training milliseconds per step of every finished run, by task, mode,
block size and FFN, so a plan can be sized to sessions (:func:`hybrid_attention.apps.claims.runner.estimate_seconds`).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hybrid_attention.attention import ALL_MODES

__all__ = ["measured_costs", "cost_table", "cost_rows", "mode_label", "FIELD_MODE"]

#: the label of J-only runs with a symmetry-breaking field (``attention = "j"``, ``j_field != 0``): J learns there, and
#: they cost what ``hj`` costs (exact enumeration), unlike the closed-form uniform J-only mode ``j``
FIELD_MODE = "j+field"


def mode_label(run: Any) -> str:
    """The mode a run is reported and costed under: its ``attention``, or :data:`FIELD_MODE` for J-only with a
    field. ``run``: a run's ``config.json["run"]`` mapping or a ``TrainConfig``."""
    get = run.get if isinstance(run, Mapping) else lambda k, d=None: getattr(run, k, d)
    return FIELD_MODE if get("attention") == "j" and get("j_field", 0.0) else get("attention")


def cost_rows(root: Path) -> list[dict]:
    """One row per finished run under ``root/<study>/{sweep,runs}/*``: study, kind, task, mode, T, ffn, steps,
    elapsed_s (training only, evaluation excluded) and ms_per_step. ``mode`` is the plan's mode as the run directory
    names it when that is a named arm (``softmax-2L_T64_...``), else :func:`mode_label` of its attention."""
    rows = []
    for m in sorted(Path(root).glob("*/*/*/metrics.json")):
        d = m.parent
        if d.parent.name not in ("sweep", "runs") or not (d / "config.json").is_file():
            continue
        met = json.loads(m.read_text())
        if not met.get("finished") or not met.get("step"):
            continue
        c = json.loads((d / "config.json").read_text())["run"]
        arm = d.name.split(f"_T{c['block_size']}_")[0]  # the plan's mode: an attention mode or a named arm
        rows.append(
            {
                "study": d.parent.parent.name,
                "kind": d.parent.name,
                "run": d.name,
                "task": c["task"],
                "mode": arm if arm not in ALL_MODES else mode_label(c),
                "block_size": c["block_size"],
                "ffn": c["ffn"],
                "steps": met["step"],
                "elapsed_s": met["elapsed_s"],
                "ms_per_step": 1000 * met["elapsed_s"] / met["step"],
            }
        )
    return rows


def measured_costs(root: Path) -> dict[str, dict[tuple[str, int, bool], float]]:
    """``{task: {(mode, T, ffn): median ms per step}}`` over the finished runs under ``root``."""
    groups: dict[str, dict[tuple[str, int, bool], list[float]]] = {}
    for r in cost_rows(root):
        groups.setdefault(r["task"], {}).setdefault((r["mode"], r["block_size"], r["ffn"]), []).append(r["ms_per_step"])
    return {t: {k: statistics.median(v) for k, v in g.items()} for t, g in groups.items()}


def cost_table(costs: dict[str, dict[tuple[str, int, bool], float]]) -> str:
    """A markdown table of :func:`measured_costs` (one torch thread per run on this machine)."""
    lines = ["| task | mode | T | FFN | ms per step (median) |", "| --- | --- | --- | --- | --- |"]
    for task, g in sorted(costs.items()):
        for (mode, T, ffn), ms in sorted(g.items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2])):
            lines.append(f"| {task} | {mode} | {T} | {'yes' if ffn else 'no'} | {ms:.1f} |")
    return "\n".join(lines) + "\n"
