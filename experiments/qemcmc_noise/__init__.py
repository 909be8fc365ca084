"""The qemcmc chain's mixing under device noise (results/qemcmc_noise/)."""
