"""Projected against actual wall time of every long command, each on the documentation's example (issue #44).

The commands: train (exact, meanfield, gibbs, qemcmc, the IBM fake-backend route), fidelity, ablate and mixing,
each case on the example of the page named in its row.

Each case runs once as ``python -m hybrid_attention.apps ...`` with ``-v``; the projection is the first stderr line
that says ``projected ... <duration> in all``, and the actual time is the wall time from that line to the command's
last line of output, its result (the work the projection speaks for; start-up and the probe come before it, the
interpreter's shutdown after it: the time to the process's exit is recorded too). Ratio = actual / projected
(target: every ratio in [0.5, 2]). Load averages are read before and after each case: the machine is shared, and
both times are measured under the same load, one case at a time; the process's CPU seconds (user + system, all
its threads) say how much of its wall time the load took away. Results accumulate in ``--json`` (a case rerun
replaces its row) and the table is rewritten from it:

    python -m bench.projections --out results/bench/projections.md            # every case (about 30 min)
    python -m bench.projections --only train-gibbs,mixing --out results/bench/projections.md
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

#: case -> (where the documentation shows it, the command's arguments; OUT is replaced by a fresh directory)
TRAIN = ["train", "--task", "brackets", "--attention", "hj", "--block-size", "8", "--steps", "100", "--no-ffn"]
CASES: dict[str, tuple[str, list[str]]] = {
    "train-exact": ("README.md (hj)", [*TRAIN, "--out", "OUT"]),
    "train-meanfield": ("README.md, --sampler meanfield", [*TRAIN, "--out", "OUT", "--eval-exact", "--sampler", "meanfield"]),
    "train-gibbs": ("README.md, --sampler gibbs", [*TRAIN, "--out", "OUT", "--eval-exact", "--sampler", "gibbs"]),
    "train-qemcmc": ("README.md (qemcmc)", [*TRAIN, "--out", "OUT", "--eval-exact", "--sampler", "qemcmc"]),
    "train-ibm": (
        "docs/quantum.md, 2 of its 5 steps",
        "train --task brackets --block-size 4 --steps 2 --sampler ibm --backend fake_torino --shots 128 --eval-exact "
        "--out OUT".split(),
    ),
    "fidelity": (
        "docs/samplers.md",
        "fidelity --samplers exact,statevector,aer,gibbs --n 3,4,5 --shots 256,1024,4096 --tau 0.5,1,2 --steps 10,40 "
        "--out OUT".split(),
    ),
    "ablate": (
        "docs/training.md, 2 modes, 2 block sizes, 1 seed",
        "ablate --task shakespeare --modes softmax hj --block-sizes 4 8 --seeds 0 --steps 600 --eval-interval 200 "
        "--out OUT".split(),
    ),
    "mixing": ("the mixing module's example", "mixing --ensemble layden --n 4,5,6 --problems 8 --out OUT".split()),
}  # fmt: skip

_UNITS = {"ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}
_PROJECTED = re.compile(r"projected .*?([0-9.]+) (ms|s|min|h) in all")


def projected_seconds(line: str) -> float | None:
    """The ``<duration> in all`` of a projection line, in seconds (``None``: not a projection line).

    Example:
        >>> projected_seconds("x: projected 43 ms per step, 6.3 s in all (2 evaluation(s) ...)")
        6.3
    """
    m = _PROJECTED.search(line)
    return None if m is None else float(m.group(1)) * _UNITS[m.group(2)]


def _follow(stream: Any, seen: dict[str, Any], key: str, want: Any = None) -> None:
    """Read ``stream`` to its end; ``seen[key]``: the time of its last line (or the first line ``want`` accepts,
    with the line in ``seen[key + "_line"]``)."""
    for text in stream:
        if want is None:
            seen[key] = time.perf_counter()
        elif key not in seen and want(text):
            seen[key], seen[key + "_line"] = time.perf_counter(), text.strip()


def run_case(argv: list[str], tmp: str) -> dict:
    """Run one command; the projection line and its seconds; the actual seconds from that line to the command's last
    line of output (its result: the work the projection speaks for) and to the process's exit (interpreter
    shutdown included); the process's CPU seconds; loads before and after."""
    argv = [os.path.join(tmp, "out") if a == "OUT" else a for a in argv]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    load0 = os.getloadavg()[0]
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "hybrid_attention.apps", "-v", *argv, "--no-progress"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    seen: dict[str, Any] = {}
    readers = [
        threading.Thread(target=_follow, args=(proc.stderr, seen, "projection", projected_seconds)),
        threading.Thread(target=_follow, args=(proc.stdout, seen, "result")),
    ]
    for r in readers:
        r.start()
    code = proc.wait()
    t_end = time.perf_counter()
    for r in readers:
        r.join()
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    if code != 0 or "projection" not in seen or "result" not in seen:
        raise RuntimeError(f"{' '.join(argv)}: exit {code}, projection or output missing ({sorted(seen)})")
    projected = projected_seconds(seen["projection_line"])
    actual = seen["result"] - seen["projection"]
    return {
        "projected_s": projected,
        "actual_s": round(actual, 2),
        "ratio": round(actual / projected, 3),
        "to_exit_s": round(t_end - seen["projection"], 2),
        "process_s": round(t_end - t0, 2),
        "process_cpu_s": round(cpu, 2),
        "load": [round(load0, 2), round(os.getloadavg()[0], 2)],
        "line": seen["projection_line"],
    }


def table(results: dict[str, dict]) -> str:
    """The markdown table of ``results`` (case -> row), in :data:`CASES` order."""
    rows = [
        "| case | documented in | command | projected | actual | actual / projected | to exit | process wall (CPU) | "
        "load 1-min (start, end) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in CASES:
        r = results.get(name)
        if r is None:
            continue
        where, argv = CASES[name]
        cmd = "hybrid-attention " + " ".join("DIR" if a == "OUT" else a for a in argv)
        rows.append(
            f"| {name} | {where} | `{cmd}` | {r['projected_s']:.1f} s | {r['actual_s']:.1f} s | {r['ratio']:.2f} | "
            f"{r['to_exit_s']:.1f} s | "
            f"{r['process_s']:.1f} s ({r['process_cpu_s']:.1f} s) | {r['load'][0]:.1f}, {r['load'][1]:.1f} |"
        )
    return "\n".join(rows) + "\n"


HEADER = """Projected against actual wall time of the long commands (issue #44), regenerated by

    python -m bench.projections --out results/bench/projections.md

(one case: `--only NAME`; rows accumulate in results/bench/projections.json). Projected: the `projected ... in all`
line each command logs before its work, from a timed probe of that work. Actual: wall time from that line to the
command's result (its last line of output); "to exit" adds the interpreter's shutdown. The machine is a shared
2-core one: the load column is the 1-minute load average before and after the case, and the process's CPU seconds
beside its wall time show how much of the wall time the load took away. One run per case.
"""

TARGET = """Target: every ratio actual / projected in [0.5, 2]. Measured: {lo:.2f} to {hi:.2f}, {inside} of {n} cases inside.

History of the `train-ibm` row (the IBM route's probe; each a run of this case): 0.76 with the full probe (a warm-up
and full-batch passes: on a fake backend it submitted more than a device run is counted for); 0.16 with one pass of
8 rows scaled to the batch (each pass submits one job per sampler call, 17-25 s each on the fake backend's local
executor against about 0.8 s per row, and the scaling multiplied that per-job time by 8); 0.48 with passes of 1 and
7 rows fitted as per-job plus per-row time on their wall time (a few seconds of per-row difference under the load's
noise); the row above: the same fit on CPU time, scaled by the probe's wall / CPU ratio (fake backends only).
"""


def verdict(results: dict[str, dict]) -> dict[str, Any]:
    """The smallest and largest ratio and how many of the cases lie in [0.5, 2]."""
    ratios = [r["ratio"] for r in results.values()]
    return {
        "lo": min(ratios),
        "hi": max(ratios),
        "n": len(ratios),
        "inside": sum(0.5 <= x <= 2 for x in ratios),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default=None, help="comma-separated cases (default: all): " + ", ".join(CASES))
    p.add_argument("--out", type=Path, default=None, help="markdown table (default: print only)")
    p.add_argument("--json", type=Path, default=Path("results/bench/projections.json"), help="accumulated rows")
    args = p.parse_args(argv)
    names = list(CASES) if args.only is None else [x.strip() for x in args.only.split(",") if x.strip()]
    bad = [x for x in names if x not in CASES]
    if bad:
        p.error(f"--only: unknown case(s) {bad}, expected among {list(CASES)}")
    results = json.loads(args.json.read_text()) if args.json.is_file() else {}
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            print(f"{name}: running", file=sys.stderr, flush=True)
            results[name] = run_case(CASES[name][1], tmp)
            print(f"{name}: {results[name]}", file=sys.stderr, flush=True)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    text = HEADER + "\n" + table(results) + "\n" + TARGET.format(**verdict(results))
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
