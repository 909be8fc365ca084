"""The neutral DQA program: schedule + problem -> ordered layers, their angles, gate counts and size checks.

Every consumer of the documented Trotterized program (section 4) reads it from here, so there is one definition of what
the program is: the qiskit emitter (:mod:`.qiskit_dqa`), the PennyLane emitter (:mod:`.pennylane_dqa`), the numpy
reference (:mod:`.reference`) and the native statevector simulator (``hybrid_attention.backends.dqa.statevector``).

* :func:`layers`: the ordered layers ``[("P", b_0), ("D", a_0), ...]`` of a schedule: the problem layer
  ``exp(-i b H_P)`` and the driver layer ``exp(-i a H_D)`` (for ``order=2`` two half driver layers around each problem
  layer; ``merge_drivers=True`` fuses adjacent driver layers, which commute);
* :class:`DQAProgram` (cached per ``(n, edges, schedule, options)`` by :func:`dqa_program`; :func:`program_for` takes
  a problem): the physical values of a batch (``beta h``, ``beta J_e``), the gate angles of every problem layer
  (RZ ``-2 b fs x_j``, RZZ ``-2 b cs x_e``, or the folded RZZ pair), gate counts;
* :class:`CircuitOptions`, :func:`resolve_coupling_map`, :func:`restrict_edges`: hardware options (measure, folded
  RZZ, device coupling graph, layout);
* :func:`count_gates`, :func:`check_circuit_size`, :data:`MAX_GATES`: programs too large are refused before anything
  is built.

numpy only (qiskit's coupling maps and backends are read by duck typing).

Example:
    >>> from hybrid_attention.circuits import DQASchedule
    >>> [(kind, round(v, 3)) for kind, v in layers(DQASchedule(tau=1.0, steps=2))]
    [('P', 0.125), ('D', 0.375), ('P', 0.375), ('D', 0.125)]
    >>> dqa_program(2, ((0, 1),), DQASchedule(tau=1.0, steps=2)).num_parameters   # 2 RZ + 1 RZZ per slice
    6
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hybrid_attention.checks import format_bytes
from hybrid_attention.ising import IsingProblem

from .schedule import DQASchedule

__all__ = [
    "CircuitOptions",
    "DQAProgram",
    "dqa_program",
    "program_for",
    "layers",
    "resolve_coupling_map",
    "restrict_edges",
    "count_gates",
    "check_circuit_size",
    "check_program_request",
    "edge_mask",
    "drop_missing_couplings",
    "MAX_GATES",
    "BYTES_PER_GATE",
]

logger = logging.getLogger(__name__)

Edge = tuple[int, int]

#: Largest DQA program (in gates) a template, circuit or PennyLane tape is built for; larger requests raise
#: ``ValueError`` before anything is allocated. A parametrised qiskit gate costs about :data:`BYTES_PER_GATE` and
#: ~25 us to build, so the default (2 million gates) is ~2 GiB and about a minute. Assign
#: ``hybrid_attention.circuits.program.MAX_GATES = ...`` to change it (read on every check).
MAX_GATES = 2_000_000
#: measured memory of one parametrised gate in a qiskit ``QuantumCircuit`` (instruction, parameter, bookkeeping)
BYTES_PER_GATE = 1024


def count_gates(n: int, num_edges: int, schedule: DQASchedule, *, fold_rzz: bool = False, measure: bool = True) -> int:
    """Gates of the DQA program: ``n`` Hadamards, per Trotter step ``n`` RZ, one RZZ per edge (four gates folded:
    X, RZZ, X, RZZ) and ``n`` RX (``2 n`` for ``order=2``), then ``n`` measurements."""
    per_step = n * (3 if schedule.order == 2 else 2) + num_edges * (4 if fold_rzz else 1)
    return n + int(schedule.steps) * per_step + (n if measure else 0)


def check_circuit_size(
    n: int, num_edges: int, schedule: DQASchedule, *, fold_rzz: bool = False, measure: bool = True
) -> int:
    """Raise ``ValueError`` if the program has more than :data:`MAX_GATES` gates (the message gives the estimated
    gates and memory); return the gate count."""
    gates = count_gates(n, num_edges, schedule, fold_rzz=fold_rzz, measure=measure)
    if gates > MAX_GATES:
        raise ValueError(
            f"the DQA program for n = {n} spins, {num_edges} couplings and steps = {schedule.steps} has an estimated "
            f"{gates:,} gates (count_gates), needing about {format_bytes(gates * BYTES_PER_GATE)} as a "
            f"circuit, above the limit MAX_GATES = {MAX_GATES:,} (hybrid_attention.circuits.program.MAX_GATES); "
            "use fewer Trotter steps or fewer couplings"
        )
    return gates


@dataclass(frozen=True)
class CircuitOptions:
    """Emitter options (hashable: part of the template cache key).

    Args:
        measure: append ``measure(j, j)`` on every qubit.
        fold_rzz: two-gate folded RZZ with angles in ``[0, pi/2]`` (fractional-gate backends).
        coupling_map: undirected physical edges allowed for two-qubit gates (``None``: all-to-all). Build it
            with :func:`resolve_coupling_map` from a list of pairs, a qiskit ``CouplingMap`` or a backend.
        layout: physical qubit of each spin (``None``: spin ``j`` on physical qubit ``j``); used for the
            coupling-map check and as the transpiler's initial layout.
        on_missing: ``"raise"`` (default) or ``"drop"`` couplings between spins not adjacent on the device.
    """

    measure: bool = True
    fold_rzz: bool = False
    coupling_map: tuple[Edge, ...] | None = None
    layout: tuple[int, ...] | None = None
    on_missing: str = "raise"

    def __post_init__(self) -> None:
        if self.on_missing not in ("raise", "drop"):
            raise ValueError(f"on_missing must be 'raise' or 'drop', got {self.on_missing!r}")


def resolve_coupling_map(obj: Any) -> tuple[Edge, ...] | None:
    """Undirected, sorted edge tuple from ``None``, a sequence of pairs, a ``CouplingMap`` or a backend."""
    if obj is None:
        return None
    if hasattr(obj, "coupling_map") and not isinstance(obj, (list, tuple)):  # BackendV2
        obj = obj.coupling_map
    if hasattr(obj, "get_edges"):  # qiskit CouplingMap
        obj = obj.get_edges()
    try:
        edges = {tuple(sorted((int(a), int(b)))) for a, b in obj}
    except (TypeError, ValueError):
        raise TypeError(
            f"coupling_map must be pairs of ints, a CouplingMap or a backend, got {type(obj).__name__}"
        ) from None
    return tuple(sorted(e for e in edges if e[0] != e[1]))


def restrict_edges(edges: Sequence[Edge], n: int, options: CircuitOptions) -> tuple[Edge, ...]:
    """Couplings allowed by ``options.coupling_map`` (raise listing the offending spin pairs, or drop them)."""
    edges = tuple(edges)
    if options.coupling_map is None:
        return edges
    layout = options.layout if options.layout is not None else tuple(range(n))
    if len(layout) < n:
        raise ValueError(f"layout must give a physical qubit for each of the {n} spins, got {len(layout)}")
    graph = set(options.coupling_map)
    bad = [(a, b) for a, b in edges if tuple(sorted((layout[a], layout[b]))) not in graph]
    if bad and options.on_missing == "raise":
        raise ValueError(
            f"{len(bad)} coupled spin pair(s) are not adjacent on the device coupling graph (spin pairs {bad[:20]}"
            f"{' ...' if len(bad) > 20 else ''}, layout {list(layout[:n])}); pass on_missing='drop' to drop them "
            "or choose a layout/couplings that fit the graph"
        )
    if bad:
        logger.warning("dropping %d coupling(s) not on the device graph: %s", len(bad), bad[:20])
    return tuple(e for e in edges if e not in set(bad))


def layers(schedule: DQASchedule, *, merge_drivers: bool = False) -> list[tuple[str, float]]:
    """The program's layers in order: ``("P", b_k)`` is ``exp(-i b_k H_P)``, ``("D", a)`` is ``exp(-i a H_D)``.

    Args:
        schedule: the :class:`DQASchedule`; ``(b_k, a_k) = schedule.coefficients()``. ``order=1``: ``P(b_k), D(a_k)``
            per slice; ``order=2``: ``D(a_k / 2), P(b_k), D(a_k / 2)``.
        merge_drivers: fuse adjacent driver layers (they commute: ``D(x) D(y) = D(x + y)``); the emitters keep them
            apart (one gate layer each), the statevector simulator merges them.

    Returns:
        ``[(kind, phase), ...]`` with ``kind`` ``"P"`` or ``"D"`` and the phase a Python float.
    """
    b, a = schedule.coefficients()
    seq: list[tuple[str, float]] = []
    for bk, ak in zip(b.tolist(), a.tolist()):
        if schedule.order == 2:
            seq += [("D", ak / 2), ("P", bk), ("D", ak / 2)]
        else:
            seq += [("P", bk), ("D", ak)]
    if not merge_drivers:
        return seq
    merged: list[tuple[str, float]] = []
    for kind, val in seq:
        if merged and kind == "D" and merged[-1][0] == "D":
            merged[-1] = ("D", merged[-1][1] + val)
        else:
            merged.append((kind, val))
    return merged


class DQAProgram:
    """The DQA program for one ``(n, coupling pattern, schedule, options)``: values, angles and sizes of a batch.

    Parameters of the program (what an emitter binds) are the gate angles of the problem layers, per slice ``k``:
    ``n`` RZ angles, then one RZZ angle per edge (two with ``fold_rzz``); the driver angles are constants.

    Attributes:
        n, edges, schedule, options: what it was built for (``edges``: coupled pairs ``(j, k)``, ``j < k``).
    """

    def __init__(self, n: int, edges: tuple[Edge, ...], schedule: DQASchedule, options: CircuitOptions) -> None:
        self.n, self.edges, self.schedule, self.options = n, edges, schedule, options

    def layers(self) -> list[tuple[str, float]]:
        """:func:`layers` of the schedule (unmerged: one gate layer each)."""
        return layers(self.schedule)

    @property
    def num_gates(self) -> int:
        """Gates of the program (:func:`count_gates`, with the options' ``fold_rzz`` and ``measure``)."""
        return count_gates(
            self.n, len(self.edges), self.schedule, fold_rzz=self.options.fold_rzz, measure=self.options.measure
        )

    @property
    def num_values(self) -> int:
        """Physical values per problem: ``n`` fields and ``len(edges)`` couplings."""
        return self.n + len(self.edges)

    @property
    def num_parameters(self) -> int:
        """Circuit parameters (gate angles) per problem: ``steps * (n + len(edges) * (2 if fold_rzz else 1))``."""
        return int(self.schedule.steps) * (self.n + len(self.edges) * (2 if self.options.fold_rzz else 1))

    def values(self, problem: IsingProblem) -> np.ndarray:
        """Physical values of a batch, ``(*batch, n + len(edges))`` float64: ``beta * h`` then ``beta * J_e``
        over :attr:`edges` (masked spins decoupled). This is the PennyLane emitter's input.

        Raises:
            ValueError: wrong ``n``; a coupling outside ``edges`` (a different pattern needs another template).
        """
        if not isinstance(problem, IsingProblem):
            raise TypeError(f"expected an IsingProblem, got {type(problem).__name__}")
        if problem.n != self.n:
            raise ValueError(f"template has n = {self.n} qubits, problem has n = {problem.n} spins")
        h, J = problem.dropped()
        beta = problem.beta_tensor().detach().double().numpy()[..., None]
        h = h.detach().double().numpy() * beta
        Jx = np.broadcast_to(J.detach().double().numpy(), (*problem.batch_shape, self.n, self.n)) * beta[..., None]
        allowed = np.zeros((self.n, self.n), dtype=bool)
        for j, k in self.edges:
            allowed[j, k] = allowed[k, j] = True
        off = (np.abs(Jx) > 0) & ~allowed
        if off.any():
            pairs = sorted({tuple(sorted(map(int, ix[-2:]))) for ix in np.argwhere(off)})
            raise ValueError(
                f"couplings on pairs {pairs[:20]} are not in this template's edges; build a template with them"
            )
        ja = np.array([e[0] for e in self.edges], dtype=int)
        kb = np.array([e[1] for e in self.edges], dtype=int)
        return np.concatenate([h, Jx[..., ja, kb]], axis=-1)

    def angles(self, values: np.ndarray) -> np.ndarray:
        """Gate angles ``(*batch, num_parameters)`` from physical values ``(*batch, n + len(edges))``.

        Per slice ``k``: ``-2 b_k field_scale x_j`` for the RZ gates, then per edge ``theta = -2 b_k coupling_scale
        x_e`` (or the folded pair ``((pi/2 - theta)/2, (pi/2 + theta)/2)``).

        Raises:
            ValueError: a folded RZZ angle ``|theta| > pi/2`` (hardware range ``[0, pi/2]`` would be violated).
        """
        values = np.asarray(values, dtype=np.float64)
        if values.shape[-1] != self.num_values:
            raise ValueError(f"values must have last dimension {self.num_values} (n + edges), got shape {values.shape}")
        b, _ = self.schedule.coefficients()
        fs, cs = float(self.schedule.field_scale), float(self.schedule.coupling_scale)
        rz = -2.0 * b[:, None] * fs * values[..., None, : self.n]  # (*batch, K, n)
        theta = -2.0 * b[:, None] * cs * values[..., None, self.n :]  # (*batch, K, E)
        if self.options.fold_rzz:
            worst = float(np.max(np.abs(theta), initial=0.0))
            if worst > math.pi / 2 + 1e-12:
                raise ValueError(
                    f"fold_rzz needs |RZZ angle| <= pi/2, got {worst:.4g} (max |2 dt B(t) beta J| over slices); "
                    "use more Trotter steps or a smaller energy_scale"
                )
            theta = np.stack([(math.pi / 2 - theta) / 2, (math.pi / 2 + theta) / 2], axis=-1).reshape(
                *theta.shape[:-1], -1
            )
        return np.concatenate([rz, theta], axis=-1).reshape(*values.shape[:-1], self.num_parameters)

    def bindings(self, problem: IsingProblem) -> np.ndarray:
        """Parameter values of a batch (a SamplerV2 PUB): ``angles(values(problem))``, ``(*batch, num_parameters)``."""
        return self.angles(self.values(problem))

    def __repr__(self) -> str:
        name, steps = type(self).__name__, self.schedule.steps
        return f"{name}(n={self.n}, edges={len(self.edges)}, steps={steps}, options={self.options})"


def check_program_request(
    n: int, edges: Sequence[Edge], schedule: DQASchedule, options: CircuitOptions
) -> tuple[Edge, ...]:
    """Validate a request for a program (or a template built on one) before anything is built.

    Args:
        n: qubits (spins), ``>= 1``; edges: the coupled pairs ``(j, k)``; schedule: a :class:`DQASchedule`;
        options: the :class:`CircuitOptions` (their ``fold_rzz`` and ``measure`` count in the gate estimate).

    Returns:
        ``edges`` as a tuple.

    Raises:
        ValueError: ``n < 1``, or more than :data:`MAX_GATES` gates (:func:`check_circuit_size`).
        TypeError: ``schedule`` is not a :class:`DQASchedule`.

    Example:
        >>> check_program_request(2, [(0, 1)], DQASchedule(tau=1.0, steps=2), CircuitOptions())
        ((0, 1),)
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not isinstance(schedule, DQASchedule):
        raise TypeError(f"schedule must be a DQASchedule, got {type(schedule).__name__}")
    edges = tuple(edges)
    check_circuit_size(int(n), len(edges), schedule, fold_rzz=options.fold_rzz, measure=options.measure)
    return edges


def edge_mask(n: int, edges: Sequence[Edge]) -> np.ndarray:
    """Boolean ``(n, n)`` matrix, ``True`` at ``[j, k]`` and ``[k, j]`` for every pair ``(j, k)`` of ``edges``.

    Example:
        >>> edge_mask(3, [(0, 2)]).astype(int).tolist()
        [[0, 0, 1], [0, 0, 0], [1, 0, 0]]
    """
    keep = np.zeros((n, n), dtype=bool)
    for j, k in edges:
        keep[j, k] = keep[k, j] = True
    return keep


def drop_missing_couplings(problem: IsingProblem, edges: Sequence[Edge]) -> IsingProblem:
    """``problem`` (detached) with every coupling that is not on one of ``edges`` set to zero: what a program built
    with ``CircuitOptions(on_missing="drop")`` runs, whose edges (``program.edges``) leave out the pairs the device
    graph does not connect. Fields, ``beta`` and mask are kept.

    Example:
        >>> import torch
        >>> J = torch.tensor([[0.0, 0.5, 0.2], [0.5, 0.0, 0.0], [0.2, 0.0, 0.0]])
        >>> drop_missing_couplings(IsingProblem(torch.zeros(3), J), [(0, 1)]).J[0].tolist()
        [0.0, 0.5, 0.0]
    """
    keep = problem.J.new_tensor(edge_mask(problem.n, edges), dtype=problem.dtype)
    return IsingProblem(problem.h.detach(), problem.J.detach() * keep, beta=problem.beta, mask=problem.mask)


@functools.lru_cache(maxsize=128)
def dqa_program(
    n: int, edges: tuple[Edge, ...], schedule: DQASchedule, options: CircuitOptions = CircuitOptions()
) -> DQAProgram:
    """Cached :class:`DQAProgram` per ``(n, edges, schedule, options)``.

    Raises:
        ValueError: ``n < 1``, or a program of more than :data:`MAX_GATES` gates (:func:`check_circuit_size`).
    """
    return DQAProgram(int(n), check_program_request(n, edges, schedule, options), schedule, options)


def program_edges(problem: IsingProblem, options: CircuitOptions) -> tuple[Edge, ...]:
    """The coupling pattern of a (batched) problem: its union of coupled pairs, restricted by ``options``."""
    if not isinstance(problem, IsingProblem):
        raise TypeError(f"expected an IsingProblem, got {type(problem).__name__}")
    return restrict_edges(problem.coupling_edges(), problem.n, options)


def program_for(problem: IsingProblem, schedule: DQASchedule, options: CircuitOptions = CircuitOptions()) -> DQAProgram:
    """The program for a (batched) problem: its union coupling pattern, restricted by ``options``."""
    return dqa_program(problem.n, program_edges(problem, options), schedule, options)
