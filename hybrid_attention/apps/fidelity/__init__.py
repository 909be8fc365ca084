"""``hybrid-attention fidelity``: how faithfully each sampler reproduces Boltzmann attention.

Sweeps samplers over problem ensembles against exact enumeration, one axis at a time around a base point:
``shots``, Trotter ``steps``, anneal time ``tau`` (DQA samplers only) and problem size ``n``. Writes
``report.json`` (every point's metrics, the configuration and the exact command) and PNG plots to ``--out``.

* Samplers (``--samplers``): ``exact`` (exact samples: the shot-noise floor), ``statevector`` (exact DQA output),
  ``aer``, ``aer-noisy`` (Aer with the noise model of a fake IBM backend), ``pennylane``, ``gibbs``, ``anneal``,
  ``meanfield``; default: every one whose dependencies are importable.
* Ensembles (``--ensemble``): ``random`` (``h, J ~ N(0, scale^2)``) or ``model`` (the fields and couplings of a
  trained model's attention layer on its task's validation inputs; ``--checkpoint DIR`` from
  ``hybrid-attention train --out DIR``).
* Each axis option takes a comma-separated list; the base value of an axis (held fixed while another axis is
  swept) is the lower median of its list unless ``--base`` says otherwise.
* Resumable: rerunning with the same ``--out`` skips points already in ``report.json``; ``--out`` is never
  overwritten silently: a directory holding something else, or a report with other settings (a different
  ensemble, :data:`ENSEMBLE_KEYS`, or another base point) is an error naming the differing settings, unless
  ``--overwrite`` is given. Other samplers or axis values extend the report (its configuration records the union).
* ``--out`` is locked while the sweep runs (:func:`hybrid_attention.apps.run_files.lock_directory`): a second sweep into
  it is refused.

Python API: :func:`run_sweep` (:class:`FidelityConfig` -> report dict), :func:`sweep_points`, :func:`load_report`;
the measurement itself is :func:`measure_point`.

Modules: ``config`` (:class:`FidelityConfig`, :func:`sweep_points`), ``problems`` (the ensembles), ``model``
(a trained model and its validation inputs), ``sweep`` (samplers, schedules, :func:`measure_point`), ``report``
(:func:`run_sweep` and the report file), ``plots`` (figures and tables; matplotlib imported only when drawing),
``command`` (the subcommand).

Example:
    hybrid-attention fidelity --samplers exact,statevector,aer --n 3,4,5 --shots 256,1024,4096 \\
        --tau 0.5,1,2 --steps 10,40 --problems 8 --out fidelity-report
"""

from __future__ import annotations

from .config import AXES, ENSEMBLE_KEYS, FidelityConfig, sweep_points
from .problems import ENSEMBLES, ensemble_problems, problems_from_model, random_problems
from .report import REPORT, load_report, run_sweep
from .sweep import SAMPLER_KINDS, SweepPoint, UnreachableTemperature, build_sampler, make_schedule, measure_point

__all__ = [
    "FidelityConfig",
    "sweep_points",
    "run_sweep",
    "load_report",
    "REPORT",
    "AXES",
    "ENSEMBLE_KEYS",
    "SweepPoint",
    "measure_point",
    "make_schedule",
    "build_sampler",
    "SAMPLER_KINDS",
    "UnreachableTemperature",
    "random_problems",
    "problems_from_model",
    "ensemble_problems",
    "ENSEMBLES",
]
