"""The paper's claims as data, and the verdict rules the report applies to them (stated once, here; printed into
``claims.md`` as :data:`RULES`).

Every finding of the paper is a :class:`Finding`: its number, the paper's words, the kind of rule that judges it
(:data:`KINDS`), the claimed value, the study it reads and the contrast (mode against reference at which block
sizes) whose paired gains decide it. :mod:`.findings` applies them; :mod:`.verdicts` holds one function per kind.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Finding",
    "FINDINGS",
    "KINDS",
    "PAPER",
    "RULES",
    "ALPHA",
    "EQUIVALENCE_MARGIN",
    "PERPLEXITY_MARGIN",
    "ACCURACY_MARGIN",
    "FIELD_STUDY",
    "rules_lines",
]

ALPHA = 0.05
#: finding 1 ("comparable"): relative perplexity difference within ± this many % counts as comparable
EQUIVALENCE_MARGIN = 0.5
#: finding 8 ("competitive"): a sampler-trained model may be worse than exact training by at most this many % in
#: perplexity (relative) or accuracy points (issue #12's targets)
PERPLEXITY_MARGIN = 2.0
ACCURACY_MARGIN = 1.0
#: the suffix of studies of J-only with a symmetry-breaking field, compared with their base study's runs
FIELD_STUDY = "_jfield"
#: the kinds of rule (:mod:`.verdicts` has one function per kind)
KINDS = ("gain", "comparable", "worse", "couplings", "competitive")


@dataclass(frozen=True)
class Finding:
    """One finding of the paper and how it is judged.

    Attributes:
        n: its number (1-8).
        paper: what the paper says.
        kind: one of :data:`KINDS`.
        claimed: the claimed value (a gain in % perplexity or accuracy points), ``None`` where the kind has none.
        study: the study whose runs it reads (``None``: finding 8 reads the quantum-training ``summary.json``).
        mode, ref: the contrast, ``mode`` against ``ref`` paired by seed.
        block_sizes: the block sizes of the contrast; ``None``: every block size the study has (couplings: the
            largest decides).
    """

    n: int
    paper: str
    kind: str
    claimed: float | None
    study: str | None
    mode: str
    ref: str
    block_sizes: tuple[int, ...] | None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Finding.kind must be one of {KINDS}, got {self.kind!r}")


FINDINGS = (
    Finding(1, "Tiny Shakespeare, T = 4: hj and softmax comparable", "comparable", None, "shakespeare", "hj",
            "softmax", (4,)),
    Finding(2, "Tiny Shakespeare, T = 12: hj beats softmax by 1.08 % in perplexity", "gain", 1.08, "shakespeare",
            "hj", "softmax", (12,)),
    Finding(3, "Tiny Shakespeare: h-only worse than softmax for T >= 8", "worse", None, "shakespeare", "h",
            "softmax", (8, 12, 16, 20)),
    Finding(4, "Tiny Shakespeare: J-only poor", "worse", None, "shakespeare", "j", "softmax", None),
    Finding(5, "learned couplings positive (ferromagnetic) for key distance 2-4, negative for distance >= 6",
            "couplings", None, "shakespeare", "hj", "", None),
    Finding(6, "brackets, T = 16: hj beats softmax by 2.89 accuracy points; the gap grows with T", "gain", 2.89,
            "brackets", "hj", "softmax", (16,)),
    Finding(7, "brackets without FFN: the gap grows to 4.53 points", "gain", 4.53, "brackets_noffn", "hj",
            "softmax", (16,)),
    Finding(8, "DQA-trained vs exact: competitive perplexity and accuracy on both tasks", "competitive", None, None,
            "dqa-shots", "exact", None),
)  # fmt: skip
#: the paper's words per finding number
PAPER = {f.n: f.paper for f in FINDINGS}

RULES = """
* a claimed gain ``g`` (findings 2, 6, 7): *reproduced* when the gain is significant and the interval reaches ``g``
  (or lies above it); *reproduced in direction, smaller* when significant but the interval lies below ``g``;
  *refuted* when not significant and the interval lies below ``g``; otherwise *inconclusive*, with the seeds a paired t
  test would need for 80 % power against ``g`` at the observed spread.
* "comparable" (finding 1): *reproduced* when the interval lies inside ``±`` :data:`EQUIVALENCE_MARGIN`, *refuted*
  when significant and outside it, otherwise inconclusive.
* "worse" (findings 3, 4): per block size, significantly worse (Holm) or not; *reproduced* when every cell is,
  *refuted* when any cell is significantly better, otherwise inconclusive. Finding 4's verdict is that of the paper's
  J-only (``h = 0``: exactly uniform attention, J never trains); J-only with a symmetry-breaking field (J learns) gets
  the same rule beside it.
* couplings (finding 5): per key distance the mean learned J over seeds with its interval, at the largest block size
  with hj runs; *reproduced* when every distance 2-4 is significantly positive and every distance >= 6 significantly
  negative, *refuted* when any is significantly of the other sign, otherwise inconclusive. The same rule's outcome at
  the smaller block sizes (T > 6) is shown beside it.
* "competitive" (finding 8): sampler-trained models against exact training, from the quantum-training experiment's
  ``summary.json`` (every model evaluated with exact marginals): per (task, T) and variant, the gain over ``exact``
  paired by seed (``_gain`` semantics: % perplexity or accuracy points, positive: the variant better) with its
  unadjusted 95 % t interval. A cell is *competitive* when the interval lies above ``-margin`` (not worse than exact
  by more than the margin: :data:`PERPLEXITY_MARGIN` % perplexity, :data:`ACCURACY_MARGIN` accuracy point, issue
  #12's targets), *not competitive* when it lies entirely below ``-margin``, otherwise (one seed: always)
  *inconclusive*, with the seeds that would show it within the margin with 80 % power if it were as good as exact.
  The finding's verdict is that of ``dqa-shots`` (training on DQA measurement shots, as the paper did):
  *reproduced* when every cell is competitive and both tasks were run, *refuted* when any cell is not competitive,
  otherwise inconclusive. ``qemcmc`` (quantum-enhanced MCMC reads, Rao-Blackwellised), ``gibbs`` (classical
  samples, same estimator) and ``dqa-rb`` (DQA shots, same estimator) are reported beside it, not in the verdict.
"""
"""The verdict rules, printed into ``claims.md`` (Holm-adjusted p-values over all cells of a study's table and 95 % t
intervals of the paired mean)."""


def rules_lines() -> list[str]:
    """:data:`RULES` as markdown lines."""
    return RULES.strip().splitlines()
