"""Run (or resume) a study's plan of training runs (``experiments/<study>/plan.py``) with parallel workers; nothing
is committed.

    python -m experiments.run_plan claims --plan pilot                 # the pilot (about 15 min with two workers)
    python -m experiments.run_plan claims --plan main --hours 2.5      # one session's share; call again to go on
    python -m experiments.run_plan claims --plan main --dry-run        # what is left and its estimated cost
    python -m experiments.run_plan claims --plan main --studies shakespeare brackets   # a subset, in this order
    python -m experiments.run_plan long_context --plan engine_pilot --workers 1   # the engine validation's models
    hybrid-attention claims --root results/claims                      # tables, verdicts and plots

Every call resumes where the last one stopped (finished runs are skipped, interrupted runs resume from their
checkpoint). Each worker is a separate process with one torch thread, on its own run directory. The corpus of the
Shakespeare studies: ``--data``, else ``$HYBRID_ATTENTION_DATA``, else the repository default
(:func:`experiments.data_path`).
"""

from __future__ import annotations

import importlib
import sys

from experiments import data_path
from hybrid_attention.apps.claims.plan_cli import main as plan_main

#: the studies with a plan of training runs
STUDIES_WITH_PLANS = ("claims", "long_context", "long_context_2")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in STUDIES_WITH_PLANS:
        print(f"usage: python -m experiments.run_plan {{{','.join(STUDIES_WITH_PLANS)}}} [options]", file=sys.stderr)
        return 2
    plan = importlib.import_module(f"experiments.{argv[0]}.plan")
    return plan_main(
        argv[1:], plans=plan.PLANS, studies=plan.STUDIES, root=plan.ROOT, description=__doc__, shared_data=data_path()
    )


if __name__ == "__main__":
    sys.exit(main())
