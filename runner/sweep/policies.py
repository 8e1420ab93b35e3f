"""HyperDrive's early-termination policies (bandit, median_stopping, truncation_selection) as
Optuna pruners, and Optuna's own successive halving (asha) and Hyperband.

A trial reports its primary metric as `trial.report(value, step)` with step = 1, 2, 3 … (the count
of its reports: HyperDrive's "interval"). Optuna asks the study's pruner after each report; the
pruner answers for that trial only, at the trial's latest interval N:

- When: N is a multiple of evaluation_interval and N >= delay_evaluation (HyperDrive: "the policy
  applies every multiple of evaluation_interval that is greater than or equal to
  delay_evaluation"); at every other interval the trial goes on.
- Against whom: the study's trials that reported at interval N, whatever their state (running,
  completed, pruned, failed), the judged trial included; each is read only up to interval N
  ("its performance is only compared with the performance of other runs up to interval N even if
  they reported metrics for intervals greater than N"), so a young trial is never compared with an
  older trial's later, better values. A trial with no report at N is left out.
- A NaN report counts as the worst value there is: a diverged trial is the first to go.

Optuna's own MedianPruner and PercentilePruner do not fit: they compare against completed trials
only, at one step's value (not a running average), and count intervals from their warm-up step.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping

from runner.errors import ManifestError, extra_module
from runner.manifest.sweep import Asha, Bandit, EarlyTermination, Hyperband, MedianStopping, TruncationSelection

optuna = extra_module("optuna", "sweep", "a sweep")


def scores(values: Mapping[int, float], goal: str, upto: int) -> list[float]:
    """The reports at intervals 1 … upto, turned so that higher is better whatever the goal
    (minimize negates); NaN becomes -inf, the worst."""
    sign = 1.0 if goal == "maximize" else -1.0
    return [-math.inf if math.isnan(value) else sign * value for step, value in sorted(values.items()) if step <= upto]


class _PolicyPruner(optuna.pruners.BasePruner):
    """The schedule and the comparison set shared by the three policies; `stops` is the rule."""

    def __init__(self, policy: Bandit | MedianStopping | TruncationSelection, goal: str):
        self.evaluation_interval = policy.evaluation_interval
        self.delay_evaluation = policy.delay_evaluation
        self.goal = goal

    def applies_at(self, interval: int) -> bool:
        return interval % self.evaluation_interval == 0 and interval >= self.delay_evaluation

    def peers(self, trials: Iterable, trial) -> Iterable:
        """The other trials that take part in the comparison (the judged one is added by prune)."""
        return (other for other in trials if other.number != trial.number)

    def prune(self, study, trial) -> bool:
        interval = trial.last_step
        if interval is None or not self.applies_at(interval):
            return False
        # The judged trial is read from the argument: the study's copy of it may lag behind.
        others = self.peers(study.get_trials(deepcopy=False), trial)
        field = [
            scores(other.intermediate_values, self.goal, interval)
            for other in others
            if interval in other.intermediate_values
        ]
        return self.stops(scores(trial.intermediate_values, self.goal, interval), field)

    def stops(self, own: list[float], others: list[list[float]]) -> bool:
        """Whether the trial whose scores (higher is better, intervals 1 … N) are `own` stops,
        given the other trials' scores over the same intervals."""
        raise NotImplementedError


class BanditPruner(_PolicyPruner):
    """Bandit: at interval N, a trial stops when its best value up to N falls outside the slack
    of the best trial's best value up to N.

    maximize, best B:   stop if value < B / (1 + slack_factor)  or  value < B - slack_amount
    minimize, best B:   stop if value > B * (1 + slack_factor)  or  value > B + slack_amount

    (HyperDrive: "any training runs whose best metric at interval 10 is less than 0.66
    (0.8/(1+slack_factor)) will be terminated"; minimize is its mirror.) A ratio only makes sense
    against the best's magnitude, so for a best below zero the factor applies the other way round
    (maximize: B * (1 + slack_factor)): maximizing -loss then stops exactly the trials that
    minimizing loss would. With both slack_factor and slack_amount set, leaving either slack stops
    the trial. The best trial never stops itself.
    """

    def __init__(self, policy: Bandit, goal: str):
        super().__init__(policy, goal)
        if policy.slack_factor is None and policy.slack_amount is None:
            raise ManifestError("sweep.early_termination: a bandit policy needs slack_factor or slack_amount")
        self.slack_factor = policy.slack_factor
        self.slack_amount = policy.slack_amount

    def stops(self, own: list[float], others: list[list[float]]) -> bool:
        mine = max(own, default=-math.inf)
        best = max([mine, *(max(theirs) for theirs in others)])
        if self.slack_amount is not None and mine < best - self.slack_amount:
            return True
        if self.slack_factor is not None:
            # Scores negate minimize's values, so one bound serves both goals: minimize's
            # B * (1 + f) for B > 0 is the score bound (-B) * (1 + f) below zero.
            bound = best / (1 + self.slack_factor) if best >= 0 else best * (1 + self.slack_factor)
            return mine < bound
        return False


class MedianStoppingPruner(_PolicyPruner):
    """Median stopping: at interval N, a trial stops when its best value up to N is worse
    (strictly) than the median of the running averages over intervals 1 … N of all trials that
    reported at N, itself included.

    (HyperDrive: "a run will be canceled at interval N if its best primary metric reported up to
    interval N is worse than the median of the running averages for intervals 1:N across all
    runs".) A trial alone is never stopped: its best is never worse than its own average.
    """

    def stops(self, own: list[float], others: list[list[float]]) -> bool:
        if not own:
            return False
        averages = [statistics.fmean(theirs) for theirs in [own, *others]]
        return max(own) < statistics.median(averages)


class TruncationSelectionPruner(_PolicyPruner):
    """Truncation selection: at interval N, the trials that reported at N are ranked by their best
    value up to N; a trial stops when it is among the lowest truncation_percentage % of them,
    that is when at least n - floor(n * truncation_percentage / 100) of the n trials are strictly
    better than it.

    (HyperDrive: "a run will be terminated at interval 5 if its performance at interval 5 is in
    the lowest 20% of performance of all runs at interval 5"; older trials count with their
    "corresponding (and earlier) performance".) With exclude_finished_jobs the ranking holds only
    trials still running ("the lowest 20% of performance of all unfinished runs"): completed,
    pruned and failed trials are left out. The count rounds down, so nothing is cut until
    n * truncation_percentage >= 100 (20 %: five trials at N), and ties are never cut, a trial
    only being behind the trials strictly better than it.
    """

    def __init__(self, policy: TruncationSelection, goal: str):
        super().__init__(policy, goal)
        self.truncation_percentage = policy.truncation_percentage
        self.exclude_finished_jobs = policy.exclude_finished_jobs

    def peers(self, trials: Iterable, trial) -> Iterable:
        others = super().peers(trials, trial)
        if self.exclude_finished_jobs:
            return (other for other in others if not other.state.is_finished())
        return others

    def stops(self, own: list[float], others: list[list[float]]) -> bool:
        if not own:
            return False
        bests = [max(own), *(max(theirs) for theirs in others)]
        cut = len(bests) * self.truncation_percentage // 100
        better = sum(1 for best in bests if best > bests[0])
        return cut > 0 and better >= len(bests) - cut


def successive_halving(policy: Asha, goal: str):
    """ASHA: rungs at min_resource × reduction_factor^k reports; at each, a trial goes on only when
    it is in the best 1/reduction_factor of the trials that reached that rung (running ones too:
    the asynchronous variant, no trial waits for a rung to fill). Optuna reads the goal from the study."""
    return optuna.pruners.SuccessiveHalvingPruner(
        min_resource=policy.min_resource, reduction_factor=policy.reduction_factor
    )


def hyperband(policy: Hyperband, goal: str):
    """Hyperband: several successive-halving brackets, each starting at its own rung, trials shared
    among them; max_resource unset: the first finished trial's count of reports (Optuna's "auto")."""
    return optuna.pruners.HyperbandPruner(
        min_resource=policy.min_resource,
        max_resource="auto" if policy.max_resource is None else policy.max_resource,
        reduction_factor=policy.reduction_factor,
    )


PRUNERS = {
    "bandit": BanditPruner,
    "median_stopping": MedianStoppingPruner,
    "truncation_selection": TruncationSelectionPruner,
    "asha": successive_halving,
    "hyperband": hyperband,
}


def pruner_for(policy: EarlyTermination | None, goal: str):
    """The Optuna pruner that applies `policy` to a study whose direction is `goal` ("maximize" or
    "minimize"); a NopPruner, which never stops a trial, without a policy."""
    if policy is None:
        return optuna.pruners.NopPruner()
    if goal not in ("maximize", "minimize"):
        raise ValueError(f"goal must be maximize or minimize, not {goal!r}")
    # Dispatch on .type: the policy models share a base, so isinstance would not tell them apart.
    return PRUNERS[policy.type](policy, goal)
