"""The command line of an experiment plan: run (or resume) a plan's studies with parallel workers, or list what is
left and its estimated cost. ``experiments/run_plan.py`` (``python -m experiments.run_plan STUDY``) is this command
over their own plan modules (:func:`main`)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from hybrid_attention.apps.cli_types import positive_float, positive_int
from hybrid_attention.tasks.shakespeare import ENV_VAR

from .costs import cost_table, measured_costs
from .runner import Study, estimate_seconds, plan_runs, run_plan, run_state

__all__ = ["main"]


def main(
    argv: list[str] | None,
    *,
    plans: dict[str, tuple[str, ...]],
    studies: dict[str, Study],
    root: str,
    description: str,
    shared_data: Path,
) -> int:
    """Parse ``argv`` and run (``--dry-run``: cost) the chosen plan's studies under ``--root``; the exit status."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--plan", choices=sorted(plans), required=True)
    p.add_argument("--root", default=root, help="directory of the studies (default: %(default)s)")
    p.add_argument(
        "--workers", type=positive_int, default=2, help="worker processes, one torch thread each (default: 2)"
    )
    p.add_argument("--hours", type=positive_float, default=None, help="start no new run after this many hours")
    p.add_argument("--dry-run", action="store_true", help="list what is left and its estimated cost; train nothing")
    p.add_argument(
        "--data",
        default=os.environ.get(ENV_VAR) or str(shared_data),
        help=f"Tiny Shakespeare text for the Shakespeare studies (default: ${ENV_VAR}, else {shared_data})",
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
    names = list(plans[args.plan])
    if args.studies:
        unknown = [n for n in args.studies if n not in names]
        if unknown:
            p.error(f"--studies: {unknown} not in the plan {args.plan!r}; expected some of {names}")
        names = list(dict.fromkeys(args.studies))
    chosen = [studies[n] for n in names]
    if any(st.base.get("task") == "shakespeare" for st in chosen) and not args.dry_run:
        if not Path(args.data).is_file():  # before any run starts: the workers would each fail on a download
            p.error(f"--data: the plan {args.plan!r} trains on Tiny Shakespeare; no corpus at {args.data!r}")
        os.environ[ENV_VAR] = str(Path(args.data).resolve())  # inherited by the spawned workers
    if args.dry_run:
        return _dry_run(chosen, args)
    res = run_plan(chosen, args.root, workers=args.workers, hours=args.hours, progress=args.progress)
    print(f"{res['done']} runs finished in this call; {res['pending']} left (call again to continue)")
    for out, why in res["failed"].items():
        print(f"FAILED {out}: {why}", file=sys.stderr)
    return 1 if res["failed"] else 0


def _dry_run(studies: list[Study], args: Any) -> int:
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
