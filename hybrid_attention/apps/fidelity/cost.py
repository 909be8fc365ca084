"""What a fidelity point cost, and which points are on the error-vs-cost Pareto frontier.

Every point of a fidelity report carries ``cost`` (:func:`point_cost`), totals over the ensemble's problems:

* ``wall_s``: seconds of the ``sample`` call on this machine (no reference computation);
* ``evaluations``: model evaluations the sampler ran, in the unit ``evaluations_unit``:

  | sampler | evaluations |
  | --- | --- |
  | ``exact`` | ``2**n`` configurations enumerated, per problem |
  | DQA (``statevector``, ``aer``, ``aer-noisy``, ``pennylane``, ``ibm``) | circuit executions x shots (one circuit per problem; ``statevector`` with exact readout: ``2**n`` amplitudes) |
  | ``gibbs``, ``anneal`` | single-spin heat-bath updates: chains x sweeps x ``n`` |
  | ``qemcmc*``, ``mh-*`` | chain states: chains x (1 start + moves); a move is one proposal (a one-shot circuit for ``qemcmc``) |
  | ``meanfield`` | fixed-point iterations x ``n`` field updates |

* ``qpu_seconds``: the projected QPU time of the same work on a device (:func:`hybrid_attention.backends.ibm.cost.qpu_seconds`,
  one job per sampler call) for the samplers that run quantum circuits; ``null``
  for the classical ones and for exact-output simulation (no device produces an exact distribution).
  ``qemcmc``: ``chains x moves`` bound circuits of one shot each; DQA: one circuit of ``shots`` shots per problem;
  circuit depth estimated as ``steps x (n + 1)`` layers (``n`` layers of disjoint ZZ pairs for all-to-all couplings
  plus one mixer layer per Trotter step).

:func:`mark_pareto` sets each point's ``pareto``: true when no other point *of the same problems* (same ``n``) has
both a smaller-or-equal error and a smaller-or-equal cost, one of them strictly (the error-vs-cost Pareto frontier;
cost = ``evaluations``), and ``pareto_wall`` with ``wall_s`` as the cost.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["point_cost", "pareto_front", "mark_pareto", "error_of", "circuit_depth"]

#: sweep samplers whose evaluations are chain states (chains x (1 + moves))
CHAIN_SAMPLERS = ("qemcmc", "qemcmc-k0", "qemcmc-aer", "qemcmc-aer-noisy", "mh-local", "mh-uniform")


def circuit_depth(n: int, steps: int) -> int:
    """Layers of a Trotterized circuit on ``n`` all-to-all coupled qubits: ``steps x (n + 1)`` (estimate)."""
    return int(steps) * (int(n) + 1)


def point_cost(
    sampler: str,
    kind: str,
    *,
    n: int,
    shots: int | None,
    steps: int | None,
    info: dict[str, Any],
    wall_s: float,
    problems: int,
) -> dict[str, Any]:
    """The ``cost`` object of one point (module docstring), totals over ``problems`` problems.

    Args:
        sampler: sweep sampler name; kind: its kind (``exact``, ``dqa``, ``dqa-exact``, ``classical``).
        n, shots, steps: the point's size, shots (``None``: exact output) and Trotter steps (DQA; for ``qemcmc`` the
            proposal's steps are read from ``info["params"]``).
        info: the ``SampleSet.info`` of the call; wall_s: its seconds; problems: problems in the ensemble.
    """
    from hybrid_attention.backends.ibm.cost import qpu_seconds

    qpu: float | None = None
    if kind == "exact":
        evals, unit = problems * (1 << n), "configurations"
    elif kind == "dqa-exact" and shots is None:
        evals, unit = problems * (1 << n), "amplitudes"
    elif kind in ("dqa", "dqa-exact"):
        evals, unit = problems * int(shots), "circuit shots"
        qpu = qpu_seconds(circuits=problems, shots=int(shots), depth=circuit_depth(n, steps))  # one job
    elif sampler in CHAIN_SAMPLERS:
        chains, moves = int(info["num_chains"]), int(info["moves"])
        evals, unit = problems * chains * (1 + moves), "chain states"
        if sampler.startswith("qemcmc"):
            psteps = int(getattr(info.get("params"), "steps", 12))
            circuits = int(info.get("circuit_executions", chains * moves))
            qpu = qpu_seconds(circuits=problems * circuits, shots=1, depth=circuit_depth(n, psteps) + 1)  # one job
    elif sampler in ("gibbs", "anneal"):
        chains = int(info.get("num_chains") or info["num_reads"])  # None in info: one chain per read
        records, thin = int(info["records_per_chain"]), int(info.get("thinning", 1))
        first = (
            max(int(info["burn_in"]), 1) if sampler == "gibbs" else int(info["num_sweeps"]) + int(info["final_sweeps"])
        )
        evals, unit = problems * chains * (first + (records - 1) * thin) * n, "spin updates"
    elif sampler == "meanfield":
        evals, unit = problems * int(info.get("iterations", 1)) * n, "field updates"
    else:
        evals, unit = None, "unknown"
    return {"wall_s": float(wall_s), "evaluations": evals, "evaluations_unit": unit, "qpu_seconds": qpu}


def error_of(point: dict[str, Any], metric: str = "attention_tv") -> float:
    """The error a frontier ranks a point by: the ``mean`` of ``metric`` against the target, with the estimator the
    point declares (``point["estimator"]``: ``conditional`` reads ``target_conditional``)."""
    block = point["target_conditional"] if point.get("estimator") == "conditional" else point["target"]
    return float(block[metric]["mean"])


def pareto_front(pairs: Iterable[tuple[float, float | None]]) -> list[bool]:
    """For ``(error, cost)`` pairs: whether each is on the Pareto frontier (no other pair at most as large in both and
    smaller in one). A ``None`` cost is never on the frontier."""
    pairs = list(pairs)
    out = []
    for i, (e, c) in enumerate(pairs):
        if c is None:
            out.append(False)
            continue
        dominated = any(
            j != i and c2 is not None and e2 <= e and c2 <= c and (e2 < e or c2 < c) for j, (e2, c2) in enumerate(pairs)
        )
        out.append(not dominated)
    return out


def mark_pareto(points: dict[str, dict[str, Any]], metric: str = "attention_tv") -> None:
    """Set ``pareto`` (cost: evaluations) and ``pareto_wall`` (cost: wall_s) on every point with a ``cost``, comparing
    the points of each problem size ``n`` (the same problems) by :func:`error_of`."""
    by_n: dict[int, list[str]] = {}
    for key, pt in points.items():
        if "cost" in pt:
            by_n.setdefault(int(pt["point"]["n"]), []).append(key)
    for keys in by_n.values():
        errs = [error_of(points[k], metric) for k in keys]
        for flag, cost_key in (("pareto", "evaluations"), ("pareto_wall", "wall_s")):
            marks = pareto_front(zip(errs, (points[k]["cost"][cost_key] for k in keys)))
            for k, m in zip(keys, marks):
                points[k][flag] = bool(m)
