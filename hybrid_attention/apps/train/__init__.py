"""Training: the Python-callable :func:`train` and the ``hybrid-attention train`` subcommand.

A run directory ``DIR`` holds:

* ``config.json``: the resolved run and model configuration (written at the start);
* ``metrics.json``: final ``val_loss`` and ``val_perplexity`` (Shakespeare) or ``val_accuracy`` and
  ``val_string_accuracy`` (brackets), the per-step training loss, every evaluation, and ``finished``;
* ``checkpoint.pt``: model, optimiser, data-generator state, history and the corpus sha256, written atomically
  (temporary file, ``fsync``, then ``os.replace``) after every evaluation, so a killed run resumed with
  ``--resume`` loses at most one evaluation interval; it holds only tensors and plain containers and is loaded
  with ``torch.load(weights_only=True)``;
* ``couplings.json``: learned ``J`` per layer (``hj`` and ``j`` modes) and ``beta`` (``mta``: also its kernels);
* ``.lock`` while a process works in ``DIR`` (:func:`hybrid_attention.apps.run_files.lock_directory`): a second
  ``train`` on the same ``DIR`` is refused.

``--resume`` continues the run in ``DIR`` with the settings of its ``config.json``: flags given with it must match
them, except ``--max-steps`` (extend a finished run; not below the steps already done), ``--data`` (the corpus may move,
its sha256 must match), ``--threads`` and ``--no-progress``. ``--sampler`` given again resets the sampler options
to the ``--sampler-option`` items given with it. A run on the IBM route killed before its first checkpoint (a
``config.json`` and a job ledger, ``ibm_jobs.jsonl``, but no ``checkpoint.pt``) resumes too: it starts again from step
0 with its settings, and the jobs its ledger holds are read or collected from it instead of being submitted again.

Ctrl-C stops a run with :class:`TrainingInterrupted` (a ``KeyboardInterrupt``) saying what is on disk: the last
checkpoint, which ``--resume`` continues, or nothing (a new run interrupted before its first checkpoint removes the
``config.json`` it wrote, so the same command starts it again).

A run whose loss, gradients or parameters become non-finite stops (:class:`TrainingDiverged`): the last good
checkpoint stays as it was, and ``metrics.json`` records the divergence under ``diverged``.

With ``--sampler NAME`` (any registry name) the Boltzmann layers get their marginals from that sampler through
:mod:`hybrid_attention.bridge` (built by :func:`hybrid_attention.backends.registry.make_sampler`: DQA samplers get
``DQASchedule(tau, trotter_steps)``; ``--shots`` reads per call, a fresh seed per step); evaluation then uses the same sampler unless ``--eval-exact`` is given. Repeatable
``--sampler-option KEY=VALUE`` items go to the sampler's constructor (e.g. Gibbs ``burn_in``, ``thinning``,
``num_chains``); they are recorded in ``config.json``.

An existing non-empty ``DIR`` is never overwritten: pass ``--resume`` to continue it, or choose another ``DIR``.

Modules: ``config`` (:class:`TrainConfig` and its validation), ``flags`` (the command-line flags, defined once
for ``train`` and ``ablate``), ``resume`` (claiming a run directory, the ``--resume`` checks), ``data`` (task,
validation set, :func:`evaluate`), ``loop`` (:func:`train`), ``command`` (the subcommand).

Example (Python):
    >>> from hybrid_attention.apps.train import TrainConfig, train   # doctest: +SKIP
    >>> metrics = train(TrainConfig(task="brackets", attention="hj", block_size=8, max_steps=200, out="runs/b8"))  # doctest: +SKIP
"""

from __future__ import annotations

from .config import DEFAULT_SHOTS, PERSISTENT_BURN_IN, TASKS, TRAINING_DEFAULTS, TrainConfig, upgrade_saved
from .data import eval_set, evaluate, load_task
from .flags import parse_sampler_option
from .loop import TrainingDiverged, TrainingInterrupted, build_sampler, build_sampling, projected_seconds, train

__all__ = [
    "TASKS",
    "TRAINING_DEFAULTS",
    "PERSISTENT_BURN_IN",
    "DEFAULT_SHOTS",
    "TrainConfig",
    "upgrade_saved",
    "TrainingDiverged",
    "TrainingInterrupted",
    "train",
    "projected_seconds",
    "evaluate",
    "eval_set",
    "load_task",
    "build_sampler",
    "build_sampling",
    "parse_sampler_option",
]
