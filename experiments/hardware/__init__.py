"""The noise study on fake IBM backends: DQA output and qemcmc bias under device noise (results/hardware/)."""
