"""The four-way ablation (``hybrid-attention ablate``): attention modes x block sizes x seeds, tabulated and plotted.

Runs go to ``DIR/runs/<mode>_T<T>_s<seed>/`` (ordinary :mod:`hybrid_attention.apps.train` run directories). The
command is resumable: finished runs (``metrics.json`` with ``finished: true``) are skipped, interrupted ones
continue from their checkpoint. It then writes

* ``DIR/runs.csv``: one row per run;
* ``DIR/summary.csv`` and ``DIR/summary.md``: mean, standard deviation (over seeds, ``ddof=1``) and count per
  mode and T, with the difference to softmax (perplexity: relative, in %; accuracy: in points and relative),
  also paired by seed (mean ± std of the per-seed differences; a seed fixes the data order and the shared
  initial weights) and the number of seeds on which the mode beat softmax;
* ``DIR/metric_vs_T.png``: the metric against T per mode (mean ± std);
* ``DIR/couplings_by_distance.csv`` / ``.png``: the learned ``J`` of the ``hj`` runs averaged over pairs with the same
  key distance ``|j - k|`` (and over heads, layers and seeds), per T;
* ``DIR/ablation.json``: the settings (a later call with different settings into the same DIR is refused).

``--report-only`` rebuilds the tables and plots from the runs present. ``--workers N`` (a local Dask cluster) or
``--scheduler ADDRESS`` (an existing one) runs each run as a Dask task; the summaries are the same as serially
(``docs/scale_out.md``). ``DIR`` is locked while the command runs
(:func:`hybrid_attention.apps.run_files.lock_directory`; so is each run directory, by
:func:`hybrid_attention.apps.train.train`):
a second ``ablate`` on the same ``DIR`` is refused. A run that diverges is recorded as such in its
``metrics.json``, skipped by later calls and reported; the other runs go on.

Modules: ``grid`` (:func:`ablate`: runs the grid), ``report`` (reading the runs, :func:`collect_runs`,
:func:`summarise`, :func:`coupling_profile`, the tables), ``plots`` (the figures; matplotlib imported there only when
drawing), ``cluster`` (the grid on a Dask cluster, :func:`~hybrid_attention.apps.ablate.cluster.run_grid`),
``command`` (the subcommand, whose training flags are :mod:`hybrid_attention.apps.train.flags`).
"""

from __future__ import annotations

from .grid import ablate
from .report import collect_runs, coupling_profile, diverged_runs, report, summarise

__all__ = ["ablate", "report", "collect_runs", "diverged_runs", "summarise", "coupling_profile"]
