"""Reading a plan's run directories for the report: one row per finished main run of ``ROOT/<study>/runs`` (with
its learned couplings by key distance), the damaged runs that are left out, and the studies of J-only with a field
with their references.

A finished run (``metrics.json`` with ``finished: true``) is *damaged* when a file the report reads is missing or
not JSON, lacks a key the report needs, or holds a value that is not a finite number where one is needed (its
metric, the validation loss, the J = 0 and best-checkpoint metrics when present, every evaluation, the couplings).
A damaged run is left out of every statistic and listed (:class:`Damaged`, with its path and what is wrong);
it never raises and is never used. Unfinished runs are skipped silently (they are still training).

J-only runs with a field (``j_field != 0``) are reported as the mode ``j+field``
(:func:`~hybrid_attention.apps.claims.costs.mode_label`), apart from the uniform J-only mode ``j``. The step budget
is read through :func:`max_steps`, which accepts the old key ``steps`` and the new ``max_steps``.
"""

from __future__ import annotations

import json
import logging
import math
import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..costs import mode_label
from ..runner import LRSweep, Study, lr_at_edge, run_state
from .rules import FIELD_STUDY

__all__ = [
    "Damaged",
    "load_json",
    "max_steps",
    "read_run",
    "scan",
    "sweep_edges",
    "collect",
    "all_rows",
    "field_base",
    "with_references",
    "field_studies",
]

logger = logging.getLogger(__name__)

#: the keys of ``config.json["run"]`` the report needs
CONFIG_KEYS = ("task", "attention", "block_size", "seed", "lr", "ffn")
#: a run directory's name (:mod:`hybrid_attention.apps.claims.runner`): ``<attention>_T<T>_lr<lr>_s<seed>``
RUN_NAME = re.compile(r"^(?P<mode>[^_]+)_T(?P<T>\d+)_lr(?P<lr>[^_]+)_s(?P<seed>\d+)$")


@dataclass(frozen=True)
class Damaged:
    """A finished run the report cannot use: its directory and what is wrong with it."""

    path: Path
    problem: str


def load_json(p: Path) -> Any:
    """The parsed JSON file ``p``.

    Raises:
        ValueError: not valid JSON (the message names the file).
    """
    with open(p) as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{p.name} is not valid JSON ({exc})") from exc


def max_steps(d: Mapping[str, Any]) -> int:
    """The step budget of a run's ``config.json["run"]`` or ``metrics.json``: ``max_steps`` (new runs) or ``steps``
    (runs from before ``TrainConfig.steps`` became ``max_steps``).

    Example:
        >>> max_steps({"steps": 4000}), max_steps({"max_steps": 2000})
        (4000, 2000)

    Raises:
        KeyError: neither key.
        ValueError: not a positive integer, or both keys with different values.
    """
    got = {k: d[k] for k in ("max_steps", "steps") if k in d}
    if not got:
        raise KeyError("max_steps (or the older steps)")
    for k, v in got.items():
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ValueError(f"{k}: expected a positive integer, got {v!r}")
    if len(set(got.values())) > 1:
        raise ValueError(f"max_steps {got['max_steps']!r} and steps {got['steps']!r} disagree")
    return next(iter(got.values()))


def _finite(v: Any, what: str) -> float:
    """``v`` as a float. Raises ValueError naming ``what`` unless it is a finite number."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{what} is {v!r}, expected a finite number")
    return float(v)


def _number(d: Mapping[str, Any], key: str, where: str) -> float:
    """``d[key]`` as a finite float. Raises KeyError or ValueError naming ``where``."""
    if key not in d:
        raise KeyError(f"{where} lacks {key!r}")
    return _finite(d[key], f"{where} {key}")


def _check_evals(evals: Any, key: str) -> list[dict[str, Any]]:
    """The evaluations of ``metrics.json``, each with a finite validation loss and metric."""
    if not isinstance(evals, list) or not all(isinstance(e, dict) for e in evals):
        raise ValueError(f"metrics.json: evals is {type(evals).__name__}, expected a list of evaluations")
    for i, e in enumerate(evals):
        for k in ("val_loss", key):
            _number(e, k, f"metrics.json evals[{i}]")
    return evals


def _check_counts(counts: Any, name: str) -> dict[str, list[int]] | None:
    """``{group: [right, count]}`` of a bracket run (or ``None``)."""
    if counts is None:
        return None
    ok = isinstance(counts, dict) and all(
        isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
        for v in counts.values()
    )
    if not ok:
        raise ValueError(f"metrics.json: {name} is not a mapping of [right, count] integer pairs")
    return counts


def _couplings(d: Path, T: int) -> dict[int, float] | None:
    """A run's learned couplings (or the control's bias) by key distance: the mean over pairs, heads and layers;
    ``None`` without ``couplings.json`` or without couplings in it."""
    if not (d / "couplings.json").is_file():
        return None
    sums: dict[int, list[float]] = {}
    for J in load_json(d / "couplings.json")["J"]:
        for head in J or []:
            for j in range(T):
                for k in range(j + 1, T):
                    sums.setdefault(k - j, []).append(_finite(head[j][k], f"couplings.json J[{j}][{k}]"))
    return {dist: statistics.fmean(v) for dist, v in sorted(sums.items())} or None


def _budget(c: dict[str, Any], m: dict[str, Any]) -> int:
    """The step budget from ``config.json["run"]``, else from ``metrics.json`` (:func:`max_steps`)."""
    for where, d in (("config.json run", c), ("metrics.json", m)):
        if "max_steps" in d or "steps" in d:
            try:
                return max_steps(d)
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from exc
    raise KeyError("config.json run and metrics.json lack max_steps (or the older steps)")


def _row(d: Path, m: dict[str, Any], c: dict[str, Any]) -> dict[str, Any]:
    """The report's row of a finished run (``m``: its metrics, ``c``: its ``config.json["run"]``), validated."""
    for k in CONFIG_KEYS:
        if k not in c:
            raise KeyError(f"config.json run lacks {k!r}")
    key, scale = ("val_perplexity", 1.0) if c["task"] == "shakespeare" else ("val_accuracy", 100.0)
    best = m.get("best")
    if best is not None and not isinstance(best, dict):
        raise ValueError(f"metrics.json: best is {best!r}, expected an evaluation")
    return {
        "run": d.name,
        "attention": c["attention"],
        "mode": mode_label(c),
        "j_field": float(c.get("j_field", 0.0)),
        "block_size": c["block_size"],
        "seed": c["seed"],
        "lr": c["lr"],
        "task": c["task"],
        "ffn": c["ffn"],
        "metric": scale * _number(m, key, "metrics.json"),
        "best_metric": scale * _number(best, key, "metrics.json best") if best is not None else math.nan,
        "val_loss": _number(m, "val_loss", "metrics.json"),
        "j0_metric": scale * _number(m, f"j0_{key}", "metrics.json") if f"j0_{key}" in m else math.nan,
        "last_step": int(_number(m, "step", "metrics.json")),
        "max_steps": _budget(c, m),
        "stopped_early": bool(m.get("stopped_early")),
        "elapsed_s": _number(m, "elapsed_s", "metrics.json"),
        "by_depth": _check_counts(m.get("val_accuracy_by_depth"), "val_accuracy_by_depth"),
        "by_distance": _check_counts(m.get("val_accuracy_by_distance"), "val_accuracy_by_distance"),
        "evals": _check_evals(m.get("evals", []), key),
        "couplings": _couplings(d, c["block_size"]),
        "diverged": bool(m.get("diverged")) and not m.get("finished"),
    }


def read_run(d: Path, diverged: bool = False) -> dict[str, Any] | None:
    """The report's row of the run directory ``d``; ``None`` while it is unfinished (no ``metrics.json`` or not
    ``finished``): ``run``, ``mode``, ``j_field``, ``block_size``, ``seed``, ``lr``, ``task``, ``ffn``, ``metric``
    (last evaluation: perplexity, or accuracy in %), ``best_metric`` (the best checkpoint's, nan if not recorded),
    ``val_loss``, ``j0_metric`` (runs with couplings, else nan), ``last_step``, ``max_steps`` (the budget),
    ``stopped_early``, ``elapsed_s``, ``by_depth`` and ``by_distance`` (brackets: ``{group: [right, count]}``),
    ``evals``, ``couplings`` (``{key distance: mean learned value}`` or ``None``), ``diverged`` (whether training
    diverged: such a run's row, read only with ``diverged=True``, holds its last evaluation before the divergence).

    Raises:
        ValueError: a damaged run; the message says what is wrong.
    """
    if not (d / "metrics.json").is_file():
        return None
    try:
        m = load_json(d / "metrics.json")
        if not isinstance(m, dict):
            raise ValueError(f"metrics.json holds {type(m).__name__}, expected an object")
        if not (m.get("finished") or (diverged and m.get("diverged"))):
            return None
        if not (d / "config.json").is_file():
            raise FileNotFoundError("config.json is missing")
        c = load_json(d / "config.json").get("run")
        if not isinstance(c, dict):
            raise ValueError("config.json has no run settings")
        return _row(d, m, c)
    except KeyError as exc:
        what = exc.args[0] if exc.args else ""
        raise ValueError(what if " " in str(what) else f"a file lacks the key {what!r}") from exc
    except (OSError, ValueError) as exc:
        raise ValueError(str(exc)) from exc
    except (TypeError, IndexError, AttributeError) as exc:  # a file of the wrong shape
        raise ValueError(f"malformed run files ({type(exc).__name__}: {exc})") from exc


def _swept(root: Path, study: str) -> tuple[dict[tuple[str, int], tuple[set, set] | None], list[Damaged]]:
    """The rates and seeds swept per (attention, T) under ``ROOT/<study>/sweep`` (``None`` for an (attention, T)
    with a damaged sweep run), and the finished sweep runs without a finite final validation loss (damaged)."""
    found: dict[tuple[str, int], tuple[set, set]] = {}
    damaged, bad = [], set()
    for d in sorted((root / study / "sweep").glob("*_T*_s*")):
        m = RUN_NAME.match(d.name)
        if m is None:
            continue
        key = (m["mode"], int(m["T"]))
        try:
            lr = float(m["lr"])
            if run_state(d) == "finished":
                _number(load_json(d / "metrics.json"), "val_loss", "metrics.json")
        except (KeyError, ValueError, OSError) as exc:
            damaged.append(Damaged(d, f"sweep run: {exc.args[0] if isinstance(exc, KeyError) else exc}"))
            bad.add(key)
            continue
        found.setdefault(key, (set(), set()))
        found[key][0].add(lr)
        found[key][1].add(int(m["seed"]))
    return {k: None if k in bad else found.get(k) for k in {*found, *bad}}, damaged


def sweep_edges(root: str | Path, study: str) -> tuple[dict[tuple[str, int], bool | None], list[Damaged]]:
    """Per (attention, T) swept under ``ROOT/<study>/sweep``: whether the rate the sweep chose lies on an edge of the
    grid it swept (:func:`~hybrid_attention.apps.claims.runner.lr_at_edge` over the rates and seeds on disk; False
    while the sweep is unfinished; ``None`` with a damaged sweep run); and the damaged sweep runs."""
    found, damaged = _swept(Path(root), study)
    edges: dict[tuple[str, int], bool | None] = {}
    for (mode, T), got in found.items():
        if got is None:
            edges[mode, T] = None
            continue
        sweep = LRSweep(tuple(sorted(got[0])), T, tuple(sorted(got[1])))
        edges[mode, T] = lr_at_edge(Study(study, {}, (mode,), (T,), (), sweep), mode, T, root)
    return edges, damaged


def _edge(edges: dict[tuple[str, int], bool | None], attention: str, T: int) -> bool | None:
    """A run's flag: its own (attention, T) sweep, else the attention's one swept block size, else ``None``."""
    if (attention, T) in edges:
        return edges[attention, T]
    own = [t for a, t in edges if a == attention]
    return edges[attention, own[0]] if len(own) == 1 else None


def scan(root: str | Path, study: str, diverged: bool = False) -> tuple[list[dict[str, Any]], list[Damaged]]:
    """The rows of the finished runs of ``ROOT/<study>/runs`` (:func:`read_run`, with ``lr_at_edge``: whether the
    run's learning rate was chosen on an edge of its sweep's grid, :func:`sweep_edges`; ``None``: no sweep) and the
    damaged runs left out (sweep runs included); ``diverged``: also the runs whose training diverged, at their last
    evaluation (:func:`read_run`)."""
    edges, damaged = sweep_edges(root, study)
    rows = []
    for d in sorted((Path(root) / study / "runs").glob("*_T*_s*")):
        try:
            row = read_run(d, diverged)
        except ValueError as exc:
            damaged.append(Damaged(d, str(exc)))
            continue
        if row is not None:
            rows.append({**row, "lr_at_edge": _edge(edges, row["attention"], row["block_size"])})
    return rows, damaged


def collect(root: str | Path, study: str) -> list[dict[str, Any]]:
    """The rows of :func:`scan` (damaged runs left out, with a warning each)."""
    rows, damaged = scan(root, study)
    warn(damaged)
    return rows


def warn(damaged: list[Damaged]) -> None:
    """A warning per damaged run (on stderr from the command line)."""
    for d in damaged:
        logger.warning("damaged run %s left out of the report: %s", d.path, d.problem)


def all_rows(root: str | Path) -> tuple[dict[str, list[dict[str, Any]]], list[Damaged]]:
    """:func:`scan` of every study under ``root``: ``({study: rows} of the studies with finished runs, damaged)``,
    a warning per damaged run."""
    data, damaged = {}, []
    for s in sorted(p.parent.name for p in Path(root).glob("*/runs") if p.is_dir()):
        rows, bad = scan(root, s)
        damaged += bad
        if rows:
            data[s] = rows
    warn(damaged)
    return data, damaged


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
