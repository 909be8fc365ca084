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

import argparse
import logging
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plan import PLANS, ROOT, STUDIES  # noqa: E402

from hybrid_attention.apps.claims.costs import cost_table, measured_costs  # noqa: E402
from hybrid_attention.apps.claims.runner import estimate_seconds, plan_runs, run_plan, run_state  # noqa: E402
from hybrid_attention.tasks.shakespeare import ENV_VAR  # noqa: E402

#: the corpus beside the repository (the workplace layout); ``--data`` or ``$HYBRID_ATTENTION_DATA`` override it
SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "tinyshakespeare.txt"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--plan", choices=sorted(PLANS), required=True)
    p.add_argument("--root", default=ROOT, help="directory of the studies (default: %(default)s)")
    p.add_argument("--workers", type=int, default=2, help="worker processes, one torch thread each (default: 2)")
    p.add_argument("--hours", type=float, default=None, help="start no new run after this many hours")
    p.add_argument("--dry-run", action="store_true", help="list what is left and its estimated cost; train nothing")
    p.add_argument(
        "--data",
        default=os.environ.get(ENV_VAR) or str(SHARED_DATA),
        help=f"Tiny Shakespeare text for the Shakespeare studies (default: ${ENV_VAR}, else {SHARED_DATA})",
    )
    p.add_argument(
        "--studies",
        nargs="+",
        metavar="STUDY",
        help="only these studies of the plan, in this order (default: the plan's studies and order)",
    )
    p.add_argument("--no-progress", dest="progress", action="store_false")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    names = list(PLANS[args.plan])
    if args.studies:
        unknown = [n for n in args.studies if n not in names]
        if unknown:
            p.error(f"--studies: {unknown} not in the plan {args.plan!r}; expected some of {names}")
        names = list(dict.fromkeys(args.studies))
    studies = [STUDIES[n] for n in names]
    if any(st.base.get("task") == "shakespeare" for st in studies) and not args.dry_run:
        if not Path(args.data).is_file():  # before any run starts: the workers would each fail on a download
            p.error(f"--data: the plan {args.plan!r} trains on Tiny Shakespeare; no corpus at {args.data!r}")
        os.environ[ENV_VAR] = str(Path(args.data).resolve())  # inherited by the spawned workers
    if args.dry_run:
        runs, waiting = plan_runs(studies, args.root)
        left = [r for r in runs if run_state(r.out) not in ("finished", "diverged")]
        table = measured_costs(Path(args.root))
        known = [estimate_seconds(r, table.get(r.config.task, {})) for r in left]
        total = sum(s for s in known if s is not None)
        print(f"{len(runs)} runs schedulable, {len(left)} left, {waiting} waiting for their learning-rate sweep")
        print(
            f"estimated training time of the {sum(s is not None for s in known)} costed runs left: "
            f"{total / 3600:.2f} h on one worker, {total / 3600 / max(args.workers, 1):.2f} h on {args.workers}"
        )
        print(cost_table(table))
        return 0
    res = run_plan(studies, args.root, workers=args.workers, hours=args.hours, progress=args.progress)
    print(f"{res['done']} runs finished in this call; {res['pending']} left (call again to continue)")
    for out, why in res["failed"].items():
        print(f"FAILED {out}: {why}", file=sys.stderr)
    return 1 if res["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
