"""The long-context study's report: ``results/long_context/report.md`` from the committed runs (PROTOCOL.md rules;
:mod:`hybrid_attention.apps.claims.report.long_context`), with the engine decision and marks of the engine validation
(``validate_engines.py``).

    python experiments/long_context/report.py            # writes results/long_context/report.md
    python experiments/long_context/report.py --print    # prints it instead
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    from hybrid_attention.apps.claims.report.load import warn
    from hybrid_attention.apps.claims.report.long_context import long_context_report

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, default=HERE / "results" / "long_context")
    p.add_argument("--print", action="store_true", help="print the report instead of writing report.md")
    args = p.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import validate_engines as ve
    from plan import STUDIES

    rows, pending = ve.validated_rows()
    ran: dict[str, set[int]] = {}
    for s in STUDIES.values():
        if not s.name.startswith(("exact_", "pilot_")):
            ran.setdefault(s.base["task"], set()).update(s.block_sizes)
    marks, note = ve.engine_summary(rows, pending, {t: tuple(sorted(Ts)) for t, Ts in ran.items()}) if ran else ({}, "")
    text, damaged = long_context_report(args.root, engine_marks=marks, engine_note=note, studies=STUDIES)
    warn(damaged)
    if args.print:
        print(text)
    else:
        (args.root / "report.md").write_text(text)
        print(f"wrote {args.root / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
