"""Is the chosen learning rate at the edge of the sweep's grid? Probe one rate beyond it (issue #13).

The Shakespeare sweep (``experiments/claims/plan.py``: 1e-3, 3e-3, 1e-2 at T = 12, seeds 100 and 101) picked 1e-2,
the top of its grid, for ``hj``, ``j`` and ``bias``. This script trains those sweep runs again at ``--lr`` (default
3e-2) with every other setting copied from the sweep run's ``config.json``, and writes a table of the final validation
loss beside the sweep's rates, so one can see whether the optimum is bracketed.

    python -m experiments.claims.lr_edge_probe            # about 1 min per run; writes results/claims/lr_edge_probe.md

Run directories go to ``--runs`` (default ``/tmp/claims_lr_probe``, not committed); finished ones are reused.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

from experiments import data_path
from experiments.claims.plan import LRS, STUDIES

ROOT = Path(__file__).resolve().parents[2]
SWEEP = ROOT / "results" / "claims" / "shakespeare" / "sweep"
#: the sweep's block size and the rate it picked for the probed modes
T = STUDIES["shakespeare"].sweep.block_size
PICKED = max(LRS)


def train_probe(mode: str, seed: int, lr: float, runs: Path) -> float:
    """Final validation loss of the sweep run ``(mode, T, seed)`` at the picked rate, trained again at ``lr``."""
    from hybrid_attention.apps.train import TrainConfig, train

    out = runs / f"{mode}_T{T}_lr{lr:g}_s{seed}"
    done = out / "metrics.json"
    if done.is_file() and json.loads(done.read_text()).get("finished"):
        return float(json.loads(done.read_text())["val_loss"])
    src = SWEEP / f"{mode}_T{T}_lr{PICKED:g}_s{seed}" / "config.json"
    if not src.is_file():
        raise FileNotFoundError(f"no sweep run {src.parent}: run experiments/run_plan.py --plan main first")
    run = json.loads(src.read_text())["run"]
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    cfg = {k: v for k, v in run.items() if k in known}
    cfg.update(lr=lr, out=str(out), progress=False, resume=(out / "checkpoint.pt").is_file())
    return float(train(TrainConfig.from_saved(cfg))["val_loss"])


def sweep_loss(mode: str, seed: int, lr: float) -> float | None:
    m = SWEEP / f"{mode}_T{T}_lr{lr:g}_s{seed}" / "metrics.json"
    return float(json.loads(m.read_text())["val_loss"]) if m.is_file() else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--modes", nargs="+", default=["hj", "j", "bias"])
    p.add_argument("--seeds", type=int, nargs="+", default=[100, 101])
    p.add_argument("--lr", type=float, default=3e-2)
    p.add_argument("--runs", type=Path, default=Path("/tmp/claims_lr_probe"))
    p.add_argument("--out", type=Path, default=ROOT / "results" / "claims" / "lr_edge_probe.md")
    args = p.parse_args(argv)
    data = data_path()
    if not os.environ.get("HYBRID_ATTENTION_DATA") and data.is_file():
        os.environ["HYBRID_ATTENTION_DATA"] = str(data)
    rates = (*LRS, args.lr)
    lines = [
        f"# Learning rate beyond the sweep's grid (Tiny Shakespeare, T = {T})",
        "",
        "Command: `python -m experiments.claims.lr_edge_probe"
        + "".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:]))
        + "`",
        "",
        f"Final validation loss of the sweep runs (seeds {', '.join(map(str, args.seeds))}) and of the same runs at "
        f"lr = {args.lr:g} (every other setting copied). The plan's sweep picked {PICKED:g} for these modes.",
        "",
        "| mode | seed | " + " | ".join(f"lr {r:g}" for r in rates) + " |",
        "| --- | --- |" + " --- |" * len(rates),
    ]
    for mode in args.modes:
        for seed in args.seeds:
            vals = [sweep_loss(mode, seed, r) for r in rates[:-1]] + [train_probe(mode, seed, args.lr, args.runs)]
            lines.append(f"| {mode} | {seed} | " + " | ".join("-" if v is None else f"{v:.4f}" for v in vals) + " |")
            print(lines[-1], flush=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
