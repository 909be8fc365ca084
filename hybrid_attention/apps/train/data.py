"""The data side of a training run: the task with its corpus record, the fixed validation set, and evaluation.

Public so that scripts evaluating a trained model (``experiments/``) use the same validation windows as training.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import torch
from tqdm.auto import tqdm

from hybrid_attention.model import Transformer
from hybrid_attention.sampling import Sampling
from hybrid_attention.tasks.bracket_variants import BracketVariantTask, accuracy_by
from hybrid_attention.tasks.brackets import BracketTask, accuracy
from hybrid_attention.tasks.mqar import MQARTask
from hybrid_attention.tasks.runs import RunsTask
from hybrid_attention.tasks.shakespeare import CharDataset, resolve_data_path

from .config import ACCURACY_TASKS, RUNS_LENGTH, RUNS_LETTERS, TrainConfig

__all__ = ["EVAL_SEED", "load_task", "eval_set", "evaluate", "fitting_chunk"]

#: seed of the Shakespeare validation windows: the same windows for every run
EVAL_SEED = 1234


def load_task(cfg: TrainConfig) -> tuple[Any, dict[str, Any]]:
    """The task of ``cfg`` and its data record ``{"path", "sha256"}`` (both ``None`` for the generated tasks,
    brackets, runs and mqar, whose generator settings are in the config).

    Raises:
        FileNotFoundError: the Shakespeare corpus cannot be found (the message says how to supply it).
        ValueError: the corpus is not UTF-8 text.
    """
    if cfg.task == "shakespeare":
        path = resolve_data_path(cfg.data)
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"corpus {str(path)!r} is not UTF-8 text ({exc})") from exc
        return CharDataset(text), {"path": str(path), "sha256": hashlib.sha256(raw).hexdigest()}
    if cfg.task == "runs":
        task = RunsTask(cfg.block_size, letters=RUNS_LETTERS, run=RUNS_LENGTH, decoys=cfg.runs_decoys())
        return task, {"path": None, "sha256": None}
    if cfg.task == "mqar":
        pairs, vocab = cfg.mqar_settings()
        return MQARTask(cfg.block_size, pairs=pairs, vocab_size=vocab), {"path": None, "sha256": None}
    variant = cfg.bracket_variant()
    if variant.is_classic:
        return BracketTask(cfg.block_size), {"path": None, "sha256": None}
    return BracketVariantTask(cfg.block_size, **variant.__dict__), {"path": None, "sha256": None}


def eval_set(task: Any, cfg: TrainConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The fixed validation inputs and targets ``(x, y)``, each ``(N, block_size)``: the held-out set of a generated
    task (brackets, runs, mqar), or ``cfg.eval_size`` Shakespeare windows drawn with :data:`EVAL_SEED`."""
    if cfg.task in ACCURACY_TASKS:
        return task.val
    g = torch.Generator().manual_seed(EVAL_SEED)  # the same windows for every run
    return task.get_batch("val", cfg.eval_size, cfg.block_size, generator=g)


#: validation windows per forward pass of :func:`evaluate`
EVAL_CHUNK = 512


def fitting_chunk(model: Transformer, T: int, chunk: int) -> int:
    """The largest number of windows, at most ``chunk``, that one forward pass of ``model`` at length ``T`` may take
    within the memory budget: a banded layer's transfer-matrix engine holds about ``windows x heads x T^2/2 x 2**W``
    window states (:func:`hybrid_attention.banded.estimate_bytes`); other layers leave ``chunk`` as it is."""
    from hybrid_attention import banded, checks

    out = chunk
    for module in model.modules():
        W, H = getattr(module, "band", 0), getattr(module, "n_head", 1)
        if not W or getattr(module, "J_raw", None) is None:
            continue
        per_window = banded.estimate_bytes(H, T, W, T, 4)
        out = min(out, max(1, int(checks.MEMORY_BUDGET // per_window)))
    return out


@torch.no_grad()
def evaluate(
    model: Transformer,
    x: torch.Tensor,
    y: torch.Tensor,
    task_name: str,
    chunk: int = EVAL_CHUNK,
    depth: torch.Tensor | None = None,
    sampling: Sampling | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Validation metrics on a fixed set ``x, y (N, T)``: ``val_loss`` and ``val_perplexity`` or
    ``val_accuracy``/``val_string_accuracy`` (accuracy tasks: per labelled position, and whole sequences). For
    brackets with ``depth (N, T)`` (the variants' nesting depths) also ``val_accuracy_by_distance`` and
    ``val_accuracy_by_depth``: ``{str(value): [right, count]}``.
    ``sampling``: how the model samples its attention (``None``: exact marginals). ``progress``: a progress bar over
    the validation windows (on stderr; a sampled evaluation can take minutes)."""
    model.eval()
    chunk = fitting_chunk(model, x.shape[-1], chunk)
    total, count, logits_all = 0.0, 0, []
    bar = tqdm(total=len(x), disable=not progress, desc="evaluating", unit="window", leave=False, dynamic_ncols=True)
    for s in range(0, len(x), chunk):
        logits, _ = model(x[s : s + chunk], sampling=sampling)
        yy = y[s : s + chunk]
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), yy.reshape(-1), ignore_index=-100, reduction="sum"
        )
        total += float(loss)
        count += int((yy != -100).sum())
        if task_name in ACCURACY_TASKS:
            logits_all.append(logits)
        bar.update(len(yy))
    bar.close()
    model.train()
    out = {"val_loss": total / count}
    if task_name in ACCURACY_TASKS:
        logits = torch.cat(logits_all)
        out["val_accuracy"], out["val_string_accuracy"] = accuracy(logits, y)
        if depth is not None:
            for name, key in (("distance", None), ("depth", depth)):
                out[f"val_accuracy_by_{name}"] = {str(k): list(v) for k, v in accuracy_by(logits, y, key).items()}
    else:
        out["val_perplexity"] = math.exp(out["val_loss"])
    return out
