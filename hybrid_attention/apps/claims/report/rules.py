"""The paper's claims as data, and the verdict rules the report applies to them (stated once, here; printed into
``claims.md`` as :data:`RULES`, pre-registered in ``experiments/claims/plan.py``).

Every finding of the paper is a :class:`Finding`: its number, the paper's words, the kind of rule that judges it
(:data:`KINDS`), the claimed value, the studies it reads, the contrast (mode against reference at which block sizes)
whose paired gains decide it, and the Holm family its contrasts belong to (:data:`FAMILIES`). :mod:`.findings`
applies them; :mod:`.verdicts` holds one function per kind.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Finding",
    "FINDINGS",
    "FAMILIES",
    "KINDS",
    "PAPER",
    "RULES",
    "ALPHA",
    "EQUIVALENCE_MARGIN",
    "PERPLEXITY_MARGIN",
    "ACCURACY_MARGIN",
    "FIELD_STUDY",
    "family_contrasts",
    "rules_lines",
]

ALPHA = 0.05
#: findings 1 ("comparable") and 3, 4 ("worse"): relative perplexity difference within ± this many %
EQUIVALENCE_MARGIN = 0.5
#: finding 8 ("competitive"): a sampler-trained model may be worse than exact training by at most this many % in
#: perplexity (relative) or accuracy points
PERPLEXITY_MARGIN = 0.5
ACCURACY_MARGIN = 0.5
#: the suffix of studies of J-only with a symmetry-breaking field, compared with their base study's runs
FIELD_STUDY = "_jfield"
#: the kinds of rule (:mod:`.verdicts` has one function per kind)
KINDS = ("gain", "comparable", "worse", "couplings", "competitive")
#: the Holm families: the findings' primary contrasts, by task
FAMILIES = {"A": "Tiny Shakespeare, findings 1-3", "B": "brackets, findings 6 and 7"}


@dataclass(frozen=True)
class Finding:
    """One finding of the paper and how it is judged.

    Attributes:
        n: its number (1-8).
        paper: what the paper says.
        kind: one of :data:`KINDS`.
        claimed: the claimed value (a gain in % perplexity or accuracy points), ``None`` where the kind has none.
        studies: the studies it reads, in order of preference: the first that has finished runs (empty: finding 8
            reads the quantum-training ``summary.json``).
        mode, ref: the contrast, ``mode`` against ``ref`` paired by seed.
        block_sizes: the block sizes of the contrast; ``None``: every block size the study has (couplings: the
            largest decides).
        family: the Holm family (:data:`FAMILIES`) of its contrasts, ``None`` for a finding outside them.
    """

    n: int
    paper: str
    kind: str
    claimed: float | None
    studies: tuple[str, ...]
    mode: str
    ref: str
    block_sizes: tuple[int, ...] | None
    family: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Finding.kind must be one of {KINDS}, got {self.kind!r}")
        if self.family is not None and (self.family not in FAMILIES or self.block_sizes is None):
            raise ValueError(f"Finding {self.n}: a family of {sorted(FAMILIES)} needs fixed block sizes")


_SHAKESPEARE_123 = ("shakespeare_pt", "shakespeare")  # learning rate per mode and T, 12 seeds; else the first study

FINDINGS = (
    Finding(1, "Tiny Shakespeare, T = 4: hj and softmax comparable", "comparable", None, _SHAKESPEARE_123, "hj",
            "softmax", (4,), "A"),
    Finding(2, "Tiny Shakespeare, T = 12: hj beats softmax by 1.08 % in perplexity", "gain", 1.08, _SHAKESPEARE_123,
            "hj", "softmax", (12,), "A"),
    Finding(3, "Tiny Shakespeare: h-only worse than softmax for T >= 8", "worse", None, _SHAKESPEARE_123, "h",
            "softmax", (8, 12, 16, 20), "A"),
    Finding(4, "Tiny Shakespeare: J-only poor", "worse", None, ("shakespeare",), "j", "softmax", None),
    Finding(5, "learned couplings positive (ferromagnetic) for key distance 2-4, negative for distance >= 6",
            "couplings", None, ("shakespeare",), "hj", "", None),
    Finding(6, "brackets, T = 16: hj beats softmax by 2.89 accuracy points; the gap grows with T", "gain", 2.89,
            ("brackets",), "hj", "softmax", (16,), "B"),
    Finding(7, "brackets without FFN: the gap grows to 4.53 points", "gain", 4.53, ("brackets_noffn",), "hj",
            "softmax", (16,), "B"),
    Finding(8, "DQA-trained vs exact: competitive perplexity and accuracy on both tasks", "competitive", None, (),
            "dqa-shots", "exact", None),
)  # fmt: skip
#: the paper's words per finding number
PAPER = {f.n: f.paper for f in FINDINGS}


def family_contrasts(family: str) -> list[tuple[Finding, int]]:
    """The contrasts of a Holm family: ``(finding, T)`` per block size of each finding in it (family A: 6, B: 2)."""
    return [(f, T) for f in FINDINGS if f.family == family for T in f.block_sizes or ()]


RULES = """
Findings 1-3 read the study `shakespeare_pt` (learning rate swept per mode and per T, 12 seeds) when it has runs,
else `shakespeare`; findings 4 and 5 read `shakespeare`. Verdicts read the last evaluation's metric; the best
checkpoint's (lowest validation loss) is shown beside each effect, not used.

Multiplicity: the Holm families are the findings' primary contrasts only. Family A (Tiny Shakespeare, 6 contrasts):
hj vs softmax at T = 4 (finding 1) and T = 12 (finding 2), h vs softmax at T = 8, 12, 16, 20 (finding 3). Family B
(brackets, 2 contrasts): hj vs softmax at T = 16 with FFN (finding 6) and without FFN (finding 7). A contrast is
*significant* when its Holm-adjusted p (within its family; a contrast without runs counts as p = 1, so the family
keeps its size m) is below 0.05. Every interval a verdict reads, and the seeds needed, use the Bonferroni level
0.05 / m of the family (Holm's most stringent step): 0.05 / 6 (99.17 % intervals) for family A, 0.05 / 2 (97.5 %)
for family B. Finding 4 lies outside the families: its intervals use 0.05 / (its number of block sizes). The
per-study tables show unadjusted 95 % intervals and p values.

* a claimed gain `g` (findings 2, 6, 7): *not testable (ceiling)* when `g` exceeds what the reference leaves
  (brackets: 100 % minus softmax's mean accuracy over the paired seeds); otherwise *reproduced* when the gain is
  significant and the interval reaches `g` (or lies above it); *reproduced in direction, smaller* when significant
  but the interval lies below `g`; *refuted* when not significant and the interval lies below `g`; otherwise
  *inconclusive*, with the seeds a paired t test at the family's Bonferroni level would need for 80 % power
  against `g` at the observed spread.
* "comparable" (finding 1): *reproduced* when the interval lies inside ±0.5 %, *refuted* when significant and the
  interval lies outside it, otherwise inconclusive (with the seeds needed against 0.5 %).
* "worse" (findings 3, 4), with the same ±0.5 % margin: per block size, *worse* when the interval lies below
  -0.5 %, *not worse* when it lies above -0.5 %, otherwise undecided. *Reproduced* when every block size of the
  finding (finding 3: T = 8, 12, 16, 20; finding 4: every T of the study) is worse, *refuted* when any is not
  worse, otherwise inconclusive (a block size without runs is undecided). Finding 4's verdict is that of the
  paper's J-only (`h = 0`: exactly uniform attention, J never trains); J-only with a symmetry-breaking field
  (J learns) gets the same rule beside it.
* couplings (finding 5): per key distance the mean learned J over seeds with its 95 % interval, at the largest
  block size with hj runs; *reproduced* when every distance 2-4 is significantly positive and every distance >= 6
  significantly negative, *refuted* when any is significantly of the other sign, otherwise inconclusive. The same
  rule's outcome at the smaller block sizes (T > 6) is shown beside it. Finding 6's trend over T: a one-sample t
  test on the seeds' slopes, unadjusted.
* "competitive" (finding 8): sampler-trained models against exact training, from the quantum-training experiment's
  `summary.json` (every model evaluated with exact marginals): per (task, T) and variant, the gain over `exact`
  paired by seed (% perplexity or accuracy points, positive: the variant better) with its unadjusted 95 % t
  interval. A cell is *competitive* when the interval lies above `-margin` (margins 0.5 % perplexity and 0.5
  accuracy point), *not competitive* when it lies entirely below `-margin`, otherwise (one seed: always)
  *inconclusive*, with the seeds that would show it within the margin with 80 % power if it were as good as exact.
  The finding's verdict is that of `dqa-shots` (training on DQA measurement shots, as the paper did): *reproduced*
  when every cell is competitive and both tasks were run, *refuted* when any cell is not competitive, otherwise
  inconclusive. `qemcmc` (quantum-enhanced MCMC reads, Rao-Blackwellised), `gibbs` (classical samples, same
  estimator) and `dqa-rb` (DQA shots, same estimator) are reported beside it, not in the verdict; the controls
  `qemcmc-k0` (qemcmc with zero moves: the mean-field start and the estimator alone), `exact-j0` (exact training
  with J fixed at 0) and `softmax` are rows of the table. Where `qemcmc` and `qemcmc-k0` both ran, the gain of
  qemcmc over qemcmc-k0, paired by seed (95 % interval), is what the quantum moves add.
"""
"""The verdict rules, printed into ``claims.md``."""


def rules_lines() -> list[str]:
    """:data:`RULES` as markdown lines."""
    return RULES.strip().splitlines()
