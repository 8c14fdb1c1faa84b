"""Metrics as per-item contributions pooled over a run, so each value and its 95% interval come from the same numbers.

Every metric of rag.eval.agent_metrics is one of

    share   a share of items (each counted item adds 0 or 1)                      -> Wilson interval
    pooled  counts of steps, chunks, citations or rewrites pooled over items       -> the wider of a bootstrap
            (sum of numerators / sum of denominators)                                 over items and Wilson on
                                                                                      the pooled counts
    mean    the mean of one value per item                                         -> bootstrap over items
    pct     a percentile of one value per item                                     -> bootstrap over items

The bootstrap resamples whole items, so the steps, chunks and citations of one item stay together. For pooled
counts neither interval is enough alone: Wilson treats the steps of one item as independent (too narrow when
they are not), and the bootstrap collapses to a point when every unit agrees (0 valid of 16 citations gives
[0, 0]); the wider of the two is reported. Resampling is vectorized: a run of a few hundred items takes
milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rag.stats.intervals import BOOTSTRAP_SAMPLES, SEED, percentile, wilson


class Pooled:
    """Values, why each missing one is missing, and per metric the per-item arrays it is pooled from."""

    def __init__(self, n_items: int) -> None:
        self.n_items = n_items
        self.values: dict[str, float | None] = {}
        self.why: dict[str, str] = {}
        self._parts: dict[str, tuple[str, Any, Any, str]] = {}  # name -> (kind, array, array or q, unit)

    def ratio(self, name: str, nums: Sequence[float], dens: Sequence[float], unit: str, reason: str,
              kind: str = "pooled") -> None:
        """sum(nums) / sum(dens), one entry per item of the run (0, 0 for an item that does not count)."""
        num, den = np.asarray(nums, dtype=float), np.asarray(dens, dtype=float)
        self._parts[name] = (kind, num, den, unit)
        self._put(name, float(num.sum() / den.sum()) if den.sum() else None, reason)

    def mean(self, name: str, values: Sequence[float | None], unit: str, reason: str) -> None:
        """The mean of the items' values (None = the item does not count)."""
        self.ratio(name, [0.0 if v is None else float(v) for v in values], [0.0 if v is None else 1.0 for v in values],
                   unit, reason, kind="mean")

    def share(self, name: str, flags: Sequence[bool | float | None], reason: str) -> None:
        """The share of items whose flag is true (None = the item does not count)."""
        self.ratio(name, [0.0 if f is None else float(bool(f)) for f in flags], [0.0 if f is None else 1.0 for f in flags],
                   "items", reason, kind="share")

    def pct(self, name: str, values: Sequence[float | None], q: float, unit: str, reason: str) -> None:
        """The ``q``-th percentile of the items' values (None = the item does not count)."""
        arr = np.array([np.nan if v is None else float(v) for v in values], dtype=float)
        self._parts[name] = ("pct", arr, q, unit)
        self._put(name, percentile([v for v in values if v is not None], q), reason)

    def put_none(self, name: str, unit: str, reason: str) -> None:
        self._parts[name] = ("none", None, None, unit)
        self._put(name, None, reason)

    def _put(self, name: str, value: float | None, reason: str) -> None:
        self.values[name] = value
        if value is None:
            self.why[name] = reason

    def support(self, name: str) -> tuple[int, str]:
        """(n, unit): how many of what the metric counts."""
        kind, a, b, unit = self._parts[name]
        if kind in ("share", "pooled", "mean"):
            return int(round(float(b.sum()))), unit
        return (int(np.sum(~np.isnan(a))), unit) if kind == "pct" else (0, unit)

    def intervals(self, *, samples: int = BOOTSTRAP_SAMPLES, seed: int = SEED) -> dict[str, dict[str, Any]]:
        """``{name: {lo, hi, n, unit, items, method}}`` for every computed metric."""
        out: dict[str, dict[str, Any]] = {}
        draws = np.random.default_rng(seed).integers(0, self.n_items, size=(samples, self.n_items)) \
            if self.n_items else None
        for name, value in self.values.items():
            if value is None:
                continue
            kind, a, b, unit = self._parts[name]
            n, _ = self.support(name)
            if kind == "share":
                lo_hi, method = wilson(int(round(float(a.sum()))), n), "wilson"
            elif kind == "pooled":
                boot, wil = _bootstrap(kind, a, b, draws), wilson(int(round(float(a.sum()))), n)
                lo_hi = (min(boot[0], wil[0]), max(boot[1], wil[1])) if boot and wil else boot or wil
                method = "wider of bootstrap over items and wilson"
            else:
                lo_hi, method = _bootstrap(kind, a, b, draws), "bootstrap over items"
            out[name] = {"lo": lo_hi[0] if lo_hi else None, "hi": lo_hi[1] if lo_hi else None, "n": n, "unit": unit,
                         "items": self.n_items, "method": method}
        return out


def _bootstrap(kind: str, a: Any, b: Any, draws: Any) -> tuple[float, float] | None:
    """2.5th and 97.5th percentiles of the metric over the resampled runs where it is defined."""
    if kind != "pct":
        nums, dens = a[draws].sum(axis=1), b[draws].sum(axis=1)
        stats = nums[dens > 0] / dens[dens > 0]
    else:  # linear-interpolated percentile of each resample's defined values (NaN sorts last)
        sample = np.sort(a[draws], axis=1)
        count = np.sum(~np.isnan(sample), axis=1)
        sample, count = sample[count > 0], count[count > 0]
        pos = (count - 1) * b / 100
        lo_i, hi_i = np.floor(pos).astype(int), np.ceil(pos).astype(int)
        lo_v = np.take_along_axis(sample, lo_i[:, None], axis=1)[:, 0]
        hi_v = np.take_along_axis(sample, hi_i[:, None], axis=1)[:, 0]
        stats = lo_v + (hi_v - lo_v) * (pos - lo_i)
    if stats.size == 0:
        return None
    lo, hi = np.percentile(stats, [2.5, 97.5])
    return float(lo), float(hi)
