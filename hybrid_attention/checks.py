"""Input checks shared by the whole toolkit: the one owner of every boundary validation rule that more than one
module applies.

Owns:

* inverse temperatures: :func:`check_beta` (an :class:`~hybrid_attention.ising.IsingProblem`'s scalar or tensor
  ``beta``, checked in the problem's dtype), :func:`beta_per_head` (a layer's ``beta`` as an ``(H,)`` tensor) and
  :func:`positive_real` (a real scalar such as ``BoltzmannAttention(beta=...)``);
* seeds: :data:`SeedLike`, :func:`check_seed`, :func:`as_generator`, :func:`spawn_seeds`, :func:`describe_seed`;
* integers: :func:`check_positive_int` and :func:`check_num_reads`;
* couplings: :func:`check_symmetric_couplings` (symmetric, zero diagonal: the rule every ``J`` obeys) and
  :func:`check_head_couplings` (a layer's ``(H, T', T')``, finite, symmetric); :func:`check_finite` (any array);
* devices: :func:`check_device` (a torch device that exists on this machine);
* sizes: :data:`MEMORY_BUDGET`, :func:`check_memory` and :func:`format_bytes`: refuse a request whose estimated
  memory exceeds the budget *before* allocating anything, naming the estimate.

Every message names what was expected and what was received. ``TypeError`` for a wrong type, ``ValueError`` for a
wrong value (the project's error rules). Depends on numpy and torch only.

Example:
    >>> from hybrid_attention import checks
    >>> checks.check_num_reads(256)
    256
    >>> checks.check_seed(1.9)
    Traceback (most recent call last):
    ...
    TypeError: seed must be an int, a numpy.random.Generator, a numpy.random.SeedSequence or None, got float 1.9
"""

from __future__ import annotations

import math
import numbers
import os
from typing import Any, Union

import numpy as np
import torch

__all__ = [
    "SeedLike",
    "IntegerTypeError",
    "MEMORY_BUDGET",
    "check_beta",
    "beta_per_head",
    "positive_real",
    "check_seed",
    "as_generator",
    "spawn_seeds",
    "describe_seed",
    "check_positive_int",
    "check_num_reads",
    "check_head_couplings",
    "check_symmetric_couplings",
    "check_finite",
    "check_device",
    "available_devices",
    "check_memory",
    "format_bytes",
]

#: what every ``seed=`` argument accepts
SeedLike = Union[int, np.integer, np.random.Generator, np.random.SeedSequence, None]  # noqa: UP007 (a runtime alias)

_SEED_EXPECTED = "an int, a numpy.random.Generator, a numpy.random.SeedSequence or None"


class IntegerTypeError(TypeError, ValueError):
    """A count (``num_reads``, ``steps``, ``burn_in``...) that is not an integer (a float, a bool, a string).

    A ``TypeError`` (the type is wrong) that is also a ``ValueError`` (a count is a value a caller may validate as
    such), so code catching either catches it.
    """


def _received(x: Any) -> str:
    """``float 1.9``, ``bool True``, ``str 'a'``: the type and (short) value of a rejected argument."""
    r = repr(x)
    return f"{type(x).__name__} {r if len(r) <= 60 else r[:57] + '...'}"


# ---------------------------------------------------------------------- memory budget
def _physical_memory() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # not POSIX, or the value is unavailable
        return None


def _default_budget() -> int:
    env = os.environ.get("HYBRID_ATTENTION_MEMORY_BUDGET")
    if env:
        try:
            v = int(float(env))
        except ValueError:
            raise ValueError(f"HYBRID_ATTENTION_MEMORY_BUDGET must be a number of bytes, got {env!r}") from None
        if v < 1:
            raise ValueError(f"HYBRID_ATTENTION_MEMORY_BUDGET must be a positive number of bytes, got {env!r}")
        return v
    phys = _physical_memory()
    return 8 << 30 if phys is None else min(8 << 30, phys // 2)


#: Largest allocation (bytes) a single request may need before it is refused with a ``ValueError``: half of the
#: physical memory, at most 8 GiB; the environment variable ``HYBRID_ATTENTION_MEMORY_BUDGET`` (bytes) replaces the
#: default at import, and assigning ``hybrid_attention.checks.MEMORY_BUDGET = ...`` changes it at run time (read on
#: every check). Estimates are lower bounds on what the request allocates (its largest arrays), so a request just
#: under the budget may still need somewhat more.
MEMORY_BUDGET: int = _default_budget()


def format_bytes(n: float) -> str:
    """``17179869184 -> '16 GiB'`` (binary units up to PiB, three significant digits)."""
    n = float(n)
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    i = 0
    while abs(n) >= 1024 and i < len(units) - 1:
        n /= 1024
        i += 1
    unit = units[i]
    return f"{n:.0f} {unit}" if unit == "B" or abs(n) >= 100 else f"{n:.3g} {unit}"


def check_memory(nbytes: float, what: str, *, budget: int | None = None, hint: str = "") -> None:
    """Raise ``ValueError`` if an estimated allocation exceeds the memory budget (call it before allocating).

    Args:
        nbytes: estimated bytes the request needs (a float is fine: products of huge counts overflow no int).
        what: what the estimate is for, with its formula, e.g. ``"aer statevector: 16 * 2**30 bytes"``.
        budget: bytes allowed (default :data:`MEMORY_BUDGET`, read at call time).
        hint: how to stay within the budget (appended to the message).

    Example:
        >>> try:
        ...     check_memory(10**12 * 4 * 9, "spins and weights", budget=8 << 30)
        ... except ValueError as exc:
        ...     print(str(exc)[:72])
        spins and weights needs an estimated 32.7 TiB, above the memory budget o
    """
    limit = MEMORY_BUDGET if budget is None else budget
    if nbytes > limit:
        msg = (
            f"{what} needs an estimated {format_bytes(nbytes)}, above the memory budget of {format_bytes(limit)} "
            "(hybrid_attention.checks.MEMORY_BUDGET or the environment variable HYBRID_ATTENTION_MEMORY_BUDGET)"
        )
        raise ValueError(msg + (f"; {hint}" if hint else ""))


# ---------------------------------------------------------------------- integers
def check_positive_int(value: Any, name: str, *, minimum: int = 1, allow_none: bool = False) -> int | None:
    """``value`` as an ``int >= minimum`` (Python or numpy integer; not a bool, not a float such as ``2.0``).

    Raises:
        IntegerTypeError: not an integer (a ``TypeError`` that is also a ``ValueError``).
        ValueError: below ``minimum``.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        expected = f"an integer >= {minimum}" + (" or None" if allow_none else "")
        raise IntegerTypeError(f"{name} must be {expected}, got {_received(value)}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_num_reads(num_reads: Any, *, allow_none: bool = True) -> int | None:
    """``num_reads``: a positive integer (reads / shots per problem) or, where allowed, ``None``."""
    return check_positive_int(num_reads, "num_reads", minimum=1, allow_none=allow_none)


# ---------------------------------------------------------------------- seeds
def check_seed(seed: Any, name: str = "seed") -> SeedLike:
    """Return ``seed`` unchanged if it is a :data:`SeedLike`: a non-negative int (Python or numpy, not a bool), a
    ``numpy.random.Generator``, a ``numpy.random.SeedSequence`` or ``None``.

    Raises:
        TypeError: anything else (floats are never truncated, bools never read as 0/1).
        ValueError: a negative integer.
    """
    if seed is None or isinstance(seed, (np.random.Generator, np.random.SeedSequence)):
        return seed
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"{name} must be {_SEED_EXPECTED}, got {_received(seed)}")
    if seed < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {seed!r}")
    return seed


def as_generator(seed: Any) -> np.random.Generator:
    """A :data:`SeedLike` as a ``numpy.random.Generator`` (a Generator is returned as is; global state is never
    touched)."""
    seed = check_seed(seed)
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def spawn_seeds(seed: Any, k: int, *, keep_none: bool = False) -> list[Any]:
    """``k`` independent 31-bit integer seeds (per chunk or per call) from a :data:`SeedLike`.

    * an int or a ``SeedSequence``: the first word of each of ``k`` spawned child sequences (reproducible);
    * a ``Generator``: ``k`` integers drawn from it (advances it);
    * ``None``: fresh entropy, or ``[None] * k`` with ``keep_none=True`` (each consumer then draws its own).
    """
    seed = check_seed(seed)
    k = check_positive_int(k, "k", minimum=0)
    if seed is None and keep_none:
        return [None] * k
    if isinstance(seed, np.random.Generator):
        return [int(x) for x in seed.integers(0, 2**31 - 1, size=k)]
    if isinstance(seed, np.random.SeedSequence):
        ss = seed
    else:
        ss = np.random.SeedSequence(None if seed is None else int(seed))
    return [int(c.generate_state(1)[0] & 0x7FFFFFFF) for c in ss.spawn(k)]


def describe_seed(seed: Any) -> Any:
    """How a seed is recorded in ``SampleSet.info['seed']``: the int, ``None``, ``"generator"`` or
    ``"seedsequence"``."""
    if isinstance(seed, np.random.Generator):
        return "generator"
    if isinstance(seed, np.random.SeedSequence):
        return "seedsequence"
    return None if seed is None else int(seed)


# ---------------------------------------------------------------------- inverse temperatures
def _is_real_scalar(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_))


def _check_real_tensor(t: torch.Tensor, name: str) -> None:
    if t.dtype == torch.bool or t.is_complex():
        raise TypeError(f"{name} must be real, got a tensor of dtype {t.dtype}")


def _check_positive_finite(t: torch.Tensor, name: str, cast_from: Any = None) -> None:
    td = t.detach()
    if not bool(torch.isfinite(td).all()) or bool((td <= 0).any()):
        got = td.cpu().tolist() if td.numel() <= 16 else f"a tensor with min {float(td.min())}, max {float(td.max())}"
        extra = f" (the value {cast_from!r} in {t.dtype})" if cast_from is not None else ""
        raise ValueError(f"{name} must be finite and > 0, got {got}{extra}")


def positive_real(value: Any, name: str = "beta") -> float:
    """A finite, positive real scalar (Python, numpy, or a one-element tensor) as a Python ``float``.

    Raises:
        TypeError: a bool, a string, a complex number, a tensor with more than one element.
        ValueError: not finite, or ``<= 0``.
    """
    if isinstance(value, torch.Tensor):
        _check_real_tensor(value, name)
        if value.numel() != 1:
            raise TypeError(f"{name} must be a real scalar, got a tensor of shape {tuple(value.shape)}")
        value = value.detach().reshape(()).item()
    elif isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if not _is_real_scalar(value):
        raise TypeError(
            f"{name} must be a real number (int, float, numpy scalar or 0-d tensor), got {_received(value)}"
        )
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return v


def check_beta(beta: Any, dtype: torch.dtype, batch_shape: tuple[int, ...] | torch.Size) -> float | torch.Tensor:
    """An Ising problem's ``beta``: a real scalar (returned as ``float``) or a real tensor broadcastable to
    ``batch_shape`` (returned unchanged), finite and ``> 0`` *in the problem's* ``dtype`` (``1e40`` is finite as a
    Python float but ``inf`` in float32, and ``1e-50`` is 0 there).

    Raises:
        TypeError: not a real number or real tensor.
        ValueError: not finite or ``<= 0`` in ``dtype``, or a tensor shape that does not broadcast.
    """
    if isinstance(beta, torch.Tensor):
        _check_real_tensor(beta, "beta")
        _check_positive_finite(beta.detach().to(dtype), "beta")
        try:
            torch.broadcast_shapes(beta.shape, tuple(batch_shape))
        except RuntimeError:
            raise ValueError(
                f"beta of shape {tuple(beta.shape)} does not broadcast to batch shape {tuple(batch_shape)}"
            ) from None
        return beta
    if isinstance(beta, np.ndarray) and beta.ndim == 0:
        beta = beta[()]
    if not _is_real_scalar(beta):
        raise TypeError(f"beta must be a positive number or a real tensor, got {_received(beta)}")
    value = float(beta)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"beta must be finite and > 0, got {value}")
    cast = torch.tensor(value, dtype=dtype)
    if not bool(torch.isfinite(cast)) or not bool(cast > 0):
        raise ValueError(
            f"beta must be finite and > 0 in the problem's dtype {dtype}, got {value} (which is "
            f"{float(cast)} in {dtype}); use float64 fields or a smaller/larger beta"
        )
    return value


def beta_per_head(beta: Any, H: int, like: torch.Tensor, name: str = "beta") -> torch.Tensor:
    """A layer's ``beta`` (a real scalar, a sequence of ``H`` reals, or a tensor of shape ``()`` or ``(H,)``) as an
    ``(H,)`` tensor in ``like``'s dtype and device, finite and ``> 0``. A tensor keeps its autograd graph.

    Raises:
        TypeError: a bool, a string or a non-real tensor.
        ValueError: a wrong shape, a non-finite or non-positive value (checked after the cast to ``like.dtype``).
    """
    if isinstance(beta, torch.Tensor):
        _check_real_tensor(beta, name)
        b = beta.to(dtype=like.dtype, device=like.device)
    else:
        if isinstance(beta, np.ndarray):
            beta = beta.tolist()
        vals = list(beta) if isinstance(beta, (list, tuple)) else [beta]
        for v in vals:
            if not _is_real_scalar(v):
                raise TypeError(
                    f"{name} must be a real number, a sequence of H reals or a tensor, got {_received(beta)}"
                )
        # built directly in the target dtype (a float32 detour would round 0.8 to 0.800000012)
        data = [float(v) for v in vals] if isinstance(beta, (list, tuple)) else float(vals[0])
        b = torch.tensor(data, dtype=like.dtype, device=like.device)
    if b.ndim == 0:
        b = b.expand(H)
    if b.shape != (H,):
        raise ValueError(f"{name} must be a scalar or have shape (H,) = ({H},), got shape {tuple(b.shape)}")
    _check_positive_finite(b, name)
    return b


# ---------------------------------------------------------------------- attention couplings
def check_head_couplings(J: Any, H: int, T: int) -> torch.Tensor:
    """A layer's couplings ``J (H, T', T')``, ``T' >= T``: finite, symmetric and with a zero diagonal on the leading
    ``T x T`` block; returns that block (a view, same dtype).

    Symmetry and the diagonal are checked to ``1e-6 * max(1, max |J|)``.

    Raises:
        TypeError: not a tensor.
        ValueError: a wrong shape, a non-finite value, an asymmetric ``J`` (e.g. only its upper triangle filled in),
            a nonzero diagonal.
    """
    if not isinstance(J, torch.Tensor):
        raise TypeError(f"J must be a torch.Tensor of shape (H, T', T'), got {type(J).__name__}")
    if J.ndim != 3 or J.shape[0] != H or J.shape[1] != J.shape[2] or J.shape[1] < T:
        raise ValueError(f"J must have shape (H, T', T') with H = {H} and T' >= T = {T}, got {tuple(J.shape)}")
    _check_real_tensor(J, "J")
    Jt = J[:, :T, :T]
    Jd = Jt.detach()
    if not bool(torch.isfinite(Jd).all()):
        raise ValueError("J must be finite, got a non-finite value in its leading T x T block")
    if Jd.numel():
        tol = 1e-6 * max(1.0, float(Jd.abs().max()))
        check_symmetric_couplings(
            Jd,
            rtol=0.0,
            atol=tol,
            diagonal_atol=tol,
            hint="build it with hybrid_attention.attention.symmetric_couplings() from an upper triangle",
        )
    return Jt


def check_symmetric_couplings(
    J: torch.Tensor,
    *,
    rtol: float = 1e-5,
    atol: float = 1e-8,
    zero_diagonal: bool = True,
    diagonal_atol: float = 0.0,
    hint: str = "",
) -> None:
    """Raise ``ValueError`` unless the couplings ``J (..., n, n)`` are symmetric and (when ``zero_diagonal``) have a
    zero diagonal: the rule of every ``J`` in the toolkit (docs/theory.md section 2; the energy sums over ``j < k``).

    Symmetry is checked elementwise as ``torch.allclose``: ``|J_jk - J_kj| <= atol + rtol |J_kj|`` (exactly
    symmetric matrices pass without arithmetic); the diagonal as ``|J_jj| <= diagonal_atol`` (default: exactly 0).

    Args:
        J: real tensor ``(..., n, n)``, finite (check that first); read detached.
        rtol, atol: the symmetry tolerance. zero_diagonal: also require a zero diagonal, to ``diagonal_atol``.
        hint: appended to the message (how to build a valid ``J``).

    Example:
        >>> import torch
        >>> check_symmetric_couplings(torch.tensor([[0.0, 1.0], [1.0, 0.0]]))
        >>> check_symmetric_couplings(torch.tensor([[0.0, 1.0], [0.0, 0.0]]))
        Traceback (most recent call last):
        ...
        ValueError: J must be symmetric (J[..., j, k] == J[..., k, j]), got max |J - J^T| = 1
    """
    Jd = J.detach()
    if Jd.numel() == 0:
        return
    tail = f"; {hint}" if hint else ""
    Jt = Jd.transpose(-1, -2)
    if not torch.equal(Jd, Jt) and not torch.allclose(Jd, Jt, rtol=rtol, atol=atol):
        err = float((Jd - Jt).abs().max())
        raise ValueError(f"J must be symmetric (J[..., j, k] == J[..., k, j]), got max |J - J^T| = {err:.3g}{tail}")
    if zero_diagonal:
        diag = float(torch.diagonal(Jd, dim1=-2, dim2=-1).abs().max())
        if diag > diagonal_atol:
            raise ValueError(f"J must have a zero diagonal (no self-couplings), got max |J_jj| = {diag:.3g}{tail}")


def check_finite(x: Any, name: str) -> None:
    """Raise ``ValueError`` naming ``name``, the first non-finite value and its index if the array ``x`` (numpy,
    torch or a nested sequence of numbers) holds a NaN or an infinity.

    Example:
        >>> check_finite([1.0, float("nan")], "h")
        Traceback (most recent call last):
        ...
        ValueError: h must be finite, got a non-finite value nan at index [1]
    """
    if isinstance(x, torch.Tensor):
        t = x.detach()
        if not (t.is_floating_point() or t.is_complex()) or bool(torch.isfinite(t).all()):
            return
        where = (~torch.isfinite(t)).nonzero()[0].tolist()
        value = t[tuple(where)].item()
    else:
        a = np.asarray(x)
        if a.dtype.kind not in "fc" or bool(np.isfinite(a).all()):
            return
        where = [int(i) for i in np.argwhere(~np.isfinite(a))[0]]
        value = a[tuple(where)].item()
    raise ValueError(f"{name} must be finite, got a non-finite value {value} at index {where}")


def check_device(device: Any) -> torch.device:
    """``device`` as a ``torch.device`` that exists on this machine.

    Raises:
        TypeError: not a string, ``torch.device`` or device index.
        ValueError: an unknown device type, or a device this machine does not have (e.g. ``"cuda"`` without a GPU,
            ``"cuda:3"`` with two); the message lists the devices that are available.

    Example:
        >>> check_device("cpu")
        device(type='cpu')
    """
    if isinstance(device, bool) or not isinstance(device, (str, torch.device, int)):
        raise TypeError(f"device must be a str, a torch.device or a device index, got {_received(device)}")
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError) as exc:
        raise ValueError(f"device {device!r} is not a torch device ({exc}); available: {available_devices()}") from None
    if dev.type == "cpu":
        return dev
    available = available_devices()
    if str(dev) not in available and not (dev.index is None and any(a.split(":")[0] == dev.type for a in available)):
        raise ValueError(f"device {str(dev)!r} is not available on this machine; available: {available}")
    return dev


def available_devices() -> list[str]:
    """The torch devices of this machine: ``"cpu"``, then ``"cuda:0"``, ... and ``"mps"`` when present."""
    out = ["cpu"]
    if torch.cuda.is_available():
        out += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        out.append("mps")
    return out
