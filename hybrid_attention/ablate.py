"""The four-way ablation (``hybrid-attention ablate``): attention modes x block sizes x seeds, tabulated and plotted.

Runs go to ``DIR/runs/<mode>_T<T>_s<seed>/`` (ordinary :mod:`hybrid_attention.train` run directories). The
command is resumable: finished runs (``metrics.json`` with ``finished: true``) are skipped, interrupted ones
continue from their checkpoint. It then writes

* ``DIR/runs.csv``: one row per run;
* ``DIR/summary.csv`` and ``DIR/summary.md``: mean, standard deviation (over seeds, ``ddof=1``) and count per
  mode and T, with the difference to softmax (perplexity: relative, in %; accuracy: in points and relative),
  also paired by seed (mean ± std of the per-seed differences; a seed fixes the data order and the shared
  initial weights) and the number of seeds on which the mode beat softmax;
* ``DIR/metric_vs_T.png``: the metric against T per mode (mean ± std);
* ``DIR/couplings_by_distance.csv`` / ``.png``: the learned ``J`` of the ``hj`` runs averaged over pairs with the same
  key distance ``|j - k|`` (and over heads, layers and seeds), per T;
* ``DIR/ablation.json``: the settings (a later call with different settings into the same DIR is refused).

``--report-only`` rebuilds the tables and plots from the runs present. ``DIR`` is locked while the command runs
(:func:`hybrid_attention.run_files.lock_directory`; so is each run directory, by :func:`hybrid_attention.train.train`):
a second ``ablate`` on the same ``DIR`` is refused. A run that diverges is recorded as such in its
``metrics.json``, skipped by later calls and reported; the other runs go on.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import logging
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from .attention import MODES
from .run_files import LOCK_NAME, lock_directory, remove_stale_temporaries, write_json
from .train import TASKS, TrainConfig, TrainingDiverged, train

__all__ = ["add_arguments", "run", "ablate", "report", "diverged_runs", "summarise", "coupling_profile"]

logger = logging.getLogger(__name__)

_SETTINGS = ("task", "ffn", "steps", "n_layer", "n_head", "n_embd", "dropout", "beta", "learn_beta", "lr", "weight_decay",
             "batch_size", "eval_interval", "eval_size", "warmup")


def _run_dir(out: Path, mode: str, T: int, seed: int) -> Path:
    return out / "runs" / f"{mode}_T{T}_s{seed}"


def _load_json(path: Path) -> Any:
    with open(path) as f:
        return json.load(f)


def _finished(d: Path) -> bool:
    p = d / "metrics.json"
    return p.is_file() and bool(_load_json(p).get("finished"))


def _diverged(d: Path) -> dict[str, Any] | None:
    p = d / "metrics.json"
    return _load_json(p).get("diverged") if p.is_file() else None


def _prepare_run(cfg: TrainConfig) -> TrainConfig:
    """Resume a run that has a checkpoint; start one that has none. A directory left by a run killed before its
    first checkpoint holds only its ``config.json`` (nothing computed): that is cleared so the run starts afresh."""
    d = Path(cfg.out)
    if (d / "checkpoint.pt").is_file():
        return dataclasses.replace(cfg, resume=True)
    if d.is_dir() and {p.name for p in d.iterdir()} <= {"config.json", LOCK_NAME}:
        with lock_directory(d):
            remove_stale_temporaries(d)
            (d / "config.json").unlink(missing_ok=True)
    return dataclasses.replace(cfg, resume=False)


def ablate(base: TrainConfig, out: str | Path, modes: list[str], block_sizes: list[int], seeds: list[int], *,
           progress: bool = True) -> list[dict[str, Any]]:
    """Run (or resume) every missing run of the grid, then tabulate and plot. Returns the per-run rows.

    All configurations are validated before the first run starts. Runs that diverge
    (:class:`hybrid_attention.train.TrainingDiverged`) are left out of the tables and listed by :func:`diverged_runs`.

    Raises:
        hybrid_attention.run_files.DirectoryLocked: another process is working in ``out``.
    """
    out = Path(out)
    configs = []
    for seed in seeds:  # seed-major: an interrupted ablation has every (mode, T) cell for the first seeds
        for T in block_sizes:
            for mode in modes:
                cfg = dataclasses.replace(base, attention=mode, block_size=T, seed=seed, out=str(_run_dir(out, mode, T, seed)),
                                          resume=True, progress=False)
                cfg.validate()
                configs.append(cfg)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {str(out)!r} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    with lock_directory(out):
        _write_marker(out, base, modes, block_sizes, seeds)
        from tqdm.auto import tqdm

        todo = [c for c in configs if not _finished(Path(c.out)) and not _diverged(Path(c.out))]
        logger.info("ablation: %d runs, %d already finished or diverged", len(configs), len(configs) - len(todo))
        bar = tqdm(todo, desc=f"ablate {base.task}{'' if base.ffn else ' no-ffn'}", disable=not progress, dynamic_ncols=True)
        for cfg in bar:
            bar.set_postfix(run=Path(cfg.out).name, refresh=True)
            try:
                m = train(_prepare_run(cfg))
            except TrainingDiverged as exc:
                logger.warning("%s", exc)
                continue
            logger.info("%s: %s", cfg.out, {k: v for k, v in m.items() if k.startswith("val_")})
        return report(out, base.task)


def _write_marker(out: Path, base: TrainConfig, modes: list[str], block_sizes: list[int], seeds: list[int]) -> None:
    """Refuse other settings than those of the ablation in ``out``; record the settings and the union of the grids."""
    settings = {k: getattr(base, k) for k in _SETTINGS}
    marker = out / "ablation.json"
    old = _load_json(marker) if marker.is_file() else {}
    if old:
        diff = {k: (old["settings"].get(k), v) for k, v in settings.items() if old["settings"].get(k) != v}
        if diff:
            raise ValueError(f"{str(out)!r} holds an ablation with other settings: "
                             + ", ".join(f"{k}: existing {a!r}, now {b!r}" for k, (a, b) in diff.items())
                             + "; choose another --out")
    grid = {"modes": sorted(set(modes) | set(old.get("modes", []))),
            "block_sizes": sorted(set(block_sizes) | set(old.get("block_sizes", []))),
            "seeds": sorted(set(seeds) | set(old.get("seeds", [])))}
    write_json(marker, {"settings": settings, **grid})


def diverged_runs(out: str | Path) -> dict[str, dict[str, Any]]:
    """``{run directory name: its metrics.json 'diverged' record}`` for the runs of ``out`` that diverged."""
    return {d.name: r for d in sorted((Path(out) / "runs").glob("*_T*_s*")) if (r := _diverged(d))}


def _collect(out: Path) -> list[dict[str, Any]]:
    rows = []
    for d in sorted((out / "runs").glob("*_T*_s*")):
        if not _finished(d):
            continue
        m = _load_json(d / "metrics.json")
        c = _load_json(d / "config.json")["run"]
        row = {"mode": c["attention"], "block_size": c["block_size"], "seed": c["seed"], "steps": m["step"],
               "elapsed_s": m["elapsed_s"], "val_loss": m["val_loss"]}
        for k in ("val_perplexity", "val_accuracy", "val_string_accuracy"):
            if k in m:
                row[k] = m[k]
        rows.append(row)
    return rows


def _metric(task: str) -> tuple[str, str]:
    return ("val_perplexity", "perplexity") if task == "shakespeare" else ("val_accuracy", "accuracy (%)")


def summarise(rows: list[dict[str, Any]], task: str) -> list[dict[str, Any]]:
    """Mean, std (ddof=1) and count per (mode, T); difference to softmax at the same T."""
    key, _ = _metric(task)
    scale = 1.0 if task == "shakespeare" else 100.0
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["mode"], r["block_size"]), []).append(r)
    out = []
    for (mode, T), rs in sorted(groups.items(), key=lambda kv: (kv[0][1], MODES.index(kv[0][0]))):
        vals = [scale * r[key] for r in rs]
        s = {"mode": mode, "block_size": T, "n": len(vals), "mean": statistics.fmean(vals),
             "std": statistics.stdev(vals) if len(vals) > 1 else float("nan"), "val_loss": statistics.fmean(r["val_loss"] for r in rs)}
        if task == "brackets":
            s["string_accuracy"] = statistics.fmean(100 * r["val_string_accuracy"] for r in rs)
        out.append(s)
    ref = {s["block_size"]: s["mean"] for s in out if s["mode"] == "softmax"}
    # paired by seed: the same seed gives every mode the same data order and the same initial shared weights
    per_seed = {(r["mode"], r["block_size"], r["seed"]): scale * r[key] for r in rows}
    lower_is_better = task == "shakespeare"
    for s in out:
        r = ref.get(s["block_size"])
        s["diff"] = s["mean"] - r if r is not None else float("nan")
        s["rel_diff_pct"] = 100 * (s["mean"] - r) / r if r else float("nan")
        pairs = [(v, per_seed[("softmax", T, seed)]) for (mode, T, seed), v in per_seed.items()
                 if mode == s["mode"] and T == s["block_size"] and ("softmax", T, seed) in per_seed]
        d = [100 * (v - b) / b if lower_is_better else v - b for v, b in pairs]
        s["paired_diff"] = statistics.fmean(d) if d else float("nan")
        s["paired_std"] = statistics.stdev(d) if len(d) > 1 else float("nan")
        s["better_than_softmax"] = f"{sum((v < b) if lower_is_better else (v > b) for v, b in pairs)}/{len(pairs)}"
    return out


def coupling_profile(out: Path, mode: str = "hj") -> dict[int, list[tuple[int, float, float, int]]]:
    """Learned ``J`` averaged by key distance: ``{T: [(distance, mean, std over seeds, n_seeds), ...]}``."""
    per: dict[int, dict[int, list[float]]] = {}
    for d in sorted((out / "runs").glob(f"{mode}_T*_s*")):
        if not _finished(d) or not (d / "couplings.json").is_file():
            continue
        T = _load_json(d / "config.json")["run"]["block_size"]
        sums: dict[int, list[float]] = {}
        for J in _load_json(d / "couplings.json")["J"]:
            if J is None:
                continue
            for head in J:
                for j in range(T):
                    for k in range(j + 1, T):
                        sums.setdefault(k - j, []).append(head[j][k])
        for dist, v in sums.items():
            per.setdefault(T, {}).setdefault(dist, []).append(statistics.fmean(v))
    return {T: [(dist, statistics.fmean(v), statistics.stdev(v) if len(v) > 1 else float("nan"), len(v))
                for dist, v in sorted(dd.items())] for T, dd in sorted(per.items())}


def _fmt(x: float, nd: int = 2) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def report(out: Path, task: str) -> list[dict[str, Any]]:
    """Write runs.csv, summary.csv/.md, couplings_by_distance.csv and the plots from the finished runs."""
    rows = _collect(out)
    if not rows:
        raise ValueError(f"no finished runs under {str(out / 'runs')!r}")
    fields = sorted({k for r in rows for k in r}, key=lambda k: list(rows[0]).index(k) if k in rows[0] else 99)
    with open(out / "runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    summ = summarise(rows, task)
    with open(out / "summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(summ[0]))
        w.writeheader()
        w.writerows(summ)
    _, label = _metric(task)
    lines = []
    if task == "shakespeare":
        lines += ["| T | mode | val perplexity (mean ± std) | seeds | rel. diff to softmax | paired rel. diff (mean ± std) | better than softmax |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for s in summ:
            lines.append(f"| {s['block_size']} | {s['mode']} | {_fmt(s['mean'], 3)} ± {_fmt(s['std'], 3)} | {s['n']} | "
                         f"{_fmt(s['rel_diff_pct'], 2)} % | {_fmt(s['paired_diff'], 2)} ± {_fmt(s['paired_std'], 2)} % | "
                         f"{s['better_than_softmax']} |")
    else:
        lines += ["| T | mode | per-bracket accuracy % (mean ± std) | whole-string % | seeds | diff to softmax (points) | rel. diff | "
                  "paired diff (points, mean ± std) | better than softmax |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for s in summ:
            lines.append(f"| {s['block_size']} | {s['mode']} | {_fmt(s['mean'])} ± {_fmt(s['std'])} | {_fmt(s['string_accuracy'], 1)} | "
                         f"{s['n']} | {_fmt(s['diff'])} | {_fmt(s['rel_diff_pct'], 2)} % | {_fmt(s['paired_diff'])} ± {_fmt(s['paired_std'])} | "
                         f"{s['better_than_softmax']} |")
    prof = coupling_profile(out)
    with open(out / "couplings_by_distance.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["block_size", "distance", "mean_J", "std_over_seeds", "seeds"])
        for T, pts in prof.items():
            for p in pts:
                w.writerow([T, *p])
    if prof:
        lines += ["", "Learned couplings of the `hj` runs, mean J by key distance |j - k| (mean over pairs, heads, layers; then over seeds):", "",
                  "| T | " + " | ".join(f"d={d}" for d in range(1, max(prof) )) + " |",
                  "| --- |" + " --- |" * (max(prof) - 1)]
        for T, pts in prof.items():
            vals = {d: m for d, m, _, _ in pts}
            lines.append(f"| {T} | " + " | ".join(_fmt(vals[d], 3) if d in vals else "" for d in range(1, max(prof))) + " |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    _plot(out, summ, prof, task, label)
    return rows


def _plot(out: Path, summ: list[dict[str, Any]], prof: dict, task: str, label: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.warning("matplotlib is not installed (pip install 'hybrid-attention[plots]'): no plots written")
        return
    Ts = sorted({s["block_size"] for s in summ})
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    for i, mode in enumerate(MODES):
        pts = [s for s in summ if s["mode"] == mode]
        if not pts:
            continue
        color = f"C{i}"
        # small horizontal offsets keep overlapping error bars apart
        ax.errorbar([s["block_size"] + 0.12 * (i - 1.5) for s in pts], [s["mean"] for s in pts],
                    yerr=[0 if math.isnan(s["std"]) else s["std"] for s in pts], marker="o", capsize=3, label=mode, color=color)
        if mode in ("hj", "h"):
            ax2.errorbar([s["block_size"] + 0.12 * (i - 1.5) for s in pts], [s["paired_diff"] for s in pts],
                         yerr=[0 if math.isnan(s["paired_std"]) else s["paired_std"] for s in pts], marker="o", capsize=3,
                         label=mode, color=color)
    ax.set_xticks(Ts)
    ax.set_xlabel("block size T")
    ax.set_ylabel(f"validation {label}")
    ax.set_title(f"{task}{'' if 'noffn' not in out.name else ' (no FFN)'}: mean ± std over seeds", fontsize=10)
    ax.legend()
    ax2.axhline(0, color="k", lw=0.8)
    ax2.set_xticks(Ts)
    ax2.set_xlabel("block size T")
    ax2.set_ylabel("rel. difference to softmax (%)" if task == "shakespeare" else "difference to softmax (points)")
    ax2.set_title("paired by seed, mean ± std" + (" (below 0: better)" if task == "shakespeare" else " (above 0: better)"), fontsize=10)
    if ax2.get_legend_handles_labels()[0]:  # no hj/h runs: nothing to label
        ax2.legend()
    fig.tight_layout()
    fig.savefig(out / "metric_vs_T.png", dpi=120)
    plt.close(fig)
    if prof:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for T, pts in prof.items():
            ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[0 if math.isnan(p[2]) else p[2] for p in pts],
                        marker="o", capsize=3, label=f"T={T}")
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xlabel("key distance |j - k|")
        ax.set_ylabel("mean learned J")
        ax.set_title(f"{task}: hj couplings by distance")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "couplings_by_distance.png", dpi=120)
        plt.close(fig)


# ---------------------------------------------------------------------- CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = TrainConfig()
    a = parser.add_argument
    a("--task", choices=TASKS, default=d.task)
    a("--modes", nargs="+", choices=MODES, default=list(MODES), help="attention modes")
    a("--block-sizes", type=int, nargs="+", default=[4, 8, 12, 16], metavar="T")
    a("--seeds", type=int, nargs="+", default=[0, 1, 2], metavar="S")
    a("--steps", type=int, default=d.steps)
    a("--out", required=True, metavar="DIR", help="ablation directory (resumable)")
    a("--no-ffn", dest="ffn", action="store_false", help="drop the MLP sub-block")
    a("--n-layer", type=int, default=d.n_layer)
    a("--n-head", type=int, default=d.n_head)
    a("--n-embd", type=int, default=d.n_embd)
    a("--dropout", type=float, default=d.dropout)
    a("--beta", type=float, default=d.beta)
    a("--learn-beta", action="store_true")
    a("--lr", type=float, default=d.lr)
    a("--weight-decay", type=float, default=d.weight_decay)
    a("--batch-size", type=int, default=d.batch_size)
    a("--eval-interval", type=int, default=d.eval_interval)
    a("--eval-size", type=int, default=d.eval_size)
    a("--warmup", type=int, default=d.warmup)
    a("--data", default=None, metavar="PATH", help="Tiny Shakespeare text (else $HYBRID_ATTENTION_DATA, else the user cache)")
    a("--threads", type=int, default=d.threads)
    a("--report-only", action="store_true", help="only rebuild tables and plots from the finished runs")
    a("--no-progress", dest="progress", action="store_false")


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if args.report_only:
        if not out.is_dir():
            raise FileNotFoundError(f"--report-only: no ablation directory {str(out)!r}")
        with lock_directory(out):
            report(out, args.task)
    else:
        names = {f.name for f in dataclasses.fields(TrainConfig)}
        base = TrainConfig(**{k: v for k, v in vars(args).items() if k in names and k not in ("out", "progress")}, out=str(out))
        ablate(base, out, list(dict.fromkeys(args.modes)), list(dict.fromkeys(args.block_sizes)), list(dict.fromkeys(args.seeds)),
               progress=args.progress)
    md = out / "summary.md"
    print(md.read_text())
    print(f"tables and plots in {out}", file=sys.stderr)
    bad = diverged_runs(out)
    for name, r in bad.items():
        print(f"hybrid-attention ablate: warning: run {str(out / 'runs' / name)!r} diverged at step {r['step']} ({r['reason']}); "
              "it is left out of the tables", file=sys.stderr)
    return 1 if bad else 0
