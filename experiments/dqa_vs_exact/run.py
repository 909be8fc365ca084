"""DQA-trained against exact-trained Boltzmann attention: same model, same data, same seeds.

Variants (everything else identical; ``hj`` attention, one layer, one head, T = 8):

* ``exact``: exact marginals by enumeration, exact gradients;
* ``dqa-marginals``: the DQA circuit's exact output marginals (``statevector`` sampler: docs/theory.md Trotter product,
  ``tau``/``trotter_steps`` below), gradients by autograd through the simulated circuit;
* ``dqa-surrogate``: the circuit's exact output distribution (all ``2**n`` states with their probabilities) but
  the bridge's covariance backward, a Boltzmann surrogate at the schedule's leading-order effective beta;
* ``dqa-shots``: ``--shots`` DQA measurement shots per problem (drawn by the same simulator) and the covariance
  backward: what hardware allows.

Evaluation uses the training sampler (a DQA-trained model is evaluated with DQA marginals/shots) and, for the DQA
variants, also exact marginals (``eval_exact``) in a second evaluation of the final checkpoint.

Run (from the repository root):

    nice -n 5 python -m experiments.dqa_vs_exact.run --task brackets --seeds 0 1 --steps 300
    nice -n 5 python -m experiments.dqa_vs_exact.run --task shakespeare --seeds 0 1 --steps 300
    python -m experiments.dqa_vs_exact.run --table     # collect summary.json into README.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from experiments import data_path

HERE = Path(__file__).resolve().parents[2] / "results" / "dqa_vs_exact"  # the outputs live in results/
VARIANTS = ("exact", "dqa-marginals", "dqa-surrogate", "dqa-shots")
#: (sampler, readout) per variant
SAMPLER_OF = {
    "exact": ("exact", None),
    "dqa-marginals": ("statevector", "exact"),
    "dqa-surrogate": ("statevector-probs", "shots"),
    "dqa-shots": ("statevector", "shots"),
}
DATA = str(data_path())  # --data is not an option here: $HYBRID_ATTENTION_DATA, else the repository default


def _all_states_class():
    from hybrid_attention.backends.dqa.statevector import StatevectorSampler

    class AllStates(StatevectorSampler):
        """The ``statevector`` DQA output distribution as weighted reads over all ``2**n`` states (``num_reads``
        ignored): the bridge's covariance surrogate without shot noise, to separate the two effects of ``dqa-shots``."""

        name = "statevector-probs"

        def sample(self, problem, *, num_reads=None, seed=None, **options):
            return super().sample(problem, num_reads=None, seed=seed, **options)

    return AllStates


def __getattr__(name):  # the registry imports AllStates from here on first use
    if name == "AllStates":
        return _all_states_class()
    raise AttributeError(name)


def _register() -> None:
    from hybrid_attention.backends.registry import register_sampler

    register_sampler("statevector-probs", __name__, "AllStates")


def run_one(task: str, variant: str, seed: int, args: argparse.Namespace) -> dict:
    from hybrid_attention.apps.train import TrainConfig, evaluate, train

    sampler, readout = SAMPLER_OF[variant]
    out = Path(args.runs) / f"{task}_{variant}_s{seed}"
    cfg = TrainConfig(
        task=task,
        attention="hj",
        block_size=args.block_size,
        max_steps=args.steps,
        seed=seed,
        out=str(out),
        batch_size=args.batch_size,
        eval_interval=args.steps,
        eval_size=args.eval_size,
        sampler=sampler,
        readout=readout,
        shots=args.shots,
        tau=args.tau,
        trotter_steps=args.trotter_steps,
        data=DATA if task == "shakespeare" else None,
        progress=False,
        threads=1,
    )
    t0 = time.perf_counter()
    metrics = train(cfg, resume=out.exists() and (out / "checkpoint.pt").exists())
    row = {
        "task": task,
        "variant": variant,
        "seed": seed,
        "train_s": round(time.perf_counter() - t0, 1),
        **{k: v for k, v in metrics.items() if k.startswith("val_")},
    }
    if variant != "exact":  # the same final weights, evaluated with exact marginals
        from hybrid_attention.apps.run_files import load_checkpoint
        from hybrid_attention.apps.train import eval_set
        from hybrid_attention.model import Transformer

        cfg_exact = TrainConfig(**{**cfg.__dict__, "sampler": "exact"})
        if task == "shakespeare":
            from hybrid_attention.tasks.shakespeare import load_shakespeare

            t = load_shakespeare(DATA)
        else:
            from hybrid_attention.tasks.brackets import BracketTask

            t = BracketTask(args.block_size)
        state = load_checkpoint(out / "checkpoint.pt")
        model = Transformer(cfg_exact.model_config(t.vocab_size))
        model.load_state_dict(state["model"])
        xv, yv = eval_set(t, cfg_exact)
        ev = evaluate(model, xv, yv, task)
        row.update({f"exact_eval_{k}": v for k, v in ev.items()})
    return row


def table(rows: list[dict]) -> str:
    out = []
    for task in ("brackets", "shakespeare"):
        sel = [r for r in rows if r["task"] == task]
        if not sel:
            continue
        metric = "val_accuracy" if task == "brackets" else "val_perplexity"
        out += [
            f"### {task} (T = {rows[0].get('block_size', 8)}; {metric.replace('val_', '')}, mean ± spread over seeds)",
            "",
            f"| variant | seeds | {metric} (own sampler) | {metric} (exact eval) | val_loss | train s/run |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for v in VARIANTS:
            rs = [r for r in sel if r["variant"] == v]
            if not rs:
                continue

            def ms(key: str, rs: list = rs) -> str:
                xs = [r[key] for r in rs if key in r]
                if not xs:
                    return "-"
                sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
                return f"{statistics.mean(xs):.4f} ± {sd:.4f}"

            ex = ms(metric) if v == "exact" else ms(f"exact_eval_{metric}")
            out.append(
                f"| {v} | {len(rs)} | {ms(metric)} | {ex} | {ms('val_loss')} | {statistics.mean(r['train_s'] for r in rs):.0f} |"
            )
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", choices=["brackets", "shakespeare"])
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--block-size", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--eval-size", type=int, default=1024)
    p.add_argument("--shots", type=int, default=256)
    p.add_argument("--tau", type=float, default=2.0)
    p.add_argument("--trotter-steps", type=int, default=20)
    p.add_argument("--runs", default="/tmp/dqa_vs_exact_runs", help="run directories (checkpoints; not committed)")
    p.add_argument("--table", action="store_true", help="only rebuild README.md's table from summary.json")
    args = p.parse_args(argv)
    summary = HERE / "summary.json"
    rows = json.loads(summary.read_text()) if summary.exists() else []
    if not args.table:
        if args.task is None:
            p.error("--task is required unless --table")
        _register()
        for seed in args.seeds:
            for v in args.variants:
                row = run_one(args.task, v, seed, args)
                row.update(
                    block_size=args.block_size,
                    steps=args.steps,
                    tau=args.tau,
                    trotter_steps=args.trotter_steps,
                    shots=args.shots,
                    batch_size=args.batch_size,
                )
                print(json.dumps(row), flush=True)
                rows = json.loads(summary.read_text()) if summary.exists() else []  # other task may run concurrently
                rows = [r for r in rows if (r["task"], r["variant"], r["seed"]) != (row["task"], v, seed)] + [row]
                summary.write_text(json.dumps(rows, indent=1))
    text = table(rows)
    print(text)
    if args.table:
        (HERE / "README.md").write_text(README.format(table=text, settings=_settings(rows)))
    return 0


README = """# DQA-trained against exact-trained Boltzmann attention

Same model (one layer, one head, `hj` attention, n_embd 64, FFN, T = 8, 300 steps, batch 64, lr 3e-3), same data and
seeds; only the source of the attention marginals differs:

* `exact`: enumeration (exact marginals and gradients);
* `dqa-marginals`: exact output marginals of the Trotterized DQA circuit (docs/theory.md section 4; `statevector` sampler),
  gradients by autograd through the simulated circuit;
* `dqa-surrogate`: the circuit's exact output distribution (all 2^n states, no shot noise), gradients from the
  bridge's covariance identities (a Boltzmann surrogate at the schedule's leading-order effective beta);
* `dqa-shots`: `shots` measurement shots per problem from the same circuit and the same covariance gradients
  (what hardware allows).

"own sampler" evaluates the trained model with the sampler it was trained with; "exact eval" evaluates the same
weights with exact marginals. Settings: {settings}.

Commands (repository root; each task in its own background process, `--runs` holds the checkpoints, not committed):

    nice -n 5 python -m experiments.dqa_vs_exact.run --task brackets --seeds 0 1 2 --steps 300
    nice -n 5 python -m experiments.dqa_vs_exact.run --task shakespeare --seeds 0 1 2 --steps 300
    python -m experiments.dqa_vs_exact.run --table

{table}
Reading (these runs): trained on the DQA circuit's exact output marginals, the model matches exact training on
brackets (evaluated with the same DQA marginals) and is within about 1.3 % in perplexity on Tiny Shakespeare; its
weights are adapted to the DQA output, so evaluating them with exact Boltzmann marginals costs accuracy/perplexity.
Both covariance-surrogate variants train poorly, with or without shot noise, so the gap comes from the surrogate
gradient, not from the 256 shots: `gradient_check.md` (from `gradient_check.py`) compares it with the true gradient
of the circuit's output. Field gradients agree in direction (cosine 0.7-1.0, closer at short anneals), but coupling
gradients disagree in both direction and size (cosine 0.05-0.96, 3-9x too large). A coupling changes the marginals
only at second order in beta, where DQA output is no longer Boltzmann. The `train s/run` column was measured on a
shared 2-core machine under varying load.

Raw rows: `summary.json`.
"""


def _settings(rows: list[dict]) -> str:
    if not rows:
        return "none"
    r = rows[0]
    return (
        f"T = {r.get('block_size')}, {r.get('steps')} steps, batch {r.get('batch_size')}, DQA schedule tau = {r.get('tau')}, "
        f"{r.get('trotter_steps')} Trotter steps (linear, Gamma = lambda = 1), {r.get('shots')} shots"
    )


if __name__ == "__main__":
    sys.exit(main())
