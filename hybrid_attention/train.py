"""Training: the ``hybrid-attention train`` subcommand, the Python-callable :func:`train`, and :func:`make_sampler`.

A run directory ``DIR`` holds:

* ``config.json``: the resolved run and model configuration (written at the start);
* ``metrics.json``: final ``val_loss`` and ``val_perplexity`` (Shakespeare) or ``val_accuracy`` and
  ``val_string_accuracy`` (brackets), the per-step training loss, every evaluation, and ``finished``;
* ``checkpoint.pt``: model, optimiser, data-generator state and history, written atomically (temporary file
  then ``os.replace``) after every evaluation, so a killed run resumed with ``--resume`` loses at most one
  evaluation interval;
* ``couplings.json``: learned ``J`` per layer (``hj`` and ``j`` modes) and ``beta``.

With ``--sampler NAME`` (any registry name) the Boltzmann layers get their marginals from that sampler through
:mod:`hybrid_attention.bridge` (DQA samplers are built with ``DQASchedule(tau, trotter_steps)``; ``--shots`` reads per
call, a fresh seed per step); evaluation then uses the same sampler unless ``--eval-exact`` is given. Repeatable
``--sampler-option KEY=VALUE`` items go to the sampler's constructor (e.g. Gibbs ``burn_in``, ``thinning``,
``num_chains``); they are recorded in ``config.json`` and a ``--resume`` must repeat them.

An existing non-empty ``DIR`` is never overwritten: pass ``--resume`` to continue it, or choose another ``DIR``.

Example (Python):
    >>> from hybrid_attention.train import TrainConfig, train   # doctest: +SKIP
    >>> metrics = train(TrainConfig(task="brackets", attention="hj", block_size=8, steps=200, out="runs/b8"))  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .attention import MODES
from .model import Transformer, TransformerConfig

__all__ = ["TrainConfig", "train", "make_sampler", "parse_sampler_option", "add_arguments", "run", "TASKS", "DQA_SAMPLERS"]

logger = logging.getLogger(__name__)

TASKS = ("shakespeare", "brackets")
#: samplers that run a DQA circuit and take ``schedule=DQASchedule(tau, steps)``
DQA_SAMPLERS = ("statevector", "aer", "pennylane", "ibm")
EVAL_SEED = 1234
# config keys that may differ when resuming (everything else must match the checkpoint)
_RESUME_FREE = {"steps", "out", "resume", "progress", "threads", "data"}


@dataclass
class TrainConfig:
    """One training run (CLI flags map one-to-one; defaults are the ablation's)."""

    task: str = "shakespeare"
    attention: str = "hj"
    block_size: int = 8
    steps: int = 1000
    seed: int = 0
    out: str | None = None
    ffn: bool = True
    n_layer: int = 1
    n_head: int = 1
    n_embd: int = 64
    dropout: float = 0.0
    beta: float = 1.0
    learn_beta: bool = False
    lr: float = 3e-3
    weight_decay: float = 0.0
    batch_size: int = 64
    eval_interval: int = 100
    eval_size: int = 2048
    warmup: int = 50
    grad_clip: float = 1.0
    data: str | None = None
    sampler: str = "exact"
    shots: int = 256
    tau: float = 1.0
    trotter_steps: int = 20
    sampler_options: dict[str, Any] = field(default_factory=dict)
    eval_exact: bool = False
    threads: int = 1
    resume: bool = False
    progress: bool = True

    def validate(self) -> None:
        """Check every value before any data is loaded or a model is built (``ValueError``/``TypeError``)."""
        if self.task not in TASKS:
            raise ValueError(f"unknown task {self.task!r}; expected one of {TASKS}")
        if self.attention not in MODES:
            raise ValueError(f"unknown attention mode {self.attention!r}; expected one of {MODES}")
        for name in ("block_size", "steps", "n_layer", "n_head", "n_embd", "batch_size", "eval_interval", "eval_size", "shots",
                     "trotter_steps", "threads"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        for name in ("seed", "warmup"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {v!r}")
        for name in ("lr", "tau", "beta", "grad_clip"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
        if not (0.0 <= self.weight_decay < 1.0):
            raise ValueError(f"weight_decay must be in [0, 1), got {self.weight_decay!r}")
        if self.task == "brackets" and self.block_size % 2:
            raise ValueError(f"the bracket task needs an even block size (well-nested strings), got {self.block_size}")
        if self.sampler != "exact" and self.attention == "softmax":
            raise ValueError("--sampler applies to Boltzmann modes (hj, h, j), not to softmax attention")
        if self.eval_exact and self.attention in ("hj", "j"):
            from .exact import MAX_SPINS

            if self.block_size > MAX_SPINS:
                raise ValueError(f"--eval-exact needs block_size <= {MAX_SPINS} (exact enumeration), got {self.block_size}")
        if self.sampler != "exact":
            from .backends.registry import SAMPLERS

            if self.sampler not in SAMPLERS:
                raise ValueError(f"unknown sampler {self.sampler!r}; available: {sorted(SAMPLERS)}")
        if not isinstance(self.sampler_options, dict) or not all(isinstance(k, str) for k in self.sampler_options):
            raise TypeError(f"sampler_options must be a dict with string keys, got {self.sampler_options!r}")
        if self.sampler_options:
            if self.sampler == "exact":
                raise ValueError(f"--sampler-option needs a sampler other than 'exact' (--sampler NAME), got options "
                                 f"{sorted(self.sampler_options)}")
            _check_constructor_options(self.sampler, self.sampler_options)
        if self.out is None:
            raise ValueError("an output directory is required (--out DIR)")
        self.model_config()  # validates the model side (mode, block size against the exact limit, ...)

    def model_config(self, vocab_size: int | None = None) -> TransformerConfig:
        vocab = vocab_size if vocab_size is not None else (2 if self.task == "brackets" else 65)
        return TransformerConfig(vocab_size=vocab, block_size=self.block_size, n_layer=self.n_layer, n_head=self.n_head,
                                 n_embd=self.n_embd, ffn=self.ffn, dropout=self.dropout, attention=self.attention, beta=self.beta,
                                 learn_beta=self.learn_beta, head="position" if self.task == "brackets" else "lm",
                                 exact=self.sampler == "exact")


def make_sampler(name: str, *, shots: int | None = None, tau: float = 1.0, trotter_steps: int = 20, seed: Any = None, **kw: Any) -> Any:
    """A sampler from the registry by name, configured for training.

    DQA samplers (:data:`DQA_SAMPLERS`) get ``schedule=DQASchedule(tau=tau, steps=trotter_steps)``; classical
    samplers ignore ``tau`` and ``trotter_steps``. ``shots`` and ``seed`` are per-call options (the training loop
    passes ``num_reads=shots`` and a fresh per-step seed); they are accepted here so callers can keep them together,
    and ``shots`` is validated. Extra keyword arguments go to the sampler's constructor.
    """
    if shots is not None and (isinstance(shots, bool) or not isinstance(shots, int) or shots < 1):
        raise ValueError(f"shots must be a positive integer, got {shots!r}")
    from .backends import get_sampler

    kwargs = dict(kw)
    if name in DQA_SAMPLERS and "schedule" not in kwargs:
        from .circuits import DQASchedule

        kwargs["schedule"] = DQASchedule(tau=float(tau), steps=int(trotter_steps))
    return get_sampler(name, **kwargs)


def _constructor_options(cls: type) -> set[str] | None:
    """Keyword arguments a sampler class's constructor accepts (following ``**kw`` up the class hierarchy), or
    ``None`` when that cannot be told (a constructor taking ``**kw`` that does not hand them to a base class)."""
    import inspect

    names: set[str] = set()
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        if klass is object:
            return names
        params = inspect.signature(vars(klass)["__init__"]).parameters.values()
        names |= {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self"}
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            return names
        if klass.__module__ == "abc" or klass.__name__ == "Sampler":
            return None
    return names


def _check_constructor_options(name: str, kwargs: dict[str, Any]) -> None:
    """``TypeError`` naming the accepted options when ``kwargs`` holds one the sampler's constructor does not take."""
    if not kwargs:
        return
    from .backends.registry import _load

    accepted = _constructor_options(_load(name))
    unknown = sorted(set(kwargs) - accepted) if accepted is not None else []
    if unknown:
        raise TypeError(f"sampler {name!r} does not accept option(s) {unknown}; accepted: {sorted(accepted)}")


def parse_sampler_option(item: str) -> tuple[str, Any]:
    """``"KEY=VALUE"`` to ``(key, value)``; the value becomes an int, float, bool (true/false), None (none) or
    stays a string. ``ValueError`` naming the expected form when ``item`` is malformed.

    Example:
        >>> parse_sampler_option("burn_in=32"), parse_sampler_option("ramp=0.25"), parse_sampler_option("method=tap")
        (('burn_in', 32), ('ramp', 0.25), ('method', 'tap'))
    """
    key, sep, raw = item.partition("=")
    key, raw = key.strip(), raw.strip()
    if not sep or not key.isidentifier() or not raw:
        raise ValueError(f"a sampler option must look like KEY=VALUE (e.g. burn_in=32), got {item!r}")
    low = raw.lower()
    if low in ("true", "false"):
        return key, low == "true"
    if low == "none":
        return key, None
    for conv in (int, float):
        try:
            return key, conv(raw)
        except ValueError:
            pass
    return key, raw


# ---------------------------------------------------------------------- files
def _atomic_write(path: Path, write: Any) -> None:
    """Write through a temporary file in the same directory, then ``os.replace`` (atomic on POSIX)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _write_json(path: Path, obj: Any) -> None:
    _atomic_write(path, lambda f: f.write(json.dumps(obj, indent=1).encode()))


def _prepare_out(cfg: TrainConfig) -> tuple[Path, dict | None]:
    out = Path(cfg.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {str(out)!r} exists and is not a directory")
    ckpt = out / "checkpoint.pt"
    nonempty = out.is_dir() and any(out.iterdir())
    if nonempty and not cfg.resume:
        raise FileExistsError(f"output directory {str(out)!r} exists and is not empty; pass --resume to continue that run "
                              "or choose another --out (runs are never overwritten)")
    state = None
    if cfg.resume and ckpt.is_file():
        state = torch.load(ckpt, map_location="cpu", weights_only=False)
        # a setting added after the checkpoint was written (absent from its config) had its default then
        old = {**dataclasses.asdict(TrainConfig()), **state["config"]}
        diff = {k: (old.get(k), v) for k, v in dataclasses.asdict(cfg).items() if k not in _RESUME_FREE and old.get(k) != v}
        if diff:
            raise ValueError(f"--resume: the settings differ from the checkpoint in {str(out)!r}: "
                             + ", ".join(f"{k}: checkpoint {a!r}, now {b!r}" for k, (a, b) in diff.items()))
    return out, state


# ---------------------------------------------------------------------- evaluation
def _eval_set(task: Any, cfg: TrainConfig) -> tuple[torch.Tensor, torch.Tensor]:
    if cfg.task == "brackets":
        return task.val
    g = torch.Generator().manual_seed(EVAL_SEED)  # the same windows for every run
    return task.get_batch("val", cfg.eval_size, cfg.block_size, generator=g)


@torch.no_grad()
def evaluate(model: Transformer, x: torch.Tensor, y: torch.Tensor, task_name: str, chunk: int = 512) -> dict[str, float]:
    """Validation metrics on a fixed set: ``val_loss`` and ``val_perplexity`` or ``val_accuracy``/``val_string_accuracy``."""
    from .tasks.brackets import accuracy

    model.eval()
    total, count, logits_all = 0.0, 0, []
    for s in range(0, len(x), chunk):
        logits, _ = model(x[s : s + chunk])
        yy = y[s : s + chunk]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), yy.reshape(-1), ignore_index=-100, reduction="sum")
        total += float(loss)
        count += int((yy != -100).sum())
        if task_name == "brackets":
            logits_all.append(logits)
    model.train()
    out = {"val_loss": total / count}
    if task_name == "brackets":
        out["val_accuracy"], out["val_string_accuracy"] = accuracy(torch.cat(logits_all), y)
    else:
        out["val_perplexity"] = math.exp(out["val_loss"])
    return out


def _lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warmup, then cosine decay to 10 % of ``lr``."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    frac = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))


def _couplings(model: Transformer) -> dict[str, Any]:
    layers = model.attention_layers
    return {"J": [None if J is None else J.tolist() for J in model.couplings()],
            "beta": [a.beta.detach().tolist() for a in layers], "attention": model.config.attention}


# ---------------------------------------------------------------------- the loop
def _load_task(cfg: TrainConfig) -> Any:
    if cfg.task == "shakespeare":
        from .tasks.shakespeare import load_shakespeare

        return load_shakespeare(cfg.data)
    from .tasks.brackets import BracketTask

    return BracketTask(cfg.block_size)


class _Run:
    """Mutable state of one run: model, optimiser, data generator, history; checkpointing and one step."""

    def __init__(self, cfg: TrainConfig, out: Path, task: Any, sampler: Any, state: dict | None) -> None:
        self.cfg, self.out, self.task, self.sampler = cfg, out, task, sampler
        torch.manual_seed(cfg.seed)  # parameter init only; data uses its own generator
        self.model = Transformer(cfg.model_config(task.vocab_size))
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.99))
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.history: dict[str, Any] = {"train_loss": [], "evals": []}
        self.step, self.elapsed = 0, 0.0
        if state is not None:
            self.model.load_state_dict(state["model"])
            self.opt.load_state_dict(state["optimizer"])
            self.gen.set_state(state["generator"])
            self.history, self.step, self.elapsed = state["history"], state["step"], state["elapsed"]
            logger.info("resuming %s at step %d", out, self.step)
        self.n_params = sum(p.numel() for p in self.model.parameters())
        self.xv, self.yv = _eval_set(task, cfg)

    def train_step(self) -> float:
        cfg, model = self.cfg, self.model
        for g in self.opt.param_groups:
            g["lr"] = _lr_at(self.step, cfg)
        x, y = self.task.get_batch("train", cfg.batch_size, cfg.block_size, generator=self.gen)
        if self.sampler is not None:  # a fresh, reproducible sampler seed per step
            model.set_sampler(self.sampler, cfg.shots, int(np.random.SeedSequence([cfg.seed, self.step]).generate_state(1)[0]))
        _, loss = model(x, y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        self.opt.step()
        self.step += 1
        value = loss.item()
        self.history["train_loss"].append(round(value, 5))
        return value

    def checkpoint(self, final: bool) -> dict[str, Any]:
        """Evaluate, then write checkpoint.pt, couplings.json and (last) metrics.json, each atomically."""
        cfg, model = self.cfg, self.model
        if cfg.eval_exact:
            model.set_sampler(None)
        ev = evaluate(model, self.xv, self.yv, cfg.task)
        ev.update(step=self.step, elapsed_s=round(self.elapsed, 3))
        if not self.history["evals"] or self.history["evals"][-1]["step"] != self.step:
            self.history["evals"].append(ev)
        metrics = {**{k: v for k, v in ev.items() if k.startswith("val_")}, "step": self.step, "steps": cfg.steps,
                   "finished": final, "elapsed_s": round(self.elapsed, 3), "n_params": self.n_params,
                   "tokens_per_s": round(cfg.batch_size * cfg.block_size * self.step / max(self.elapsed, 1e-9), 1), **self.history}
        blob = {"model": model.state_dict(), "optimizer": self.opt.state_dict(), "generator": self.gen.get_state(),
                "history": self.history, "step": self.step, "elapsed": self.elapsed, "config": dataclasses.asdict(cfg)}
        _atomic_write(self.out / "checkpoint.pt", lambda f: torch.save(blob, f))
        _write_json(self.out / "couplings.json", _couplings(model))
        _write_json(self.out / "metrics.json", metrics)  # last: a finished metrics.json implies everything else is there
        return metrics


def train(config: TrainConfig | None = None, **overrides: Any) -> dict[str, Any]:
    """Train one model and return its ``metrics.json`` content.

    Args:
        config: a :class:`TrainConfig` (or ``None`` for defaults); ``overrides`` replace its fields.

    Raises:
        ValueError / TypeError: bad settings (raised before any data is loaded).
        FileExistsError: ``out`` is non-empty and ``resume`` is off.
        FileNotFoundError: the Shakespeare corpus cannot be found (message says how to supply it).
    """
    cfg = dataclasses.replace(config or TrainConfig(), **overrides)
    cfg.validate()
    out, state = _prepare_out(cfg)
    sampler = None
    if cfg.sampler != "exact":  # before the data: bad sampler option values fail fast
        sampler = make_sampler(cfg.sampler, shots=cfg.shots, tau=cfg.tau, trotter_steps=cfg.trotter_steps, seed=cfg.seed,
                               **cfg.sampler_options)
    try:
        task = _load_task(cfg)
    except BaseException:
        if sampler is not None and hasattr(sampler, "close"):
            sampler.close()
        raise
    torch.set_num_threads(cfg.threads)
    out.mkdir(parents=True, exist_ok=True)  # only now: bad settings and missing data leave no directory behind
    try:
        return _loop(_Run(cfg, out, task, sampler, state))
    finally:
        if sampler is not None and hasattr(sampler, "close"):
            sampler.close()


def _loop(run: _Run) -> dict[str, Any]:
    from tqdm.auto import tqdm

    cfg = run.cfg
    _write_json(run.out / "config.json", {"run": dataclasses.asdict(cfg), "model": run.model.config.to_dict(),
                                          "n_params": run.n_params, "torch": torch.__version__})
    bar = tqdm(total=cfg.steps, initial=run.step, disable=not cfg.progress, desc=f"{cfg.task} {cfg.attention} T={cfg.block_size}",
               dynamic_ncols=True, mininterval=1.0)
    metrics = None
    run.model.train()
    t0 = time.perf_counter()
    while run.step < cfg.steps:
        loss = run.train_step()
        now = time.perf_counter()
        run.elapsed += now - t0  # evaluation time is not training time
        bar.update(1)
        bar.set_postfix(loss=f"{loss:.4f}", tok_s=f"{cfg.batch_size * cfg.block_size * run.step / max(run.elapsed, 1e-9):.0f}",
                        refresh=False)
        if run.step % cfg.eval_interval == 0 or run.step == cfg.steps:
            metrics = run.checkpoint(run.step == cfg.steps)
            bar.set_postfix(loss=f"{loss:.4f}", val=f"{metrics['val_loss']:.4f}", refresh=True)
        t0 = time.perf_counter()
    bar.close()
    return metrics if metrics is not None else run.checkpoint(True)  # None: resumed an already finished run


# ---------------------------------------------------------------------- CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = TrainConfig()
    a = parser.add_argument
    a("--task", choices=TASKS, default=d.task, help="shakespeare (next character) or brackets (point at the match)")
    a("--attention", choices=MODES, default=d.attention, help="attention mode (SPEC section 3)")
    a("--block-size", type=int, default=d.block_size, metavar="T", help="sequence length T (spins per query)")
    a("--steps", type=int, default=d.steps, metavar="N", help="optimiser steps")
    a("--seed", type=int, default=d.seed, metavar="S")
    a("--out", required=True, metavar="DIR", help="run directory (must be new or empty unless --resume)")
    a("--resume", action="store_true", help="continue the run in DIR from its last checkpoint")
    a("--no-ffn", dest="ffn", action="store_false", help="drop the MLP sub-block")
    a("--n-layer", type=int, default=d.n_layer)
    a("--n-head", type=int, default=d.n_head)
    a("--n-embd", type=int, default=d.n_embd)
    a("--dropout", type=float, default=d.dropout)
    a("--beta", type=float, default=d.beta, help="(initial) inverse temperature of the Ising attention")
    a("--learn-beta", action="store_true", help="learn beta per head")
    a("--lr", type=float, default=d.lr, help="peak learning rate (warmup, then cosine decay to 10 %%)")
    a("--weight-decay", type=float, default=d.weight_decay)
    a("--batch-size", type=int, default=d.batch_size)
    a("--eval-interval", type=int, default=d.eval_interval, help="steps between evaluations and checkpoints")
    a("--eval-size", type=int, default=d.eval_size, help="validation windows (shakespeare; brackets use the held-out set)")
    a("--warmup", type=int, default=d.warmup)
    a("--data", default=None, metavar="PATH", help="Tiny Shakespeare text (else $HYBRID_ATTENTION_DATA, else the user cache)")
    a("--sampler", default=d.sampler, help="'exact' (enumeration, default) or a registry name: statevector, aer, gibbs, ...")
    a("--shots", type=int, default=d.shots, help="reads per sampler call (non-exact samplers)")
    a("--tau", type=float, default=d.tau, help="DQA anneal time (DQA samplers)")
    a("--trotter-steps", type=int, default=d.trotter_steps, help="DQA Trotter steps (DQA samplers)")
    a("--sampler-option", dest="sampler_options", action="append", type=_option_arg, default=None, metavar="KEY=VALUE",
      help="a sampler constructor option, repeatable (e.g. --sampler-option burn_in=32 --sampler-option num_chains=8); "
           "values are read as int, float, true/false, none or string")
    a("--eval-exact", action="store_true", help="evaluate with exact marginals even when training with a sampler")
    a("--threads", type=int, default=d.threads, help="torch CPU threads")
    a("--no-progress", dest="progress", action="store_false", help="no progress bar")


def _option_arg(item: str) -> tuple[str, Any]:
    try:
        return parse_sampler_option(item)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    kw = {k: v for k, v in vars(args).items() if k in names}
    items = kw.pop("sampler_options", None) or []
    opts: dict[str, Any] = {}
    for key, value in items:
        if key in opts and opts[key] != value:
            raise ValueError(f"--sampler-option {key} given twice with different values: {opts[key]!r} and {value!r}")
        opts[key] = value
    return TrainConfig(**kw, sampler_options=opts)


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    try:
        metrics = train(cfg)
    except FileExistsError as exc:
        print(f"hybrid-attention train: error: {exc}", file=sys.stderr)
        return 2
    keys = [k for k in ("val_loss", "val_perplexity", "val_accuracy", "val_string_accuracy") if k in metrics]
    print(f"{cfg.out}: step {metrics['step']}, " + ", ".join(f"{k} {metrics[k]:.4f}" for k in keys))
    return 0
