"""Uncertainty for every figure: 95% intervals, paired tests and a plain verdict. Pure functions, no I/O.

    wilson(k, n)                Wilson score interval of a proportion (the unit is the item)
    bootstrap(items, stat)      percentile bootstrap over items of any statistic of a list of items (a number
                                or a dict of numbers); used for means, pooled ratios and percentiles
    paired_difference(a, b)     mean of b - a over paired items: paired-bootstrap interval, and the exact
                                sign-flip (randomization) p-value
    mcnemar(a, b)               exact McNemar test of paired 0/1 outcomes (two-sided binomial on discordant pairs)
    compare_paired(a, b)        McNemar when both are 0/1, else the paired difference; with a plain verdict

Resampling is seeded, so a report rebuilt from the same results prints the same intervals. At small n the
percentile bootstrap interval of a difference is too narrow (three equal gains give a zero-width interval),
so a difference is called detectable on the exact p-value, never on the interval alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from itertools import product
from typing import Any

import numpy as np

Z95 = 1.959963984540054  # two-sided 95% normal quantile
ALPHA = 0.05
BOOTSTRAP_SAMPLES = 1000
SEED = 0
EXACT_SIGN_FLIPS_UP_TO = 16  # 2**16 sign patterns enumerated; beyond, a seeded Monte Carlo sample


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default), ``q`` in [0, 100]; None for no values."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval of ``k`` successes in ``n`` trials; None when ``n`` is 0."""
    if n <= 0:
        return None
    if not 0 <= k <= n:
        raise ValueError(f"wilson: k must be in [0, n], got k={k}, n={n}")
    p, z2 = k / n, z * z
    center = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, center - half), min(1.0, center + half)


def _number(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def bootstrap(items: Sequence[Any], stat: Callable[[list[Any]], Any], *, samples: int = BOOTSTRAP_SAMPLES,
              seed: int = SEED, level: float = 0.95) -> Any:
    """Percentile interval of ``stat`` over ``samples`` resamples of ``items`` (with replacement).

    ``stat`` returns a number (-> ``(lo, hi)``) or a dict of numbers (-> ``{key: (lo, hi)}``); a resample where
    the statistic is None or NaN is left out. None (or a None entry) when no resample gave a value."""
    if not items:
        return None
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(items), size=(samples, len(items)))
    values = [stat([items[i] for i in row]) for row in draws]
    tail = (1 - level) / 2 * 100

    def interval(xs: list[float | None]) -> tuple[float, float] | None:
        xs = [x for x in (_number(v) for v in xs) if x is not None]
        return (percentile(xs, tail), percentile(xs, 100 - tail)) if xs else None

    if values and isinstance(values[0], Mapping):
        return {key: interval([v.get(key) for v in values]) for key in values[0]}
    return interval(values)


def mean_interval(values: Sequence[float], **kw: Any) -> tuple[float, float] | None:
    """Bootstrap interval of the mean of ``values``."""
    return bootstrap(list(values), lambda xs: sum(xs) / len(xs), **kw)


def sign_flip_p(diffs: Sequence[float], *, seed: int = SEED, draws: int = 20_000) -> float:
    """Two-sided p-value of the paired randomization test: the share of sign patterns of ``diffs`` whose mean is
    at least as far from 0 as the observed one. Exact up to ``EXACT_SIGN_FLIPS_UP_TO`` non-zero differences."""
    d = np.array([x for x in diffs if x != 0], dtype=float)
    if d.size == 0:
        return 1.0
    observed = abs(d.mean()) - 1e-12
    if d.size <= EXACT_SIGN_FLIPS_UP_TO:
        signs = np.array(list(product((1.0, -1.0), repeat=d.size)))
        return float(np.mean(np.abs(signs @ d / d.size) >= observed))
    signs = np.random.default_rng(seed).choice((1.0, -1.0), size=(draws, d.size))
    return float((np.sum(np.abs(signs @ d / d.size) >= observed) + 1) / (draws + 1))


def mcnemar(a: Sequence[bool | int], b: Sequence[bool | int]) -> tuple[int, int, float]:
    """(only_a, only_b, p): items right in ``a`` only, in ``b`` only, and the exact two-sided McNemar p-value."""
    if len(a) != len(b):
        raise ValueError(f"mcnemar: paired outcomes must have equal length, got {len(a)} and {len(b)}")
    only_a = sum(1 for x, y in zip(a, b) if x and not y)
    only_b = sum(1 for x, y in zip(a, b) if y and not x)
    n = only_a + only_b
    if n == 0:
        return only_a, only_b, 1.0
    tail = sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1)) / 2 ** n
    return only_a, only_b, min(1.0, 2 * tail)


@dataclass
class Comparison:
    """A paired comparison of ``b`` against ``a`` over the same ``n`` items."""

    n: int
    mean_a: float | None
    mean_b: float | None
    diff: float | None  # mean_b - mean_a
    lo: float | None  # 95% paired-bootstrap interval of diff
    hi: float | None
    p: float
    test: str  # "McNemar (exact)" or "paired bootstrap; sign-flip p"
    verdict: str
    only_a: int | None = None  # McNemar: items right in a only / in b only
    only_b: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def verdict(diff: float | None, p: float, n: int, name_a: str = "A", name_b: str = "B") -> str:
    """Plain words: which is higher when the difference is detectable at ``ALPHA``, else that it is not."""
    if n == 0 or diff is None:
        return "no paired items to compare"
    if p >= ALPHA or diff == 0:
        return f"no detectable difference at n={n} (p={p:.2g})"
    return f"{name_b} {'higher' if diff > 0 else 'lower'} than {name_a} (p={p:.2g}, n={n})"


def compare_paired(a: Sequence[float], b: Sequence[float], name_a: str = "A", name_b: str = "B", *,
                   seed: int = SEED) -> Comparison:
    """``b`` vs ``a`` on the same items (position i in both is item i): McNemar for 0/1 outcomes, else the paired
    bootstrap interval of the mean difference with the sign-flip p-value."""
    if len(a) != len(b):
        raise ValueError(f"compare_paired: paired values must have equal length, got {len(a)} and {len(b)}")
    n = len(a)
    if n == 0:
        return Comparison(0, None, None, None, None, None, 1.0, "none", verdict(None, 1.0, 0))
    xa, xb = [float(x) for x in a], [float(x) for x in b]
    diffs = [y - x for x, y in zip(xa, xb)]
    mean_a, mean_b, diff = sum(xa) / n, sum(xb) / n, sum(diffs) / n
    lo_hi = mean_interval(diffs, seed=seed) or (None, None)
    if all(x in (0.0, 1.0) for x in xa + xb):
        only_a, only_b, p = mcnemar(xa, xb)
        return Comparison(n, mean_a, mean_b, diff, *lo_hi, p, "McNemar (exact)",
                          verdict(diff, p, n, name_a, name_b), only_a, only_b)
    p = sign_flip_p(diffs, seed=seed)
    return Comparison(n, mean_a, mean_b, diff, *lo_hi, p, "paired bootstrap; sign-flip p",
                      verdict(diff, p, n, name_a, name_b))
