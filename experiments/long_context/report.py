"""The long-context study's report: ``results/long_context/report.md`` from the committed runs (PROTOCOL.md rules;
:mod:`hybrid_attention.apps.claims.report.long_context`), with the engine decision and marks of the engine validation
(``validate_engines.py``).

    python -m experiments.long_context.report            # writes results/long_context/report.md and gain_vs_T.png
    python -m experiments.long_context.report --print    # prints it instead
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]
#: the gain plot beside report.md
FIGURE = "gain_vs_T.png"


def main(argv: list[str] | None = None) -> int:
    from experiments.long_context.analysis import (
        FULL_SEEDS,
        MARGIN,
        gain_points,
        load_studies,
        long_context_report,
    )
    from hybrid_attention.apps.claims.report.load import warn
    from hybrid_attention.apps.claims.report.plots import write_long_context_plot

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, default=HERE / "results" / "long_context")
    p.add_argument("--print", action="store_true", help="print the report instead of writing report.md")
    args = p.parse_args(argv)
    from experiments.long_context import validate_engines as ve
    from experiments.long_context.plan import STUDIES

    rows, pending = ve.validated_rows()
    ran: dict[str, set[int]] = {}
    for s in STUDIES.values():
        if not s.name.startswith(("exact_", "pilot_")):
            ran.setdefault(s.base["task"], set()).update(s.block_sizes)
    marks, note = ve.engine_summary(rows, pending, {t: tuple(sorted(Ts)) for t, Ts in ran.items()}) if ran else ({}, "")
    figure = None
    if not args.print:
        rows_by_study, _ = load_studies(args.root)
        if write_long_context_plot(args.root / FIGURE, gain_points(rows_by_study), MARGIN, FULL_SEEDS):
            figure = FIGURE
    text, damaged = long_context_report(args.root, engine_marks=marks, engine_note=note, studies=STUDIES, figure=figure)
    warn(damaged)
    if args.print:
        print(text)
    else:
        (args.root / "report.md").write_text(text)
        print(f"wrote {args.root / 'report.md'}" + (f" and {args.root / FIGURE}" if figure else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
