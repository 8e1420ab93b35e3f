"""Hyperparameter sweeps on Optuna (the manifest's sweep: section)."""
