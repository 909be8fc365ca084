"""The claims report: per study, paired comparisons with confidence intervals; per finding of the paper, its number,
ours with an interval (Holm and Bonferroni within the findings' families of primary contrasts) and seeds, and a
verdict; the damaged runs left out; the plots; the cost table.

Input: the run directories of a plan (:mod:`hybrid_attention.apps.claims.runner`), ``ROOT/<study>/runs/*`` and
``ROOT/<study>/sweep/*``. Studies are recognised by name: ``shakespeare_pt``, ``shakespeare``, ``brackets``,
``brackets_noffn`` (findings; which finding reads which: :data:`.rules.FINDINGS`), ``pilot_*`` (pilot tables),
``<study>_jfield*`` (J-only with a symmetry-breaking field, reported against ``<study>``'s softmax and uniform J-only
runs of the same seeds; ``shakespeare_jfield*`` goes beside finding 4), any other (tables only). J-only runs with a
field (``j_field != 0``) are reported as the mode ``j+field``, apart from the uniform J-only mode ``j``.

Modules, each the one owner of its concept:

* :mod:`.load`: reading run directories and metrics;
* :mod:`.rules`: the paper's claims as data (:data:`.rules.FINDINGS`) and the verdict rules' text;
* :mod:`.tables`: per-study cells and paired comparisons, the budget plateau, bracket breakdowns;
* :mod:`.verdicts`: one verdict function per kind of rule;
* :mod:`.findings`: applying the rules to the runs;
* :mod:`.sampler_training`: finding 8 (sampler-trained against exact training);
* :mod:`.fmt`, :mod:`.render`, :mod:`.plots`: numbers as text, markdown, plots;
* :mod:`.write`: :func:`write_report`, the files of the report.
"""

from __future__ import annotations

from .findings import family_table, findings
from .load import Damaged, collect, field_studies, max_steps, read_run, scan, with_references
from .rules import ACCURACY_MARGIN, ALPHA, EQUIVALENCE_MARGIN, FINDINGS, PERPLEXITY_MARGIN, Finding
from .sampler_training import load_sampler_training, sampler_training_cells
from .tables import breakdown, compare, coupling_by_distance, plateau, study_table
from .write import write_report

__all__ = [
    "collect",
    "scan",
    "read_run",
    "max_steps",
    "Damaged",
    "compare",
    "study_table",
    "coupling_by_distance",
    "field_studies",
    "with_references",
    "findings",
    "family_table",
    "plateau",
    "breakdown",
    "write_report",
    "FINDINGS",
    "Finding",
    "EQUIVALENCE_MARGIN",
    "ALPHA",
    "PERPLEXITY_MARGIN",
    "ACCURACY_MARGIN",
    "load_sampler_training",
    "sampler_training_cells",
]
