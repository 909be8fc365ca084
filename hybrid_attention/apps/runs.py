"""One loader for a training run directory (``hybrid-attention train --out DIR``): :func:`load_run`.

Every command and study that reads a trained model back (fidelity's ``model`` ensemble, ``mixing --checkpoint``,
the demo, the experiments' engine validation, burn-in and Gibbs-accuracy studies) goes through it, so a run's
settings are read one way: ``config.json`` (``run`` and ``model``) when the directory has one, else the checkpoint's
own ``config``, older setting names read under today's (:func:`~hybrid_attention.apps.train.upgrade_saved`).

Example:
    >>> from hybrid_attention.apps.runs import load_run
    >>> run = load_run("runs/hj")  # doctest: +SKIP
    >>> run.model(x)  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from hybrid_attention.apps.run_files import load_checkpoint
from hybrid_attention.apps.train import TrainConfig, load_task, upgrade_saved
from hybrid_attention.model import Transformer, TransformerConfig

__all__ = ["Run", "load_run"]


@dataclasses.dataclass(frozen=True)
class Run:
    """A trained run read back from its directory.

    Attributes:
        path: the run directory.
        config: its :class:`~hybrid_attention.apps.train.TrainConfig` (``out`` is ``path``).
        model: the :class:`~hybrid_attention.model.Transformer` with the saved weights, in eval mode.
        metrics: ``metrics.json`` (``None`` while the run has not written one).
        saved: ``config.json`` as saved (``None`` for a directory that has only its checkpoint).
    """

    path: Path
    config: TrainConfig
    model: Transformer
    metrics: dict[str, Any] | None
    saved: dict[str, Any] | None

    def task(self) -> Any:
        """The run's task (its data set: brackets, Shakespeare, ...), as training built it."""
        return load_task(self.config)[0]


def _json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None


def load_run(path: str | Path, *, data: str | None = None, exact: bool | None = None) -> Run:
    """Read the run in ``path`` (a run directory or its ``checkpoint.pt``).

    Args:
        path: the directory ``hybrid-attention train --out`` wrote, or its ``checkpoint.pt``.
        data: the corpus path to use instead of the saved one (Shakespeare runs whose corpus moved).
        exact: ``True`` builds the model for exact marginals whatever the run trained with (``TransformerConfig.exact``,
            which checks the block size against the enumeration limit); ``None`` keeps the saved setting.

    Raises:
        FileNotFoundError: no ``checkpoint.pt`` there.
        ValueError: the checkpoint is truncated or corrupt (:func:`~hybrid_attention.apps.run_files.load_checkpoint`),
            or its settings do not describe a model this version can rebuild.
    """
    ck = Path(path)
    if ck.is_dir():
        ck = ck / "checkpoint.pt"
    if not ck.exists():
        raise FileNotFoundError(f"no checkpoint at {ck} (expected a directory written by hybrid-attention train --out)")
    run = ck.parent
    blob = load_checkpoint(ck)
    saved = _json(run / "config.json")
    try:
        settings = upgrade_saved(saved["run"] if saved is not None else blob["config"])
        known = set(TrainConfig.__dataclass_fields__)
        overrides = {"out": str(run)}
        if data is not None or (saved is not None and not settings.get("data") and saved.get("data_path")):
            overrides["data"] = data if data is not None else saved["data_path"]
        cfg = TrainConfig(**{**{k: v for k, v in settings.items() if k in known}, **overrides})
        if saved is not None and "model" in saved:
            mcfg = TransformerConfig(**saved["model"])
        else:
            mcfg = cfg.model_config(blob["model"]["wte.weight"].shape[0])
        if exact is not None:
            mcfg = dataclasses.replace(mcfg, exact=exact)
        model = Transformer(mcfg)
        model.load_state_dict(blob["model"])
    except (KeyError, TypeError, AttributeError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(
            f"checkpoint {str(ck)!r} does not describe a model this version can rebuild ({first})"
        ) from exc
    return Run(path=run, config=cfg, model=model.eval(), metrics=_json(run / "metrics.json"), saved=saved)
