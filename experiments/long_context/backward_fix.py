"""What the mean-field backward fix changes (PROTOCOL.md change 5): measured on every committed mean-field model.

Until 2026-12-04 the implicit-function backward of ``hybrid_attention/backends/mcmc/meanfield.py`` stopped its adjoint iteration on an
absolute test, ``max |v_new - v| < tol * max(1, max |g|)``. A training loss is a mean over thousands of targets, so
the incoming gradient ``g`` has entries far below ``tol`` (1.2e-4 in float32) and the iteration stopped after one
step: the gradient was ``g + d (df/dm)^T g`` (damping ``d``), not the implicit gradient ``(I - df/dm)^-T g``. The fix
makes the test relative to ``max |g|``. Forward values (marginals, metrics) are unaffected; only gradients change.

For every run trained with mean field (the engine pilots, the study's own hj runs so far, ``results/long_sequence``)
this measures, on one training batch, the parameter gradient of the pre-fix backward (re-created here as
:func:`prefix_implicit`, for this measurement only) against the fixed one and against unrolled differentiation;
and for every engine-validation record it recomputes the mean-field candidates' gradient criteria: exactly against
exact enumeration at T <= 20, and at T >= 32 (Gibbs references, not recomputed) as the range the fixed gradient's
cosine can take given its angle to the pre-fix gradient. The engine decision is then recomputed at both ends of
every range.

    python -m experiments.long_context.backward_fix     # writes results/long_context/backward_fix.md
"""

from __future__ import annotations

import json
import math
import sys
from contextlib import contextmanager
from pathlib import Path

import torch

from experiments.long_context import validate_engines as ve
from experiments.long_context.plan import ENGINES, ROOT
from hybrid_attention.backends.mcmc import meanfield

HERE = ve.HERE
MF_ENGINES = ("meanfield", "tap")


def prefix_implicit(m_star, h, J, mask, tap, b, damping, max_iter, tol, info):
    """The implicit backward as it was before the fix (absolute stopping test); for this measurement only."""
    m = meanfield.update(m_star, h, J, mask, tap, b)
    z0 = m_star.clone().requires_grad_(True)
    with torch.enable_grad():
        f0 = meanfield.update(z0, h, J, mask, tap, b)

    def hook(g):
        v = g
        for k in range(1, max_iter + 1):
            info["backward_iterations"] = k
            vjp = torch.autograd.grad(f0, z0, v, retain_graph=True)[0]
            new = (1 - damping) * v + damping * (g + vjp)
            if not torch.isfinite(new).all():
                return g
            done = float((new - v).abs().max()) < tol * max(1.0, float(g.abs().max()))
            v = new
            if done:
                break
        return v

    if m.requires_grad:
        m.register_hook(hook)
    return m


@contextmanager
def prefix_backward():
    """Within the block, mean field differentiates with the pre-fix backward."""
    fixed = meanfield.implicit
    meanfield.implicit = prefix_implicit
    try:
        yield
    finally:
        meanfield.implicit = fixed


def _sampling(method: str, grad: str = "implicit"):
    from hybrid_attention import Sampling
    from hybrid_attention.backends import get_sampler

    kw = {"grad": "unroll", "max_iter": 3000} if grad == "unroll" else {}
    return Sampling(get_sampler("meanfield", method=method, **kw))


def _angle(c: float) -> float:
    return math.acos(max(-1.0, min(1.0, c)))


def training_gradients(run: Path) -> dict:
    """On one training batch of the run's own size and its own mean-field method: per group ``{"prefix_vs_fixed",
    "prefix_vs_unroll", "fixed_vs_unroll"}`` as ``{"cosine", "norm_ratio"}`` (first over second)."""
    model, cfg, task = ve.load(run)
    model.train()
    method = (cfg.sampler_options or {}).get("method", "naive")
    x, y = task.get_batch("train", cfg.batch_size, cfg.block_size, generator=torch.Generator().manual_seed(5))
    with prefix_backward():
        g_pre = ve.gradient(model, x, y, _sampling(method))
    g_fix = ve.gradient(model, x, y, _sampling(method))
    g_unr = ve.gradient(model, x, y, _sampling(method, "unroll"))
    return {
        "method": method,
        "prefix_vs_fixed": ve.compare_grads(g_pre, g_fix),
        "prefix_vs_unroll": ve.compare_grads(g_pre, g_unr),
        "fixed_vs_unroll": ve.compare_grads(g_fix, g_unr),
    }


def recheck(record: dict) -> dict:
    """The mean-field candidates' gradient criteria of one validation record, with the fixed backward: per engine and
    group ``{"cosine": (low, high), "norm_ratio": value}`` (``low == high`` where the reference is exact)."""
    run = HERE / record["run"]
    model, cfg, task = ve.load(run)
    T = cfg.block_size
    xg, yg = task.get_batch("train", 32, T, generator=torch.Generator().manual_seed(12345))  # validate()'s batch
    exact = record["reference"]["kind"] == "exact enumeration"
    g_ref = ve.gradient(model, xg, yg, None) if exact else None
    out = {}
    for eng in MF_ENGINES:
        method = "tap" if eng == "tap" else "naive"
        with prefix_backward():
            g_pre = ve.gradient(model, xg, yg, _sampling(method))
        g_fix = ve.gradient(model, xg, yg, _sampling(method))
        shift = ve.compare_grads(g_fix, g_pre)
        old = record["engines"][eng]["gradient"]
        groups = {}
        for k, s in shift.items():
            if exact:
                new = ve.compare_grads(g_fix, g_ref)[k]
                groups[k] = {"cosine": (new["cosine"], new["cosine"]), "norm_ratio": new["norm_ratio"]}
            else:  # the angle to the reference moves by at most the angle between the two engine gradients
                a, d = _angle(old[k]["cosine"]), _angle(s["cosine"])
                groups[k] = {
                    "cosine": (math.cos(min(math.pi, a + d)), math.cos(max(0.0, a - d))),
                    "norm_ratio": old[k]["norm_ratio"] * s["norm_ratio"],
                }
            groups[k]["shift"] = s
        out[eng] = groups
    return out


def with_gradients(record: dict, new: dict, end: int) -> dict:
    """``record`` with its mean-field candidates' gradient entries replaced by ``new`` at one end (0: the low
    cosine, 1: the high one) of each range."""
    r = json.loads(json.dumps(record))
    for eng, groups in new.items():
        r["engines"][eng]["gradient"] = {
            k: {"cosine": g["cosine"][end], "norm_ratio": g["norm_ratio"]} for k, g in groups.items()
        }
    return r


def mean_field_runs() -> list[Path]:
    """Every committed-style run directory trained with mean field that has a checkpoint."""
    out = []
    for conf in sorted((HERE / "results").glob("**/config.json")):
        d = conf.parent
        try:
            run = json.loads(conf.read_text()).get("run", {})
        except json.JSONDecodeError:
            continue
        if run.get("sampler") == "meanfield" and (d / "checkpoint.pt").is_file():
            out.append(d)
    return out


def _fmt(c: dict) -> str:
    return " / ".join(f"{c[k]['cosine']:.5f}, {c[k]['norm_ratio']:.3f}" for k in ("c_attn", "J_raw", "rest") if k in c)


def main() -> int:
    torch.set_num_threads(1)
    lines = [
        "# The mean-field backward fix: what it changes",
        "",
        "Produced by `python -m experiments.long_context.backward_fix` (PROTOCOL.md change 5). Per parameter group "
        "(attention projection `c_attn` / couplings `J_raw` / the rest): gradient cosine and norm ratio of the "
        "first gradient over the second, on one training batch (the run's batch size, seed 5) at the run's last "
        "checkpoint.",
        "",
        "## Training gradients of every mean-field run",
        "",
        "| run | method | pre-fix vs fixed | pre-fix vs unrolled | fixed vs unrolled |",
        "| --- | --- | --- | --- | --- |",
    ]
    worst = 1.0
    for run in mean_field_runs():
        print(f"training gradient: {run.relative_to(HERE)}", flush=True)
        r = training_gradients(run)
        worst = min(worst, *(g["cosine"] for g in r["prefix_vs_fixed"].values()))
        lines.append(
            f"| {run.relative_to(HERE / 'results')} | {r['method']} | {_fmt(r['prefix_vs_fixed'])} | "
            f"{_fmt(r['prefix_vs_unroll'])} | {_fmt(r['fixed_vs_unroll'])} |"
        )
    lines += [
        "",
        f"Smallest cosine between the pre-fix and the fixed gradient over every run and group: {worst:.5f}.",
        "",
        "## The engine validation's gradient criteria, recomputed",
        "",
        f"Criteria: cosine >= {ve.COSINE_MIN}, norm ratio in [{ve.NORM_RANGE[0]}, {ve.NORM_RANGE[1]}]. At T <= 20 "
        "against exact enumeration (exact values); at T >= 32 the committed Gibbs reference is not recomputed, so "
        "the fixed gradient's cosine is given as the range its angle to the pre-fix gradient allows.",
        "",
        "| model | engine | committed cos, ratio (c_attn / J / rest) | fixed: cos range, ratio (c_attn / J / rest) |",
        "| --- | --- | --- | --- |",
    ]
    rows, pending = ve.validated_rows()
    ends = ([], [])
    for rec in rows:
        print(f"validation record: {rec['model']}", flush=True)
        new = recheck(rec)
        for eng, groups in new.items():
            old = rec["engines"][eng]["gradient"]
            lines.append(
                f"| {rec['model']} | {eng} | {_fmt(old)} | "
                + " / ".join(
                    f"[{g['cosine'][0]:.3f}, {g['cosine'][1]:.3f}], {g['norm_ratio']:.3f}" for g in groups.values()
                )
                + " |"
            )
        for end in (0, 1):
            ends[end].append(with_gradients(rec, new, end))
    decisions = [ve.choose(e) for e in ends]
    committed = ve.choose(rows)
    same = all(d == committed for d in decisions)
    lines += [
        "",
        "## The engine decision",
        "",
        f"- Committed (pre-fix gradients): {committed['tasks']} (overall: {committed['overall']}).",
        f"- Fixed gradients, every cosine at the low end of its range: {decisions[0]['tasks']} "
        f"(overall: {decisions[0]['overall']}).",
        f"- Fixed gradients, every cosine at the high end: {decisions[1]['tasks']} (overall: {decisions[1]['overall']}).",
        f"- plan.ENGINES: {ENGINES}.",
        "",
        "The decision "
        + ("is unchanged at both ends." if same else "CHANGES: see PROTOCOL.md change 5 for what follows."),
    ]
    out = HERE / ROOT / "backward_fix.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
