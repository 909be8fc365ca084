"""Which failures of the runtime service are worth another try, and the loop that tries again.

A transient failure is one the same request may survive a moment later: a network failure (``ConnectionError``,
``TimeoutError``, or qiskit-ibm-runtime's ``RequestsApiError`` without a status code) or an HTTP answer 408, 429 or
5xx. Anything else (a refused option, a bad circuit, an authorisation error) is raised at once.

:func:`retrying` waits between tries as :meth:`~.options.Execution.delay` says (exponential backoff with jitter,
capped) and gives up after ``Execution.max_attempts`` tries. It never decides on its own that a submission may be
repeated: the caller's ``before_retry`` asks the service first (:mod:`.jobs`: the jobs carrying the PUB's tag) and
returns the job the service already accepted, if any.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .options import Execution

__all__ = ["TRANSIENT_STATUS", "is_transient", "retrying", "GaveUp"]

logger = logging.getLogger("hybrid_attention.backends.ibm.sampler")

#: HTTP statuses worth another try: request timeout, too many requests, server-side errors
TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})


class GaveUp(RuntimeError):
    """Every try failed with a transient error; ``attempts`` tries, the last error is the cause."""

    def __init__(self, message: str, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure of the service or the network that the same request may survive later.

    Example:
        >>> is_transient(ConnectionError("reset")), is_transient(ValueError("bad option"))
        (True, False)
    """
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        # qiskit-ibm-runtime's RequestsApiError carries -1 when no answer came back (a network failure)
        return status in TRANSIENT_STATUS or (status == -1 and type(exc).__name__ == "RequestsApiError")
    return isinstance(exc, (ConnectionError, TimeoutError))


def retrying(
    call: Callable[[], Any],
    execution: Execution,
    *,
    what: str,
    before_retry: Callable[[], Any] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    rng: np.random.Generator | None = None,
) -> Any:
    """``call()``, tried again after transient errors (:func:`is_transient`) up to ``execution.max_attempts``
    times in all, waiting :meth:`Execution.delay` between tries.

    Args:
        call: the request.
        execution: the retry policy.
        what: the request, for log lines and the error.
        before_retry: asked after each wait, before ``call`` is tried again: a value other than ``None`` is
            returned instead of trying again (the job the service accepted after all). Its own transient errors
            count as failed tries (``call`` is not tried again until it has answered).

    Raises:
        GaveUp: every try failed with a transient error (the last one is ``__cause__``).
        Exception: the first error that is not transient, as raised.
    """
    rng = np.random.default_rng() if rng is None else rng  # jitter only: never the sampling seed
    attempt, ask = 0, False
    while True:
        try:
            if ask and before_retry is not None:
                found = before_retry()
                if found is not None:
                    return found
            ask = False
            return call()
        except Exception as exc:
            if not is_transient(exc):
                raise
            attempt += 1
            ask = ask or before_retry is not None
            if attempt >= execution.max_attempts:
                raise GaveUp(
                    f"{what}: {attempt} tries failed with transient errors (last: {type(exc).__name__}: {exc})",
                    attempt,
                ) from exc
            wait = execution.delay(attempt - 1, rng)
            logger.warning("ibm: %s failed (%s: %s); try %d of %d in %.2f s", what, type(exc).__name__, exc,
                           attempt + 1, execution.max_attempts, wait)  # fmt: skip
            sleep(wait)
