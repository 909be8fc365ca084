"""Validation inputs of a trained run's task, with its model (read by :func:`hybrid_attention.apps.runs.load_run`).

Used by the ``model`` ensemble of ``hybrid-attention fidelity``, by ``hybrid-attention mixing --checkpoint`` and by
the notebooks: the Ising problems a trained attention layer actually solves
(:func:`hybrid_attention.apps.fidelity.problems.problems_from_model`).
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from hybrid_attention.apps.runs import load_run
from hybrid_attention.model import Transformer
from hybrid_attention.tasks.brackets import BracketTask
from hybrid_attention.tasks.shakespeare import load_shakespeare

__all__ = ["model_inputs"]

logger = logging.getLogger(__name__)


def model_inputs(checkpoint: str | Path, count: int, *, seed: int = 0) -> tuple[Transformer, torch.Tensor]:
    """The model of ``checkpoint`` (a run directory or its ``checkpoint.pt``, built for exact marginals: the
    fidelity study compares samplers against the exact layer) and ``count`` validation inputs
    ``(count, block_size)`` of its task.

    Brackets: held-out strings; Shakespeare: validation windows (needs the corpus, see
    :func:`hybrid_attention.tasks.shakespeare.load_shakespeare`). ``seed`` picks which ones.

    Raises:
        FileNotFoundError, ValueError: as :func:`~hybrid_attention.apps.runs.load_run`.
    """
    run = load_run(checkpoint, exact=True)
    model, cfg = run.model, run.config
    g = torch.Generator().manual_seed(int(seed))
    if cfg.task == "brackets":
        x, _ = BracketTask(cfg.block_size, val_size=max(count, 64)).get_batch("val", count, generator=g)
    else:
        x, _ = load_shakespeare(cfg.data).get_batch("val", count, cfg.block_size, generator=g)
    return model, x
