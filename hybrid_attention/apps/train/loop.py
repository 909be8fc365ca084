"""The training loop: :func:`train` (a :class:`~hybrid_attention.apps.train.config.TrainConfig` -> its metrics).

Owns one run's mutable state (model, optimiser, data generator, history), the learning-rate schedule, the optimiser
step with its divergence checks (:class:`TrainingDiverged`), evaluation at every ``eval_interval`` and the files of
the run directory (``checkpoint.pt``, ``couplings.json``, ``metrics.json``, ``config.json``; see
:mod:`hybrid_attention.apps.train`). The sampler of a non-exact run comes from the registry
(:func:`hybrid_attention.backends.registry.make_sampler`), and :func:`build_sampling` turns the run's settings into the
one :class:`~hybrid_attention.sampling.Sampling` value that every step passes to the model (``model(x, y,
sampling=...)``, with the step's own seed).

Example:
    >>> from hybrid_attention.apps.train import TrainConfig, train   # doctest: +SKIP
    >>> metrics = train(TrainConfig(task="brackets", attention="hj", block_size=8, max_steps=200, out="runs/b8"))  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from hybrid_attention.apps.run_files import LOCK_NAME, atomic_write, write_json
from hybrid_attention.attention import COUPLED_MODES
from hybrid_attention.backends.registry import is_dqa, make_sampler
from hybrid_attention.model import Transformer
from hybrid_attention.sampling import PersistentChains, Sampling

from ..hardware import check_budget, reaches_ibm, with_default_ledger, with_session_default
from .config import CHECKPOINT_FORMAT, TrainConfig
from .cost import ProbeTiming, check_sampler_calls, probe_passes, probe_seconds, projection, run_seconds, step_work
from .data import eval_set, evaluate, load_task
from .resume import check_resume_data, claim_directory, load_resume_state, run_ledger

__all__ = [
    "projected_seconds",
    "TrainingDiverged",
    "TrainingInterrupted",
    "train",
    "build_sampler",
    "build_sampling",
    "plateaued",
    "CHECKPOINT_FORMAT",
    "PLATEAU_REL_TOL",
]

logger = logging.getLogger(__name__)
#: the run's work and projected time, said before the first step (``hybrid-attention train`` shows it)
cost_logger = logging.getLogger("hybrid_attention.apps.train.cost")


class TrainingDiverged(RuntimeError):
    """The loss, the gradients or the parameters became non-finite. ``step``: the step that failed (1-based);
    ``checkpoint_step``: the step of the checkpoint kept on disk (``None``: none written yet); ``out``: the run."""

    def __init__(self, step: int, reason: str, *, out: Path | None = None, checkpoint_step: int | None = None) -> None:
        self.step, self.reason, self.out, self.checkpoint_step = step, reason, out, checkpoint_step
        kept = (
            f"the last good checkpoint (step {checkpoint_step}) in {str(out)!r} is kept"
            if checkpoint_step is not None
            else f"no checkpoint was written yet in {str(out)!r}"
        )
        super().__init__(
            f"training diverged at step {step} ({reason}); {kept}; lower --lr (or raise --warmup) and start a new run"
        )


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C (``KeyboardInterrupt``) stopped a run; still a ``KeyboardInterrupt`` for callers that stop on it.
    ``out``: the run; ``checkpoint_step``: the step of the checkpoint kept on disk (``None``: none written; a new
    run then removes the ``config.json`` it wrote, so that the same command starts it afresh); ``max_steps``;
    ``left``: the files still in ``out`` when no checkpoint was written (e.g. an IBM job ledger)."""

    def __init__(self, out: Path, checkpoint_step: int | None, max_steps: int, left: tuple[str, ...] = ()) -> None:
        self.out, self.checkpoint_step, self.max_steps, self.left = out, checkpoint_step, max_steps, left
        if checkpoint_step is not None:
            what = f"the checkpoint {str(out / 'checkpoint.pt')!r} (step {checkpoint_step} of {max_steps}) is kept"
        else:
            what = f"no checkpoint was written in {str(out)!r} yet: nothing was saved"
        super().__init__(f"training interrupted; {what}")


#: early stopping: an evaluation improves on the best so far when its loss is below ``best * (1 - PLATEAU_REL_TOL)``
PLATEAU_REL_TOL = 1e-3


def plateaued(val_losses: list[float], patience: int) -> bool:
    """Whether the last ``patience`` evaluations brought no improvement (a drop below ``best * (1 -``
    :data:`PLATEAU_REL_TOL` ``)``) of the validation loss. ``patience = 0``: never.

    Example:
        >>> plateaued([1.0, 0.9, 0.8999, 0.9], 2), plateaued([1.0, 0.9, 0.8], 2)
        (True, False)
    """
    if patience <= 0 or not val_losses:
        return False
    best, since = val_losses[0], 0
    for v in val_losses[1:]:
        if v < best * (1 - PLATEAU_REL_TOL):
            best, since = v, 0
        else:
            since += 1
    return since >= patience


def _lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warmup, then cosine decay to 10 % of ``lr``."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    frac = (step - cfg.warmup) / max(1, cfg.max_steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))


def _couplings(model: Transformer) -> dict[str, Any]:
    """``couplings.json``: learned ``J`` per layer (``(n_head, T, T)`` lists, ``None`` without couplings) and ``beta``;
    for attention ``mta`` also each layer's convolution kernel (``mta_kernel``, ``(n_head, c_q, c_k)`` lists)."""
    layers = model.attention_layers
    out = {
        "J": [None if J is None else J.tolist() for J in model.couplings()],
        "beta": [a.beta.detach().tolist() for a in layers],
        "attention": model.config.attention,
    }
    if model.config.attention == "mta":
        out["mta_kernel"] = [a.mta_kernel.detach().tolist() for a in layers]
    return out


def build_sampler(cfg: TrainConfig) -> Any:
    """The training sampler (``None`` for exact marginals). Failures to set one up (IBM accounts and credentials,
    a service that refuses) become a ``ValueError`` naming the sampler, like any other bad setting."""
    if cfg.sampler == "exact":
        return None
    options = cfg.resolved_sampler_options()
    if cfg.backend is not None:
        options["backend"] = cfg.backend
    # the IBM route records its jobs in the run's directory: --resume never submits a PUB twice
    options = with_default_ledger(cfg.sampler, options, cfg.out)
    options = with_session_default(cfg.sampler, options)  # training's jobs are iterative: one session
    # the anneal settings reach DQA samplers only: others may take a constructor option of the same name
    # (qemcmc's trotter_steps: the proposal's Trotter steps)
    anneal = {"tau": cfg.tau, "trotter_steps": cfg.trotter_steps} if is_dqa(cfg.sampler) else {}
    try:
        return make_sampler(cfg.sampler, **anneal, **options)
    except Exception as exc:
        ibm = any(c.__module__.startswith("qiskit_ibm_runtime") for c in type(exc).__mro__)
        if isinstance(exc, RuntimeError) or ibm:
            raise ValueError(f"cannot set up sampler {cfg.sampler!r}: {' '.join(str(exc).split())}") from exc
        raise


def build_sampling(cfg: TrainConfig) -> Sampling | None:
    """How the run samples: ``None`` for exact marginals, else the :class:`~hybrid_attention.sampling.Sampling`
    value of its sampler (:func:`build_sampler`), ``shots`` reads per problem, readout, estimator and persistent
    chains (seeded by the run's seed). With readout ``shots`` a sampler that could give its exact output trains on
    ``cfg.shots`` reads per call instead. The sampler is closed again when the value cannot be built."""
    sampler = build_sampler(cfg)
    if sampler is None:
        return None
    readout = cfg.resolved_readout()
    C = cfg.resolved_persistent_chains()
    chains = PersistentChains(C, seed=cfg.seed) if C else None
    try:
        return Sampling(
            sampler,
            num_reads=cfg.resolved_shots(),
            readout=readout,
            estimator=cfg.resolved_estimator(),
            chains=chains,
        )
    except (TypeError, ValueError) as exc:  # TrainConfig.validate checks the class; this is the instance
        sampler.close()
        raise ValueError(f"--sampler {cfg.sampler!r}: {exc}") from exc


class _Run:
    """Mutable state of one run: model, optimiser, data generator, history; checkpointing and one step."""

    def __init__(
        self,
        cfg: TrainConfig,
        out: Path,
        task: Any,
        sampling: Sampling | None,
        state: dict | None,
        data: dict[str, Any] | None = None,
    ) -> None:
        self.cfg, self.out, self.task, self.sampling = cfg, out, task, sampling
        self.data = data or {"path": None, "sha256": None}
        torch.manual_seed(cfg.seed)  # parameter init only; data uses its own generator
        self.model = Transformer(cfg.model_config(task.vocab_size))
        self.params = list(self.model.parameters())
        self.opt = torch.optim.AdamW(self.params, lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.99))
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.history: dict[str, Any] = {"train_loss": [], "evals": []}
        self.step, self.elapsed = 0, 0.0
        self.checkpoint_step: int | None = None  # the step of the checkpoint on disk
        self.chains = None if sampling is None else sampling.chains  # one key per attention layer
        if state is not None:
            try:
                self.model.load_state_dict(state["model"])
                self.opt.load_state_dict(state["optimizer"])
                self.gen.set_state(state["generator"])
                if self.chains is not None:
                    self.chains.load_state_dict(state["persistent_chains"])
            except (RuntimeError, ValueError, KeyError, TypeError) as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise ValueError(
                    f"--resume: checkpoint {str(out / 'checkpoint.pt')!r} does not fit this model ({first})"
                ) from exc
            self.history, self.step, self.elapsed = state["history"], state["step"], state["elapsed"]
            self.checkpoint_step = self.step
            logger.info("resuming %s at step %d", out, self.step)
        self.n_params = sum(p.numel() for p in self.params)
        self.xv, self.yv = eval_set(task, cfg)
        self.val_depth = getattr(task, "val_depth", None)  # bracket variants: accuracy by depth and distance

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
        try:
            _, loss = model(x, y, sampling=self.step_sampling(self.step))
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

    def step_sampling(self, step: int) -> Sampling | None:
        """The value training step ``step`` (0-based) samples with: the run's, with a fresh, reproducible seed."""
        if self.sampling is None:
            return None
        return self.sampling.with_seed(int(np.random.SeedSequence([self.cfg.seed, step]).generate_state(1)[0]))

    def eval_sampling(self) -> Sampling | None:
        """Evaluation samples like the last training step (its seed), unless ``eval_exact``; persistent chains
        continue a copy of the training chains (the validation batch reuses them cyclically), so that evaluating
        neither starts cold nor moves the chains training continues."""
        if self.cfg.eval_exact or self.sampling is None:
            return None
        sampling = self.step_sampling(self.step - 1)
        return sampling if self.chains is None else dataclasses.replace(sampling, chains=self.chains.copy())

    @property
    def extra_evals(self) -> int:
        """Evaluations beyond the interval's: the final one with ``J = 0`` of a coupled model."""
        return 1 if self.model.config.attention in COUPLED_MODES else 0

    def probe(self) -> ProbeTiming:
        """Time a short probe of the run's work (:func:`~hybrid_attention.apps.train.cost.probe_seconds`); on the
        IBM route only the smallest one: on a real device every pass is paid, and a fake backend rehearses exactly
        what the device would be sent (the estimate's job and circuit counts hold for both)."""
        cfg = self.cfg
        ibm = self.sampling is not None and reaches_ibm(cfg.sampler, cfg.sampler_options)
        local = ibm and _ibm_of(self.sampling.sampler).local
        timing = probe_seconds(self.model, self.task, cfg, self.step_sampling(self.step), full=not ibm, local=local)
        return dataclasses.replace(timing, step=timing.step + self._update_seconds())

    def _update_seconds(self, repeats: int = 3) -> float:
        """Seconds of a step's work beside the forward and backward passes: a batch drawn, the gradients clipped,
        the AdamW update and the finiteness check (a fifth of a small model's step), timed on clones of the
        parameters with an optimiser of their own and a generator of its own: the run's state is untouched."""
        cfg = self.cfg
        clones = [p.detach().clone().requires_grad_(True) for p in self.params]
        for c in clones:
            c.grad = torch.zeros_like(c)
        opt = torch.optim.AdamW(clones, lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.99))
        opt.step()  # allocates the optimiser's state, as the run's first step does
        gen = torch.Generator().manual_seed(cfg.seed + 2)
        t0 = time.perf_counter()
        for _ in range(repeats):
            self.task.get_batch("train", cfg.batch_size, cfg.block_size, generator=gen)
            torch.nn.utils.clip_grad_norm_(clones, cfg.grad_clip)
            opt.step()
            with torch.no_grad():
                float(torch.stack([c.sum() for c in clones]).sum())
        return (time.perf_counter() - t0) / repeats

    def checkpoint(self, final: bool) -> dict[str, Any]:
        """Evaluate, then write checkpoint.pt, couplings.json and (last) metrics.json, each atomically. The run
        finishes here too when it has ``plateaued`` (``--patience``); a finished run with couplings is also
        evaluated with ``J = 0`` (``j0_val_*``)."""
        cfg, model = self.cfg, self.model
        sampling = self.eval_sampling()  # one value for the evaluation and the J = 0 one (its chains continue)
        ev = evaluate(model, self.xv, self.yv, cfg.task, depth=self.val_depth, sampling=sampling, progress=cfg.progress)
        if not math.isfinite(ev["val_loss"]):
            raise self.diverged(self.step, f"validation loss {ev['val_loss']} after the step")
        groups = {k: ev.pop(k) for k in list(ev) if k.startswith("val_accuracy_by_")}
        ev.update(step=self.step, elapsed_s=round(self.elapsed, 3))
        if not self.history["evals"] or self.history["evals"][-1]["step"] != self.step:
            self.history["evals"].append(ev)
        stopped = not final and plateaued([e["val_loss"] for e in self.history["evals"]], cfg.patience)
        final = final or stopped
        extra: dict[str, Any] = {}
        if final and model.config.attention in COUPLED_MODES:
            with model.couplings_zeroed():
                ev0 = evaluate(model, self.xv, self.yv, cfg.task, sampling=sampling, progress=cfg.progress)
            extra = {f"j0_{k}": v for k, v in ev0.items() if k.startswith("val_")}
        best = min(self.history["evals"], key=lambda e: e["val_loss"])
        metrics = {
            **{k: v for k, v in ev.items() if k.startswith("val_")},
            **groups,
            **extra,
            "best": best,
            "stopped_early": stopped,
            "step": self.step,
            "max_steps": cfg.max_steps,
            "finished": final,
            "elapsed_s": round(self.elapsed, 3),
            "n_params": self.n_params,
            "tokens_per_s": round(cfg.batch_size * cfg.block_size * self.step / max(self.elapsed, 1e-9), 1),
            **self.history,
        }
        blob = {
            "format": CHECKPOINT_FORMAT,
            "model": model.state_dict(),
            "optimizer": self.opt.state_dict(),
            "generator": self.gen.get_state(),
            "history": self.history,
            "step": self.step,
            "elapsed": self.elapsed,
            "config": dataclasses.asdict(cfg),
            "data_sha256": self.data["sha256"],
        }
        if self.chains is not None:
            blob["persistent_chains"] = self.chains.state_dict()
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
            metrics = {
                "step": 0,
                "max_steps": self.cfg.max_steps,
                "n_params": self.n_params,
                "train_loss": [],
                "evals": [],
            }
        done = metrics.get("step", 0)
        metrics.update(
            finished=False,
            diverged={
                "step": exc.step,
                "reason": exc.reason,
                "checkpoint_step": exc.checkpoint_step,
                "train_loss_since_checkpoint": self.history["train_loss"][done:],
            },
        )
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
        hybrid_attention.apps.run_files.DirectoryLocked: another process is working in ``out``.
        TrainingDiverged: the loss, gradients or parameters became non-finite (the last checkpoint is kept).
    """
    cfg = dataclasses.replace(config or TrainConfig(), **overrides)
    cfg.validate()
    if cfg.shots is not None and cfg.sampler != "exact" and cfg.resolved_readout() == "exact":
        logger.warning(
            "shots = %d has no effect: sampler %r trains on its exact output (readout exact); pass --readout shots "
            "(readout='shots') to train on that many reads per call",
            cfg.shots,
            cfg.sampler,
        )
    out = Path(cfg.out)
    with claim_directory(out, cfg.resume):  # bad settings, a refused resume and missing data leave no directory behind
        where: dict[str, Any] = {}  # the run's state and _Run once they exist: what Ctrl-C leaves on disk
        try:
            return _train_in(cfg, out, where)
        except KeyboardInterrupt as exc:
            raise _interrupted(cfg, out, where) from exc


def projected_seconds(cfg: TrainConfig) -> float:
    """The projected wall time of a fresh run of ``cfg``: its model built and its work probed as ``train`` does before
    the first step (:meth:`_Run.probe`), nothing written (the global random state is restored). The probe's own time
    is included: the run probes itself again before its first step."""
    cfg = cfg.resolved()
    sampling = build_sampling(cfg)
    try:
        task, data = load_task(cfg)
        torch.set_num_threads(cfg.threads)
        with torch.random.fork_rng(devices=[]):
            run = _Run(cfg, Path(cfg.out or "."), task, sampling, None, data)
            t0 = time.perf_counter()
            timing = run.probe()
            probe_s = time.perf_counter() - t0
        return probe_s + run_seconds(cfg, 0, timing, eval_rows=len(run.xv), extra_evals=run.extra_evals)[0]
    finally:
        if sampling is not None:
            sampling.sampler.close()


def _interrupted(cfg: TrainConfig, out: Path, where: dict[str, Any]) -> TrainingInterrupted:
    """What a Ctrl-C leaves: the checkpoint on disk, or (none written by a new run) its ``config.json`` removed."""
    run, state = where.get("run"), where.get("state")
    step = run.checkpoint_step if run is not None else (state["step"] if state is not None else None)
    left: tuple[str, ...] = ()
    if step is None:
        if not cfg.resume and run_ledger(out) is None:
            # written by this run: the same command starts afresh (a run with paid jobs in its ledger keeps it, so
            # that --resume restarts it from the ledger without submitting them again)
            (out / "config.json").unlink(missing_ok=True)
        left = tuple(sorted(p.name for p in out.iterdir() if p.name != LOCK_NAME))
    return TrainingInterrupted(out, step, cfg.max_steps, left)


def _train_in(cfg: TrainConfig, out: Path, where: dict[str, Any]) -> dict[str, Any]:
    """:func:`train` in its claimed directory; ``where`` receives the resumed ``state`` and the ``run``."""
    # config.json records the settings that ran: unset sampler settings are the run's own when it resumes, else
    # the sampler's validated training defaults
    state, cfg = load_resume_state(cfg, out) if cfg.resume else (None, cfg.resolved())
    where["state"] = state
    sampling = build_sampling(cfg)  # before the data: bad sampler option values fail fast
    try:
        check_sampler_calls(cfg, sampling)  # every call's size against the memory budget, before any work
        if sampling is not None and reaches_ibm(cfg.sampler, cfg.sampler_options):
            steps_left = cfg.max_steps - (state["step"] if state is not None else 0)
            qpu_budget(cfg, sampling.sampler, steps_left)  # refused above --max-qpu-seconds: nothing submitted
        task, data = load_task(cfg)
        if state is not None:
            check_resume_data(state, task, data, out)
        torch.set_num_threads(cfg.threads)
        where["run"] = _Run(cfg, out, task, sampling, state, data)
        return _loop(where["run"])
    finally:
        if sampling is not None:
            sampling.sampler.close()


def _ibm_of(sampler: Any) -> Any:
    """The IBM sampler behind ``sampler`` on the IBM route: itself, or a qemcmc's ``ibm`` engine."""
    return sampler if sampler.name == "ibm" else sampler.ibm


def qpu_budget(cfg: TrainConfig, sampler: Any, steps_left: int) -> dict[str, Any]:
    """The IBM route's estimate for the ``steps_left`` remaining steps of the run (training passes, evaluations
    unless ``eval_exact``, and the timing probe), logged before the first step; ``ValueError`` (before anything is submitted) when it is
    above ``max_qpu_seconds`` on a real device."""
    from ..estimate import estimate_train

    ibm = _ibm_of(sampler)
    evals = (
        0 if cfg.eval_exact else math.ceil(steps_left / cfg.eval_interval) * math.ceil(cfg.eval_size / cfg.batch_size)
    )
    # the timing probe before the first step: on the IBM route one pass of the batch, or for a batch above
    # PROBE_ROWS two passes of 1 and PROBE_ROWS - 1 rows, each counted as a full pass (its jobs exactly, its circuits
    # and shots from above)
    evals += probe_passes(cfg.batch_size)
    est = estimate_train(
        sampler,
        block_size=cfg.block_size,
        batch_size=cfg.batch_size,
        n_layer=cfg.n_layer,
        n_head=cfg.n_head,
        max_steps=steps_left,
        shots=cfg.resolved_shots(),
        eval_calls=evals,
    )
    est.pop("per_pass")
    line = check_budget(
        est,
        cfg.max_qpu_seconds,
        real_device=not ibm.local,
        what=f"{cfg.sampler} on {ibm.backend_name}, {steps_left} steps",
    )
    cost_logger.info(line)
    return est


def _loop(run: _Run) -> dict[str, Any]:
    cfg = run.cfg
    done = run.out / "metrics.json"
    if run.checkpoint_step == cfg.max_steps:  # resumed a run that already reached --max-steps
        metrics = json.loads(done.read_text()) if done.is_file() else {}
        if metrics.get("finished") and metrics.get("step") == cfg.max_steps:
            logger.info("%s already finished at step %d: nothing to do", run.out, cfg.max_steps)
            return metrics
    if run.checkpoint_step is not None and done.is_file():  # resumed a run that stopped early (--patience)
        metrics = json.loads(done.read_text())
        if metrics.get("stopped_early") and metrics.get("finished") and metrics.get("step") == run.checkpoint_step:
            logger.info("%s stopped early at step %d (plateau): nothing to do", run.out, run.checkpoint_step)
            return metrics
    write_json(
        run.out / "config.json",
        {
            "format": CHECKPOINT_FORMAT,
            "run": dataclasses.asdict(cfg),
            "model": run.model.config.to_dict(),
            "n_params": run.n_params,
            "torch": torch.__version__,
            "data_path": run.data["path"],
            "data_sha256": run.data["sha256"],
        },
    )
    work = step_work(cfg, run.sampling)
    if run.step < cfg.max_steps:  # what the run will do and cost, before its first step
        timing = run.probe()
        cost_logger.info(projection(cfg, work, run.step, timing, eval_rows=len(run.xv), extra_evals=run.extra_evals))
    bar = tqdm(
        total=cfg.max_steps,
        initial=run.step,
        disable=not cfg.progress,
        desc=f"{cfg.task} {cfg.attention} T={cfg.block_size}",
        dynamic_ncols=True,
        mininterval=1.0,
    )
    metrics = None
    run.model.train()
    t0 = time.perf_counter()
    try:
        while run.step < cfg.max_steps:
            loss = run.train_step()
            now = time.perf_counter()
            run.elapsed += now - t0  # evaluation time is not training time
            bar.update(1)
            rate = {"tok_s": f"{cfg.batch_size * cfg.block_size * run.step / max(run.elapsed, 1e-9):.0f}"}
            if work is not None:  # sampler work per second: circuits, sweeps, shots, ...
                rate[f"{work.short}_s"] = f"{work.count * run.step / max(run.elapsed, 1e-9):.3g}"
            bar.set_postfix(loss=f"{loss:.4f}", **rate, refresh=False)
            if run.step % cfg.eval_interval == 0 or run.step == cfg.max_steps:
                metrics = run.checkpoint(run.step == cfg.max_steps)
                bar.set_postfix(loss=f"{loss:.4f}", val=f"{metrics['val_loss']:.4f}", refresh=True)
                if metrics["finished"]:  # reached --max-steps, or plateaued (--patience)
                    break
            t0 = time.perf_counter()
    except TrainingDiverged as exc:
        bar.close()
        run.record_divergence(exc)
        raise
    bar.close()
    return (
        metrics if metrics is not None else run.checkpoint(True)
    )  # None: resumed a run stopped exactly at --max-steps
