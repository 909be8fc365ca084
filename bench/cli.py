"""Wall time of ``hybrid-attention --help`` and of every subcommand's ``--help``, whole process, start-up included.

Each command is started ``--runs`` times (after one warm-up run that is not counted) as a fresh process
(``python -m hybrid_attention.apps ...``, the console script's module); the table gives the median and the spread
(min - max) of the wall time, and the heavy packages the process imported (none expected: the help comes from the
recorded flags, ``hybrid_attention/apps/cli_flags.py``). A bare ``python -c pass`` row measures the interpreter's own start-up on
this machine in the same run. Target (issue "speed where the work is"): every help under 0.5 s.

    python -m bench.cli --out results/bench/cli.md
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = ("demo", "train", "ablate", "fidelity", "claims")
HEAVY = ("torch", "qiskit", "pennylane", "numpy")
PROBE = (
    "import runpy, sys, contextlib, io\nsys.argv = ['hybrid-attention', *{argv!r}]\n"
    "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
    "    runpy.run_module('hybrid_attention.apps', run_name='__main__')\n"
    "print(sorted({{m.split('.')[0] for m in sys.modules}} & {heavy!r}), file=sys.stderr)"
)


def wall(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=11)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    rows = {"python -c pass": [sys.executable, "-c", "pass"]}
    rows["hybrid-attention --help"] = [sys.executable, "-m", "hybrid_attention.apps", "--help"]
    for c in COMMANDS:
        rows[f"hybrid-attention {c} --help"] = [sys.executable, "-m", "hybrid_attention.apps", c, "--help"]
    for cmd in rows.values():
        wall(cmd)  # warm-up (file cache)
    times: dict[str, list[float]] = {k: [] for k in rows}
    for _ in range(args.runs):  # interleaved: load drifts hit every row alike
        for k, cmd in rows.items():
            times[k].append(wall(cmd))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        f"Command: `python -m bench.cli {' '.join(argv if argv is not None else sys.argv[1:])}`",
        "",
        f"{args.runs} interleaved runs per command after a warm-up, whole process (fresh interpreter); "
        f"{os.cpu_count()} cores, load average {load} at the end",
        "",
        "| command | median s | min - max s | heavy packages imported |",
        "| --- | --- | --- | --- |",
    ]
    for k, cmd in rows.items():
        heavy = "-"
        if "hybrid_attention.apps" in cmd:
            argv_ = cmd[cmd.index("hybrid_attention.apps") + 1 :]
            probe = PROBE.format(argv=argv_, heavy=set(HEAVY))
            r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
            heavy = r.stderr.strip().splitlines()[-1]
        v = times[k]
        lines.append(f"| `{k}` | {statistics.median(v):.3f} | {min(v):.3f} - {max(v):.3f} | {heavy} |")
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("# Command-line help time\n\n" + text + "\n")


if __name__ == "__main__":
    main()
