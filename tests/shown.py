"""Compare what an example prints with the output a page shows, within stated tolerances.

Float kernels differ between CPUs (Intel and AMD, AVX2 and AVX-512), so a printed float may change in its last digit
on another machine, and a value computed over many float steps (a training run's loss) may drift further. Text and
integers must match exactly; every number written with a decimal point is compared with a tolerance:

* by default one unit of its last printed digit (``0.3042`` within 1e-4): a value that differs by float epsilon
  between two machines rounds to a neighbouring last digit when it sits near a rounding tie;
* a line may carry a wider tolerance of its own (``tolerances``: the first pattern found in the line decides), given
  by the caller next to its reason (shot noise, a training trajectory).
"""

from __future__ import annotations

import re

NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _unit(token: str) -> float:
    """One unit of the last printed digit of a decimal ``token`` (``0.3042`` -> 1e-4; ``1.5e-3`` -> 1e-4)."""
    mantissa, _, exponent = token.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (int(exponent or 0) - decimals)


def mismatches(shown: str, expected: str, tolerances: dict[str, float] | None = None) -> list[str]:
    """Each difference between ``shown`` and ``expected`` beyond the tolerances, as a sentence (empty: they agree).

    Args:
        shown, expected: printed text, compared line by line after trailing spaces are stripped.
        tolerances: ``{substring: absolute tolerance}``; a line containing the substring compares its decimal numbers
            within that tolerance (plus one unit of the last printed digit) instead of one unit.
    """
    a = [line.rstrip() for line in shown.strip().splitlines()]
    b = [line.rstrip() for line in expected.strip().splitlines()]
    if len(a) != len(b):
        return [f"{len(a)} lines printed, {len(b)} shown"]
    out = []
    for i, (got, want) in enumerate(zip(a, b), 1):
        if NUMBER.split(got) != NUMBER.split(want):
            out.append(f"line {i}: text differs: {got!r} against {want!r}")
            continue
        extra = next((tol for key, tol in (tolerances or {}).items() if key in want), 0.0)
        for x, y in zip(NUMBER.findall(got), NUMBER.findall(want)):
            if not any(c in y.lower() for c in ".e"):  # an integer: a count, a shape, a seed
                if x != y:
                    out.append(f"line {i}: {x} against {y} (integers must match)")
                continue
            tol = extra + _unit(y) * (1 + 1e-9)
            if abs(float(x) - float(y)) > tol:
                out.append(f"line {i}: {x} against {y}, beyond {tol:.3g}")
    return out
