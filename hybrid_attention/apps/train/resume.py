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

from .config import RESUME_FREE, TrainConfig, default_readout, upgrade_saved

__all__ = ["claim_directory", "load_resume_state", "check_resume_data", "saved_settings"]

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


def load_resume_state(cfg: TrainConfig, out: Path) -> tuple[dict[str, Any], TrainConfig]:
    """The checkpoint of the run in ``out`` (``--resume``), checked against ``cfg``, and ``cfg`` with the sampler
    settings it leaves unset taken from the run (:meth:`TrainConfig.resolved_from`), not from today's defaults."""
    ckpt = out / "checkpoint.pt"
    if not ckpt.is_file():
        what = (
            "config.json but no checkpoint.pt (the run stopped before its first checkpoint)"
            if (out / "config.json").is_file()
            else "no checkpoint.pt"
        )
        raise FileNotFoundError(
            f"--resume: {str(out)!r} holds {what}: nothing to resume; remove it or choose another --out"
        )
    state = load_checkpoint(ckpt, required=_STATE_KEYS)
    # a setting added after the checkpoint was written (absent from its config) had its default then
    old = {**dataclasses.asdict(TrainConfig()), **upgrade_saved(state["config"])}
    if old.get("readout") is None:  # written before --readout: the readout it had
        old["readout"] = default_readout(old["sampler"])
    cfg = cfg.resolved_from(old)
    diff = {k: (old.get(k), v) for k, v in dataclasses.asdict(cfg).items() if k not in RESUME_FREE and old.get(k) != v}
    if diff:
        raise ValueError(
            f"--resume: the settings differ from the checkpoint in {str(out)!r}: "
            + ", ".join(f"{k}: checkpoint {a!r}, now {b!r}" for k, (a, b) in diff.items())
        )
    if state["step"] > cfg.max_steps:
        raise ValueError(
            f"--resume: the run in {str(out)!r} has already done {state['step']} steps, more than --max-steps "
            f"{cfg.max_steps}; pass --max-steps {state['step']} or more (or omit it to keep {old.get('max_steps')})"
        )
    return state, cfg


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
            saved = upgrade_saved(json.load(f)["run"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"--resume: {str(path)!r} is damaged ({type(exc).__name__}: {exc})") from exc
    if not isinstance(saved, dict):
        raise ValueError(f"--resume: {str(path)!r} is damaged (no 'run' settings)")
    return saved
