"""The second long-context study's plan (results/long_context_2/PROTOCOL.md): arms, tasks, seeds, budgets, sweeps.

Run it with ``python -m experiments.run_plan long_context_2 --plan NAME`` (resumable; see experiments/run_plan.py;
``--dry-run`` prints what is left and its projected time from the measured step times). Runs go to
``results/long_context_2/<task>_T<T>/{sweep,runs}/<arm>_T<T>_lr<lr>_s<seed>/``.

Plans (the protocol's cut order runs from the last to the first):

* ``primary``: Tiny Shakespeare and MQAR at T = 64 and 128, the six primary arms, seeds 0-2 sweep the learning rate
  over the grid (extended by rule), seeds 3-9 run at the chosen rate; MQAR under PROTOCOL.md change 5's floor rule
  (:func:`at_floor`): a cell whose every arm is within 2 points of chance runs no main seeds, and T = 128 first runs
  sweep seed 0 alone;
* ``pilot256``: the same tasks and arms at T = 256, seeds 0-2, each arm at its T = 128 chosen rate (waits for it);
* ``secondary_arms``: ``mta``, ``h`` and the engine control ``hj-band4-mf`` on the primary tasks, 5 seeds;
* ``secondary_tasks``: the runs task (3 decoys at every T) and brackets below the ceiling, the primary arms, 5 seeds;
* ``mf_validation``: ``hj-full`` trained exactly (enumeration) at T = 12, 16, 20, seed 0, on both primary tasks: the
  models naive mean field is validated on (``python -m experiments.long_context_2.validate_meanfield``).

Every arm: width 64 (``softmax-2L``: matched, below), one head, FFN, batch 64, AdamW, 100 warm-up steps, cosine
decay, gradient clipping at 1, evaluation every 100 steps, early stopping after 5 evaluations without a 0.1 % drop,
at most :data:`MAX_STEPS` steps.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from pathlib import Path

from hybrid_attention.apps.claims.report.load import read_run
from hybrid_attention.apps.claims.runner import LRSweep, Study, chosen_lr
from hybrid_attention.apps.train import TrainConfig
from hybrid_attention.sizing import count_parameters

ROOT = "results/long_context_2"
#: the step budget per run (PROTOCOL.md "Budget": 1000, from the measured step times in ``budget.md``)
MAX_STEPS = 1000
LRS = (1e-3, 3e-3, 1e-2)
SWEEP_SEEDS = (0, 1, 2)
PRIMARY_SEEDS = tuple(range(3, 10))  # with the sweep's seeds 0-2 at the chosen rate: 10 seeds per cell
SECONDARY_SEEDS = (3, 4)  # 5 per cell
BLOCK_SIZES = (64, 128)
PILOT_T = 256
COMMON = {
    "n_layer": 1,
    "n_head": 1,
    "n_embd": 64,
    "ffn": True,
    "batch_size": 64,
    "warmup": 100,
    "grad_clip": 1.0,
    "eval_interval": 100,
    "patience": 5,
    "max_steps": MAX_STEPS,
}


def task_settings(task: str, T: int) -> dict:
    """The task's settings at block size ``T``, named explicitly (PROTOCOL.md "Tasks")."""
    if task == "shakespeare":
        return {"task": "shakespeare"}
    if task == "mqar":  # hybrid_attention.tasks.mqar's defaults at T, written out: T // 8 pairs, V = max(64, 4 T)
        return {"task": "mqar", "kv_pairs": max(1, T // 8), "mqar_vocab": max(64, 4 * T)}
    if task == "runs":  # the decoy count held fixed across T (round 1's count at T = 32)
        return {"task": "runs", "pointer": "attention", "decoys": 3}
    if task == "brackets":  # round 1's variant below the ceiling
        return {"task": "brackets", "bracket_types": 2, "filler": 0.2, "disjoint": True, "train_max_depth": 3}
    raise ValueError(f"unknown task {task!r}; expected shakespeare, mqar, runs or brackets")


#: round 1's mean-field engine (PROTOCOL.md change 3): the damped whole-batch iteration, written out so that every run
#: of the mean-field arms uses it whatever ``train``'s default solver is (runs that recorded no options ran it too)
ROUND1_MEANFIELD = {"solver": "damped", "damping": 0.5}
#: the one-layer arms (PROTOCOL.md "Arms"): the fields each lays over :data:`COMMON`
ONE_LAYER_ARMS = {
    "softmax": {"attention": "softmax"},
    "bias": {"attention": "bias"},
    "hj-band4": {"attention": "hj", "band": 4, "band_shape": "free", "sampler": "exact"},
    "hj-band8": {"attention": "hj", "band": 8, "band_shape": "free", "sampler": "exact"},
    "hj-full": {"attention": "hj", "sampler": "meanfield", "sampler_options": ROUND1_MEANFIELD},
}
PRIMARY_ARMS = ("softmax", "softmax-2L", "bias", "hj-band4", "hj-band8", "hj-full")
SECONDARY_ARMS = {
    "mta": {"attention": "mta"},
    "h": {"attention": "h"},
    # the training-engine control: hj-band4 trained with naive mean field (evaluated exactly by the report)
    "hj-band4-mf": {
        "attention": "hj",
        "band": 4,
        "band_shape": "free",
        "sampler": "meanfield",
        "sampler_options": ROUND1_MEANFIELD,
        "eval_exact": True,
    },
}
#: the engine behind each arm's numbers (the report names it beside every number)
ENGINES = {
    "softmax": "-",
    "softmax-2L": "-",
    "bias": "-",
    "hj-band4": "exact (transfer matrix)",
    "hj-band8": "exact (transfer matrix)",
    "hj-full": "naive mean field",
    "mta": "-",
    "h": "exact (closed form)",
    "hj-band4-mf": "trained with naive mean field, evaluated exactly",
}


def _model_config(task: str, T: int, arm: dict, **changes) -> object:
    cfg = TrainConfig(**{**COMMON, **task_settings(task, T), **arm, "block_size": T, **changes})
    return cfg.model_config()


@cache
def two_layer_width(task: str, T: int) -> tuple[int, int, int]:
    """``softmax-2L``'s width at ``(task, T)`` and the two counts ``(width, its parameters, hj-full's)``: the
    narrowest two-layer softmax (a multiple of ``n_head``) with at least as many parameters as every one-layer
    primary arm, which is the closest such count to ``hj-full``'s (``hj-full`` has the most; J counted by its free
    entries, :func:`hybrid_attention.sizing.count_parameters`)."""
    counts = {name: count_parameters(_model_config(task, T, arm)) for name, arm in ONE_LAYER_ARMS.items()}
    target = max(counts.values())
    width = COMMON["n_head"]
    while True:
        n = count_parameters(_model_config(task, T, {"attention": "softmax", "n_layer": 2, "n_embd": width}))
        if n >= target:
            return width, n, counts["hj-full"]
        width += COMMON["n_head"]


def arms(task: str, T: int, names: tuple[str, ...]) -> dict[str, dict]:
    """The fields of each named arm at ``(task, T)``."""
    out = {}
    for name in names:
        if name == "softmax-2L":
            out[name] = {"attention": "softmax", "n_layer": 2, "n_embd": two_layer_width(task, T)[0]}
        else:
            out[name] = {**ONE_LAYER_ARMS, **SECONDARY_ARMS}[name]
    return out


def _sweep() -> LRSweep:
    # PROTOCOL.md "Design": chosen on seeds 0-2; edges extend by the next half-decade (at most two per side), also
    # below a lowest rate with a diverged seed
    return LRSweep(LRS, None, seeds=SWEEP_SEEDS, extend=True, max_extend=2, extend_below_divergence=True)


#: PROTOCOL.md change 5, the floor rule: a primary MQAR cell whose every arm's mean accuracy at its chosen rate over
#: the sweep seeds lies within this many points of chance is untestable, and its main seeds are not run
FLOOR_POINTS = 2.0
#: change 5: MQAR at these T first runs only these sweep seeds, at the starting grid (no extension); the rest of the
#: cell runs only if some arm is then more than FLOOR_POINTS from chance
FLOOR_FIRST_SEEDS = {128: (0,)}


def chance(task: str, T: int) -> float | None:
    """The accuracy in % of guessing one of the context's values (100 / pairs) on MQAR at ``T``; ``None`` for a task
    without a floor rule."""
    return 100.0 / task_settings(task, T)["kv_pairs"] if task == "mqar" else None


def floor_means(study: Study, root: str | Path = ROOT) -> dict[str, float | None]:
    """Per arm of ``study`` (as it stands: :meth:`Study.resolve`), the mean accuracy in % at its chosen rate over
    the sweep's seeds (a diverged run: its last evaluation before the divergence); ``None`` while the rate or a run
    is pending."""
    st, root = study.resolve(root), Path(root)
    T = st.block_sizes[0]
    out: dict[str, float | None] = {}
    for arm in st.modes:
        lr = chosen_lr(st, arm, root, T)
        rows = [] if lr is None else [
            read_run(root / st.name / "sweep" / f"{arm}_T{T}_lr{lr:g}_s{seed}", diverged=True) for seed in st.sweep.seeds
        ]  # fmt: skip
        out[arm] = None if lr is None or any(r is None for r in rows) else sum(r["metric"] for r in rows) / len(rows)
    return out


def at_floor(study: Study, root: str | Path = ROOT) -> bool | None:
    """Whether every arm of ``study`` (an MQAR cell) is within :data:`FLOOR_POINTS` of chance (PROTOCOL.md change 5):
    ``True`` (untestable), ``False``, or ``None`` while an arm's rate or sweep run is pending; ``False`` when some
    arm with a result is already beyond it."""
    c = chance(study.base["task"], study.block_sizes[0])
    means = floor_means(study, root)
    if any(m is not None and abs(m - c) > FLOOR_POINTS for m in means.values()):
        return False
    return None if any(m is None for m in means.values()) else True


def _floor_stage(study: Study, root: Path) -> Study:
    """The MQAR cell as it stands under the floor rule (PROTOCOL.md change 5): at a T of :data:`FLOOR_FIRST_SEEDS`,
    first those sweep seeds alone; then, unless every arm is at chance, the whole sweep; main seeds only once the
    sweep shows some arm beyond the floor."""
    T = study.block_sizes[0]
    plain = dataclasses.replace(study, stage=None)
    if T in FLOOR_FIRST_SEEDS:
        first = dataclasses.replace(plain, sweep=LRSweep(LRS, None, seeds=FLOOR_FIRST_SEEDS[T]), seeds=())
        if at_floor(first, root) is not False:
            return first
    return plain if at_floor(plain, root) is False else dataclasses.replace(plain, seeds=())


def _study(name: str, task: str, T: int, names: tuple[str, ...], seeds: tuple[int, ...], label: str) -> Study:
    a = arms(task, T, names)
    return Study(
        name,
        {**COMMON, **task_settings(task, T)},
        names,
        (T,),
        seeds,
        _sweep(),
        label=label,
        mode_base=a,
        stage=_floor_stage if chance(task, T) is not None and names == PRIMARY_ARMS else None,
    )


STUDIES: dict[str, Study] = {}
for _T in BLOCK_SIZES:
    for _task in ("shakespeare", "mqar"):
        STUDIES[f"{_task}_T{_T}"] = _study(
            f"{_task}_T{_T}", _task, _T, PRIMARY_ARMS, PRIMARY_SEEDS, f"round 2, {_task}, T = {_T}: primary arms"
        )
        STUDIES[f"{_task}_T{_T}_secondary"] = _study(
            f"{_task}_T{_T}_secondary",
            _task,
            _T,
            tuple(SECONDARY_ARMS),
            SECONDARY_SEEDS,
            f"round 2, {_task}, T = {_T}: secondary arms",
        )
    for _task in ("runs", "brackets"):
        STUDIES[f"{_task}_T{_T}"] = _study(
            f"{_task}_T{_T}", _task, _T, PRIMARY_ARMS, SECONDARY_SEEDS, f"round 2, {_task}, T = {_T} (secondary task)"
        )


#: the mean-field validation's models (PROTOCOL.md "The engines" (a), change 2): ``hj-full`` trained with exact
#: marginals (enumeration) at these block sizes, seed 0, at round 1's rate for its exact references
VALIDATION_BLOCK_SIZES = (12, 16, 20)
VALIDATION_LR = 3e-3
VALIDATION_ARM = {"attention": "hj", "sampler": "exact"}
for _task in ("shakespeare", "mqar"):
    for _T in VALIDATION_BLOCK_SIZES:
        STUDIES[f"exact_{_task}_T{_T}"] = Study(
            f"exact_{_task}_T{_T}",
            {**COMMON, **task_settings(_task, _T), "lr": VALIDATION_LR},
            ("hj-full-exact",),
            (_T,),
            (0,),
            None,
            label=f"round 2, {_task}, T = {_T}: hj-full trained exactly (the mean-field validation's model)",
            mode_base={"hj-full-exact": VALIDATION_ARM},
        )


def pilot_study(task: str, root: str | Path = ROOT) -> Study | None:
    """The T = 256 pilot of ``task``: the primary arms on seeds 0-2, each at its chosen rate at T = 128 (``None``
    until every primary arm's T = 128 sweep has chosen)."""
    source = STUDIES[f"{task}_T128"].resolve(root)
    rates = {arm: chosen_lr(source, arm, Path(root), 128) for arm in PRIMARY_ARMS}
    if any(r is None for r in rates.values()):
        return None
    a = arms(task, PILOT_T, PRIMARY_ARMS)
    return Study(
        f"{task}_T{PILOT_T}",
        {**COMMON, **task_settings(task, PILOT_T)},
        PRIMARY_ARMS,
        (PILOT_T,),
        SWEEP_SEEDS,
        None,
        label=f"round 2, {task}, T = {PILOT_T}: pilot (3 seeds, T = 128's rates)",
        mode_base={k: {**v, "lr": rates[k]} for k, v in a.items()},
    )


for _task in ("shakespeare", "mqar"):
    _pilot = pilot_study(_task)
    if _pilot is not None:
        STUDIES[_pilot.name] = _pilot

#: plans: the studies each runs, in order (T = 64 first: a session's share finishes whole cells sooner)
PLANS = {
    "primary": ("shakespeare_T64", "mqar_T64", "shakespeare_T128", "mqar_T128"),
    "pilot256": tuple(name for name in (f"shakespeare_T{PILOT_T}", f"mqar_T{PILOT_T}") if name in STUDIES),
    # secondary cells at T = 128 cut by the protocol's budget (PROTOCOL.md "Budget"); their studies stay defined
    "secondary_arms": tuple(f"{t}_T64_secondary" for t in ("shakespeare", "mqar")),
    "secondary_tasks": tuple(f"{t}_T64" for t in ("runs", "brackets")),
    # PROTOCOL.md "The engines" (a): the exact-trained models mean field is validated on
    "mf_validation": tuple(f"exact_{t}_T{T}" for t in ("shakespeare", "mqar") for T in VALIDATION_BLOCK_SIZES),
}


def check() -> None:
    """Every run configuration of every study validates (raises ``ValueError`` naming the first that does not)."""
    for st in STUDIES.values():
        for mode in st.modes:
            for T in st.block_sizes:
                st.config(mode, T, 0, 1e-3, Path("/nonexistent") / st.name / mode)


if __name__ == "__main__":
    check()
    for (task, T), _ in {
        (t, T): 0 for t in ("shakespeare", "mqar", "runs", "brackets") for T in (64, 128, 256)
    }.items():
        w, n, ref = two_layer_width(task, T)
        print(f"{task} T = {T}: softmax-2L width {w}, {n} parameters; hj-full {ref}")
