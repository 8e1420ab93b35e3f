"""The Optuna samplers behind sampling_algorithm, and what makes a sweep's draws its own.

A sweep has one seed (the manifest's, else one drawn when the sweep is created and kept in the
study), and trial N draws from a generator seeded with (that seed, N). A resumed sweep, a runner
joining it, or a sweep that lost its storage for a while therefore never starts the sequence
over: trial 5 draws what trial 5 of an uninterrupted sweep would, never what trial 0 drew (a
sampler seeded once per process replayed the sequence from its start on every `tftrain sweep
resume`). How each sampling goes on:

- random, bayesian (TPE): a sampler of their kind per trial, seeded for that trial; TPE still
  learns from every finished trial in the study, whoever ran it.
- random with rule sobol: the scrambled Sobol sequence is the sweep seed's; Optuna keeps its
  position in the study, so it goes on from the last point drawn. Choices (which Sobol does not
  cover) are drawn per trial as under random.
- grid: the points are shuffled by the manifest's seed, the same order in every process; a point
  that a trial of the study finished, or is running, is not drawn again. A trial that a signal
  stopped is queued again with its own values (study.queue_stopped_trials), not re-drawn.
"""

from __future__ import annotations

import hashlib
import secrets
import warnings
from collections.abc import Callable
from typing import Any

from runner.errors import extra_module
from runner.manifest.sweep import Sampling
from runner.sweep.space import SearchSpace

SEED_BITS = 32  # what numpy's RandomState and the manifest's seed take


def new_seed() -> int:
    """A sweep's seed when the manifest sets none; kept in the study so every runner shares it."""
    return secrets.randbits(SEED_BITS)


def trial_seed(seed: int, number: int) -> int:
    """The seed of trial `number`'s draws: a hash, so neighbouring trials' streams are unrelated."""
    digest = hashlib.sha256(f"tftrain-sweep:{seed}:{number}".encode()).digest()
    return int.from_bytes(digest[: SEED_BITS // 8], "little")


def sampler_for(sampling: Sampling, space: SearchSpace, seed: int | None = None) -> Any:
    """The Optuna sampler for a sweep's sampling_algorithm; `seed`: the sweep's (default: the
    manifest's, else a new one)."""
    optuna = extra_module("optuna", "sweep", "a sweep")
    if seed is None:
        seed = new_seed() if sampling.seed is None else sampling.seed
    if sampling.type == "grid":
        # the grid's order is the manifest's seed's alone: a point's id must name the same point in
        # every runner, also in one that joined before the sweep's drawn seed was stored
        return _grid_sampler(optuna, space.grid_params(), sampling.seed or 0)
    if sampling.type == "bayesian":
        return _trial_seeded(optuna, optuna.samplers.TPESampler, seed)
    random = _trial_seeded(optuna, optuna.samplers.RandomSampler, seed)
    if sampling.rule == "sobol":
        # QMCSampler is marked experimental; the manifest asked for it, so the warning tells no one anything
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            # choice params are drawn independently by design, not a surprise worth a warning each trial
            return optuna.samplers.QMCSampler(
                qmc_type="sobol", scramble=True, seed=seed, independent_sampler=random, warn_independent_sampling=False
            )
    return random


def _trial_seeded(optuna: Any, kind: Callable[..., Any], seed: int) -> Any:
    """A sampler that answers for trial N with `kind(seed=trial_seed(seed, N))`: the draws depend
    on the sweep's seed and the trial's number, not on what this process asked before."""

    class TrialSeeded(optuna.samplers.BaseSampler):
        def __init__(self) -> None:
            self.kind, self.seed = kind, seed
            self._by_trial: dict[int, Any] = {}  # asks are made one at a time (SweepRunner's lock)

        def _of(self, trial: Any) -> Any:
            sampler = self._by_trial.get(trial.number)
            if sampler is None:
                sampler = self._by_trial[trial.number] = kind(seed=trial_seed(seed, trial.number))
            return sampler

        def before_trial(self, study: Any, trial: Any) -> None:
            self._of(trial).before_trial(study, trial)

        def infer_relative_search_space(self, study: Any, trial: Any) -> dict[str, Any]:
            return self._of(trial).infer_relative_search_space(study, trial)

        def sample_relative(self, study: Any, trial: Any, search_space: dict[str, Any]) -> dict[str, Any]:
            return self._of(trial).sample_relative(study, trial, search_space)

        def sample_independent(self, study: Any, trial: Any, param_name: str, param_distribution: Any) -> Any:
            return self._of(trial).sample_independent(study, trial, param_name, param_distribution)

        def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
            self._of(trial).after_trial(study, trial, state, values)
            self._by_trial.pop(trial.number, None)  # told: its sampler is done

        def reseed_rng(self) -> None:
            """Nothing to reseed: the seed and the trial's number fix every draw."""

    return TrialSeeded()


def _grid_sampler(optuna: Any, params: dict[str, list[Any]], seed: int) -> Any:
    class AskTellGridSampler(optuna.samplers.GridSampler):
        """GridSampler whose last trial's tell does not call study.stop(), which raises outside
        study.optimize; a sweep asks and tells, and ends after as many trials as the grid has."""

        def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
            pass

    return AskTellGridSampler(params, seed=seed)
