"""What a claim's check can conclude: its outcomes and the three-valued comparisons that give them.

A check of :mod:`rflens.claims.statements` returns True (the claim holds), False (it does
not) or :data:`UNDECIDED` (an interval straddles the criterion's threshold: this scale
cannot tell), and raises :class:`Missing` when the data it needs was not produced (the claim
is "not run"). :func:`at_least` and :func:`all_of` turn intervals into outcomes;
:func:`straddles` notes each interval that left a claim undecided (a row's ``straddling``,
:mod:`rflens.claims.verdicts`). :func:`simultaneous` widens the k intervals one verdict reads
so that they hold together with :data:`LEVEL` probability (Bonferroni).
"""

from __future__ import annotations

from contextvars import ContextVar
from statistics import NormalDist

import numpy as np

UNDECIDED = "undecided"  # a check's outcome when the interval straddles the threshold
# the intervals that straddled their thresholds in the check being run (rflens.claims.verdicts._decide)
STRADDLING: ContextVar[list | None] = ContextVar("rflens_straddling", default=None)
LEVEL = 0.95  # every claim's verdict rests on intervals that hold together with this probability


class Missing(Exception):
    """The data a check needs was not produced (the claim is "not run")."""


def simultaneous(r: float, lo: float, hi: float, k: int) -> tuple[float, float]:
    """The bounds of a 95% interval (``lo``, ``hi`` around the point value ``r``) widened to
    1 - 0.05 / k, so that k intervals read by one verdict hold together with 95% probability
    (Bonferroni). Each side's distance from ``r`` on the log scale grows by
    z(1 - 0.025 / k) / z(0.975), a normal approximation of the bootstrap interval at the
    adjusted level (the 1000 stored replicates leave too few in the tails to read it
    directly). k = 1 returns the bounds unchanged."""
    if k <= 1 or not all(map(np.isfinite, (r, lo, hi))) or min(r, lo, hi) <= 0:
        return lo, hi
    f = NormalDist().inv_cdf(1 - (1 - LEVEL) / 2 / k) / NormalDist().inv_cdf(1 - (1 - LEVEL) / 2)
    return r * (lo / r) ** f, r * (hi / r) ** f


def straddles(lo: float, hi: float, threshold: float, estimate: float | None = None, *, above: bool = True) -> str:
    """UNDECIDED, noting the interval [lo, hi] (of a positive ratio, with its ``estimate``)
    that straddles ``threshold``, where the criterion asks the value to lie ``above`` it (or
    below): :func:`rflens.claims.verdicts.check` gives them as a row's ``straddling``."""
    found = STRADDLING.get()
    if found is not None:
        found.append({"estimate": None if estimate is None else float(estimate), "low": float(lo), "high": float(hi),
                      "threshold": float(threshold), "above": above})
    return UNDECIDED


def at_least(lo: float, hi: float, threshold: float, estimate: float | None = None) -> bool | str:
    """Is the value >= threshold? True when the interval's lower bound is, False when its
    upper bound is below, UNDECIDED when it straddles."""
    return True if lo >= threshold else (False if hi < threshold else straddles(lo, hi, threshold, estimate))


def all_of(*outcomes) -> bool | str:
    """Three-valued AND: False if any is False, else UNDECIDED if any is, else True."""
    if any(o is False for o in outcomes):
        return False
    return UNDECIDED if any(o == UNDECIDED for o in outcomes) else True
