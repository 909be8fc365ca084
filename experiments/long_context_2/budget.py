"""The round-2 budget (PROTOCOL.md "Budget"): measured training milliseconds per step of every arm, task and T of
the plan, and the CPU hours each plan needs at a step budget.

    python -m experiments.long_context_2.budget --measure   # time every (task, arm, T): about 30 min on one core
    python -m experiments.long_context_2.budget             # the table and the totals (results/long_context_2/budget.md)

How: each configuration trains from initialisation through the plan's own path (``hybrid_attention.apps.train.train``
with the run's ``TrainConfig``, one torch thread, a fresh process, no evaluation inside the timed steps) for
``--short`` and ``--long`` steps, and the training seconds of the two are differenced so start-up costs cancel:
``ms per step = 1000 (t_long - t_short) / (long - short)``. The machine is shared, so each configuration is timed
interleaved with a fixed reference (:data:`REFERENCE`, Tiny Shakespeare softmax at T = 64) and costed by its ratio to
it times the reference's whole-run cost in round 1 (its finished runs, the same runner with two workers). Naive mean
field costs more as J grows during training (its fixed-point iterations rise): round 1's finished hj runs measured
that over whole runs, and the ratio of that to this pilot's costed time at initialisation (same engine, same T)
scales the mean-field arms here. Results: ``results/long_context_2/budget_steps.json`` (measurements) and ``budget.md``.
"""

from __future__ import annotations

import argparse
import glob
import json
import multiprocessing
import os
import statistics
import tempfile
import time
from pathlib import Path

from experiments import REPO, data_path

from . import plan

OUT = REPO / "results" / "long_context_2"
STEPS_FILE = OUT / "budget_steps.json"
ROUND1 = REPO / "results" / "long_context"
#: the reference timed beside every configuration: Tiny Shakespeare softmax at T = 64 (its whole-run cost in round 1,
#: measured by the same runner with two workers, converts the ratios into milliseconds)
REFERENCE = ("shakespeare", "softmax", 64)
REF_LONG = 65
#: arms trained with naive mean field (their cost grows as J grows)
MEANFIELD_ARMS = ("hj-full", "hj-band4-mf")


def _time_one(args: tuple[str, str, int, int]) -> float:
    """Training seconds of ``steps`` steps of (task, arm, T) from initialisation, in this (fresh) process."""
    task, arm, T, steps = args
    import torch

    from hybrid_attention.apps.train import TrainConfig, train

    torch.set_num_threads(1)
    fields = {**plan.COMMON, **plan.task_settings(task, T), **plan.arms(task, T, (arm,))[arm]}
    with tempfile.TemporaryDirectory() as tmp:
        cfg = TrainConfig(
            **{**fields, "block_size": T, "max_steps": steps, "eval_interval": 10**6, "patience": 0},
            lr=1e-3,
            seed=0,
            out=str(Path(tmp) / "run"),
            data=str(data_path()),
            progress=False,
            threads=1,
        )
        m = train(cfg)
    return float(m["elapsed_s"])


def configurations() -> list[tuple[str, str, int]]:
    """Every (task, arm, T) of the plans."""
    out = []
    for T in (*plan.BLOCK_SIZES, plan.PILOT_T):
        for task in ("shakespeare", "mqar"):
            out += [(task, arm, T) for arm in plan.PRIMARY_ARMS]
            if T != plan.PILOT_T:
                out += [(task, arm, T) for arm in plan.SECONDARY_ARMS]
        if T != plan.PILOT_T:
            for task in ("runs", "brackets"):
                out += [(task, arm, T) for arm in plan.PRIMARY_ARMS]
    return out


def measure(short: int, long: int, only: str | None = None, exclude: list[str] | None = None) -> None:
    """Time every configuration (resumable: measured ones are kept in :data:`STEPS_FILE`); ``only`` / ``exclude``:
    the configurations naming (or not naming) this task or arm."""
    from tqdm.auto import tqdm

    done = json.loads(STEPS_FILE.read_text()) if STEPS_FILE.is_file() else {}
    todo = [
        c
        for c in configurations()
        if "|".join(map(str, c)) not in done
        and (only is None or only in map(str, c))
        and not set(exclude or ()) & set(map(str, c))
    ]
    ctx = multiprocessing.get_context("spawn")
    for task, arm, T in tqdm(todo, desc="step times", unit="config"):
        ts, ref = {}, {}
        try:
            for steps, ref_steps in ((short, short), (long, REF_LONG)):  # reference and configuration interleaved
                with ctx.Pool(1, maxtasksperchild=1) as pool:
                    ref[ref_steps] = pool.apply(_time_one, ((*REFERENCE, ref_steps),))
                with ctx.Pool(1, maxtasksperchild=1) as pool:
                    ts[steps] = pool.apply(_time_one, ((task, arm, T, steps),))
        except ValueError as exc:  # refused before work (the memory budget): the configuration cannot run here
            entry = {"refused": " ".join(str(exc).split())}
        else:
            ms = 1000 * (ts[long] - ts[short]) / (long - short)
            ref_ms = 1000 * (ref[REF_LONG] - ref[short]) / (REF_LONG - short)
            entry = {
                "ms_per_step": ms,
                "reference_ms_per_step": ref_ms,
                "ratio": ms / ref_ms,
                "short": [short, ts[short]],
                "long": [long, ts[long]],
            }
        load = os.getloadavg()[0]
        done["|".join(map(str, (task, arm, T)))] = {**entry, "measured": time.strftime("%Y-%m-%d %H:%M"), "load": load}
        OUT.mkdir(parents=True, exist_ok=True)
        current = json.loads(STEPS_FILE.read_text()) if STEPS_FILE.is_file() else {}  # another measurer's entries too
        current.update(done)
        done = current
        tmp = STEPS_FILE.with_suffix(".tmp")
        tmp.write_text(json.dumps(done, indent=1, sort_keys=True) + "\n")
        tmp.replace(STEPS_FILE)


def round1_cost(mode: str = "hj") -> dict[int, float]:
    """Round 1's whole-run cost (median ms per step of its finished Tiny Shakespeare runs of ``mode``) per T."""
    out = {}
    for T in (64, 128):
        v = []
        for f in glob.glob(str(ROUND1 / "shakespeare*" / "runs" / f"{mode}_T{T}_*" / "metrics.json")):
            m = json.loads(Path(f).read_text())
            if m.get("step"):
                v.append(1000 * m["elapsed_s"] / m["step"])
        if v:
            out[T] = statistics.median(v)
    return out


def runs_per_cell(name: str) -> int:
    """Runs of one (arm, task, T) cell of a plan, without grid extensions: the sweep (3 rates x seeds 0-2) and the
    main seeds; the T = 256 pilot: 3."""
    if name == "pilot256":
        return len(plan.SWEEP_SEEDS)
    seeds = plan.PRIMARY_SEEDS if name == "primary" else plan.SECONDARY_SEEDS
    return len(plan.LRS) * len(plan.SWEEP_SEEDS) + len(seeds)


def report(steps_budget: int) -> str:
    steps = json.loads(STEPS_FILE.read_text())
    ref_ms = round1_cost("softmax")[REFERENCE[2]]

    def costed(v: dict) -> float:  # ms per step under the plan's conditions: the measured ratio x round 1's reference
        return v["ratio"] * ref_ms

    r1 = round1_cost("hj")
    init_mf = {
        T: costed(steps[f"shakespeare|hj-full|{T}"]) for T in r1 if "ratio" in steps.get(f"shakespeare|hj-full|{T}", {})
    }
    growth = {T: r1[T] / init_mf[T] for T in init_mf}
    g_max = max(growth.values()) if growth else 1.0
    lines = [
        "# Round 2 budget: measured step times and CPU hours",
        "",
        "Regenerate: `python -m experiments.long_context_2.budget --measure` (timings, resumable), then",
        "`python -m experiments.long_context_2.budget` (this page). One torch thread per run, as the plan runs them;",
        "ms per step from differencing two run lengths from initialisation (module docstring), each configuration",
        "timed interleaved with the reference (Tiny Shakespeare softmax, T = 64) so that the machine's load cancels in",
        f"their ratio; the ratio times the reference's whole-run cost in round 1 ({ref_ms:.1f} ms per step, the same",
        "runner with two workers) gives the costed time.",
        "",
        "Naive mean field grows slower as J grows. Round 1's finished Tiny Shakespeare hj runs (whole runs, same engine)",
        "against this pilot at initialisation: "
        + ", ".join(f"T = {T}: {r1[T]:.0f} vs {init_mf[T]:.0f} ms, x{growth[T]:.2f}" for T in sorted(growth))
        + ". The mean-field arms are costed at their initial step times times the factor of their T (at T = 256",
        f"the largest, x {g_max:.2f}).",
        "",
        "| task | arm | T | / reference (at init) | ms/step costed | runs per cell | CPU h per cell |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    totals: dict[str, float] = {}
    refused = []
    for key, v in sorted(steps.items(), key=lambda kv: (int(kv[0].split("|")[2]), kv[0])):
        task, arm, T = key.split("|")
        T = int(T)
        if "refused" in v:
            refused.append(f"- {task}, {arm}, T = {T}: {v['refused']}")
            continue
        ms = costed(v) * (growth.get(T, g_max) if arm in MEANFIELD_ARMS else 1.0)
        if T == plan.PILOT_T:
            name = "pilot256"
        elif task in ("runs", "brackets"):
            name = "secondary_tasks"
        elif arm in plan.SECONDARY_ARMS:
            name = "secondary_arms"
        else:
            name = "primary"
        n = runs_per_cell(name)
        hours = n * steps_budget * ms / 1000 / 3600
        totals[f"{name} T{T}"] = totals.get(f"{name} T{T}", 0.0) + hours
        lines.append(f"| {task} | {arm} | {T} | {v['ratio']:.2f} | {ms:.0f} | {n} | {hours:.2f} |")
    lines += ["", f"Totals at {steps_budget} steps per run (CPU hours; two workers halve the wall time):", ""]
    lines += ["| plan, T | CPU h |", "| --- | --- |"]
    lines += [f"| {k} | {v:.1f} |" for k, v in sorted(totals.items())]
    lines.append(f"| all | {sum(totals.values()):.1f} |")
    loads = [v["load"] for v in steps.values() if "load" in v]
    if loads:
        lines += ["", f"Load average (1 min) during the measurements: {min(loads):.1f} to {max(loads):.1f} (2 cores)."]
    if refused:
        lines += ["", "Configurations that cannot run on this machine (refused before work):", "", *refused]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    global STEPS_FILE
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--measure", action="store_true", help="time the configurations not measured yet")
    p.add_argument("--short", type=int, default=5)
    p.add_argument("--long", type=int, default=25)
    p.add_argument("--only", default=None, help="measure only the configurations naming this task, arm or T")
    p.add_argument(
        "--exclude", nargs="*", default=[], help="measure none of the configurations naming these tasks, arms or T"
    )
    p.add_argument("--steps", type=int, default=plan.MAX_STEPS, help="step budget per run for the totals")
    p.add_argument(
        "--merge", type=Path, nargs="*", default=[], help="measurement files of other measurers to merge in first"
    )
    p.add_argument(
        "--steps-file",
        type=Path,
        default=None,
        help="measurements file (default: results/long_context_2/budget_steps.json)",
    )
    args = p.parse_args(argv)
    if args.steps_file is not None:
        STEPS_FILE = args.steps_file
    if args.merge:
        merged = json.loads(STEPS_FILE.read_text()) if STEPS_FILE.is_file() else {}
        for f in args.merge:
            merged.update({k: v for k, v in json.loads(f.read_text()).items() if k not in merged})
        STEPS_FILE.write_text(json.dumps(merged, indent=1, sort_keys=True) + "\n")
    if args.measure:
        measure(args.short, args.long, args.only, args.exclude)
    text = report(args.steps)
    (OUT / "budget.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
