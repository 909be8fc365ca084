"""The long-context study's plan (results/long_context/PROTOCOL.md): studies, budgets, learning-rate sweeps.

Run it with ``python -m experiments.run_plan long_context --plan NAME`` (resumable; see experiments/run_plan.py). Runs go to
``results/long_context/<study>/{sweep,runs}/``.

Plans:

* ``engine_pilot``: the models the engine validation checks at T = 32 and 64 (hj trained with naive mean field,
  2 seeds per task, 2000 steps, lr 3e-3; the protocol's "models trained with candidate (1)");
* ``exact_reference``: the exact-trained hj models it checks at T = 12, 16, 20 (Tiny Shakespeare and the claims
  study's harder bracket variant, seed 0, the claims study's settings; its runs keep no checkpoints in git, so the
  validation trains its own);
* ``main``: the full design at T = 32 and 64 (every task; softmax, h, bias and hj on the study engine, 10 seeds,
  learning rate swept per mode and T). Its hj engine per task is set once the validation has chosen it
  (``ENGINES``);
* ``T128``: Tiny Shakespeare at T = 128, 3 seeds per mode (the protocol's pilot), on the same engine.
"""

from __future__ import annotations

from hybrid_attention.apps.claims.runner import LRSweep, Study

ROOT = "results/long_context"
MODES = ("softmax", "hj", "h", "bias")
SEEDS = tuple(range(10))
LRS = (1e-3, 3e-3, 1e-2)
COMMON = {"n_layer": 1, "n_head": 1, "n_embd": 64, "batch_size": 64, "eval_interval": 100, "warmup": 100}
#: the three tasks of the protocol
TASKS = {
    "shakespeare": {"task": "shakespeare"},
    "brackets": {"task": "brackets", "bracket_types": 2, "filler": 0.2, "disjoint": True, "train_max_depth": 3},
    "runs": {"task": "runs", "pointer": "attention"},
}
#: candidate (1) of the protocol: naive mean field with the implicit-function gradient
MEANFIELD = {"sampler": "meanfield"}
#: the protocol's candidate engines (the names of ``validate_engines.CANDIDATES``) as training settings
CANDIDATE_CONFIGS = {
    "meanfield": MEANFIELD,
    "gibbs-persistent": {
        "sampler": "gibbs",
        "persistent_chains": 8,
        "shots": 8,
        "estimator": "conditional",
        "sampler_options": {"burn_in": 2},
    },
    "tap": {"sampler": "meanfield", "sampler_options": {"method": "tap"}},
}
#: the hj engine of the main study per task, by candidate name, as the engine validation decided over its 18 models
#: (``results/long_context/engine_validation.md``; PROTOCOL.md "The engine" and changes 1-4; a test holds this to the
#: committed decision): no candidate passed everywhere, so per task (change 1, rule 2) Tiny Shakespeare takes the
#: first candidate passing all its converged models, brackets and runs (no candidate passing) the smallest largest
#: metric deviation, and their cells are "engine-limited"
ENGINES: dict[str, str] | None = {"shakespeare": "meanfield", "brackets": "tap", "runs": "meanfield"}

#: the claims study's harder bracket variant (no depth split), for the exact-trained reference models
CLAIMS_BRACKETS = {"task": "brackets", "bracket_types": 2, "filler": 0.2, "disjoint": True}

STUDIES = {
    **{
        f"exact_{name}": Study(
            f"exact_{name}",
            {**COMMON, **task, "max_steps": 2000, "lr": 3e-3, "patience": 5},
            ("hj",),
            (12, 16, 20),
            (0,),
            label=f"engine validation: hj trained exactly, {name}",
        )
        for name, task in (("shakespeare", TASKS["shakespeare"]), ("brackets", CLAIMS_BRACKETS))
    },
    **{
        f"pilot_{name}": Study(
            f"pilot_{name}",
            {**COMMON, **task, **MEANFIELD, "max_steps": 2000, "lr": 3e-3, "patience": 0},
            ("hj",),
            (32, 64),
            (0, 1),
            label=f"engine pilot: hj on naive mean field, {name}",
        )
        for name, task in TASKS.items()
    },
}
# the sweeps also extend below a lowest rate that diverged (PROTOCOL.md change 6)
if ENGINES is not None:
    STUDIES.update(
        {
            name: Study(
                name,
                {**COMMON, **task, "max_steps": 4000, "patience": 5},
                MODES,
                (32, 64),
                SEEDS,
                LRSweep(LRS, None, extend=True, extend_below_divergence=True),
                label=f"long context, {name}",
                mode_base={"hj": CANDIDATE_CONFIGS[ENGINES[name]]},  # softmax, h and bias have no engine
            )
            for name, task in TASKS.items()
        }
    )
    # T = 128, Tiny Shakespeare: the protocol's pilot of 3 seeds per mode (the full design only if the T = 64
    # primary contrast comes out "hj better")
    STUDIES["shakespeare_T128"] = Study(
        "shakespeare_T128",
        {**COMMON, **TASKS["shakespeare"], "max_steps": 4000, "patience": 5},
        MODES,
        (128,),
        SEEDS[:3],
        LRSweep(LRS, None, extend=True, extend_below_divergence=True),
        label="long context, shakespeare, T = 128 (pilot: 3 seeds per mode)",
        mode_base={"hj": CANDIDATE_CONFIGS[ENGINES["shakespeare"]]},
    )

#: plans: the studies each runs, in order
PLANS = {
    "engine_pilot": tuple(f"pilot_{name}" for name in TASKS),
    "exact_reference": ("exact_shakespeare", "exact_brackets"),
}
if ENGINES is not None:
    PLANS["main"] = tuple(TASKS)
    PLANS["T128"] = ("shakespeare_T128",)
