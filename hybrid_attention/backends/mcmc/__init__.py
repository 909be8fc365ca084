"""The MCMC wing: Markov chains over spin configurations, and the mean field they start from.

* ``chain``: :class:`~hybrid_attention.backends.mcmc.chain.MetropolisChain`, the one Metropolis chain, parameterised
  by its proposal rule (acceptance, chains, burn-in, starts, persistent states, diagnostics);
* ``metropolis``: the chain with Layden et al.'s classical proposals (``mh-local``, ``mh-uniform``);
* ``qemcmc`` (+ ``qemcmc_engines``, ``qemcmc_draw``): the chain with the quantum (circuit) proposal;
* ``gibbs`` (+ ``gibbs_kernel``): heat-bath Gibbs chains and simulated annealing (``gibbs``, ``anneal``);
* ``meanfield``: naive / TAP mean field with a differentiable fixed point (``meanfield``), the chains' start;
* ``analysis``: exact transition matrices of small chains, spectral gaps, autocorrelation diagnostics.
"""
