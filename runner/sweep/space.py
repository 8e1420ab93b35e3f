"""Azure ML's ten search-space expressions on Optuna, and the samplers that draw from them.

Every key is one Optuna param, named by the key. What Optuna stores (the param) and what the
script gets (the value) differ where Azure defines an expression as a transformation of a draw:
loguniform's param is the exponent, the normal family's param is a quantile u in (0, 1) mapped
through the normal inverse CDF (Optuna has no normal distribution; a sampler that models u models
the normal honestly), and a q-expression's param is the draw before rounding. `values_of` and
`internal` translate between the two.
"""

from __future__ import annotations

import itertools
import math
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from statistics import NormalDist
from typing import Any, Union

from runner.errors import extra_module
from runner.manifest.sweep import Choice, Expression

# The normal family's quantiles stay inside (0, 1), which inv_cdf needs; this clips about seven
# standard deviations out, a tail no sweep will miss.
QUANTILE_EPSILON = 1e-12
# A grid is enumerated in memory (GridSampler does it too): a larger one is a mistake, not a sweep.
MAX_GRID = 1_000_000
# A value counts as reachable when a param reproduces it to this relative error: exp and inv_cdf
# have no exact inverse for every float.
REACH_TOLERANCE = 1e-9
# How many floats either side of a param are tried for an exact value.
NEIGHBOURS = 32


def _same(a: Any, b: Any) -> bool:
    """Equal and of one type: a choice of 1, 1.0 and True has three values. Floats compare by
    their repr, so that 0.0 and -0.0 are two values and NaN is one."""
    return type(a) is type(b) and (repr(a) == repr(b) if isinstance(a, float) else a == b)


@dataclass(frozen=True)
class _Choice:
    values: tuple[Any, ...]
    # Optuna finds a categorical's value with ==, which confuses 1, 1.0 and True (and misses NaN):
    # for such a choice the param is the value's index; otherwise the value itself, which reads well.
    by_index: bool

    @classmethod
    def of(cls, expression: Choice) -> _Choice:
        values = tuple(expression.values)
        # one pass with a set (equal values hash alike: 1, 1.0 and True collide), never values.index
        # per value, which is quadratic: a 20,000-value choice took seconds
        ambiguous = len(set(values)) != len(values)
        ambiguous |= any(isinstance(value, float) and not math.isfinite(value) for value in values)
        return cls(values, ambiguous)

    def options(self) -> list[Any]:
        return list(range(len(self.values))) if self.by_index else list(self.values)

    def suggest(self, trial: Any, key: str) -> Any:
        return trial.suggest_categorical(key, self.options())

    def value(self, param: Any) -> Any:
        return self.values[int(param)] if self.by_index else param

    def param(self, key: str, value: Any) -> Any:
        for index, candidate in enumerate(self.values):
            if _same(candidate, value):
                return index if self.by_index else candidate
        raise ValueError(f"{key}: {value!r} is none of the choice's values {list(self.values)!r}")

    def grid(self, key: str) -> list[Any]:
        return self.options()

    def distribution(self, optuna: Any) -> Any:
        return optuna.distributions.CategoricalDistribution(self.options())


@dataclass(frozen=True)
class _RandInt:
    upper: int

    def suggest(self, trial: Any, key: str) -> int:
        return trial.suggest_int(key, 0, self.upper - 1)

    def value(self, param: Any) -> int:
        return int(param)

    def param(self, key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < self.upper:
            raise ValueError(f"{key}: {value!r} is no integer from 0 to {self.upper - 1} (randint)")
        return value

    def grid(self, key: str) -> range:
        return range(self.upper)

    def distribution(self, optuna: Any) -> Any:
        return optuna.distributions.IntDistribution(0, self.upper - 1)


@dataclass(frozen=True)
class _Continuous:
    type: str
    low: float  # the param's bounds
    high: float
    normal: NormalDist | None  # the normal family: the param is a quantile of this
    log: bool  # the value is exp of the draw
    q: float | None

    @classmethod
    def of(cls, key: str, expression: Any) -> _Continuous:
        family = expression.type.removeprefix("q")
        if family in ("uniform", "loguniform"):
            low, high, normal = float(expression.min_value), float(expression.max_value), None
            if low >= high:
                raise ValueError(f"{key}: {expression.type} needs min_value < max_value, not {low} and {high}")
        else:
            low, high, normal = QUANTILE_EPSILON, 1 - QUANTILE_EPSILON, NormalDist(expression.mu, expression.sigma)
        q = float(expression.q) if expression.type.startswith("q") else None
        dimension = cls(expression.type, low, high, normal, family.startswith("log"), q)
        # the value grows with the param, so both ends tell whether every draw is a finite float
        try:
            finite = all(math.isfinite(dimension.value(end)) for end in (low, high))
        except OverflowError:
            finite = False
        if not finite:
            raise ValueError(f"{key}: {expression.type} reaches values beyond a float's range")
        return dimension

    def suggest(self, trial: Any, key: str) -> float:
        return trial.suggest_float(key, self.low, self.high)

    def distribution(self, optuna: Any) -> Any:
        return optuna.distributions.FloatDistribution(self.low, self.high)

    def value(self, param: Any) -> float:
        x = float(param)
        if self.normal is not None:
            x = self.normal.inv_cdf(min(max(x, QUANTILE_EPSILON), 1 - QUANTILE_EPSILON))
        if self.log:
            x = math.exp(x)
        return x if self.q is None else _multiple(x, self.q)

    def param(self, key: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{key}: {value!r} is no number ({self.type})")
        target = float(value)
        nearest = None
        for param in self._candidates(target):
            miss = abs(self.value(param) - target)
            if miss == 0:
                return param
            if nearest is None or miss < nearest[0]:
                nearest = (miss, param)
        if not nearest[0] <= REACH_TOLERANCE * max(1.0, abs(target)):
            raise ValueError(f"{key}: {value!r} is out of {self.type}'s reach")
        return nearest[1]

    def _candidates(self, target: float) -> Iterator[float]:
        """Params that may give target, likeliest first. The plain inverse is usually exact and
        reads well; where rounding in exp or inv_cdf moves it, the exact param is a few floats
        away, and bisecting finds one where the plain inverse is out of bounds or undefined."""
        guess = self._inverse(target)
        if guess is not None and self.low <= guess <= self.high:
            yield from self._around(guess)
        yield from self._around(self._bisect(target))

    def _inverse(self, target: float) -> float | None:
        """The param that the plain inverse gives (None where there is none)."""
        try:
            x = math.log(target) if self.log else target
            return self.normal.cdf(x) if self.normal is not None else x
        except ValueError:
            return None

    def _bisect(self, target: float) -> float:
        """The least param whose value reaches target, bisecting the floats between the bounds (the
        value never falls as the param grows, give or take a rounding)."""
        low, high = _ordinal(self.low), _ordinal(self.high)
        while low < high:
            middle = (low + high) // 2
            if self.value(_float(middle)) < target:
                low = middle + 1
            else:
                high = middle
        return _float(low)

    def _around(self, param: float) -> list[float]:
        """param and the floats next to it within the bounds, nearest first."""
        place, low, high = _ordinal(param), _ordinal(self.low), _ordinal(self.high)
        steps = sorted(range(-NEIGHBOURS, NEIGHBOURS + 1), key=abs)
        return [_float(place + step) for step in steps if low <= place + step <= high]

    def grid(self, key: str) -> list[Any]:
        raise ValueError(f"{key}: grid sampling takes choice and randint expressions only, not {self.type}")


_Dimension = Union[_Choice, _RandInt, _Continuous]


def _dimension(key: str, expression: Expression) -> _Dimension:
    if expression.type == "choice":
        return _Choice.of(expression)
    if expression.type == "randint":
        return _RandInt(expression.upper)
    return _Continuous.of(key, expression)


def _multiple(x: float, q: float) -> float:
    """round(x / q) * q (half to even, as numpy rounds), then to q's decimals: 3 * 0.1 is 0.3 on
    the script's command line, not 0.30000000000000004."""
    places = max(0, -Decimal(repr(q)).as_tuple().exponent)
    return round(round(x / q) * q, places)


def _ordinal(x: float) -> int:
    """x's place among the floats (its bit pattern, negatives mirrored): bisecting these integers bisects floats."""
    bits = struct.unpack("<q", struct.pack("<d", x))[0]
    return bits if bits >= 0 else -(bits & 0x7FFF_FFFF_FFFF_FFFF)


def _float(ordinal: int) -> float:
    bits = ordinal if ordinal >= 0 else -ordinal | 1 << 63
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


class SearchSpace:
    """A sweep's search space: keys are script_params flags, one Optuna param each."""

    def __init__(self, space: dict[str, Expression]) -> None:
        self._dimensions = {key: _dimension(key, expression) for key, expression in space.items()}

    def suggest(self, trial: Any) -> dict[str, Any]:
        """Ask the trial for every key; the values the script gets, by key."""
        return {key: dimension.value(dimension.suggest(trial, key)) for key, dimension in self._dimensions.items()}

    def values_of(self, params: dict[str, Any]) -> dict[str, Any]:
        """The values of a trial's stored params (trial.params); a key it never asked for is left out."""
        return {key: dimension.value(params[key]) for key, dimension in self._dimensions.items() if key in params}

    def internal(self, values: dict[str, Any]) -> dict[str, Any]:
        """The params that reproduce these values (for study.enqueue_trial)."""
        for key in values:
            if key not in self._dimensions:
                raise ValueError(f"{key}: not in the search space")
        for key in self._dimensions:
            if key not in values:
                raise ValueError(f"{key}: no value given")
        return {key: dimension.param(key, values[key]) for key, dimension in self._dimensions.items()}

    def distributions(self) -> dict[str, Any]:
        """The Optuna distribution of each key's param: what `suggest` asks (a finished trial of an
        earlier sweep joins this study with them: warm start)."""
        optuna = extra_module("optuna", "sweep", "a sweep")
        return {key: dimension.distribution(optuna) for key, dimension in self._dimensions.items()}

    def grid(self) -> list[dict[str, Any]]:
        """Every combination's values, in the search space's key order."""
        options = self.grid_params()
        return [self.values_of(dict(zip(options, combination))) for combination in itertools.product(*options.values())]

    def grid_params(self) -> dict[str, list[Any]]:
        """Each key's params in grid order (what GridSampler enumerates); a grid too large to hold is refused."""
        options = {key: dimension.grid(key) for key, dimension in self._dimensions.items()}
        size = math.prod(len(params) for params in options.values())
        if size > MAX_GRID:
            raise ValueError(f"the grid has {size} combinations, more than {MAX_GRID}")
        return {key: list(params) for key, params in options.items()}
