"""The compiled loops' slow stage against Newton on the rows that training leaves slow (issue #44 target 2).

One training run of ``train --attention hj --sampler meanfield --block-size T --steps STEPS`` in process (the
CLI's model, optimiser, schedule and batches: :func:`bench.meanfield_profile._trainer`), the forward problems of
the steps ``--at`` captured. On each, the rows still unconverged after ``SWITCH`` iterations solved both ways:

* Newton (``LONG = SWITCH``, as before the slow stage): :func:`~hybrid_attention.backends.mcmc.fixed_point.stragglers`
  from the iterate after ``SWITCH``;
* the slow stage (``mf_kernel.LONG``): the iteration on, each row until its estimated distance ``r / (1 - rho)`` is
  below ``tol``, Newton for the rows that do not pass by then.

Each answer is polished in float64 (Newton on the free energy to a residual of 1e-12) to the fixed point it
belongs to: the table gives the rows whose two polished points differ (by more than 1e-6: another fixed point;
both are local minima of the free energy where the iteration or Newton's descent converges) and in how many of them
the slow stage's is the lower minimum, the largest distance between the polished points, each answer's largest
distance from its own, and the single-thread CPU time of each way (the whole forward solve of
the step's rows).

    python -m bench.meanfield_slow --block-size 128 --steps 500 --at 100 150 250 450
"""

from __future__ import annotations

import argparse
import time


def _capture(T: int, steps: int, at: list[int]) -> list[tuple[int, dict]]:
    """``[(step, forward inputs)]`` of the training run's steps ``at`` (1-based)."""
    from bench.meanfield_profile import _trainer
    from hybrid_attention.backends.mcmc import mf_kernel

    step, _, _ = _trainer("hj", T, steps)
    got: list[tuple[int, dict]] = []
    original = mf_kernel.forward
    current = [0]

    def spy(h, J, mask, b, width, start, **kw):  # noqa: ANN001, ANN202 (the spied function's signature)
        if current[0] in at:
            keep = {k: v for k, v in kw.items() if k != "out"}
            got.append((current[0], {"h": h.clone(), "J": J.clone(), "mask": mask.clone(), "b": b.clone(),
                                     "width": width.clone(), "kw": keep}))  # fmt: skip
        return original(h, J, mask, b, width, start, **kw)

    mf_kernel.forward = spy
    try:
        for i in range(max(at)):
            current[0] = i + 1
            step(i)
    finally:
        mf_kernel.forward = original
    return got


def _both_ways(p: dict) -> dict:
    """The step's forward solve without and with the slow stage, polished in float64 (module docstring)."""
    from hybrid_attention.backends.mcmc import fixed_point, mf_kernel, mf_newton

    damping, tol = p["kw"]["damping"], p["kw"]["tol"]
    h, J, mk, width = (p[k][None] for k in ("h", "J", "mask", "width"))
    out = {}
    for name, long in (("newton", fixed_point.SWITCH), ("slow stage", mf_kernel.LONG)):
        saved, mf_kernel.LONG = mf_kernel.LONG, long  # the library's solve, with or without the slow stage
        try:
            t0 = time.thread_time()
            x, _, _, extra, _ = mf_kernel.solve_rows(h, J, mk, p["b"][None, :, None], damping, tol, 500, width)
            out[name] = {"x": x[0], "s": time.thread_time() - t0, "late": extra["newton_rows"]}
        finally:
            mf_kernel.LONG = saved
    _, count, _, _ = mf_kernel.forward(p["h"], p["J"], p["mask"], p["b"], p["width"], None, damping=damping, tol=tol,
                                       max_iter=mf_kernel.LONG, switch=fixed_point.SWITCH)  # fmt: skip
    out["slow stage"]["count"] = count
    rows = (out["slow stage"]["count"] > fixed_point.SWITCH).nonzero().squeeze(1)
    hh, mk, bb = (t.index_select(0, rows).double() for t in (p["h"], p["mask"], p["b"][:, None]))
    polished = {}
    for name, o in out.items():
        x = o["x"].index_select(0, rows).double()
        ref, _, r = mf_newton.newton_free_energy(x, hh, p["J"].double(), bb, mk, tol=1e-12, max_iter=100)
        polished[name] = (ref, (x - ref).abs().amax(-1))
    same = (polished["newton"][0] - polished["slow stage"][0]).abs().amax(-1)
    apart = same > 1e-6  # polished to a residual of 1e-12: distinct fixed points, not one point twice
    F = {k: mf_newton.free_energy(v[0], hh, p["J"].double(), bb, mk) for k, v in polished.items()}
    return {
        "rows": len(rows),
        "apart": int(apart.sum()),
        "lower": int((F["slow stage"] < F["newton"])[apart].sum()),
        "newton after": out["slow stage"]["late"],
        "same": float(same.max()) if len(rows) else 0.0,
        "err newton": float(polished["newton"][1].max()) if len(rows) else 0.0,
        "err slow": float(polished["slow stage"][1].max()) if len(rows) else 0.0,
        "iters": int(out["slow stage"]["count"].max()),
        "ms newton": out["newton"]["s"] * 1e3,
        "ms slow": out["slow stage"]["s"] * 1e3,
        "tol": tol,
    }


def main(argv: list[str] | None = None) -> int:
    import torch

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--block-size", type=int, default=128)
    p.add_argument("--steps", type=int, default=500, help="the run's length (its learning-rate schedule)")
    p.add_argument("--at", type=int, nargs="+", default=[100, 150, 250, 450], help="steps captured (1-based)")
    args = p.parse_args(argv)
    if max(args.at) > args.steps or min(args.at) < 1:
        p.error(f"--at must be steps 1..{args.steps}; got {args.at}")
    torch.set_num_threads(1)
    got = _capture(args.block_size, args.steps, sorted(set(args.at)))
    print(f"# T = {args.block_size}, a {args.steps}-step run; rows past SWITCH: Newton against the slow stage")
    print(
        "| step | rows past SWITCH | to Newton after the slow stage | at another fixed point (of them, the slow "
        "stage's lower in free energy) | polished points apart (max) | "
        "Newton's answer from its point (max) | slow stage's (max) | slowest row's iterations | "
        "forward solve CPU ms: Newton | slow stage |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for step, problem in got:
        r = _both_ways(problem)
        print(
            f"| {step} | {r['rows']} | {r['newton after']} | {r['apart']} ({r['lower']}) | {r['same']:.1e} | "
            f"{r['err newton']:.1e} | "
            f"{r['err slow']:.1e} | {r['iters']} | {r['ms newton']:.1f} | {r['ms slow']:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
