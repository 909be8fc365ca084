"""How close is the bridge's covariance surrogate to the true gradient of the DQA circuit's output marginals?

For random problems (n = 6 spins, fields ~ N(0, scale^2), couplings ~ 0.3 N(0, 1)), compares
``d(G . m)/dh`` and ``d(G . m)/dJ`` (pair derivative, J symmetric) from

* autograd through the simulated circuit (``statevector`` sampler, complex128: the true gradient), and
* the bridge's covariance identities over the circuit's exact output distribution at the schedule's leading-order
  effective beta (``Sampling(sampler, readout="shots")`` with every state weighted exactly, no shot noise),

reporting the cosine similarity and the norm ratio (surrogate / true). Run:

    nice -n 5 python -m experiments.dqa_vs_exact.gradient_check > results/dqa_vs_exact/gradient_check.md
"""

from __future__ import annotations

import torch

from hybrid_attention import IsingProblem
from hybrid_attention.backends import get_sampler
from hybrid_attention.bridge import differentiable_marginals
from hybrid_attention.circuits import DQASchedule
from hybrid_attention.sampling import Sampling


def cos(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a * b).sum() / (a.norm() * b.norm()))


def main() -> None:
    g = torch.Generator().manual_seed(0)
    n, B = 6, 16
    print("| tau | field scale | cos(h grad) | norm ratio h | cos(J grad) | norm ratio J |")
    print("| --- | --- | --- | --- | --- | --- |")
    for tau in (0.5, 1.0, 2.0):
        sv = get_sampler("statevector", schedule=DQASchedule(tau=tau, steps=20), dtype=torch.complex128)
        for scale in (0.5, 1.0, 3.0):
            h = (scale * torch.randn(B, n, generator=g, dtype=torch.float64)).requires_grad_()
            U = 0.3 * torch.randn(n, n, generator=g, dtype=torch.float64).triu(1)
            J = (U + U.T).requires_grad_()
            G = torch.randn(B, n, generator=g, dtype=torch.float64)
            true = torch.autograd.grad((sv.differentiable_marginals(IsingProblem(h, J)) * G).sum(), (h, J))
            m = differentiable_marginals(IsingProblem(h, J), Sampling(sv, readout="shots"))  # every state, weighted
            sur = torch.autograd.grad((m * G).sum(), (h, J))
            tJ, sJ = true[1] + true[1].T, sur[1] + sur[1].T
            print(
                f"| {tau} | {scale} | {cos(true[0], sur[0]):.3f} | {float(sur[0].norm() / true[0].norm()):.2f} | "
                f"{cos(tJ, sJ):.3f} | {float(sJ.norm() / tJ.norm()):.2f} |"
            )


if __name__ == "__main__":
    main()
