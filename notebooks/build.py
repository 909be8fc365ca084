"""Render the notebooks: each ``notebooks/<name>.py`` (jupytext percent format, the source that is reviewed and
linted) becomes ``notebooks/<name>.ipynb`` executed top to bottom, with its outputs and plots.

    python notebooks/build.py                     # render and execute every notebook (several minutes, progress bar)
    python notebooks/build.py dqa_temperature     # only these (names with or without .py)
    python notebooks/build.py --quick             # small parameters (HYBRID_ATTENTION_QUICK=1), as the tests run them
    python notebooks/build.py --out DIR           # write the .ipynb files to DIR instead of notebooks/
    python notebooks/build.py --check             # exit 1 if a committed .ipynb's cells differ from its .py source

The committed ``.ipynb`` files are this script's output in the full configuration (``python notebooks/build.py``),
so they can be read with their plots without running anything. A notebook is written only after it executed
without error; a failing one leaves the previous file untouched. Needs the ``notebooks`` extra (jupytext, nbclient).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def sources(names: list[str] | None = None) -> list[Path]:
    """The notebook sources ``notebooks/*.py`` (this script excluded), optionally only ``names``."""
    found = sorted(p for p in HERE.glob("*.py") if p.name != Path(__file__).name)
    if not names:
        return found
    wanted = {n.removesuffix(".py").removesuffix(".ipynb") for n in names}
    unknown = wanted - {p.stem for p in found}
    if unknown:
        raise SystemExit(f"unknown notebook(s) {sorted(unknown)}; expected some of {[p.stem for p in found]}")
    return [p for p in found if p.stem in wanted]


def cells_of(nb) -> list[tuple[str, str]]:
    """``(cell type, source)`` of every cell: what a source and its rendered notebook must share."""
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


def execute(src: Path, *, quick: bool, timeout: int = 3600):
    """Read ``src`` with jupytext and execute it with nbclient in ``notebooks/`` (progress bar over cells)."""
    import jupytext
    from nbclient import NotebookClient
    from tqdm.auto import tqdm

    nb = jupytext.read(src)
    env = {"HYBRID_ATTENTION_QUICK": "1" if quick else "0", "MPLBACKEND": "Agg"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    bar = tqdm(total=sum(c.cell_type == "code" for c in nb.cells), desc=src.stem, unit="cell")
    try:
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(HERE)}},
            on_cell_executed=lambda **_: bar.update(1),
        )
        client.execute()
    finally:
        bar.close()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return nb


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    ap.add_argument("names", nargs="*", help="notebooks to render (default: all)")
    ap.add_argument("--check", action="store_true", help="only check that each committed .ipynb matches its .py source")
    ap.add_argument("--quick", action="store_true", help="small parameters (HYBRID_ATTENTION_QUICK=1)")
    ap.add_argument("--out", type=Path, default=HERE, help="folder for the rendered .ipynb files")
    args = ap.parse_args(argv)
    import jupytext
    import nbformat

    srcs = sources(args.names)
    if args.check:
        stale = [
            p.name
            for p in srcs
            if not p.with_suffix(".ipynb").exists()
            or cells_of(nbformat.read(p.with_suffix(".ipynb"), as_version=4)) != cells_of(jupytext.read(p))
        ]
        if stale:
            print(
                "out of date (run python notebooks/build.py " + " ".join(p.removesuffix(".py") for p in stale) + ")",
                file=sys.stderr,
            )
            return 1
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for src in srcs:
        t0 = time.perf_counter()
        nb = execute(src, quick=args.quick)
        target = args.out / (src.stem + ".ipynb")
        tmp = target.with_suffix(".ipynb.tmp")
        nbformat.write(nb, tmp)
        tmp.replace(target)
        print(f"{target} ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
