"""The paper's claims tested under a committed protocol (results/claims/): the plan, cost measurements, the learning-rate edge probe."""
