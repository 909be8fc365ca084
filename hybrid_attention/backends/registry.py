"""Sampler registry: the single factory that builds a sampler by name.

Owns the table of registered samplers (name -> import path and the extra that provides its dependencies), their lazy
import with an install hint for a missing extra, the names of the options each
constructor accepts, and the two factories every caller goes through:

* :func:`get_sampler` (``name, **options``): the options are checked against the constructor's before it is
  called, so a misspelt option is a ``TypeError`` naming the accepted ones; flat spellings of a grouped option
  (``burn_in=`` for a chain sampler's ``chain=ChainSchedule(...)``, the class's ``option_groups``) are folded into
  that option's frozen value (:func:`fold_options`), so command lines and older code keep working;
* :func:`make_sampler` (``name, tau=, trotter_steps=, **options``): the same, with the anneal given as numbers: DQA
  samplers (:func:`is_dqa`) get ``schedule=DQASchedule(tau, trotter_steps)``, the others ignore both.

What a sampler can do is declared once, on its class (``capabilities``); :func:`is_dqa` reads it from there (importing
the backend's module, not its heavy dependencies until the sampler is built). :data:`SAMPLERS` is readable without
importing any backend.

Example:
    >>> from hybrid_attention.backends.registry import get_sampler, is_dqa, sampler_options
    >>> is_dqa("aer"), is_dqa("gibbs")
    (True, False)
    >>> sorted(sampler_options("exact"))
    ['max_spins']
    >>> get_sampler("exact").properties["exact"]
    True
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from typing import Any, NamedTuple

from hybrid_attention.circuits.schedule import DQASchedule
from hybrid_attention.sampler import Sampler, capabilities_of

__all__ = [
    "SamplerEntry",
    "SAMPLERS",
    "register_sampler",
    "is_dqa",
    "sampler_class",
    "sampler_options",
    "check_sampler_options",
    "fold_options",
    "get_sampler",
    "make_sampler",
    "available_samplers",
]


class SamplerEntry(NamedTuple):
    """Where a registered sampler lives: ``module`` and ``cls`` (any callable returning a sampler) and the ``extra``
    of ``pip install hybrid-attention[extra]`` that provides its dependencies (``None``: none needed)."""

    module: str
    cls: str
    extra: str | None = None


#: name -> :class:`SamplerEntry`
SAMPLERS: dict[str, SamplerEntry] = {
    "exact": SamplerEntry("hybrid_attention.backends.exact", "ExactSampler"),
    "statevector": SamplerEntry("hybrid_attention.backends.dqa.statevector", "StatevectorSampler"),
    "aer": SamplerEntry("hybrid_attention.backends.dqa.aer", "AerSampler", "aer"),
    # aer's matrix_product_state method: chain (banded) problems up to 100 qubits
    "aer-mps": SamplerEntry("hybrid_attention.backends.dqa.aer_mps", "AerMPSSampler", "aer"),
    "pennylane": SamplerEntry("hybrid_attention.backends.dqa.pennylane", "PennyLaneSampler", "pennylane"),
    "ibm": SamplerEntry("hybrid_attention.backends.ibm.sampler", "IBMSampler", "ibm"),
    # quantum-enhanced MCMC: circuit proposals, Metropolis acceptance, Boltzmann output (not a DQA output)
    "qemcmc": SamplerEntry("hybrid_attention.backends.mcmc.qemcmc", "QEMCMCSampler"),
    # Metropolis with Layden et al.'s classical proposals (one spin flipped; a uniformly random configuration)
    "mh-local": SamplerEntry("hybrid_attention.backends.mcmc.metropolis", "LocalMetropolisSampler"),
    "mh-uniform": SamplerEntry("hybrid_attention.backends.mcmc.metropolis", "UniformMetropolisSampler"),
    "gibbs": SamplerEntry("hybrid_attention.backends.mcmc.gibbs", "GibbsSampler"),
    "anneal": SamplerEntry("hybrid_attention.backends.mcmc.gibbs", "AnnealingSampler"),
    "meanfield": SamplerEntry("hybrid_attention.backends.mcmc.meanfield", "MeanFieldSampler"),
    # any dimod.Sampler (dwave-samplers' simulated annealing at constant beta by default; a QPU needs allow_hardware)
    "dimod": SamplerEntry("hybrid_attention.backends.ocean.sampler", "DimodSampler", "ocean"),
    # any registered sampler, its batch sharded across Dask workers (or run here): one seed per problem
    "sharded": SamplerEntry("hybrid_attention.backends.sharded", "ShardedSampler"),
}


def register_sampler(name: str, module: str, cls: str, extra: str | None = None) -> None:
    """Register a sampler class (or factory) by import path; it is imported only when first requested.

    Args:
        name: registry name; module, cls: import path of the class or factory (a class declares its
            ``capabilities``; ``capabilities.dqa``: it takes ``schedule=``, which :func:`make_sampler` builds);
        extra: the ``hybrid-attention`` extra that provides its dependencies.
    """
    SAMPLERS[name] = SamplerEntry(module, cls, extra)


def _entry(name: str) -> SamplerEntry:
    if not isinstance(name, str):
        raise TypeError(f"sampler name must be a string, got {type(name).__name__}")
    if name not in SAMPLERS:
        raise ValueError(f"unknown sampler {name!r}; available: {sorted(SAMPLERS)}")
    return SAMPLERS[name]


def is_dqa(name: str) -> bool:
    """Whether registered sampler ``name`` runs a DQA circuit (takes ``schedule=``): its class's
    ``capabilities.dqa``.

    Raises:
        ValueError: ``name`` is not registered. TypeError: it is not a string, or the registered callable declares
        no capabilities. ImportError: as :func:`sampler_class`.
    """
    return capabilities_of(sampler_class(name)).dqa


def sampler_class(name: str) -> type[Sampler]:
    """The class (or factory) registered as ``name``, imported now.

    Raises:
        ValueError: unknown name. ImportError: a dependency is missing (the message names the extra to install).
    """
    module, cls, extra = _entry(name)
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or str(exc)
        if module.startswith("hybrid_attention.") and missing == module:
            raise ImportError(f"sampler {name!r} is registered but its module {module} is missing") from exc
        hint = f"pip install 'hybrid-attention[{extra}]'" if extra else "pip install hybrid-attention"
        raise ImportError(f"sampler {name!r} needs {missing!r}, which is not installed; run: {hint}") from exc
    return getattr(mod, cls)


def _accepted(params: list[inspect.Parameter]) -> set[str]:
    return {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self"}


def sampler_options(name: str) -> set[str] | None:
    """Names of the keyword options the constructor of sampler ``name`` accepts, following ``**kw`` up the class
    hierarchy; ``None`` when that cannot be told (a constructor or factory taking ``**kw`` that does not hand them
    to a base class's constructor).

    Raises:
        ValueError, ImportError: as :func:`sampler_class`.
    """
    factory = sampler_class(name)
    if not isinstance(factory, type):  # a factory function
        params = list(inspect.signature(factory).parameters.values())
        return None if any(p.kind is p.VAR_KEYWORD for p in params) else _accepted(params)
    names: set[str] = set()
    for klass in factory.__mro__:
        if "__init__" not in vars(klass):
            continue
        if klass is object:
            return names
        params = list(inspect.signature(vars(klass)["__init__"]).parameters.values())
        names |= _accepted(params) | set(_groups(klass))
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            return names
        if klass.__module__ == "abc" or klass.__name__ == "Sampler":
            return None
    return names


def _groups(factory: Any) -> dict[str, tuple[str, str]]:
    """The flat options a sampler class folds into grouped ones (``option_groups``; none for a factory)."""
    return factory.option_groups if isinstance(factory, type) and issubclass(factory, Sampler) else {}


def fold_options(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with every flat spelling of a grouped constructor option (the class's ``option_groups``, e.g.
    ``burn_in`` of ``chain``) folded into that option's frozen value: ``dataclasses.replace`` of the value given, or
    of the constructor's default, with the flat fields (a list becomes a tuple: command lines give ranges as lists).

    Raises:
        ValueError: a grouped option given both as a value and by its fields (``chain=`` and ``burn_in=``).
        ValueError, TypeError: a field value the dataclass refuses.
    """
    factory = sampler_class(name)
    groups = _groups(factory)
    flat = {k: options[k] for k in options if k in groups}
    if not flat:
        return dict(options)
    out = {k: v for k, v in options.items() if k not in flat}
    fields: dict[str, dict[str, Any]] = {}
    for key, value in flat.items():
        param, field = groups[key]
        fields.setdefault(param, {})[field] = tuple(value) if isinstance(value, list) else value
    defaults = inspect.signature(factory).parameters
    for param, values in fields.items():
        if out.get(param) is not None:
            given = sorted(k for k in flat if groups[k][0] == param)
            raise ValueError(f"{name}: give either {param}= or {'=/'.join(given)}=, not both")
        out[param] = dataclasses.replace(defaults[param].default, **values)
    return out


def check_sampler_options(name: str, options: dict[str, Any]) -> None:
    """``TypeError`` naming the accepted options when ``options`` holds one the constructor of ``name`` does not
    take (nothing is constructed)."""
    if not options:
        return
    accepted = sampler_options(name)
    unknown = sorted(set(options) - accepted) if accepted is not None else []
    if unknown:
        raise TypeError(f"sampler {name!r} does not accept option(s) {unknown}; accepted: {sorted(accepted)}")


def get_sampler(name: str, **options: Any) -> Sampler:
    """A registered sampler, e.g. ``get_sampler("aer", schedule=DQASchedule(tau=1.0, steps=20))``.

    Raises:
        ValueError: unknown name (or a bad option value, from the constructor). TypeError: an option the
            constructor does not take (:func:`check_sampler_options`). ImportError: a missing extra.
    """
    check_sampler_options(name, options)
    return sampler_class(name)(**fold_options(name, options))


def make_sampler(name: str, *, tau: float | None = None, trotter_steps: int | None = None, **options: Any) -> Sampler:
    """:func:`get_sampler` with the anneal given as numbers, as training and the CLI configure it.

    DQA samplers (:func:`is_dqa`) get ``schedule=DQASchedule(tau=tau, steps=trotter_steps)`` (defaults 1.0 and 20)
    unless ``schedule`` is among ``options``. Other samplers get ``tau`` / ``trotter_steps`` as constructor options
    when the constructor takes an option of that name (``qemcmc``: the proposal's Trotter steps). The remaining
    ``options`` go to the constructor. Reads and seeds are per-call settings (``sample(num_reads=, seed=)``, or a
    :class:`~hybrid_attention.sampling.Sampling` value), not constructor options.

    Raises:
        TypeError: ``tau`` or ``trotter_steps`` for a sampler that takes neither (nothing would use it), or as
            :func:`get_sampler`. ValueError: as :func:`get_sampler`.
    """
    if is_dqa(name):
        if "schedule" not in options:
            options["schedule"] = DQASchedule(
                tau=1.0 if tau is None else float(tau), steps=20 if trotter_steps is None else int(trotter_steps)
            )
    else:
        accepted = sampler_options(name)  # None: the constructor takes any keyword
        for key, value in (("tau", tau), ("trotter_steps", trotter_steps)):
            if value is None:
                continue
            if accepted is not None and key not in accepted:
                raise TypeError(f"sampler {name!r} takes no {key} (it runs no DQA anneal); drop it")
            options[key] = value
    return get_sampler(name, **options)


def available_samplers() -> dict[str, bool]:
    """``{name: importable}`` for every registered sampler (tries the imports; nothing is instantiated)."""
    out = {}
    for name in SAMPLERS:
        try:
            sampler_class(name)
            out[name] = True
        except ImportError:
            out[name] = False
    return out
