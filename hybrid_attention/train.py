"""Training: the ``hybrid-attention train`` subcommand, the Python-callable :func:`train`, and :func:`make_sampler`.

A run directory ``DIR`` holds:

* ``config.json``: the resolved run and model configuration (written at the start);
* ``metrics.json``: final ``val_loss`` and ``val_perplexity`` (Shakespeare) or ``val_accuracy`` and
  ``val_string_accuracy`` (brackets), the per-step training loss, every evaluation, and ``finished``;
* ``checkpoint.pt``: model, optimiser, data-generator state, history and the corpus sha256, written atomically
  (temporary file, ``fsync``, then ``os.replace``) after every evaluation, so a killed run resumed with
  ``--resume`` loses at most one evaluation interval; it holds only tensors and plain containers and is loaded
  with ``torch.load(weights_only=True)``;
* ``couplings.json``: learned ``J`` per layer (``hj`` and ``j`` modes) and ``beta``;
* ``.lock`` while a process works in ``DIR`` (:func:`hybrid_attention.run_files.lock_directory`): a second
  ``train`` on the same ``DIR`` is refused.

``--resume`` continues the run in ``DIR`` with the settings of its ``config.json``: flags given with it must match
them, except ``--steps`` (extend a finished run; not below the steps already done), ``--data`` (the corpus may move,
its sha256 must match), ``--threads`` and ``--no-progress``. ``--sampler`` given again resets the sampler options
to the ``--sampler-option`` items given with it.

A run whose loss, gradients or parameters become non-finite stops (:class:`TrainingDiverged`): the last good
checkpoint stays as it was, and ``metrics.json`` records the divergence under ``diverged``.

With ``--sampler NAME`` (any registry name) the Boltzmann layers get their marginals from that sampler through
:mod:`hybrid_attention.bridge` (DQA samplers are built with ``DQASchedule(tau, trotter_steps)``; ``--shots`` reads per
call, a fresh seed per step); evaluation then uses the same sampler unless ``--eval-exact`` is given. Repeatable
``--sampler-option KEY=VALUE`` items go to the sampler's constructor (e.g. Gibbs ``burn_in``, ``thinning``,
``num_chains``); they are recorded in ``config.json``.

An existing non-empty ``DIR`` is never overwritten: pass ``--resume`` to continue it, or choose another ``DIR``.

Example (Python):
    >>> from hybrid_attention.train import TrainConfig, train   # doctest: +SKIP
    >>> metrics = train(TrainConfig(task="brackets", attention="hj", block_size=8, steps=200, out="runs/b8"))  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .attention import MODES
from .model import Transformer, TransformerConfig
from .run_files import atomic_write, is_empty, load_checkpoint, lock_directory, write_json

__all__ = ["TrainConfig", "TrainingDiverged", "train", "make_sampler", "parse_sampler_option", "add_arguments", "run", "TASKS",
           "DQA_SAMPLERS"]

logger = logging.getLogger(__name__)

TASKS = ("shakespeare", "brackets")
#: samplers that run a DQA circuit and take ``schedule=DQASchedule(tau, steps)``
DQA_SAMPLERS = ("statevector", "aer", "pennylane", "ibm")
EVAL_SEED = 1234
# config keys that may differ when resuming (everything else must match the checkpoint)
_RESUME_FREE = {"steps", "out", "resume", "progress", "threads", "data"}
#: checkpoint layout: 2 adds ``format`` and ``data_sha256`` (1, without them, still loads)
CHECKPOINT_FORMAT = 2


class TrainingDiverged(RuntimeError):
    """The loss, the gradients or the parameters became non-finite. ``step``: the step that failed (1-based);
    ``checkpoint_step``: the step of the checkpoint kept on disk (``None``: none written yet); ``out``: the run."""

    def __init__(self, step: int, reason: str, *, out: Path | None = None, checkpoint_step: int | None = None) -> None:
        self.step, self.reason, self.out, self.checkpoint_step = step, reason, out, checkpoint_step
        kept = (f"the last good checkpoint (step {checkpoint_step}) in {str(out)!r} is kept" if checkpoint_step is not None
                else f"no checkpoint was written yet in {str(out)!r}")
        super().__init__(f"training diverged at step {step} ({reason}); {kept}; lower --lr (or raise --warmup) and start "
                         "a new run")


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
@contextlib.contextmanager
def _claim(out: Path, resume: bool) -> Any:
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
                raise FileExistsError(f"output directory {str(out)!r} exists and is not empty; pass --resume to continue "
                                      "that run or choose another --out (runs are never overwritten)")
            yield out
    finally:
        for p in created:  # innermost first; rmdir only removes empty directories
            try:
                p.rmdir()
            except OSError:
                break


def _load_state(cfg: TrainConfig, out: Path) -> dict[str, Any]:
    """The checkpoint of the run in ``out`` (``--resume``), checked against ``cfg``."""
    ckpt = out / "checkpoint.pt"
    if not ckpt.is_file():
        what = "config.json but no checkpoint.pt (the run stopped before its first checkpoint)" if (out / "config.json").is_file() \
            else "no checkpoint.pt"
        raise FileNotFoundError(f"--resume: {str(out)!r} holds {what}: nothing to resume; remove it or choose another --out")
    state = load_checkpoint(ckpt, required=("model", "optimizer", "generator", "history", "step", "elapsed", "config"))
    # a setting added after the checkpoint was written (absent from its config) had its default then
    old = {**dataclasses.asdict(TrainConfig()), **state["config"]}
    diff = {k: (old.get(k), v) for k, v in dataclasses.asdict(cfg).items() if k not in _RESUME_FREE and old.get(k) != v}
    if diff:
        raise ValueError(f"--resume: the settings differ from the checkpoint in {str(out)!r}: "
                         + ", ".join(f"{k}: checkpoint {a!r}, now {b!r}" for k, (a, b) in diff.items()))
    if state["step"] > cfg.steps:
        raise ValueError(f"--resume: the run in {str(out)!r} has already done {state['step']} steps, more than --steps "
                         f"{cfg.steps}; pass --steps {state['step']} or more (or omit --steps to keep {old.get('steps')})")
    return state


def _check_state_data(state: dict[str, Any], task: Any, data: dict[str, Any], out: Path) -> None:
    """Refuse to resume on another corpus: its sha256 (format 2) or at least its vocabulary must match."""
    ckpt = out / "checkpoint.pt"
    old_sha = state.get("data_sha256")
    if old_sha is not None and data["sha256"] is not None and old_sha != data["sha256"]:
        raise ValueError(f"--resume: the corpus {data['path']!r} (sha256 {data['sha256']}) is not the one the checkpoint "
                         f"{str(ckpt)!r} was trained on (sha256 {old_sha}); pass that corpus with --data")
    if old_sha is None and data["sha256"] is not None:
        logger.warning("%s records no corpus sha256 (written by an earlier version): cannot check that %s is its corpus",
                       ckpt, data["path"])
    emb = state["model"].get("wte.weight")
    if emb is not None and emb.shape[0] != task.vocab_size:
        raise ValueError(f"--resume: the corpus {data['path']!r} has a vocabulary of {task.vocab_size} characters, the "
                         f"checkpoint {str(ckpt)!r} was trained on {emb.shape[0]}; pass its corpus with --data")


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
def _load_task(cfg: TrainConfig) -> tuple[Any, dict[str, Any]]:
    """The task and its data record ``{"path", "sha256"}`` (both ``None`` for the generated bracket task, whose
    generator settings are in the config)."""
    if cfg.task == "shakespeare":
        import hashlib

        from .tasks.shakespeare import CharDataset, resolve_data_path

        path = resolve_data_path(cfg.data)
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"corpus {str(path)!r} is not UTF-8 text ({exc})") from exc
        return CharDataset(text), {"path": str(path), "sha256": hashlib.sha256(raw).hexdigest()}
    from .tasks.brackets import BracketTask

    return BracketTask(cfg.block_size), {"path": None, "sha256": None}


def _build_sampler(cfg: TrainConfig) -> Any:
    """The training sampler (``None`` for exact marginals). Failures to set one up (IBM accounts and credentials,
    a service that refuses) become a ``ValueError`` naming the sampler, like any other bad setting."""
    if cfg.sampler == "exact":
        return None
    try:
        return make_sampler(cfg.sampler, shots=cfg.shots, tau=cfg.tau, trotter_steps=cfg.trotter_steps, seed=cfg.seed,
                            **cfg.sampler_options)
    except Exception as exc:
        ibm = any(c.__module__.startswith("qiskit_ibm_runtime") for c in type(exc).__mro__)
        if isinstance(exc, RuntimeError) or ibm:
            raise ValueError(f"cannot set up sampler {cfg.sampler!r}: {' '.join(str(exc).split())}") from exc
        raise


class _Run:
    """Mutable state of one run: model, optimiser, data generator, history; checkpointing and one step."""

    def __init__(self, cfg: TrainConfig, out: Path, task: Any, sampler: Any, state: dict | None,
                 data: dict[str, Any] | None = None) -> None:
        self.cfg, self.out, self.task, self.sampler = cfg, out, task, sampler
        self.data = data or {"path": None, "sha256": None}
        torch.manual_seed(cfg.seed)  # parameter init only; data uses its own generator
        self.model = Transformer(cfg.model_config(task.vocab_size))
        self.params = list(self.model.parameters())
        self.opt = torch.optim.AdamW(self.params, lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.99))
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.history: dict[str, Any] = {"train_loss": [], "evals": []}
        self.step, self.elapsed = 0, 0.0
        self.checkpoint_step: int | None = None  # the step of the checkpoint on disk
        if state is not None:
            try:
                self.model.load_state_dict(state["model"])
                self.opt.load_state_dict(state["optimizer"])
                self.gen.set_state(state["generator"])
            except (RuntimeError, ValueError, KeyError, TypeError) as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise ValueError(f"--resume: checkpoint {str(out / 'checkpoint.pt')!r} does not fit this model ({first})") from exc
            self.history, self.step, self.elapsed = state["history"], state["step"], state["elapsed"]
            self.checkpoint_step = self.step
            logger.info("resuming %s at step %d", out, self.step)
        self.n_params = sum(p.numel() for p in self.params)
        self.xv, self.yv = _eval_set(task, cfg)

    def diverged(self, step: int, reason: str) -> TrainingDiverged:
        return TrainingDiverged(step, reason, out=self.out, checkpoint_step=self.checkpoint_step)

    def finite_parameters(self) -> bool:
        with torch.no_grad():  # one reduction on the hot path; the exact check only when it overflows
            total = float(torch.stack([p.sum() for p in self.params]).sum())
        return math.isfinite(total) or all(bool(torch.isfinite(p).all()) for p in self.params)

    def train_step(self) -> float:
        """One optimiser step; :class:`TrainingDiverged` (parameters untouched where the check precedes the update)
        for a non-finite loss, gradient norm or attention input, or non-finite parameters after the update."""
        cfg, model = self.cfg, self.model
        for g in self.opt.param_groups:
            g["lr"] = _lr_at(self.step, cfg)
        x, y = self.task.get_batch("train", cfg.batch_size, cfg.block_size, generator=self.gen)
        if self.sampler is not None:  # a fresh, reproducible sampler seed per step
            model.set_sampler(self.sampler, cfg.shots, int(np.random.SeedSequence([cfg.seed, self.step]).generate_state(1)[0]))
        try:
            _, loss = model(x, y)
        except ValueError as exc:
            # settings and data were validated: a non-finite attention input (scores, J, beta) comes from the weights
            if "finite" not in str(exc):
                raise
            raise self.diverged(self.step + 1, f"non-finite attention input: {exc}") from exc
        value = loss.item()
        if not math.isfinite(value):
            raise self.diverged(self.step + 1, f"training loss {value}")
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = float(torch.nn.utils.clip_grad_norm_(self.params, cfg.grad_clip))
        if not math.isfinite(norm):
            raise self.diverged(self.step + 1, f"gradient norm {norm}")
        self.opt.step()
        if not self.finite_parameters():
            raise self.diverged(self.step + 1, "non-finite parameters after the optimiser step")
        self.step += 1
        self.history["train_loss"].append(round(value, 5))
        return value

    def checkpoint(self, final: bool) -> dict[str, Any]:
        """Evaluate, then write checkpoint.pt, couplings.json and (last) metrics.json, each atomically."""
        cfg, model = self.cfg, self.model
        if cfg.eval_exact:
            model.set_sampler(None)
        ev = evaluate(model, self.xv, self.yv, cfg.task)
        if not math.isfinite(ev["val_loss"]):
            raise self.diverged(self.step, f"validation loss {ev['val_loss']} after the step")
        ev.update(step=self.step, elapsed_s=round(self.elapsed, 3))
        if not self.history["evals"] or self.history["evals"][-1]["step"] != self.step:
            self.history["evals"].append(ev)
        metrics = {**{k: v for k, v in ev.items() if k.startswith("val_")}, "step": self.step, "steps": cfg.steps,
                   "finished": final, "elapsed_s": round(self.elapsed, 3), "n_params": self.n_params,
                   "tokens_per_s": round(cfg.batch_size * cfg.block_size * self.step / max(self.elapsed, 1e-9), 1), **self.history}
        blob = {"format": CHECKPOINT_FORMAT, "model": model.state_dict(), "optimizer": self.opt.state_dict(),
                "generator": self.gen.get_state(), "history": self.history, "step": self.step, "elapsed": self.elapsed,
                "config": dataclasses.asdict(cfg), "data_sha256": self.data["sha256"]}
        atomic_write(self.out / "checkpoint.pt", lambda f: torch.save(blob, f))
        self.checkpoint_step = self.step
        write_json(self.out / "couplings.json", _couplings(model))
        write_json(self.out / "metrics.json", metrics)  # last: a finished metrics.json implies everything else is there
        return metrics

    def record_divergence(self, exc: TrainingDiverged) -> None:
        """Add ``diverged`` to metrics.json (the checkpoint is not touched)."""
        path = self.out / "metrics.json"
        try:
            metrics = json.loads(path.read_text()) if path.is_file() else {}
        except (OSError, ValueError):
            metrics = {}
        if not metrics:
            metrics = {"step": 0, "steps": self.cfg.steps, "n_params": self.n_params, "train_loss": [], "evals": []}
        done = metrics.get("step", 0)
        metrics.update(finished=False, diverged={"step": exc.step, "reason": exc.reason, "checkpoint_step": exc.checkpoint_step,
                                                 "train_loss_since_checkpoint": self.history["train_loss"][done:]})
        write_json(path, metrics)


def train(config: TrainConfig | None = None, **overrides: Any) -> dict[str, Any]:
    """Train one model and return its ``metrics.json`` content.

    Args:
        config: a :class:`TrainConfig` (or ``None`` for defaults); ``overrides`` replace its fields.

    Raises:
        ValueError / TypeError: bad settings (raised before any data is loaded), settings or a corpus that differ
            from the checkpoint being resumed, a damaged checkpoint, or a sampler that cannot be set up.
        FileExistsError: ``out`` is non-empty and ``resume`` is off.
        FileNotFoundError: the Shakespeare corpus cannot be found (message says how to supply it), or ``resume`` is
            on and ``out`` holds no checkpoint.
        hybrid_attention.run_files.DirectoryLocked: another process is working in ``out``.
        TrainingDiverged: the loss, gradients or parameters became non-finite (the last checkpoint is kept).
    """
    cfg = dataclasses.replace(config or TrainConfig(), **overrides)
    cfg.validate()
    out = Path(cfg.out)
    with _claim(out, cfg.resume):  # bad settings, a refused resume and missing data leave no directory behind
        state = _load_state(cfg, out) if cfg.resume else None
        sampler = _build_sampler(cfg)  # before the data: bad sampler option values fail fast
        try:
            task, data = _load_task(cfg)
            if state is not None:
                _check_state_data(state, task, data, out)
            torch.set_num_threads(cfg.threads)
            return _loop(_Run(cfg, out, task, sampler, state, data))
        finally:
            if sampler is not None and hasattr(sampler, "close"):
                sampler.close()


def _loop(run: _Run) -> dict[str, Any]:
    from tqdm.auto import tqdm

    cfg = run.cfg
    if run.checkpoint_step == cfg.steps:  # resumed a run that already reached --steps
        done = run.out / "metrics.json"
        metrics = json.loads(done.read_text()) if done.is_file() else {}
        if metrics.get("finished") and metrics.get("step") == cfg.steps:
            logger.info("%s already finished at step %d: nothing to do", run.out, cfg.steps)
            return metrics
    write_json(run.out / "config.json", {"run": dataclasses.asdict(cfg), "model": run.model.config.to_dict(),
                                         "n_params": run.n_params, "torch": torch.__version__, "data_path": run.data["path"],
                                         "data_sha256": run.data["sha256"]})
    bar = tqdm(total=cfg.steps, initial=run.step, disable=not cfg.progress, desc=f"{cfg.task} {cfg.attention} T={cfg.block_size}",
               dynamic_ncols=True, mininterval=1.0)
    metrics = None
    run.model.train()
    t0 = time.perf_counter()
    try:
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
    except TrainingDiverged as exc:
        bar.close()
        run.record_divergence(exc)
        raise
    bar.close()
    return metrics if metrics is not None else run.checkpoint(True)  # None: resumed a run stopped exactly at --steps


# ---------------------------------------------------------------------- CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``train`` flags. Their argparse default is ``None`` (not given): :func:`config_from_args` fills in the
    :class:`TrainConfig` default, or with ``--resume`` the run's own setting; the help shows the default."""
    d = TrainConfig()

    def a(*flags: str, default: Any = None, help: str = "", **kw: Any) -> None:
        if default is not None:
            help = f"{help} (default: {default})".strip()
        parser.add_argument(*flags, default=None, help=help, **kw)

    a("--task", choices=TASKS, default=d.task, help="shakespeare (next character) or brackets (point at the match)")
    a("--attention", choices=MODES, default=d.attention, help="attention mode (SPEC section 3)")
    a("--block-size", type=int, default=d.block_size, metavar="T", help="sequence length T (spins per query)")
    a("--steps", type=int, default=d.steps, metavar="N", help="optimiser steps (with --resume: the new total, to extend a run)")
    a("--seed", type=int, default=d.seed, metavar="S")
    parser.add_argument("--out", required=True, metavar="DIR", help="run directory (must be new or empty unless --resume)")
    a("--resume", action="store_true", help="continue the run in DIR from its last checkpoint, with the settings of "
      "DIR/config.json (flags given as well must match them, except --steps, --data, --threads, --no-progress)")
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
    a("--grad-clip", type=float, default=d.grad_clip, help="gradient-norm clipping threshold")
    a("--data", metavar="PATH", help="Tiny Shakespeare text (default: $HYBRID_ATTENTION_DATA, else the user cache)")
    a("--sampler", default=d.sampler, help="'exact' (enumeration) or a registry name: statevector, aer, gibbs, ...")
    a("--shots", type=int, default=d.shots, help="reads per sampler call (non-exact samplers)")
    a("--tau", type=float, default=d.tau, help="DQA anneal time (DQA samplers)")
    a("--trotter-steps", type=int, default=d.trotter_steps, help="DQA Trotter steps (DQA samplers)")
    a("--sampler-option", dest="sampler_options", action="append", type=_option_arg, metavar="KEY=VALUE",
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


def _saved_settings(out: Path) -> dict[str, Any]:
    """The ``run`` settings of ``out/config.json`` (``--resume``); errors name the directory."""
    path = out / "config.json"
    if not out.is_dir():
        raise FileNotFoundError(f"--resume: no run directory {str(out)!r} (start a new run without --resume)")
    if not path.is_file():
        raise FileNotFoundError(f"--resume: {str(out)!r} holds no config.json: not a run directory of hybrid-attention train")
    try:
        with open(path) as f:
            saved = json.load(f)["run"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"--resume: {str(path)!r} is damaged ({type(exc).__name__}: {exc})") from exc
    if not isinstance(saved, dict):
        raise ValueError(f"--resume: {str(path)!r} is damaged (no 'run' settings)")
    return saved


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The run's :class:`TrainConfig`: flags given on the command line, the rest from the :class:`TrainConfig`
    defaults, or with ``--resume`` from ``DIR/config.json`` (a flag that differs from it is refused unless it is one
    that may change on resume, such as ``--steps``)."""
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    given = {k: v for k, v in vars(args).items() if k in names and v is not None}
    items = given.pop("sampler_options", None)
    if items is not None or "sampler" in given:  # --sampler given again comes with its own options (or none)
        opts: dict[str, Any] = {}
        for key, value in items or []:
            if key in opts and opts[key] != value:
                raise ValueError(f"--sampler-option {key} given twice with different values: {opts[key]!r} and {value!r}")
            opts[key] = value
        given["sampler_options"] = opts
    if not given.get("resume"):
        return TrainConfig(**given)
    saved = _saved_settings(Path(given["out"]))
    # a setting added after the run was written (absent from its config) had its default then
    base = {**dataclasses.asdict(TrainConfig()), **{k: v for k, v in saved.items() if k in names and k not in ("out", "resume", "progress")}}
    diff = {k: (base[k], v) for k, v in given.items() if k not in _RESUME_FREE and base[k] != v}
    if diff:
        raise ValueError(f"--resume: the settings differ from the checkpoint in {given['out']!r}: "
                         + ", ".join(f"{k}: checkpoint {a!r}, now {b!r}" for k, (a, b) in diff.items())
                         + " (omit a flag to keep the run's setting)")
    return TrainConfig(**{**base, **given})


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    metrics = train(cfg)
    keys = [k for k in ("val_loss", "val_perplexity", "val_accuracy", "val_string_accuracy") if k in metrics]
    print(f"{cfg.out}: step {metrics['step']}, " + ", ".join(f"{k} {metrics[k]:.4f}" for k in keys))
    return 0
