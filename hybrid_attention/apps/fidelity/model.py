"""Load a trained model from a ``hybrid-attention train --out DIR`` directory, with validation inputs of its task.

Used by the ``model`` ensemble of ``hybrid-attention fidelity`` and by the notebooks: the Ising problems a
trained attention layer actually solves (:func:`hybrid_attention.apps.fidelity.problems.problems_from_model`).
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from hybrid_attention.apps.run_files import load_checkpoint
from hybrid_attention.apps.train import TrainConfig, upgrade_saved
from hybrid_attention.model import Transformer
from hybrid_attention.tasks.brackets import BracketTask
from hybrid_attention.tasks.shakespeare import load_shakespeare

__all__ = ["load_model", "model_inputs"]

logger = logging.getLogger(__name__)


def load_model(checkpoint: str | Path) -> tuple[Transformer, TrainConfig]:
    """Rebuild the model saved in ``checkpoint`` (a run directory or its ``checkpoint.pt``).

    Returns:
        ``(model, train_config)``: a :class:`hybrid_attention.model.Transformer` in eval mode with the saved
        weights, and the run's :class:`hybrid_attention.apps.train.TrainConfig`.

    Raises:
        FileNotFoundError: no ``checkpoint.pt`` there.
        ValueError: the checkpoint is truncated, corrupt, holds objects other than tensors and plain containers
            (it is loaded with ``weights_only=True``), or does not fit the model its configuration describes.
    """
    path = Path(checkpoint)
    if path.is_dir():
        path = path / "checkpoint.pt"
    if not path.exists():
        raise FileNotFoundError(
            f"no checkpoint at {path} (expected a directory written by hybrid-attention train --out)"
        )
    blob = load_checkpoint(path)
    known = set(TrainConfig.__dataclass_fields__)
    try:
        cfg = TrainConfig(**{k: v for k, v in upgrade_saved(blob["config"]).items() if k in known})
        vocab = blob["model"]["wte.weight"].shape[0]
        mcfg = cfg.model_config(vocab)
        mcfg.exact = True  # the fidelity study compares samplers against the exact layer
        model = Transformer(mcfg)
        model.load_state_dict(blob["model"])
    except (KeyError, TypeError, AttributeError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(
            f"checkpoint {str(path)!r} does not describe a model this version can rebuild ({first})"
        ) from exc
    model.eval()
    return model, cfg


def model_inputs(checkpoint: str | Path, count: int, *, seed: int = 0) -> tuple[Transformer, torch.Tensor]:
    """The model of ``checkpoint`` and ``count`` validation inputs ``(count, block_size)`` of its task.

    Brackets: held-out strings; Shakespeare: validation windows (needs the corpus, see
    :func:`hybrid_attention.tasks.shakespeare.load_shakespeare`). ``seed`` picks which ones.
    """
    model, cfg = load_model(checkpoint)
    g = torch.Generator().manual_seed(int(seed))
    if cfg.task == "brackets":
        x, _ = BracketTask(cfg.block_size, val_size=max(count, 64)).get_batch("val", count, generator=g)
    else:
        x, _ = load_shakespeare(cfg.data).get_batch("val", count, cfg.block_size, generator=g)
    return model, x
