"""The mean-field stopping tolerance of ``train --sampler meanfield`` (issue #44 target 2; protocol
``results/meanfield/PROTOCOL_tol.md``).

``accuracy``: on trained weights (``--weights``: a state dict a ``lockstep --save`` run wrote, or a run's
``checkpoint.pt``), one training batch: the layer's mean-field marginals and the parameter gradients of the loss with
``train``'s mean-field sampler (solver ``rows``, damping 1, float32) at each ``--tols`` value, against the same solver
at tol 1e-7 in float64 (the tight solution): the marginals' largest and rms difference, the cosine of the gradients
(all parameters as one vector), the forward iterations and whether every row converged.

``runs``: the protocol's training runs, ``train --attention hj --sampler meanfield`` with ``train``'s defaults and
``--max-steps 1000`` (``--sampler-option tol=CANDIDATE`` for the candidate arm), seeds and block sizes given, each run
in ``OUT/T<T>/<arm>_s<seed>`` (a run whose ``metrics.json`` exists is skipped), ``--jobs`` at a time under
``nice -n 5``, one thread each.

``table``: the runs' final validation perplexity paired by seed: candidate minus default in % of default per seed,
their mean and 95 % paired t interval per block size, and the protocol's decision rule applied.

    python -m bench.meanfield_tol accuracy --block-size 64 --weights /tmp/mftol/w64-0.pt
    python -m bench.meanfield_tol runs --tol 1e-3 --out results/meanfield/tol_runs
    python -m bench.meanfield_tol table --out results/meanfield/tol_runs
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

#: the protocol's rule (fixed before the runs): mean paired difference within this many % of the default's final
#: validation perplexity, and its 95 % paired t interval within the second
MEAN_BOUND, CI_BOUND = 0.5, 1.5
#: the tight reference: the rows solver at this tolerance, in float64
TIGHT = 1e-7


def _grads_and_marginals(model, x, y, tol: float):
    """``(marginals of the layer (flattened), gradient of every parameter (one vector), sampler info)`` of one
    training step's forward and backward with ``train``'s mean-field sampler at ``tol``."""
    import torch

    from hybrid_attention import Sampling
    from hybrid_attention.backends import get_sampler

    sampler = get_sampler("meanfield", solver="rows", damping=1.0, tol=tol)
    seen: list[torch.Tensor] = []
    inner = sampler.differentiable_marginals

    def record(problem):
        m = inner(problem)
        seen.append(m.detach().reshape(-1))
        return m

    sampler.differentiable_marginals = record  # an instance attribute: this sampler only
    model.zero_grad(set_to_none=True)
    _, loss = model(x, y, sampling=Sampling(sampler))
    loss.backward()
    g = torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])
    return torch.cat(seen), g, dict(sampler.last_info)


def accuracy(args: argparse.Namespace) -> None:
    import copy

    import torch

    from hybrid_attention import Transformer
    from hybrid_attention.apps.train import TrainConfig, load_task

    torch.set_num_threads(1)
    cfg = TrainConfig(attention="hj", sampler="meanfield", block_size=args.block_size).resolved()
    task, _ = load_task(cfg)
    model = Transformer(cfg.model_config(task.vocab_size))
    state = torch.load(args.weights, weights_only=False)
    model.load_state_dict(state.get("model", state))
    model.train()
    gen = torch.Generator().manual_seed(args.batch_seed)
    x, y = task.get_batch("train", cfg.batch_size, args.block_size, generator=gen)
    m_ref, g_ref, info = _grads_and_marginals(copy.deepcopy(model).double(), x, y, TIGHT)
    print(
        f"# T = {args.block_size}, weights {args.weights}, batch seed {args.batch_seed}; reference: float64, tol "
        f"{TIGHT:g}: forward iterations {info['iterations']}, converged {info['converged']}"
    )
    print("| T | tol | max abs(m - m_tight) | rms | gradient cosine | forward iterations | all rows converged |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for tol in args.tols:
        m, g, info = _grads_and_marginals(model, x, y, tol)
        d = m.double() - m_ref
        cos = float(torch.nn.functional.cosine_similarity(g.double(), g_ref, dim=0))
        print(
            f"| {args.block_size} | {tol:g} | {float(d.abs().max()):.1e} | {float(d.pow(2).mean().sqrt()):.1e} | "
            f"{cos:.6f} | {info['iterations']} | {info['converged']} |",
            flush=True,
        )


def _argv(arm: str, T: int, seed: int, tol: float | None, out: Path) -> list[str]:
    argv = ["train", "--attention", "hj", "--sampler", "meanfield", "--block-size", str(T), "--max-steps", "1000"]
    argv += ["--seed", str(seed), "--threads", "1", "--no-progress", "--out", str(out)]
    return argv + (["--sampler-option", f"tol={tol:g}"] if arm == "candidate" else [])


def runs(args: argparse.Namespace) -> None:
    jobs = [(arm, T, seed) for arm in args.arms for T in args.block_size for seed in args.seeds]
    jobs.sort(key=lambda j: -j[1])  # the longest (T = 128) first
    skip = {tuple(x.split(":")) for x in args.skip}
    todo = [j for j in jobs if not (_run_dir(args.out, *j) / "metrics.json").exists()]
    todo = [j for j in todo if (j[0], str(j[1]), str(j[2])) not in skip]
    running: list[tuple[subprocess.Popen, tuple, float]] = []
    while todo or running:
        busy = sum(_alive(pid) for pid in args.after)  # runs started elsewhere hold their slots until they end
        while todo and len(running) + busy < args.jobs:
            arm, T, seed = job = todo.pop(0)
            out = _run_dir(args.out, *job)
            cmd = [
                "nice",
                "-n",
                "5",
                sys.executable,
                "-m",
                "hybrid_attention.apps",
                *_argv(arm, T, seed, args.tol, out),
            ]
            print(f"start {' '.join(cmd[3:])}; load {os.getloadavg()[0]:.1f}", flush=True)
            out.parent.mkdir(parents=True, exist_ok=True)
            with open(f"{out}.log", "w") as log:  # the child keeps its own copy of the descriptor
                running.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), job, time.time()))
        time.sleep(5)
        for p, job, t0 in list(running):
            if p.poll() is not None:
                running.remove((p, job, t0))
                print(f"done {job} rc {p.returncode} in {time.time() - t0:.0f} s", flush=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _run_dir(out: str, arm: str, T: int, seed: int) -> Path:
    return Path(out) / f"T{T}" / f"{arm}_s{seed}"


def _final(d: Path) -> float | None:
    """The final validation perplexity of a finished run, else ``None``."""
    try:
        m = json.loads((d / "metrics.json").read_text())
    except FileNotFoundError:
        return None
    return m["val_perplexity"] if m.get("finished") else None


def table(args: argparse.Namespace) -> None:
    from hybrid_attention.apps.claims.stats import paired_ci

    print("| T | seed | default: final val perplexity | candidate | candidate - default, % of default |")
    print("| --- | --- | --- | --- | --- |")
    verdict = []
    for T in args.block_size:
        diffs = []
        for seed in args.seeds:
            got = {arm: _final(_run_dir(args.out, arm, T, seed)) for arm in ("default", "candidate")}
            if None in got.values():
                shown = {k: "unfinished" if v is None else f"{v:.4f}" for k, v in got.items()}
                print(f"| {T} | {seed} | {shown['default']} | {shown['candidate']} | - |")
                continue
            diffs.append(100 * (got["candidate"] - got["default"]) / got["default"])
            print(f"| {T} | {seed} | {got['default']:.4f} | {got['candidate']:.4f} | {diffs[-1]:+.3f} |")
        if len(diffs) < len(args.seeds):
            verdict.append(None)
            print(f"| {T} | {len(diffs)} of {len(args.seeds)} pairs finished | | | incomplete |")
            continue
        r = paired_ci(diffs)
        ok = abs(r.mean) <= MEAN_BOUND and -CI_BOUND <= r.lo and r.hi <= CI_BOUND
        verdict.append(ok)
        print(
            f"| {T} | mean (95 % paired t interval) | | | {r.mean:+.3f} ({r.lo:+.3f}, {r.hi:+.3f}): "
            f"{'within' if ok else 'outside'} the rule |"
        )
    state = "not validated" if False in verdict else ("incomplete" if None in verdict else "validated")
    print(
        f"\n# the candidate: {state} (rule: mean within +-{MEAN_BOUND} %, 95 % paired t interval within "
        f"+-{CI_BOUND} %, in every block size)"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="part", required=True)
    a, r, t = sub.add_parser("accuracy"), sub.add_parser("runs"), sub.add_parser("table")
    a.add_argument("--block-size", type=int, default=64)
    a.add_argument("--weights", required=True)
    a.add_argument("--tols", type=float, nargs="+", default=[1.2e-4, 3e-4, 1e-3, 3e-3])
    a.add_argument("--batch-seed", type=int, default=5)
    for q in (r, t):
        q.add_argument("--out", default="results/meanfield/tol_runs")
        q.add_argument("--block-size", type=int, nargs="+", default=[64, 128])
        q.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    r.add_argument("--tol", type=float, default=None, help="the candidate tolerance (needed for the candidate arm)")
    r.add_argument("--arms", nargs="+", default=["default", "candidate"], choices=["default", "candidate"])
    r.add_argument("--jobs", type=int, default=2)
    r.add_argument(
        "--after",
        type=int,
        nargs="*",
        default=[],
        metavar="PID",
        help="runs started elsewhere: each holds a slot until it ends",
    )
    r.add_argument("--skip", nargs="*", default=[], metavar="ARM:T:SEED", help="runs to leave out (started elsewhere)")
    args = p.parse_args(argv)
    if args.part == "runs" and "candidate" in args.arms and args.tol is None:
        p.error("the candidate arm needs --tol")
    {"accuracy": accuracy, "runs": runs, "table": table}[args.part](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
