"""The symmetric proposal program of quantum-enhanced MCMC (docs/theory.md section 6).

A ``qemcmc`` chain step (Layden et al., Nature 619, 282 (2023)) prepares the current configuration ``|s>`` as a
basis state, evolves it under

    ``H_prop = gamma H_mix + (1 - gamma) alpha H_P``,   ``H_mix = -sum_j X_j``,   ``H_P = -sum h Z - sum J ZZ``,

for a time ``t`` and measures every qubit in the Z basis: the outcome ``s'`` is the proposal, drawn with probability
``Q(s'|s) = |<s'|U|s>|^2``. ``alpha`` puts the two terms on one scale (Layden's choice, the default):
``alpha = sqrt(n) / sqrt(sum_j h_j^2 + sum_{j<k} J_jk^2)`` over the active spins (``alpha = 0`` for an empty problem).

The evolution is the palindromic second-order (Strang) Trotter product with ``K`` steps, ``dt = t / K``,

    ``U = [D(a/2) P(b) D(a/2)]^K``,   ``D(x) = exp(-i x H_mix)``,   ``P(x) = exp(-i x alpha H_P)``,
    ``a = gamma dt``,   ``b = (1 - gamma) dt``.

Both generators are real symmetric matrices in the Z basis, so every factor satisfies ``F^T = F``; the product
reads the same backwards, so ``U^T = U`` and ``Q(s'|s) = Q(s|s')``: the proposal is symmetric, and the
Metropolis-Hastings rule on the classical energy makes the chain's stationary distribution exactly Boltzmann.
(A first-order product ``U = [D P]^K`` with constant phases has ``U^T = P U P^-1``: the same ``Q``, since diagonal
phases are invisible to a Z measurement. A time-dependent segment, such as a forward anneal ramp, gives an
asymmetric ``Q`` unless it is followed by its reverse; ``tests/circuits/test_proposal.py`` shows all three.)

This module owns, for the emitters and the simulators:

* :class:`ProposalParams`: ``gamma``, evolution ``time`` (each fixed or a range drawn uniformly at every chain
  step, independently of the state), Trotter ``steps``, ``alpha`` (``None``: Layden's normalisation), ``shape``
  (``"constant"``, or ``"reverse"``: a reverse-anneal segment whose mixer weight rises to ``gamma`` mid-segment and
  falls back, symmetric in time, the annealing variant of the proposal);
* :func:`proposal_layers`: the ordered layers ``[("D", a/2), ("P", b), ("D", a), ..., ("P", b), ("D", a/2)]``
  (adjacent driver halves merged; ``merge_drivers=False`` keeps them apart);
* :func:`alpha_of` and :func:`proposal_values`: the per-problem scale and the physical values
  ``alpha * (h, J_e)``;
* :class:`ProposalTemplate` (cached by :func:`proposal_template`): the parametrised qiskit circuit (basis-state
  preparation by ``RX(pi b_j)``, the Trotter product, measurement), with :meth:`ProposalTemplate.bindings`;
* :func:`proposal_unitary` / :func:`proposal_matrix`: the independent numpy oracle (the reference statevector of
  :mod:`.reference`, applied to every basis state).

numpy only; qiskit is imported when a template's circuit is first built.

Example:
    >>> import numpy as np
    >>> p = ProposalParams(gamma=0.4, time=3.0, steps=6)
    >>> U = proposal_unitary(np.array([0.5, -0.2]), np.array([[0.0, 0.7], [0.7, 0.0]]), p)
    >>> bool(np.allclose(U, U.T)), bool(np.allclose(U.conj().T @ U, np.eye(4)))
    (True, True)
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .program import CircuitOptions, Edge, restrict_edges
from .reference import apply_driver, problem_energies

__all__ = [
    "ProposalParams",
    "proposal_layers",
    "slice_phases",
    "SHAPES",
    "alpha_of",
    "proposal_values",
    "ProposalTemplate",
    "proposal_template",
    "proposal_unitary",
    "proposal_matrix",
]

Range = float | tuple[float, float]
#: proposal shapes: a fixed Hamiltonian, or a reverse-anneal segment symmetric in time
SHAPES = ("constant", "reverse")


def _range(value: Any, name: str, lo: float, hi: float, *, closed_hi: bool = True) -> tuple[float, float]:
    """A fixed value or a ``(low, high)`` range as a checked ``(low, high)`` pair within ``[lo, hi]``."""
    pair = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(pair) != 2:
        raise ValueError(f"ProposalParams.{name} must be a number or a (low, high) pair, got {value!r}")
    out = []
    for v in pair:
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v):
            raise ValueError(f"ProposalParams.{name} must hold finite numbers, got {value!r}")
        if not (lo <= v and (v <= hi if closed_hi else v < hi)):
            raise ValueError(f"ProposalParams.{name} must lie in [{lo}, {hi}], got {value!r}")
        out.append(float(v))
    if out[0] > out[1]:
        raise ValueError(f"ProposalParams.{name} range must have low <= high, got {value!r}")
    return out[0], out[1]


@dataclass(frozen=True)
class ProposalParams:
    """Parameters of the proposal circuit (docs/theory.md section 6).

    Args:
        gamma: mixer weight in ``[0, 1]``, a number or a ``(low, high)`` range drawn uniformly at every chain
            step (default ``(0.25, 0.6)``, Layden et al.'s range).
        time: evolution time ``t >= 0``, a number or a range (default ``(2.0, 20.0)``, Layden et al.'s range).
        steps: Trotter steps ``K`` of the palindromic product (default 12).
        alpha: scale of ``H_P`` against ``H_mix``; ``None`` (default) is Layden's
            ``sqrt(n) / ||(h, J)||`` per problem (:func:`alpha_of`).
        shape: ``"constant"`` (default): the mixer weight is ``gamma`` in every slice (time evolution under a fixed
            Hamiltonian); ``"reverse"``: a reverse-anneal segment, weight ``gamma_k = gamma (1 - |2 (k + 1/2)/K - 1|)``
            rising from ~0 (the classical problem) to ``gamma`` mid-segment and back, symmetric in time so the product
            stays palindromic (:meth:`slices`).

    Random parameters are drawn independently of the chain's state, so each step's proposal is a mixture of
    symmetric proposals, itself symmetric.

    Example:
        >>> ProposalParams(gamma=0.5, time=4.0).fixed
        True
    """

    gamma: Range = (0.25, 0.6)
    time: Range = (2.0, 20.0)
    steps: int = 12
    alpha: float | None = None
    shape: str = "constant"

    def __post_init__(self) -> None:
        object.__setattr__(self, "gamma", _pair_or_value(_range(self.gamma, "gamma", 0.0, 1.0)))
        object.__setattr__(self, "time", _pair_or_value(_range(self.time, "time", 0.0, math.inf)))
        if isinstance(self.steps, bool) or not isinstance(self.steps, (int, np.integer)) or self.steps < 1:
            raise ValueError(f"ProposalParams.steps must be an integer >= 1, got {self.steps!r}")
        object.__setattr__(self, "steps", int(self.steps))
        if self.alpha is not None:
            a = self.alpha
            if isinstance(a, bool) or not isinstance(a, (int, float, np.floating)) or not (math.isfinite(a) and a >= 0):
                raise ValueError(f"ProposalParams.alpha must be a finite number >= 0 or None, got {a!r}")
            object.__setattr__(self, "alpha", float(a))
        if self.shape not in SHAPES:
            raise ValueError(f"ProposalParams.shape must be one of {SHAPES}, got {self.shape!r}")

    @property
    def fixed(self) -> bool:
        """True when neither ``gamma`` nor ``time`` is drawn at random."""
        return not isinstance(self.gamma, tuple) and not isinstance(self.time, tuple)

    def ranges(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """``((gamma_low, gamma_high), (time_low, time_high))``."""
        g, t = self.gamma, self.time
        return (g if isinstance(g, tuple) else (g, g)), (t if isinstance(t, tuple) else (t, t))

    def draw(self, rng: np.random.Generator, size: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """``size`` parameter pairs ``(gamma (size,), time (size,))`` drawn uniformly from the ranges (the
        generator is advanced only for the ranges that are not fixed)."""
        (g0, g1), (t0, t1) = self.ranges()
        g = np.full(size, g0) if g0 == g1 else rng.uniform(g0, g1, size)
        t = np.full(size, t0) if t0 == t1 else rng.uniform(t0, t1, size)
        return g, t

    def phases(self, gamma: float, time: float) -> tuple[float, float]:
        """``(a, b) = (gamma dt, (1 - gamma) dt)`` with ``dt = time / steps``: driver and problem phases of one slice
        of the constant shape."""
        dt = float(time) / self.steps
        return float(gamma) * dt, (1.0 - float(gamma)) * dt

    def slices(self, gamma: Any, time: Any) -> tuple[np.ndarray, np.ndarray]:
        """Per-slice phases ``(a (..., K), b (..., K))``: ``a_k = gamma_k dt``, ``b_k = (1 - gamma_k) dt`` with
        ``gamma_k`` of :attr:`shape` (``gamma`` and ``time`` scalars or arrays of one shape); ``a_k = a_{K-1-k}``."""
        return slice_phases(self.shape, gamma, time, self.steps)


def slice_phases(shape: str, gamma: Any, time: Any, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`ProposalParams.slices` for a ``shape``, ``gamma`` and ``time`` (scalars or arrays), ``steps`` slices."""
    g = np.asarray(gamma, dtype=np.float64)[..., None]
    dt = np.asarray(time, dtype=np.float64)[..., None] / steps
    if shape == "reverse":
        x = (np.arange(steps) + 0.5) / steps
        g = g * (1.0 - np.abs(2.0 * x - 1.0))
    g = np.broadcast_to(g, np.broadcast_shapes(g.shape, dt.shape[:-1] + (steps,)))
    return g * dt, (1.0 - g) * dt


def _pair_or_value(pair: tuple[float, float]) -> Range:
    return pair[0] if pair[0] == pair[1] else pair


def proposal_layers(a: Any, b: Any, steps: int, *, merge_drivers: bool = True) -> list[tuple[str, float]]:
    """The palindromic product ``prod_k D(a_k/2) P(b_k) D(a_k/2)`` as ordered layers ``(kind, phase)``.

    ``a``, ``b``: per-slice phases ``(steps,)`` (:meth:`ProposalParams.slices`) or numbers (the same in every slice).
    ``("D", x)`` is ``exp(-i x H_mix)`` (``RX(-2x)`` on every qubit), ``("P", x)`` is ``exp(-i x alpha H_P)``.
    With ``merge_drivers`` (default) adjacent halves are fused: ``D(a/2) P(b) D(a) P(b) ... D(a) P(b) D(a/2)``.
    The sequence reads the same backwards when ``a`` and ``b`` do.
    """
    a_k = np.broadcast_to(np.asarray(a, dtype=np.float64), (int(steps),)).tolist()
    b_k = np.broadcast_to(np.asarray(b, dtype=np.float64), (int(steps),)).tolist()
    seq: list[tuple[str, float]] = []
    for ak, bk in zip(a_k, b_k):
        seq += [("D", ak / 2), ("P", bk), ("D", ak / 2)]
    if not merge_drivers:
        return seq
    merged: list[tuple[str, float]] = []
    for kind, val in seq:
        if merged and kind == "D" and merged[-1][0] == "D":
            merged[-1] = ("D", merged[-1][1] + val)
        else:
            merged.append((kind, val))
    return merged


def alpha_of(h: Any, J: Any, mask: Any = None) -> np.ndarray:
    """Layden's scale ``alpha = sqrt(n_active) / sqrt(sum_j h_j^2 + sum_{j<k} J_jk^2)`` per problem.

    Args:
        h: ``(*batch, n)``; J: ``(n, n)`` or ``(*batch, n, n)`` (masked spins already decoupled); mask: ``None`` or
            bool ``(*batch, n)`` (active spins counted in ``n_active``).

    Returns:
        ``(*batch,)`` float64; 0 where the problem has no field and no coupling (the proposal is then the mixer).
    """
    h = np.asarray(h, dtype=np.float64)
    J = np.asarray(J, dtype=np.float64)
    norm2 = (h**2).sum(-1) + 0.5 * (J**2).sum((-2, -1))
    n_act = np.full(h.shape[:-1], h.shape[-1], dtype=np.float64) if mask is None else np.asarray(mask).sum(-1)
    norm2 = np.broadcast_to(norm2, h.shape[:-1])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(norm2 > 0, np.sqrt(n_act / np.where(norm2 > 0, norm2, 1.0)), 0.0)


def proposal_values(h: Any, J: Any, params: ProposalParams, edges: tuple[Edge, ...], mask: Any = None) -> np.ndarray:
    """Physical values of the proposal's problem term, ``(*batch, n + len(edges))``: ``alpha h`` then
    ``alpha J_e`` over ``edges`` (``alpha`` from ``params`` or :func:`alpha_of`)."""
    h = np.asarray(h, dtype=np.float64)
    n = h.shape[-1]
    J = np.broadcast_to(np.asarray(J, dtype=np.float64), (*h.shape[:-1], n, n))
    alpha = alpha_of(h, J, mask) if params.alpha is None else np.full(h.shape[:-1], params.alpha)
    ja = np.array([e[0] for e in edges], dtype=int)
    kb = np.array([e[1] for e in edges], dtype=int)
    return alpha[..., None] * np.concatenate([h, J[..., ja, kb]], axis=-1)


class ProposalTemplate:
    """Parametrised qiskit circuit of the proposal for one ``(n, edges, steps, options, shape)``.

    Parameters (``ParameterVector("theta", num_parameters)``), all bound per circuit execution: ``n`` preparation
    angles ``pi b_j`` (``RX(pi) = -iX`` flips bit ``j``; phases are irrelevant), then the problem layers' RZ angles
    ``-2 b_k alpha h_j`` and RZZ angles ``-2 b_k alpha J_e`` (two per edge with ``options.fold_rzz``), then the driver
    angles ``-2 x`` of the merged driver layers. With ``shape="constant"`` every slice reuses one set of problem
    angles and two driver angles (``x = a/2`` at the ends, ``a`` inside); with ``shape="reverse"`` each slice has its
    own (``K (n + E) + K + 1`` of them). Either way the circuit is palindromic for any binding of a symmetric schedule.

    Attributes:
        n, edges, steps, options, shape: what it was built for.
    """

    def __init__(
        self, n: int, edges: tuple[Edge, ...], steps: int, options: CircuitOptions, shape: str = "constant"
    ) -> None:
        if shape not in SHAPES:
            raise ValueError(f"shape must be one of {SHAPES}, got {shape!r}")
        self.n, self.edges, self.steps, self.options, self.shape = int(n), tuple(edges), int(steps), options, shape
        self._zz = len(self.edges) * (2 if options.fold_rzz else 1)  # RZZ angles per problem layer
        self._slices = 1 if shape == "constant" else self.steps  # problem-angle sets
        # driver angles: constant: a/2 (the end halves) and a (inner layers, none for one slice); reverse: one per layer
        self._drivers = (2 if self.steps > 1 else 1) if shape == "constant" else self.steps + 1

    @property
    def num_parameters(self) -> int:
        """``n + S (n + E') + D``: ``S`` problem-angle sets (1 or ``steps``), ``E'`` RZZ angles per set, ``D`` driver
        angles (2, or 1 for one slice, or ``steps + 1``)."""
        return self.n + self._slices * (self.n + self._zz) + self._drivers

    @functools.cached_property
    def params(self) -> Any:
        from qiskit.circuit import ParameterVector

        return ParameterVector("theta", self.num_parameters)

    @functools.cached_property
    def circuit(self) -> Any:
        """The parametrised ``QuantumCircuit`` (qubit ``j`` measured into clbit ``j`` of ``"meas"``)."""
        from qiskit import ClassicalRegister, QuantumCircuit, QuantumRegister

        n, per = self.n, self.n + self._zz
        th = list(self.params)
        drv = th[self.n + self._slices * per :]
        qc = QuantumCircuit(QuantumRegister(n, "q"), name=f"qemcmc_n{n}_K{self.steps}_{self.shape}")
        if self.options.measure:
            qc.add_register(ClassicalRegister(n, "meas"))
        for j in range(n):
            qc.rx(th[j], j)
        k = d = 0
        for kind, val in proposal_layers(1.0, 1.0, self.steps):
            if kind == "D":  # constant: the end halves (0.5) share one angle, the inner layers (1.0) another
                qc.rx(drv[(0 if val == 0.5 else 1) if self.shape == "constant" else d], range(n))
                d += 1
                continue
            base = self.n + (0 if self.shape == "constant" else k) * per
            for j in range(n):
                qc.rz(th[base + j], j)
            zz = th[base + n : base + per]
            for e, (j, m) in enumerate(self.edges):
                if self.options.fold_rzz:  # RZZ(theta) = RZZ((pi/2 + theta)/2) . X_j RZZ((pi/2 - theta)/2) X_j
                    qc.x(j)
                    qc.rzz(zz[2 * e], j, m)
                    qc.x(j)
                    qc.rzz(zz[2 * e + 1], j, m)
                else:
                    qc.rzz(zz[e], j, m)
            k += 1
        if self.options.measure:
            qc.measure(range(n), range(n))
        return qc

    def bindings(self, bits: Any, values: Any, gamma: Any, time: Any) -> np.ndarray:
        """Parameter values ``(rows, num_parameters)`` of a batch of executions.

        Args:
            bits: ``(rows, n)`` 0/1 (or bool) basis state to prepare (``b_j = 1`` is ``s_j = -1``).
            values: ``(rows, n + len(edges))`` from :func:`proposal_values`.
            gamma, time: scalars or ``(rows,)``.

        Raises:
            ValueError: wrong shapes; a folded RZZ angle ``|theta| > pi/2``.
        """
        bits = np.asarray(bits, dtype=np.float64)
        values = np.asarray(values, dtype=np.float64)
        rows = bits.shape[0]
        if bits.shape != (rows, self.n) or values.shape != (rows, self.n + len(self.edges)):
            raise ValueError(
                f"bits must be (rows, {self.n}) and values (rows, {self.n + len(self.edges)}), "
                f"got {bits.shape} and {values.shape}"
            )
        g = np.broadcast_to(np.asarray(gamma, dtype=np.float64), (rows,))
        t = np.broadcast_to(np.asarray(time, dtype=np.float64), (rows,))
        a, b = slice_phases(self.shape, g, t, self.steps)  # (rows, K)
        b = b[:, : self._slices]
        rz = -2.0 * b[:, :, None] * values[:, None, : self.n]  # (rows, S, n)
        theta = -2.0 * b[:, :, None] * values[:, None, self.n :]  # (rows, S, E)
        if self.options.fold_rzz:
            worst = float(np.max(np.abs(theta), initial=0.0))
            if worst > math.pi / 2 + 1e-12:
                raise ValueError(f"fold_rzz needs |RZZ angle| <= pi/2, got {worst:.4g}; use more Trotter steps")
            theta = np.stack([(math.pi / 2 - theta) / 2, (math.pi / 2 + theta) / 2], axis=-1).reshape(
                rows, self._slices, -1
            )
        if self.shape == "constant":
            drv = np.stack([-a[:, 0], -2.0 * a[:, 0]], axis=-1)[:, : self._drivers]  # RX(-2 x), x = a/2 and a
        else:  # merged layers: a_0/2, (a_0 + a_1)/2, ..., a_{K-1}/2
            x = np.concatenate([a[:, :1] / 2, (a[:, :-1] + a[:, 1:]) / 2, a[:, -1:] / 2], axis=-1)
            drv = -2.0 * x
        problem = np.concatenate([rz, theta], axis=-1).reshape(rows, -1)
        return np.concatenate([math.pi * bits, problem, drv], axis=-1)

    def __repr__(self) -> str:
        return (
            f"ProposalTemplate(n={self.n}, edges={len(self.edges)}, steps={self.steps}, shape={self.shape!r}, "
            f"options={self.options})"
        )


@functools.lru_cache(maxsize=64)
def proposal_template(
    n: int, edges: tuple[Edge, ...], steps: int, options: CircuitOptions = CircuitOptions(), shape: str = "constant"
) -> ProposalTemplate:
    """Cached :class:`ProposalTemplate`; ``edges`` are restricted to ``options.coupling_map`` (raise or drop)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    return ProposalTemplate(n, restrict_edges(edges, n, options), steps, options, shape)


def proposal_unitary(h: Any, J: Any, params: ProposalParams, gamma: float | None = None, time: float | None = None):
    """The proposal unitary ``U`` ``(2**n, 2**n)`` complex128 of one problem, ``U[s', s] = <s'|U|s>`` (numpy oracle).

    Args:
        h: ``(n,)`` fields, J: ``(n, n)`` couplings (masked spins decoupled beforehand).
        params: :class:`ProposalParams`; ``gamma`` and ``time`` must be given when the params hold a range.

    Each column is the reference statevector (:func:`.reference.apply_driver` and the diagonal phase of
    :func:`.reference.problem_energies`) evolved from a basis state.
    """
    h = np.asarray(h, dtype=np.float64)
    J = np.asarray(J, dtype=np.float64)
    n = h.shape[-1]
    if h.ndim != 1 or J.shape != (n, n):
        raise ValueError(f"proposal_unitary needs h (n,) and J (n, n), got {h.shape} and {J.shape}")
    if n > 12:
        raise ValueError(f"proposal_unitary builds a 2**n x 2**n matrix; n = {n} is above its limit of 12")
    (g0, g1), (t0, t1) = params.ranges()
    if gamma is None or time is None:
        if not params.fixed:
            raise ValueError("gamma and time must be given for ProposalParams with ranges")
        gamma, time = g0, t0
    alpha = float(alpha_of(h, J)) if params.alpha is None else params.alpha
    E = alpha * problem_energies(h, J)
    a, b = params.slices(gamma, time)
    psi = np.eye(1 << n, dtype=np.complex128)  # row s: the basis state |s>
    for kind, val in proposal_layers(a, b, params.steps):
        psi = apply_driver(psi, val, n) if kind == "D" else psi * np.exp(-1j * val * E)
    return psi.T  # column s: U|s>


def proposal_matrix(h: Any, J: Any, params: ProposalParams, gamma: float | None = None, time: float | None = None):
    """``Q[s, s'] = |<s'|U|s>|^2`` ``(2**n, 2**n)`` float64, rows sum to 1 (the proposal distribution from ``s``)."""
    U = proposal_unitary(h, J, params, gamma, time)
    return np.abs(U.T) ** 2
