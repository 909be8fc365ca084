"""Mean-field marginals (naive and TAP) against exact enumeration: where the approximation holds and where it breaks.

Problems: fields ``h ~ N(0, 1)``; couplings ``J_jk ~ N(0, c**2 / n)`` (Sherrington-Kirkpatrick scaling, so ``c beta``
is the effective coupling strength; the SK spin-glass transition is at ``c beta = 1``), and a ferromagnetic family
``J_jk = c / n`` (all positive). 32 problems per cell; errors are ``|m_mf - m_exact|`` over all spins and problems.

    python -m bench.meanfield_error --out results/meanfield
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

from hybrid_attention import IsingProblem, exact
from hybrid_attention.backends.mcmc.meanfield import MeanFieldSampler


def problems(n: int, c: float, beta: float, family: str, batch: int, seed: int) -> IsingProblem:
    rng = np.random.default_rng(seed)
    h = rng.normal(size=(batch, n))
    if family == "sk":
        U = np.triu(rng.normal(scale=c / np.sqrt(n), size=(batch, n, n)), 1)
    else:
        U = np.triu(np.full((batch, n, n), c / n), 1)
    return IsingProblem(torch.tensor(h), torch.tensor(U + np.swapaxes(U, 1, 2)), beta=beta)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, nargs="+", default=[8, 16])
    p.add_argument("--c", type=float, nargs="+", default=[0.1, 0.3, 0.5, 1.0, 2.0])
    p.add_argument("--beta", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--out", default=None, help="directory for table.md and table.csv")
    args = p.parse_args(argv)
    rows = []
    for family in ("sk", "ferro"):
        for n in args.n:
            for c in args.c:
                for beta in args.beta:
                    pr = problems(n, c, beta, family, args.batch, seed=1000 * n + int(100 * c) + int(10 * beta))
                    me = exact.marginals(pr).numpy()
                    row = {"family": family, "n": n, "c": c, "beta": beta, "c*beta": round(c * beta, 3)}
                    for method in ("naive", "tap"):
                        mf = MeanFieldSampler(method=method, max_iter=2000)
                        err = np.abs(mf.marginals(pr).numpy() - me)
                        row[f"{method} mean err"] = float(err.mean())
                        row[f"{method} max err"] = float(err.max())
                        row[f"{method} converged"] = bool(mf.last_info["converged"])  # all problems of the cell
                    rows.append(row)
    cols = list(rows[0])

    def fmt(k: str, v: object) -> str:
        return f"{v:.4f}" if "err" in k else f"{v:g}" if isinstance(v, float) else str(v)

    md = ["| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    md += ["| " + " | ".join(fmt(k, r[k]) for k in cols) + " |" for r in rows]
    text = "\n".join(md)
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        cmd = "python -m bench.meanfield_error " + " ".join(sys.argv[1:] if argv is None else argv)
        (out / "table.md").write_text(
            f"Mean-field error vs exact enumeration (measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}).\n\n"
            f"Command: `{cmd}`\n\n{__doc__.split(chr(10) + chr(10))[1]}\n\n{text}\n"
        )
        (out / "table.csv").write_text(
            ",".join(cols) + "\n" + "\n".join(",".join(str(r[k]) for k in cols) for r in rows) + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
