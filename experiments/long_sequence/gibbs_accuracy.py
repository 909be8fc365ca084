"""How far short-burn-in Gibbs attention is from the truth at the learned coupling scales of the T = 64 runs.

For each run directory (``couplings.json``; with ``checkpoint.pt`` the attention scores ``h`` of the first ``--windows``
held-out windows come from the trained model, without it ``h ~ N(0, 1)`` is used and the table says so; checkpoints are
not committed, so rerun the training first), the problems are exactly the ones the
bridge sends during training: query ``i``'s Ising system over keys ``0..i``, couplings the leading block of the learned
``J``, one padded call with a causal mask. Measured:

* ``n = 16`` (the first 16 queries, exact enumeration as the reference): the chosen Gibbs settings, the same settings
  averaged over 8 independent calls (what survives averaging is bias from the short burn-in, not shot noise), mean
  field, and the expected error of the same number of *independent exact* samples (the shot-noise floor);
* ``T = 64`` (beyond enumeration): the same against a long Gibbs reference (default 512 burn-in sweeps, the first half a
  warm-up from beta = 0, 256 chains x 16 records, thinning 4 = 4096 reads), whose own noise is shown by a second
  reference with another seed.

Errors: mean and max |m - m_ref| over visible (query, key) pairs, and the total-variation distance between the attention
rows ``(1 + m) / 2`` normalised (what the model consumes), mean and max over queries.

    python -m experiments.long_sequence.gibbs_accuracy --runs results/long_sequence/runs/brackets_hj_T64_gibbs_s0 \\
        --configs 128:16:32:1 --out results/long_sequence/gibbs_accuracy.md
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch

from experiments import data_path
from hybrid_attention import kernels
from hybrid_attention.backends.mcmc.gibbs import GibbsSampler
from hybrid_attention.backends.mcmc.meanfield import MeanFieldSampler
from hybrid_attention.bridge import attention_marginals
from hybrid_attention.sampling import Sampling

B = 8  # held-out windows captured per run (--windows uses the first ones)


def scores(run: Path, seed: int) -> tuple[torch.Tensor, torch.Tensor, float, str]:
    """``h (B, 1, T, T)``, ``J (1, T, T)``, ``beta`` and where ``h`` came from."""
    cp = json.loads((run / "couplings.json").read_text())
    J = torch.tensor(cp["J"][0], dtype=torch.float32)
    beta = float(np.asarray(cp["beta"][0]).reshape(-1)[0])
    T = J.shape[-1]
    ck = run / "checkpoint.pt"
    if not ck.is_file():
        g = torch.Generator().manual_seed(seed)
        return torch.randn(B, 1, T, T, generator=g), J, beta, "h ~ N(0, 1) (no checkpoint)"
    from hybrid_attention.apps.runs import load_run
    from hybrid_attention.apps.train import eval_set

    conf = json.loads((run / "config.json").read_text())
    r = load_run(run, data=conf["run"].get("data") or str(data_path()))
    model = r.model
    x, _ = eval_set(r.task(), r.config)
    with torch.no_grad():
        (p,) = model.attention_problems(x[:B], layers=[0])
    b = float(p.beta.reshape(-1)[0])
    return p.h, p.J[:, :T, :T], b, "trained model's scores on held-out windows"


def weights(m: torch.Tensor) -> torch.Tensor:
    T = m.shape[-1]
    vis = torch.ones(T, T, dtype=torch.bool).tril()
    return kernels.normalised_weights(m.masked_fill(~vis, 0.0), vis)


def errors(m: torch.Tensor, ref: torch.Tensor) -> list[float]:
    T = m.shape[-1]
    vis = torch.ones(T, T, dtype=torch.bool).tril()
    d = (m - ref).abs()[..., vis]
    tv = 0.5 * (weights(m) - weights(ref)).abs().sum(-1)  # (B, H, T)
    return [float(d.mean()), float(d.max()), float(tv.mean()), float(tv.max())]


def gibbs(h, J, beta, *, shots, burn_in, chains, thinning, seed):
    s = GibbsSampler(burn_in=burn_in, num_chains=chains, thinning=thinning)
    return attention_marginals(h, J, beta, sampling=Sampling(s, num_reads=shots, seed=seed)).detach().double()


def _config(text: str) -> dict[str, int]:
    shots, chains, burn_in, thinning = (int(v) for v in text.split(":"))
    return dict(shots=shots, chains=chains, burn_in=burn_in, thinning=thinning)


def measure(run: Path, a: argparse.Namespace) -> list[str]:
    h, J, beta, source = scores(run, a.seed)
    h = h[: a.windows]
    T = h.shape[-1]
    iu = np.triu_indices(T, 1)
    Jn = J[0].double().numpy()
    rows = [
        f"### {run.name}",
        "",
        f"Scores: {source} ({h.shape[0]} windows); beta = {beta:g}; learned J: max |J| = {np.abs(Jn[iu]).max():.3f}, "
        f"max row sum |J| = {np.abs(Jn).sum(1).max():.2f}, max row sum J = {Jn.sum(1).max():.2f}; "
        f"|h| mean {h.abs().mean():.2f}, max {h.abs().max():.2f}.",
        "",
        "| n | method | reference | mean abs dm | max abs dm | mean TV (attention row) | max TV | seconds |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]

    def row(n, name, refname, m, ref, secs):
        e = errors(m, ref)
        rows.append(f"| {n} | {name} | {refname} | {e[0]:.4f} | {e[1]:.3f} | {e[2]:.4f} | {e[3]:.3f} | {secs:.1f} |")

    def label(c):
        return f"Gibbs {c['shots']} reads, {c['chains']} chains, burn-in {c['burn_in']}, thinning {c['thinning']}"

    def configs(hh, JJ, ref, n, refname):
        for c in a.configs:
            t = time.perf_counter()
            m = gibbs(hh, JJ, beta, **c, seed=a.seed)
            row(n, label(c), refname, m, ref, time.perf_counter() - t)
            reps = torch.stack([gibbs(hh, JJ, beta, **c, seed=a.seed + 1 + k) for k in range(8)]).mean(0)
            row(n, label(c) + ", mean of 8 calls (bias + noise / sqrt 8)", refname, reps, ref, float("nan"))
        t = time.perf_counter()
        mf = attention_marginals(hh, JJ, beta, sampling=Sampling(MeanFieldSampler())).detach().double()
        row(n, "mean field (naive)", refname, mf, ref, time.perf_counter() - t)

    # n = 16: exact reference
    n = min(16, T)
    h16, J16 = h[..., :n, :n].double(), J[:, :n, :n].double()
    ref = kernels.causal_marginals(h16, J16, beta)
    configs(h16, J16, ref, n, "exact")
    vis = torch.ones(n, n, dtype=torch.bool).tril()
    for c in a.configs:
        floor = float(math.sqrt(2 / math.pi) * torch.sqrt((1 - ref[..., vis] ** 2) / c["shots"]).mean())
        rows.append(
            f"| {n} | independent exact samples, {c['shots']} reads (expected; / sqrt 8 for the mean of 8: "
            f"{floor / math.sqrt(8):.4f}) | exact | {floor:.4f} | | | | |"
        )

    # T = 64: long-chain reference, twice with different seeds (its own noise)
    long = _config(a.reference)
    t = time.perf_counter()
    ref = gibbs(h, J, beta, **long, seed=a.seed + 100)
    t_ref = time.perf_counter() - t
    ref2 = gibbs(h, J, beta, **long, seed=a.seed + 200)
    row(T, "second long reference, other seed", "long Gibbs", ref2, ref, t_ref)
    configs(h, J, ref, T, f"long Gibbs ({label(long)})")
    return rows + [""]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", nargs="+", required=True)
    p.add_argument(
        "--configs",
        nargs="+",
        type=_config,
        default=[_config("128:16:32:1")],
        metavar="SHOTS:CHAINS:BURN_IN:THINNING",
        help="Gibbs settings to measure (default 128:16:32:1)",
    )
    p.add_argument(
        "--reference",
        default="4096:256:512:4",
        metavar="SHOTS:CHAINS:BURN_IN:THINNING",
        help="the long T = 64 reference (default 4096:256:512:4)",
    )
    p.add_argument("--windows", type=int, default=4, help="held-out windows (problems = windows x T)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="write the markdown here (else print only)")
    a = p.parse_args()
    torch.set_num_threads(1)
    lines = []
    for r in a.runs:
        part = measure(Path(r), a)
        print("\n".join(part), flush=True)
        lines += part
    if a.out:
        Path(a.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
