"""Reading a plan's run directories for the report: one row per finished main run of ``ROOT/<study>/runs``, the
studies of J-only with a field and their references, and the learned couplings by key distance.

Studies are recognised by name (:mod:`hybrid_attention.apps.claims.report`). J-only runs with a field
(``j_field != 0``) are reported as the mode ``j+field`` (:func:`~hybrid_attention.apps.claims.costs.mode_label`),
apart from the uniform J-only mode ``j``.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from ..costs import mode_label
from ..stats import paired_ci
from .rules import FIELD_STUDY

__all__ = ["load_json", "collect", "all_rows", "field_base", "with_references", "field_studies", "coupling_by_distance"]


def load_json(p: Path) -> Any:
    """The parsed JSON file ``p``."""
    with open(p) as f:
        return json.load(f)


def collect(root: str | Path, study: str) -> list[dict[str, Any]]:
    """One row per finished main run of ``ROOT/<study>/runs``: mode, block_size, seed, lr, task, ffn, metric (the
    task's: perplexity, or accuracy in %), val_loss, j0_metric (runs with couplings), steps, stopped_early,
    elapsed_s, by_depth and by_distance (brackets variants: ``{depth or match distance: [right, count]}``)."""
    rows = []
    for d in sorted((Path(root) / study / "runs").glob("*_T*_s*")):
        if not (d / "metrics.json").is_file() or not (d / "config.json").is_file():
            continue
        m = load_json(d / "metrics.json")
        if not m.get("finished"):
            continue
        c = load_json(d / "config.json")["run"]
        shakespeare = c["task"] == "shakespeare"
        key, scale = ("val_perplexity", 1.0) if shakespeare else ("val_accuracy", 100.0)
        rows.append(
            {
                "run": d.name,
                "mode": mode_label(c),
                "j_field": float(c.get("j_field", 0.0)),
                "block_size": c["block_size"],
                "seed": c["seed"],
                "lr": c["lr"],
                "task": c["task"],
                "ffn": c["ffn"],
                "metric": scale * m[key],
                "val_loss": m["val_loss"],
                "j0_metric": scale * m[f"j0_{key}"] if f"j0_{key}" in m else math.nan,
                "steps": m["step"],
                "stopped_early": bool(m.get("stopped_early")),
                "elapsed_s": m["elapsed_s"],
                "by_depth": m.get("val_accuracy_by_depth"),
                "by_distance": m.get("val_accuracy_by_distance"),
                "evals": m.get("evals", []),
            }
        )
    return rows


def all_rows(root: str | Path) -> dict[str, list[dict[str, Any]]]:
    """:func:`collect` of every study under ``root`` that has finished runs."""
    studies = sorted(p.parent.name for p in Path(root).glob("*/runs") if p.is_dir())
    data = {s: collect(root, s) for s in studies}
    return {s: r for s, r in data.items() if r}


def field_base(study: str) -> str | None:
    """The base study of a ``<base>_jfield*`` study, else ``None``."""
    return study.split(FIELD_STUDY)[0] if FIELD_STUDY in study else None


def with_references(study: str, rows: list[dict[str, Any]], base_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` of a ``<base>_jfield*`` study together with the softmax and uniform J-only runs of its base study
    (``base_rows``) at the study's block sizes, so that its table pairs J-only with a field against them by seed;
    other studies unchanged."""
    if field_base(study) is None:
        return rows
    Ts = {r["block_size"] for r in rows}
    return [r for r in base_rows if r["mode"] in ("softmax", "j") and r["block_size"] in Ts] + rows


def field_studies(root: str | Path, base: str) -> list[str]:
    """The ``<base>_jfield*`` studies under ``root`` that have a ``runs`` directory, sorted."""
    return sorted(p.parent.name for p in Path(root).glob(f"{base}{FIELD_STUDY}*/runs") if p.is_dir())


def coupling_by_distance(root: str | Path, study: str, mode: str, T: int) -> list[dict[str, Any]]:
    """Learned ``J`` (or the control's bias) by key distance at ``T``: per distance the per-seed mean over pairs,
    heads and layers, then the mean over seeds with its 95 % interval (``paired_ci`` of the seeds' values)."""
    per: dict[int, list[float]] = {}
    for d in sorted((Path(root) / study / "runs").glob(f"{mode}_T{T}_*")):
        if not (d / "couplings.json").is_file() or not (d / "metrics.json").is_file():
            continue
        if not load_json(d / "metrics.json").get("finished"):
            continue
        sums: dict[int, list[float]] = {}
        for J in load_json(d / "couplings.json")["J"]:
            for head in J or []:
                for j in range(T):
                    for k in range(j + 1, T):
                        sums.setdefault(k - j, []).append(head[j][k])
        for dist, v in sums.items():
            per.setdefault(dist, []).append(statistics.fmean(v))
    out = []
    for dist in sorted(per):
        r = paired_ci(per[dist])
        out.append({"distance": dist, "n": r.n, "mean": r.mean, "lo": r.lo, "hi": r.hi, "p": r.p})
    return out
