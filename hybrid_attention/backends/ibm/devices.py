"""IBM Quantum backends for :mod:`.ibm`: credentials, the runtime's Sampler class, fake backends by name, the
fractional RZZ gate's angle bounds, and resolving what ``IBMSampler(backend=...)`` was given to a backend object
(a device only with the explicit opt-in and credentials, both checked before the service is contacted)."""

from __future__ import annotations

import difflib
import os
import re
from typing import Any

import numpy as np
from qiskit_ibm_runtime import QiskitRuntimeService

__all__ = [
    "has_credentials",
    "runtime_sampler",
    "runtime_service",
    "fake_backend",
    "fake_backend_names",
    "is_fake_backend_name",
    "has_fractional_rzz",
    "check_rzz_angles",
    "is_local",
    "resolve_backend",
]


def has_credentials() -> bool:
    """True if ``QISKIT_IBM_TOKEN`` is set or an account is saved on disk (nothing is contacted)."""
    if os.environ.get("QISKIT_IBM_TOKEN"):
        return True
    try:
        return bool(QiskitRuntimeService.saved_accounts())
    except Exception:  # unreadable config file counts as no credentials
        return False


def runtime_sampler() -> tuple[type, str]:
    """``(class, kind)`` of the runtime Sampler this installation offers: ``kind = "executor"`` for the client-side
    ``qiskit_ibm_runtime.executor_sampler.Sampler`` (>= 0.50), else ``"legacy"`` for ``qiskit_ibm_runtime.SamplerV2``.

    Example:
        >>> from hybrid_attention.backends.ibm.sampler import runtime_sampler
        >>> runtime_sampler()[1] in ("executor", "legacy")
        True
    """
    try:
        from qiskit_ibm_runtime.executor_sampler import Sampler
    except ImportError:  # an older runtime (or one without samplomatic): the server-side primitive
        from qiskit_ibm_runtime import SamplerV2

        return SamplerV2, "legacy"
    return Sampler, "executor"


def runtime_service(instance: str | None = None) -> Any:
    """A ``QiskitRuntimeService`` from ``QISKIT_IBM_TOKEN`` when set, else the saved account; ``instance`` (default
    ``QISKIT_IBM_INSTANCE``) picks the IBM Cloud instance. The token is never kept."""
    token = os.environ.get("QISKIT_IBM_TOKEN")
    inst = instance or os.environ.get("QISKIT_IBM_INSTANCE")
    return QiskitRuntimeService(token=token, instance=inst) if token else QiskitRuntimeService(instance=inst)


# ---------------------------------------------------------------------- fake backends by name
def _fake_classes() -> dict[str, type]:
    """``{backend_name: class}`` of the fake backends (``FakeTorino.backend_name == "fake_torino"``)."""
    from qiskit_ibm_runtime import fake_provider
    from qiskit_ibm_runtime.fake_provider.fake_backend import FakeBackendV2

    out = {}
    for attr in dir(fake_provider):
        obj = getattr(fake_provider, attr)
        if attr.startswith("Fake") and isinstance(obj, type) and issubclass(obj, FakeBackendV2):
            out[str(getattr(obj, "backend_name", attr))] = obj
    return out


def fake_backend_names() -> list[str]:
    """Names of the runtime's fake backends (``qiskit_ibm_runtime.fake_provider``), e.g. ``"fake_torino"``.

    Example:
        >>> from hybrid_attention.backends.ibm.sampler import fake_backend_names
        >>> {"fake_torino", "fake_manila", "fake_fractional"} <= set(fake_backend_names())
        True
    """
    return sorted(_fake_classes())


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def fake_backend(name: str) -> Any:
    """The fake backend called ``name``: ``"fake_torino"``, ``"FakeTorino"`` or ``"fake_manila_v2"`` all work (case,
    ``_`` / ``-`` and a ``V2`` suffix are ignored; the class name works too: ``"FakeFractionalBackend"``). A Heron
    name with the suffix ``_fractional`` (``"fake_torino_fractional"``) is that backend with IBM's fractional RZZ and
    RX gates added (:func:`~hybrid_attention.backends.ibm.fractional.with_fractional_gates`: their errors are
    assumed equal to CZ's and SX's).

    Raises:
        ValueError: no fake backend has that name; the message lists the close matches.

    Example:
        >>> from hybrid_attention.backends.ibm.sampler import fake_backend
        >>> fake_backend("FakeManilaV2").name, fake_backend("fake_manila").num_qubits
        ('fake_manila', 5)
    """
    if not isinstance(name, str):
        raise TypeError(f"a fake backend name must be a string, got {type(name).__name__}")
    from .fractional import FRACTIONAL_SUFFIX, with_fractional_gates

    if name.lower().endswith(FRACTIONAL_SUFFIX) and _norm(name) != "fakefractional":
        return with_fractional_gates(fake_backend(name[: -len(FRACTIONAL_SUFFIX)]))
    classes = _fake_classes()
    key = _norm(name)
    for bname, cls in classes.items():  # the backend name, or the class name with or without its V2 suffix
        cname = _norm(cls.__name__)
        if key in (_norm(bname), cname, cname.removesuffix("v2"), _norm(bname) + "v2"):
            return cls()
    close = difflib.get_close_matches(name.lower().replace("-", "_"), list(classes), n=5, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ValueError(
        f"ibm: no fake backend named {name!r}{hint} (qiskit_ibm_runtime.fake_provider has {len(classes)}: "
        "see hybrid_attention.backends.ibm.sampler.fake_backend_names())"
    )


def is_fake_backend_name(name: str) -> bool:
    """Whether ``name`` means a fake backend (starts with ``fake``, any case): resolved offline, never a device."""
    return _norm(name).startswith("fake")


# ---------------------------------------------------------------------- fractional gates
def has_fractional_rzz(backend: Any) -> bool:
    """Whether the backend's native ``rzz`` has angle bounds that exclude negative angles (IBM's fractional
    ``RZZ(0 <= theta <= pi/2)``): the DQA circuit must then be emitted with folded RZZ. False for targets without
    ``rzz`` or with an unrestricted one (``AerSimulator``).

    Example:
        >>> from hybrid_attention.backends.ibm.sampler import fake_backend, has_fractional_rzz
        >>> has_fractional_rzz(fake_backend("fake_fractional")), has_fractional_rzz(fake_backend("fake_torino"))
        (True, False)
    """
    target = getattr(backend, "target", None)
    if target is None or "rzz" not in target.operation_names:
        return False
    if not hasattr(target, "gate_has_angle_bounds"):  # qiskit < 2.0: no angle bounds; IBM's fractional RZZ has them
        return True
    return bool(target.gate_has_angle_bounds("rzz")) and not target.supported_angle_bound("rzz", [-0.1])


def _rzz_angles(isa: Any, values: np.ndarray) -> np.ndarray:
    """Every bound angle of the ISA circuit's ``rzz`` gates over the rows of ``values (C, P)`` (flat)."""
    column = {p: i for i, p in enumerate(isa.parameters)}
    out = []
    for ins in isa.data:
        if ins.operation.name != "rzz":
            continue
        par = ins.operation.params[0]
        if par in column:
            out.append(values[:, column[par]])
        elif getattr(par, "parameters", None):  # an expression of parameters
            out.append(np.array([float(par.bind({p: row[column[p]] for p in par.parameters})) for row in values]))
        else:
            out.append(np.array([float(par)]))
    return np.concatenate(out) if out else np.zeros(0)


def check_rzz_angles(isa: Any, values: np.ndarray, backend: Any) -> None:
    """``ValueError`` before any submission when a bound ``rzz`` angle lies outside the target's angle bounds."""
    target = backend.target
    for a in np.unique(np.round(_rzz_angles(isa, values), 12)):
        if not target.supported_angle_bound("rzz", [float(a)]):
            raise ValueError(
                f"ibm: backend {getattr(backend, 'name', backend)!r} rejects RZZ({float(a):.6g}) (fractional gates "
                "take angles in [0, pi/2]); nothing was submitted. Use fold_rzz=True (or None: automatic), which "
                "folds every angle into [0, pi/2] (needs |2 beta dt B J| <= pi/2), or a backend without fractional gates"
            )


def is_local(backend: Any) -> bool:
    """Fake backends and plain simulators run in the runtime's local mode."""
    mod = type(backend).__module__
    return "fake_provider" in mod or mod.startswith("qiskit_aer") or "fake" in type(backend).__name__.lower()


def resolve_backend(
    backend: Any, *, allow_hardware: bool, instance: str | None, fractional: bool
) -> tuple[Any, bool, Any]:
    """``(backend object, local, service or None)``: a fake name is resolved offline; a device name or ``None`` needs
    the opt-in and credentials (both checked before the service is contacted)."""
    if isinstance(backend, str) and is_fake_backend_name(backend):
        return fake_backend(backend), True, None
    if backend is not None and not isinstance(backend, str) and not hasattr(backend, "target"):
        raise TypeError(
            f"ibm: backend must be a BackendV2, a device or fake-backend name, or None, got {type(backend).__name__}"
        )
    if backend is not None and not isinstance(backend, str) and is_local(backend):
        return backend, True, None
    if not allow_hardware:
        raise ValueError(
            "ibm: submitting to a real IBM Quantum device needs the explicit opt-in allow_hardware=True "
            "(QPU time is billed); pass a fake backend such as 'fake_torino' (or FakeTorino()) to run offline"
        )
    if isinstance(backend, (str, type(None))):
        if not has_credentials():
            raise RuntimeError(
                "ibm: no IBM Quantum credentials found: set QISKIT_IBM_TOKEN (and QISKIT_IBM_INSTANCE) or "
                "save an account with QiskitRuntimeService.save_account(token=..., instance=...)"
            )
        service = runtime_service(instance)
        # fractional-gate devices expose RZZ(0 <= theta <= pi/2) only when asked for: needed by fold_rzz=True
        backend = (
            service.backend(backend, use_fractional_gates=fractional)
            if backend
            else service.least_busy(operational=True, simulator=False, use_fractional_gates=fractional)
        )
        return backend, False, service
    return backend, False, getattr(backend, "service", None)
