"""Run directories of ``hybrid-attention train``: claiming one for a run, and the checks behind ``--resume``.

A new run needs a new or empty directory; ``--resume`` needs one holding a checkpoint whose settings and corpus match
the run's (:data:`hybrid_attention.apps.train.config.RESUME_FREE` lists the settings that may change). The
generic file handling (lock, atomic writes, safe checkpoint loading) is :mod:`hybrid_attention.apps.run_files`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hybrid_attention.apps.run_files import is_empty, load_checkpoint, lock_directory

from ..hardware import with_default_ledger
from .config import (
    READ_FORMATS,
    RECORDED_SINCE_FORMAT_1,
    RESUME_FREE,
    TrainConfig,
    complete_saved,
    upgrade_saved,
)

__all__ = [
    "claim_directory",
    "load_resume_state",
    "refuse_changes",
    "check_resume_data",
    "saved_settings",
    "check_version",
]

logger = logging.getLogger(__name__)

_STATE_KEYS = ("model", "optimizer", "generator", "history", "step", "elapsed", "config")


@contextlib.contextmanager
def claim_directory(out: Path, resume: bool) -> Iterator[Path]:
    """Lock ``out`` for the run (creating it unless resuming) and check it may be used; a directory created here
    is removed again if the run stops before writing anything (bad data, a refused resume)."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {str(out)!r} exists and is not a directory")
    if resume and not out.is_dir():
        raise FileNotFoundError(f"--resume: no run directory {str(out)!r} (start a new run without --resume)")
    created = [p for p in (out, *out.parents) if not p.exists()]
    out.mkdir(parents=True, exist_ok=True)
    try:
        with lock_directory(out):
            if not resume and not is_empty(out):
                raise FileExistsError(
                    f"output directory {str(out)!r} exists and is not empty; pass --resume to continue "
                    "that run or choose another --out (runs are never overwritten)"
                )
            yield out
    finally:
        for p in created:  # innermost first; rmdir only removes empty directories
            try:
                p.rmdir()
            except OSError:
                break


def load_resume_state(cfg: TrainConfig, out: Path) -> tuple[dict[str, Any] | None, TrainConfig]:
    """The checkpoint of the run in ``out`` (``--resume``), checked against ``cfg``, and ``cfg`` with the sampler
    settings it leaves unset taken from the run (:meth:`TrainConfig.resolved_from`), not from today's defaults.

    A run on the IBM route that stopped before its first checkpoint (``config.json`` and a job ledger, no
    ``checkpoint.pt``) resumes from step 0 with its own settings: the state is ``None`` and training reproduces the
    PUBs of the interrupted run, whose jobs are read or collected from the ledger instead of being submitted again.
    """
    ckpt = out / "checkpoint.pt"
    if not ckpt.is_file():
        ledger = run_ledger(out)
        if ledger is not None:
            old = _saved_config(out)
            cfg = _checked(cfg.resolved_from(old), old, out).pinned_options()
            logger.warning(
                "--resume: %s stopped before its first checkpoint: the run starts again from step 0 with its settings, "
                "and the jobs its ledger %s holds are read or collected from it, not submitted again",
                out,
                ledger,
            )
            return None, cfg
        what = (
            "config.json but no checkpoint.pt (the run stopped before its first checkpoint) and no job ledger"
            if (out / "config.json").is_file()
            else "no checkpoint.pt"
        )
        raise FileNotFoundError(
            f"--resume: {str(out)!r} holds {what}: nothing to resume; remove it or choose another --out (a run on "
            "the IBM route keeps a job ledger there, and --resume then restarts it without paying twice)"
        )
    state = load_checkpoint(ckpt, required=_STATE_KEYS)
    if not isinstance(state["config"], dict):
        raise ValueError(f"--resume: checkpoint {str(ckpt)!r} is damaged (no settings under 'config')")
    check_version(upgrade_saved(state["config"]), state.get("format", 1), f"checkpoint {str(ckpt)!r}")
    # a setting added after the checkpoint was written (absent from its config) had its default then
    old = complete_saved(state["config"])
    # checked as given, then run with the sampler options it recorded (not today's training defaults)
    cfg = _checked(cfg.resolved_from(old), old, out).pinned_options()
    if state["step"] > cfg.max_steps:
        raise ValueError(
            f"--resume: the run in {str(out)!r} has already done {state['step']} steps, more than --max-steps "
            f"{cfg.max_steps}; pass --max-steps {state['step']} or more (or omit it to keep {old.get('max_steps')})"
        )
    return state, cfg


def _checked(cfg: TrainConfig, old: dict[str, Any], out: Path) -> TrainConfig:
    """``cfg``, or ``ValueError`` naming every setting (outside ``RESUME_FREE``) that differs from the run's
    (:func:`refuse_changes`)."""
    refuse_changes(old, dataclasses.asdict(cfg), out)
    return cfg


def _saved_config(out: Path) -> dict[str, Any]:
    """The run's settings from ``config.json``, completed with what it had for settings added since."""
    return complete_saved(saved_settings(out))


def run_ledger(out: Path) -> Path | None:
    """The job ledger of the run in ``out`` when it has ``config.json`` and its ledger holds a line, else ``None``."""
    if not (out / "config.json").is_file():
        return None
    try:
        saved = _saved_config(out)
    except (OSError, ValueError):
        return None
    opts = with_default_ledger(saved["sampler"], dict(saved.get("sampler_options") or {}), out)
    path = opts.get("ledger") or (opts.get("ibm_options") or {}).get("ledger")
    if path is None or not Path(path).is_file() or Path(path).stat().st_size == 0:
        return None
    return Path(path)


def refuse_changes(saved: dict[str, Any], given: dict[str, Any], out: Path | str, *, hint: str = "") -> None:
    """``ValueError`` naming every setting of ``given`` (except :data:`RESUME_FREE`) that differs from the run's
    ``saved`` one, with both values; sampler options count as the same when :meth:`TrainConfig.means_options` says
    so, and when they differ each differing option is named too (compared resolved, like with like)."""
    diff = []
    for k, v in given.items():
        if k in RESUME_FREE or saved.get(k) == v:
            continue
        if k == "sampler_options":
            mine = TrainConfig(sampler=given.get("sampler", saved.get("sampler", "exact")), sampler_options=v)
            if mine.means_options(saved.get(k) or {}):
                continue
            diff.append(f"{k}: checkpoint {saved.get(k)!r}, now {v!r} ({_option_changes(saved.get(k) or {}, mine)})")
        else:
            diff.append(f"{k}: checkpoint {saved.get(k)!r}, now {v!r}")
    if diff:
        raise ValueError(
            f"--resume: the settings differ from the checkpoint in {str(out)!r}: " + ", ".join(diff) + hint
        )


def _option_changes(saved: dict[str, Any], mine: TrainConfig) -> str:
    now = mine.resolved_sampler_options()
    shown = lambda d, k: repr(d[k]) if k in d else "unset"  # noqa: E731
    return "; ".join(
        f"option {k}: checkpoint {shown(saved, k)}, now {shown(now, k)}"
        for k in sorted(set(saved) | set(now))
        if k not in saved or k not in now or saved[k] != now[k]
    )


def check_resume_data(state: dict[str, Any], task: Any, data: dict[str, Any], out: Path) -> None:
    """Refuse to resume on another corpus: its sha256 (checkpoint format 2) or at least its vocabulary must match."""
    ckpt = out / "checkpoint.pt"
    old_sha = state.get("data_sha256")
    if old_sha is not None and data["sha256"] is not None and old_sha != data["sha256"]:
        raise ValueError(
            f"--resume: the corpus {data['path']!r} (sha256 {data['sha256']}) is not the one the checkpoint "
            f"{str(ckpt)!r} was trained on (sha256 {old_sha}); pass that corpus with --data"
        )
    if old_sha is None and data["sha256"] is not None:
        logger.warning(
            "%s records no corpus sha256 (written by an earlier version): cannot check that %s is its corpus",
            ckpt,
            data["path"],
        )
    emb = state["model"].get("wte.weight")
    if emb is not None and emb.shape[0] != task.vocab_size:
        raise ValueError(
            f"--resume: the corpus {data['path']!r} has a vocabulary of {task.vocab_size} characters, the "
            f"checkpoint {str(ckpt)!r} was trained on {emb.shape[0]}; pass its corpus with --data"
        )


def saved_settings(out: Path) -> dict[str, Any]:
    """The ``run`` settings of ``out/config.json`` (``--resume``); errors name the directory."""
    path = out / "config.json"
    if not out.is_dir():
        raise FileNotFoundError(f"--resume: no run directory {str(out)!r} (start a new run without --resume)")
    if not path.is_file():
        raise FileNotFoundError(
            f"--resume: {str(out)!r} holds no config.json: not a run directory of hybrid-attention train"
        )
    try:
        with open(path) as f:
            blob = json.load(f)
        saved = upgrade_saved(blob["run"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"--resume: {str(path)!r} is damaged ({type(exc).__name__}: {exc})") from exc
    check_version(saved, blob.get("format"), repr(str(path)))
    return saved


def check_version(saved: dict[str, Any], fmt: Any, where: str) -> None:
    """Refuse (``ValueError``) a run written by another version: a format outside :data:`READ_FORMATS`, settings
    this version does not know, or settings every version records (:data:`RECORDED_SINCE_FORMAT_1`) missing; the
    message names the format found and the ones expected, and the unknown and missing settings. ``fmt`` ``None``:
    none recorded (``config.json`` of runs written before it recorded one)."""
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(k for k in saved if k not in known)
    missing = [k for k in RECORDED_SINCE_FORMAT_1 if k not in saved]
    bad_format = fmt is not None and (isinstance(fmt, bool) or fmt not in READ_FORMATS)
    if not (unknown or missing or bad_format):
        return
    found = "no format recorded" if fmt is None else f"format {fmt!r}"
    problems = [f"unknown settings {unknown}"] if unknown else []
    problems += [f"missing settings {missing}"] if missing else []
    raise ValueError(
        f"--resume: {where} was written by another version of hybrid-attention ({found}; this version reads "
        f"format {' or '.join(map(str, READ_FORMATS))})"
        + (": " + "; ".join(problems) if problems else "")
        + "; resume it with the version that wrote it, or start a new run in another --out"
    )
