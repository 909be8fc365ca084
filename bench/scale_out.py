"""Scale-out on Dask: speed-up of an ablation grid and of a large sampler batch with 1 vs 2 workers, the overhead
per task, and a paper estimate of a 1,000-run grid on 64 workers from measured per-run costs.

Everything runs on this machine: a cluster of 1 and one of 2 single-threaded workers, each deployed as a user would
(``dask scheduler`` and ``dask worker --nworkers N --nthreads 1`` processes; started once, their start-up timed apart).
The grid is the ``hybrid-attention ablate`` command in a fresh process for every variant (serial, ``--scheduler``
of the 1-worker and of the 2-worker cluster); the batch is the ``sharded`` Gibbs sampler in this process (``client``
None, or a client of either cluster). Repetitions are interleaved (serial, 1 worker, 2 workers, serial, ...) so that
machine load hits every variant alike; the tables give medians and ratios of medians. Every distributed result is
checked against the serial one (identical summaries, bitwise-identical SampleSets).

    python -m bench.scale_out                       # grid of 4 brackets runs, batch of 256 problems, 3 reps
    python -m bench.scale_out --runs-csv results/ablation/shakespeare/runs.csv --reps 5
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from hybrid_attention import IsingProblem
from hybrid_attention.backends import get_sampler


def _noop(x: int) -> int:
    return x


class Cluster:
    """A Dask cluster as a user deploys one: ``dask scheduler`` and ``dask worker --nworkers N --nthreads 1`` as
    separate processes (so that nothing of Dask runs in the process that times the serial variants)."""

    def __init__(self, workers: int, root: Path) -> None:
        self.file = root / f"scheduler-{workers}.json"
        t = time.perf_counter()
        common = dict(start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs = [
            subprocess.Popen(
                ["dask", "scheduler", "--port", "0", "--no-dashboard", "--scheduler-file", str(self.file)], **common
            )
        ]
        while not self.file.is_file():
            time.sleep(0.1)
        self.procs.append(
            subprocess.Popen(
                ["dask", "worker", "--scheduler-file", str(self.file), "--nworkers", str(workers), "--nthreads", "1"]
                + ["--no-dashboard"],
                **common,
            )
        )
        import distributed

        self.client = distributed.Client(scheduler_file=str(self.file))
        self.client.wait_for_workers(workers)
        self.startup = time.perf_counter() - t
        self.address = self.client.scheduler.address

    def close(self) -> None:
        self.client.close()
        for p in reversed(self.procs):  # each in its own session: its nannies and workers go with it
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=30)


def grid_command(args: argparse.Namespace, out: Path) -> list[str]:
    """``hybrid-attention ablate`` of the bench's grid (brackets, softmax and hj, ``args.seeds`` seeds)."""
    return [
        sys.executable,
        "-m",
        "hybrid_attention.apps",
        "ablate",
        "--task",
        "brackets",
        "--modes",
        "softmax",
        "hj",
        "--block-sizes",
        str(args.block_size),
        "--seeds",
        *map(str, range(args.seeds)),
        "--steps",
        str(args.steps),
        "--eval-interval",
        str(args.steps),
        "--n-embd",
        "16",
        "--batch-size",
        "16",
        "--eval-size",
        "256",
        "--warmup",
        "5",
        "--threads",
        "1",
        "--no-progress",
        "--out",
        str(out),
    ]


def time_grid(cluster: Cluster | None, args: argparse.Namespace, root: Path, tag: str) -> tuple[float, bytes]:
    """Wall time of the ``ablate`` command on a fresh directory, serial (``cluster=None``) or ``--scheduler``; its
    summary.md. Every variant is one process started the same way, so the start-up of Python is in all of them."""
    out = Path(tempfile.mkdtemp(prefix=f"{tag}-", dir=root))
    cmd = grid_command(args, out) + ([] if cluster is None else ["--scheduler", cluster.address])
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t, (out / "summary.md").read_bytes()


def batch_problem(args: argparse.Namespace) -> IsingProblem:
    g = torch.Generator().manual_seed(0)
    n = args.n
    U = torch.randn(args.batch, n, n, generator=g, dtype=torch.float64).triu(1)
    return IsingProblem(torch.randn(args.batch, n, generator=g, dtype=torch.float64), U + U.transpose(1, 2))


def time_batch(cluster: Cluster | None, args: argparse.Namespace, p: IsingProblem) -> tuple[float, np.ndarray]:
    client = None if cluster is None else cluster.client
    opts = {"kernel": args.kernel}
    s = get_sampler("sharded", sampler="gibbs", sampler_options=opts, client=client, shard_size=args.shard_size)
    t = time.perf_counter()
    ss = s.sample(p, num_reads=args.reads, seed=1)
    return time.perf_counter() - t, ss.spins


def task_overhead(client, k: int = 200) -> float:
    """Seconds per no-op task (submit to result), ``k`` tasks at once."""
    client.submit(_noop, -1, pure=False).result()  # warm
    t = time.perf_counter()
    client.gather([client.submit(_noop, i, pure=False) for i in range(k)])
    return (time.perf_counter() - t) / k


def paper_estimate(runs_csv: Path | None, measured_run_s: float, runs: int, workers: int, overhead: float) -> str:
    """1,000 runs on 64 workers from per-run costs: ``ceil(runs / workers)`` waves of the mean run (each worker
    runs one run at a time), plus per-task overhead; and the perfect-packing bound ``sum / workers``."""
    lines = []
    sources = [("this bench's grid run (wall per run, serial)", [measured_run_s])]
    if runs_csv is not None and runs_csv.is_file():
        with open(runs_csv) as f:
            el = [float(r["elapsed_s"]) for r in csv.DictReader(f)]
        sources.append((f"{runs_csv} (elapsed_s of {len(el)} committed runs; training time only)", el))
    waves = math.ceil(runs / workers)
    lines.append(f"| per-run cost from | mean run s | {runs} runs serial | {workers} workers (waves x mean) | bound |")
    lines.append("| --- | --- | --- | --- | --- |")
    for label, xs in sources:
        m = statistics.fmean(xs)
        serial = runs * m
        est = waves * m + waves * overhead
        lines.append(
            f"| {label} | {m:.2f} | {serial / 3600:.2f} h | {est / 60:.1f} min | {serial / workers / 60:.1f} min |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--seeds", type=int, default=2, help="grid: softmax and hj x this many seeds")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--block-size", type=int, default=8)
    p.add_argument("--kernel", default="auto", help="Gibbs kernel of the batch: auto, compiled or torch")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--reads", type=int, default=256)
    p.add_argument("--shard-size", type=int, default=32)
    p.add_argument("--runs-csv", type=Path, default=Path("results/ablation/shakespeare/runs.csv"))
    p.add_argument("--estimate-runs", type=int, default=1000)
    p.add_argument("--estimate-workers", type=int, default=64)
    args = p.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="scale_out-") as tmp:
        run(args, Path(tmp))


def run(args: argparse.Namespace, root: Path) -> None:
    """The measurements and their tables (grid directories under ``root``)."""
    import distributed

    clusters = {w: Cluster(w, root) for w in (1, 2)}
    try:
        variants = {"serial": None, "1 worker": clusters[1], "2 workers": clusters[2]}
        grid: dict[str, list[float]] = {k: [] for k in variants}
        batch: dict[str, list[float]] = {k: [] for k in variants}
        prob = batch_problem(args)
        for c in (None, *clusters.values()):  # every process loads (and compiles) the sampler before timing
            time_batch(c, args, batch_problem(argparse.Namespace(**{**vars(args), "batch": 8})))
        ref_md = ref_spins = None
        for _ in range(args.reps):
            for name, cluster in variants.items():
                dt, md = time_grid(cluster, args, root, name.replace(" ", ""))
                ref_md = md if ref_md is None else ref_md
                assert md == ref_md, f"{name}: summary differs from the serial grid"
                grid[name].append(dt)
                dt, spins = time_batch(cluster, args, prob)
                ref_spins = spins if ref_spins is None else ref_spins
                assert np.array_equal(spins, ref_spins), f"{name}: SampleSet differs"
                batch[name].append(dt)
        overhead = {w: task_overhead(clusters[w].client) for w in (1, 2)}
        startup = {w: clusters[w].startup for w in (1, 2)}
    finally:
        for c in clusters.values():
            c.close()

    G = 2 * args.seeds
    med = {k: {"grid": statistics.median(grid[k]), "batch": statistics.median(batch[k])} for k in variants}
    print(
        f"grid: `hybrid-attention ablate` of {G} brackets runs (softmax, hj x {args.seeds} seeds, T={args.block_size}, "
        f"{args.steps} steps, n_embd 16), one process per variant; batch: {args.batch} problems, n={args.n}, "
        f"{args.reads} reads, sharded gibbs ({args.kernel} kernel), shards of {args.shard_size}; median of {args.reps} "
        f"interleaved reps; torch {torch.__version__}, distributed {distributed.__version__}"
    )
    print("summaries identical to the serial grid: yes; SampleSets bitwise identical: yes\n")
    print("| workload | serial s | 1 worker s | 2 workers s | 2 vs 1 worker | 2 workers vs serial |")
    print("| --- | --- | --- | --- | --- | --- |")
    for w in ("grid", "batch"):
        s, a, b = (med[k][w] for k in ("serial", "1 worker", "2 workers"))
        print(f"| {w} | {s:.2f} | {a:.2f} | {b:.2f} | {a / b:.2f}x | {s / b:.2f}x |")
    print()
    print("| overhead | 1 worker | 2 workers |")
    print("| --- | --- | --- |")
    print(f"| cluster start-up: scheduler + workers ready (s) | {startup[1]:.2f} | {startup[2]:.2f} |")
    print(f"| no-op task, 200 at once (ms per task) | {1e3 * overhead[1]:.2f} | {1e3 * overhead[2]:.2f} |")
    per_run_grid = (med["1 worker"]["grid"] - med["serial"]["grid"]) / G
    print(f"| grid on 1 worker minus serial, per run (s) | {per_run_grid:.3f} | |")
    print()
    print(
        f"Paper estimate: {args.estimate_runs} runs on {args.estimate_workers} single-threaded workers "
        f"(per-task overhead {1e3 * overhead[2]:.1f} ms, cluster start-up not included)"
    )
    print(
        paper_estimate(args.runs_csv, med["serial"]["grid"] / G, args.estimate_runs, args.estimate_workers, overhead[2])
    )


if __name__ == "__main__":
    main()
