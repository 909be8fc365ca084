"""A line of physical qubits for a chain (banded) problem, chosen by the device's reported error rates.

A band-W Ising chain is laid out with spin ``j`` on ``line[j]``: band 1 then needs no SWAP on a heavy-hex device
(every coupling is an edge of the coupling map), wider bands need a SWAP network along the line (docs/banded.md).

The line is a simple path of ``n`` qubits in the coupling graph of ``backend.target`` minimising
``sum -log(1 - e_2q)`` over its edges plus ``sum -log(1 - e_readout)`` over its qubits (the log-fidelity of one
layer of the chain's two-qubit gates and one read-out), plus, with ``duration = t > 0`` (the circuit's expected
duration in seconds), each qubit's decoherence over ``t`` from its T1 and T2 (``backend.target.qubit_properties``):
``-log F(t)`` with ``F(t) = (3 + exp(-t/T1) + 2 exp(-t/T2)) / 6``, the average fidelity of an idle qubit under
amplitude and phase damping (1 at ``t = 0``, 1/2 for a fully relaxed qubit). Candidates: from every qubit, a path of ``n`` qubits
grown by depth-first search in Warnsdorff's order (step to the unvisited neighbour with the fewest unvisited
neighbours, dead ends last, ties to the lower error; a bounded number of backtracking steps), which walks a
heavy-hex lattice row by row; the candidate of lowest cost is kept. A heuristic, not an optimum; it is deterministic.

Example:
    >>> from qiskit_ibm_runtime.fake_provider import FakeTorino
    >>> from hybrid_attention.backends.ibm.line_layout import line_layout
    >>> line = line_layout(FakeTorino(), 16)
    >>> len(line), len(set(line))
    (16, 16)
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["line_layout", "qubit_graph", "line_cost", "is_line", "idle_cost"]

_TWO_QUBIT = ("cz", "ecr", "cx", "rzz")


def idle_cost(t1: float | None, t2: float | None, duration: float) -> float:
    """``-log F``: ``F = (3 + exp(-t/T1) + 2 exp(-t/T2)) / 6`` the average fidelity of a qubit idling for ``duration``
    seconds under amplitude (T1) and phase (T2) damping; a missing T1 or T2 counts as infinite (no decay)."""
    if duration <= 0:
        return 0.0
    d1 = math.exp(-duration / t1) if t1 else 1.0
    d2 = math.exp(-duration / t2) if t2 else 1.0
    return -math.log((3.0 + d1 + 2.0 * d2) / 6.0)


def qubit_graph(backend: Any, *, duration: float = 0.0) -> tuple[dict[int, dict[int, float]], dict[int, float]]:
    """``(adjacency, readout)``: ``adjacency[a][b]`` the cost ``-log(1 - e)`` of the best two-qubit gate on the
    undirected edge ``a-b`` (either direction), ``readout[q]`` the cost of measuring ``q`` plus, for ``duration > 0``
    seconds, its decoherence over that time (:func:`idle_cost`; missing errors count 0; an error of 1 or more makes
    the edge or qubit unusable and it is left out)."""
    target = backend.target
    adj: dict[int, dict[int, float]] = {q: {} for q in range(int(backend.num_qubits))}
    for name in _TWO_QUBIT:
        if name not in target.operation_names:
            continue
        for qargs, props in target[name].items():
            if qargs is None or len(qargs) != 2:
                continue
            err = 0.0 if props is None or props.error is None else float(props.error)
            if err >= 1.0:
                continue
            a, b = int(qargs[0]), int(qargs[1])
            cost = -math.log1p(-err)
            adj[a][b] = adj[b][a] = min(cost, adj[a].get(b, math.inf))
    readout: dict[int, float] = {}
    for q in adj:
        props = target["measure"].get((q,)) if "measure" in target.operation_names else None
        err = 0.0 if props is None or props.error is None else float(props.error)
        readout[q] = -math.log1p(-min(err, 1.0 - 1e-12))
        if duration > 0:
            qp = target.qubit_properties[q] if target.qubit_properties else None
            readout[q] += idle_cost(getattr(qp, "t1", None), getattr(qp, "t2", None), duration)
    return adj, readout


def line_cost(line: list[int], adj: dict[int, dict[int, float]], readout: dict[int, float]) -> float:
    """The score of a line: edge costs plus read-out costs (``-log`` of the product of success probabilities)."""
    return sum(adj[a][b] for a, b in zip(line, line[1:])) + sum(readout[q] for q in line)


def is_line(line: list[int], backend: Any) -> bool:
    """Whether ``line`` is a simple path of the backend's coupling map (distinct qubits, consecutive ones coupled)."""
    adj, _ = qubit_graph(backend)
    return len(set(line)) == len(line) and all(b in adj.get(a, {}) for a, b in zip(line, line[1:]))


def _grow(start: int, n: int, adj: dict[int, dict[int, float]], budget: int) -> list[int] | None:
    """A path of ``n`` qubits from ``start`` by depth-first search with Warnsdorff's order (fewest unvisited onward
    neighbours first, dead ends last, ties to the lower error), giving up after ``budget`` steps."""
    path, seen = [start], {start}

    def order(q: int, last: int) -> tuple:
        onward = sum(r not in seen for r in adj[q]) - 1
        return (onward <= 0, onward, adj[last][q], q)

    stack = [iter(sorted((q for q in adj[start]), key=lambda q: order(q, start)))]
    steps = 0
    while stack and len(path) < n and steps < budget:
        steps += 1
        nxt = next((q for q in stack[-1] if q not in seen), None)
        if nxt is None:
            stack.pop()
            seen.discard(path.pop())
            continue
        path.append(nxt)
        seen.add(nxt)
        stack.append(iter(sorted((q for q in adj[nxt] if q not in seen), key=lambda q: order(q, nxt))))
    return path if len(path) == n else None


def line_layout(backend: Any, n: int, *, duration: float = 0.0) -> list[int]:
    """Physical qubits ``line[0..n-1]`` for spins ``0..n-1`` of a chain: a path of the coupling map chosen by error
    rates (module docstring).

    Args:
        backend: a qiskit ``BackendV2`` with a ``target`` (e.g. ``FakeTorino()``, ``FakeSherbrooke()``).
        n: the number of spins.
        duration: the circuit's expected duration in seconds (``QuantumCircuit.estimate_duration``); ``> 0`` adds
            each qubit's T1/T2 decoherence over that time to its cost (0: gate and read-out errors only).

    Raises:
        TypeError: ``n`` is not an int, or the backend has no target. ValueError: ``n < 1``, more than the backend's
        qubits, or no path of ``n`` qubits was found.
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"line_layout: n must be an int, got {type(n).__name__}")
    if not hasattr(backend, "target"):
        raise TypeError(f"line_layout: backend must be a qiskit BackendV2 with a target, got {type(backend).__name__}")
    if n < 1 or n > int(backend.num_qubits):
        raise ValueError(f"line_layout: n must be in [1, {backend.num_qubits}] for {backend.name}, got {n}")
    if isinstance(duration, bool) or not isinstance(duration, (int, float)) or not (0 <= duration < math.inf):
        raise ValueError(f"line_layout: duration must be a finite number of seconds >= 0, got {duration!r}")
    adj, readout = qubit_graph(backend, duration=float(duration))
    best: tuple[float, list[int]] | None = None
    for budget in (20 * n, 200 * n):  # a wider search only when the quick one finds no path
        for start in sorted(adj):
            path = _grow(start, n, adj, budget=budget)
            if path is not None and (best is None or line_cost(path, adj, readout) < best[0]):
                best = (line_cost(path, adj, readout), path)
        if best is not None:
            break
    if best is None:
        raise ValueError(
            f"line_layout: found no path of {n} qubits among the working couplers of {backend.name} (couplers "
            "reported with error 1 are left out; the search is bounded): use fewer spins or another backend"
        )
    return best[1]
