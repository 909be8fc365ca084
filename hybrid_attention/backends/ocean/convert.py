"""Conversions between the toolkit and dimod (D-Wave Ocean): binary quadratic models and sample sets.

Conventions (docs/theory.md section 2): our energy is ``E(s) = -h.s - sum_{j<k} J_jk s_j s_k``; dimod's Ising energy is
``E = sum_i h_i s_i + sum_{i<j} J_ij s_i s_j + offset``, so ``h_dimod = -h`` and ``J_dimod = -J`` and the energies of
the same configuration agree up to the model's offset. dimod's BINARY ``x = 1`` is ``s = +1`` (``x = (1 + s) / 2``):
that is *not* a qubit bit (``b = (1 - s) / 2``), so never hand measured bits to dimod as BINARY.

Masked (dropped) spins are not variables of the dimod model: :func:`to_bqm` omits them and
:meth:`~hybrid_attention.ising.IsingProblem.from_bqm` with ``labels=`` masks the labels the model does not have.

Needs the ``ocean`` extra (``pip install 'hybrid-attention[ocean]'``).

Example:
    >>> import torch
    >>> from hybrid_attention import IsingProblem
    >>> p = IsingProblem(torch.tensor([0.5, -0.25]), torch.tensor([[0.0, 1.0], [1.0, 0.0]]))
    >>> bqm = to_bqm(p, labels=["a", "b"])
    >>> {v: float(b) for v, b in bqm.linear.items()}, float(bqm.quadratic["a", "b"])
    ({'a': -0.5, 'b': 0.25}, -1.0)
    >>> IsingProblem.from_bqm(bqm).h.tolist()
    [0.5, -0.25]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dimod
import numpy as np

from hybrid_attention.checks import as_generator
from hybrid_attention.ising import IsingProblem
from hybrid_attention.sampleset import SampleSet

__all__ = ["to_bqm", "from_bqm", "sampleset_to_dimod", "sampleset_from_dimod", "spins_to_vartype"]

_VARTYPES = {"SPIN": dimod.SPIN, "BINARY": dimod.BINARY}


def _vartype(vartype: Any) -> dimod.Vartype:
    if isinstance(vartype, dimod.Vartype):
        return vartype
    if isinstance(vartype, str) and vartype.upper() in _VARTYPES:
        return _VARTYPES[vartype.upper()]
    raise ValueError(f"vartype must be 'SPIN' or 'BINARY' (or a dimod.Vartype), got {vartype!r}")


def to_bqm(
    problem: IsingProblem, *, labels: Sequence[Any] | None = None, vartype: Any = "SPIN", offset: float = 0.0
) -> dimod.BinaryQuadraticModel:
    """The dimod model of one (unbatched) problem: ``h -> -h``, ``J -> -J``, masked spins omitted.

    Args:
        problem: an unbatched :class:`IsingProblem` (``beta`` is not part of a BQM: pass it to the sampler).
        labels: ``n`` distinct hashable labels, spin ``j`` -> ``labels[j]`` (default ``j``).
        vartype: ``"SPIN"`` (default) or ``"BINARY"`` (dimod converts with ``s = 2x - 1``; the offset absorbs the
            constant).
        offset: constant energy added to the model (``E_dimod = E + offset``).

    Returns:
        a ``dimod.BinaryQuadraticModel`` whose energy of a configuration equals ``problem.energy`` of it plus
        ``offset``; every active spin is a variable (zero-field spins included).

    Raises:
        ValueError: a batched problem, wrong labels, a bad vartype.
    """
    if not isinstance(problem, IsingProblem):
        raise TypeError(f"to_bqm expects an IsingProblem, got {type(problem).__name__}")
    vt = _vartype(vartype)
    h, J = problem.to_dimod(labels=labels)
    bqm = dimod.BinaryQuadraticModel.from_ising(h, J, float(offset))
    return bqm if vt is dimod.SPIN else bqm.change_vartype(dimod.BINARY, inplace=False)


def from_bqm(bqm: Any, **kwargs: Any) -> Any:
    """:meth:`IsingProblem.from_bqm <hybrid_attention.ising.IsingProblem.from_bqm>` (same arguments)."""
    return IsingProblem.from_bqm(bqm, **kwargs)


def spins_to_vartype(spins: np.ndarray, vartype: Any) -> np.ndarray:
    """±1 spins as dimod values of ``vartype``: SPIN unchanged, BINARY ``x = (1 + s) / 2`` (int8)."""
    s = np.asarray(spins, dtype=np.int8)
    return s if _vartype(vartype) is dimod.SPIN else ((s + 1) // 2).astype(np.int8)


def _occurrences(weights: np.ndarray, exact: bool) -> np.ndarray | None:
    """Integer counts proportional to ``weights`` when they are shot frequencies, else ``None``."""
    if exact or weights.size == 0:
        return None
    occ = weights / weights[weights > 0].min()
    rounded = np.rint(occ)
    return rounded.astype(np.int64) if np.allclose(occ, rounded, rtol=0, atol=1e-6) else None


def sampleset_to_dimod(
    ss: SampleSet,
    index: tuple[int, ...] = (),
    *,
    bqm: dimod.BinaryQuadraticModel | None = None,
    labels: Sequence[Any] | None = None,
    vartype: Any = None,
    aggregate: bool = False,
) -> dimod.SampleSet:
    """One problem of a :class:`SampleSet` as a ``dimod.SampleSet`` (masked spins omitted).

    Args:
        ss: our sample set, spins ``(*batch, reads, n)``.
        index: which problem of the batch (``()`` for an unbatched set).
        bqm: the dimod model the reads answer (its variables must be the problem's active spins, by ``labels``);
            energies then include its offset and its vartype is used. Default: :func:`to_bqm` of the problem.
        labels: spin ``j`` -> ``labels[j]`` (default: ``j``, or ``list(bqm.variables)`` when only active spins).
        vartype: of the default model (default ``"SPIN"``); not with ``bqm``, whose vartype is used.
        aggregate: merge identical reads (``num_occurrences`` adds up).

    Returns:
        ``dimod.SampleSet`` with one row per read (``num_occurrences`` 1), or per distinct configuration with
        counts when the weights are shot frequencies; exact output weights (``ss.exact``) go to a ``probability``
        data vector (``num_occurrences`` 1). Energies are dimod's: ``E(s) + offset``. ``info`` copies ``ss.info``.
    """
    if bqm is not None and vartype is not None:
        raise ValueError(f"vartype={vartype!r} only applies to the default model; the given bqm has its own vartype")
    bs = ss.batch_shape
    if len(index) != len(bs):
        raise ValueError(f"index must pick one problem of batch shape {bs}, got {index!r}")
    problem = ss.problem[index] if bs else ss.problem
    spins, weights = ss.spins[index], ss.weights[index]
    active = np.arange(ss.n) if problem.mask is None else np.flatnonzero(problem.mask.cpu().numpy())
    if bqm is None:
        bqm = to_bqm(problem, labels=labels, vartype="SPIN" if vartype is None else vartype)
        names = list(labels) if labels is not None else list(range(ss.n))
        names = [names[j] for j in active]
    else:
        names = list(labels)[: ss.n] if labels is not None else None
        names = [names[j] for j in active] if names is not None else list(bqm.variables)
        if set(names) != set(bqm.variables) or len(names) != len(active):
            raise ValueError(f"bqm variables {list(bqm.variables)} are not the problem's active spins {names}")
    samples = spins_to_vartype(spins[:, active], bqm.vartype)
    vectors: dict[str, Any] = {}
    occ = _occurrences(weights, ss.exact)
    if occ is None:
        vectors["num_occurrences"] = np.ones(len(weights), dtype=np.int64)
        if ss.exact:
            vectors["probability"] = weights
    else:
        vectors["num_occurrences"] = occ
    info = {k: v for k, v in ss.info.items() if not k.startswith("_")}
    out = dimod.SampleSet.from_samples_bqm((samples, names), bqm, info=info, **vectors)
    return out.aggregate() if aggregate else out


def sampleset_from_dimod(
    sampleset: dimod.SampleSet,
    problem: IsingProblem,
    *,
    labels: Sequence[Any] | None = None,
    seed: Any = None,
    info: dict[str, Any] | None = None,
) -> SampleSet:
    """A ``dimod.SampleSet`` answering one (unbatched) ``problem`` as our :class:`SampleSet`.

    Rows are expanded by ``num_occurrences`` (weights ``1 / reads``); BINARY values become spins ``s = 2x - 1``.
    Spins of ``problem`` that are not variables of the sample set must be masked ones: they are filled with
    uniform ±1 draws from ``seed``, like a decoupled spin of our other samplers (statistics report them as 0).

    Args:
        sampleset: dimod's result; its variables are ``labels[j]`` of active spins ``j``.
        problem: the unbatched problem the result answers (its energies follow our sign).
        labels: spin ``j`` -> ``labels[j]`` (default ``j``).
        seed: for the masked spins' values.
        info: run facts to store (default: ``{"backend": "dimod"}`` plus dimod's ``info``).

    Returns:
        :class:`SampleSet` with spins ``(reads, n)``.

    Raises:
        ValueError: a batched problem, a variable outside ``labels``, a missing active spin.
    """
    if len(problem.batch_shape) != 0:
        raise ValueError(f"sampleset_from_dimod needs an unbatched problem, got batch {tuple(problem.batch_shape)}")
    n = problem.n
    names = list(range(n)) if labels is None else list(labels)
    if len(names) != n:
        raise ValueError(f"labels must name the n = {n} spins, got {len(names)}")
    col = {v: j for j, v in enumerate(names)}
    unknown = [v for v in sampleset.variables if v not in col]
    if unknown:
        raise ValueError(f"dimod sample set has variables {unknown} that are not spins of the problem ({names})")
    cols = np.array([col[v] for v in sampleset.variables], dtype=np.int64)
    active = np.ones(n, dtype=bool) if problem.mask is None else problem.mask.cpu().numpy().astype(bool)
    missing = sorted(set(np.flatnonzero(active)) - set(cols.tolist()))
    if missing:
        raise ValueError(f"active spins {[names[j] for j in missing]} are missing from the dimod sample set")
    rec = sampleset.record
    occ = np.asarray(rec.num_occurrences, dtype=np.int64)
    values = np.asarray(rec.sample, dtype=np.int8).reshape(len(occ), len(cols))
    if sampleset.vartype is dimod.BINARY:
        values = (2 * values - 1).astype(np.int8)
    values = np.repeat(values, occ, axis=0)
    reads = values.shape[0]
    spins = as_generator(seed).choice(np.array([-1, 1], dtype=np.int8), size=(reads, n))
    spins[:, cols] = values
    run = {"backend": "dimod", "num_reads": reads, **dict(sampleset.info)} if info is None else dict(info)
    return SampleSet(spins, np.full(reads, 1.0 / max(reads, 1)), problem.detach(), run)
