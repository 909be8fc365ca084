"""Run (or resume) a plan of experiments/claims/plan.py with two workers; nothing is committed.

    python experiments/claims/run.py --plan pilot                 # the pilot (about 15 min with two workers)
    python experiments/claims/run.py --plan main --hours 2.5      # one session's share; call again to go on
    python experiments/claims/run.py --plan main --dry-run        # what is left and its estimated cost
    python experiments/claims/run.py --plan main --studies shakespeare brackets   # a subset, in this order
    hybrid-attention claims --root results/claims                 # tables, verdicts and plots

Every call resumes where the last one stopped (finished runs are skipped, interrupted runs resume from their
checkpoint). Each worker is a separate process with one torch thread, on its own run directory.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plan import PLANS, ROOT, STUDIES  # noqa: E402

from hybrid_attention.apps.claims.plan_cli import main  # noqa: E402

#: the corpus beside the repository (the workplace layout); ``--data`` or ``$HYBRID_ATTENTION_DATA`` override it
SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "tinyshakespeare.txt"

if __name__ == "__main__":
    sys.exit(main(None, plans=PLANS, studies=STUDIES, root=ROOT, description=__doc__, shared_data=SHARED_DATA))
