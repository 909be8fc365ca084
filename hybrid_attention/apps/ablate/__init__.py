"""The four-way ablation (``hybrid-attention ablate``): attention modes x block sizes (x learning rates) x seeds,
tabulated and plotted.

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
* ``DIR/ablation.json``: the settings (a later call with different settings into the same DIR is refused; a
  setting added to the flags after the marker was written counts as its default) and the union of the grids.

``--lrs LR [LR ...]`` adds a learning-rate axis (the small per-mode learning-rate sweep that gives every mode the
same budget): runs at a learning rate other than the directory's own go to ``DIR/runs/<mode>_T<T>_lr<tag>_s<seed>/``
(:func:`~hybrid_attention.apps.ablate.grid.lr_tag`, e.g. ``lr3e-03``), ``runs.csv`` gains an ``lr`` column,
``summary.csv`` (and ``metric_vs_T.png``, the coupling profile) give each (mode, T) at its best learning rate
(:func:`summarise_best_lr`), ``summary_by_lr.csv`` the table per learning rate, ``summary.md`` both, and
``metric_vs_lr.png`` the metric against the learning rate. A directory made with one learning rate continues with
``--lrs`` that include it, reusing its runs; without ``--lrs`` (or with a single one) run names and files carry no
learning rate. The rule is in :mod:`hybrid_attention.apps.ablate.grid`.

``--report-only`` rebuilds the tables and plots from the runs present. ``--workers N`` (a local Dask cluster) or
``--scheduler ADDRESS`` (an existing one) runs each run as a Dask task; the summaries are the same as serially
(``docs/scale_out.md``). ``DIR`` is locked while the command runs
(:func:`hybrid_attention.apps.run_files.lock_directory`; so is each run directory, by
:func:`hybrid_attention.apps.train.train`):
a second ``ablate`` on the same ``DIR`` is refused. A run that diverges is recorded as such in its
``metrics.json``, skipped by later calls and reported; the other runs go on.

Modules: ``grid`` (:func:`ablate`: runs the grid), ``runs`` (one run of it,
:func:`~hybrid_attention.apps.ablate.runs.run_one`, shared by the serial and the Dask paths), ``report`` (reading
the runs, :func:`collect_runs`, :func:`summarise`, :func:`coupling_profile`, the tables), ``plots`` (the figures;
matplotlib imported there only when drawing), ``cluster`` (the grid on a Dask cluster,
:func:`~hybrid_attention.apps.ablate.cluster.run_grid`), ``command`` (the subcommand, whose training flags are
:mod:`hybrid_attention.apps.train.flags`).
"""

from __future__ import annotations

from .grid import ablate
from .report import collect_runs, coupling_profile, diverged_runs, report, summarise, summarise_best_lr

__all__ = ["ablate", "report", "collect_runs", "diverged_runs", "summarise", "summarise_best_lr", "coupling_profile"]
