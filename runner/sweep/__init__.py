"""Hyperparameter sweeps on Optuna: a manifest's sweep: section run as a study of tftrain runs."""
