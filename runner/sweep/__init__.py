"""Hyperparameter sweeps on Optuna: the search space, the samplers, the study that runs the trials."""
