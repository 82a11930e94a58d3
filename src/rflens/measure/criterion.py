"""The criterion "extrapolates", and the levels the book reads r(L) = ppl(L) / ppl(L_tr) at.

Chi et al. (ACL 2023) call a model extrapolating when its perplexity stays flat beyond
L_tr. The book fixes that reading once (:func:`extrapolates`): r(L) <= 1.10 for every
measured L_tr < L <= 16 L_tr, for the upper confidence bound of r wherever the per-segment
losses are known; the claims (:mod:`rflens.claims.checks`) and the figures use it.

The two levels, 1.10 for "stays flat" and 2 for "breaks", are this book's reading of the
paper's words, not the paper's numbers. :func:`levels` sets others for the code inside its
``with`` block (:func:`tol_level`, :func:`breaks_level` read them), so that a reader can see
how a verdict moves with the level it rests on; the board keeps the stated ones.
"""

from __future__ import annotations

import contextlib
import math
from contextvars import ContextVar

import numpy as np
import pandas as pd


# "extrapolates": r(L) = ppl(L) / ppl(L_tr) <= 1.10 for every L up to 16 L_tr.
EXTRAPOLATION_TOLERANCE = 1.10
EXTRAPOLATION_HORIZON = 16  # in units of L_tr
# "breaks" (does not extrapolate): r(L) >= 2 at the stated length
BREAKS = 2.0
_LEVELS: ContextVar[dict] = ContextVar("rflens_levels", default={})


@contextlib.contextmanager
def levels(*, tol: float | None = None, breaks: float | None = None):
    """Within the block, "stays flat" reads r <= ``tol`` and "breaks" r >= ``breaks`` (None:
    the stated level)."""
    for name, v in (("tol", tol), ("breaks", breaks)):
        if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 1):
            raise ValueError(f"a level of r must be a number above 1, got {name}={v!r}")
    token = _LEVELS.set({k: float(v) for k, v in (("tol", tol), ("breaks", breaks)) if v is not None})
    try:
        yield
    finally:
        _LEVELS.reset(token)


def tol_level() -> float:
    """The level of "stays flat" in force: :data:`EXTRAPOLATION_TOLERANCE` outside :func:`levels`."""
    return _LEVELS.get().get("tol", EXTRAPOLATION_TOLERANCE)


def breaks_level() -> float:
    """The level of "breaks" in force: :data:`BREAKS` outside :func:`levels`."""
    return _LEVELS.get().get("breaks", BREAKS)


def ratio(ppl: dict, l_tr: int) -> dict[int, float]:
    """r(L) = ppl(L) / ppl(L_tr) for every measured L; empty when ppl(L_tr) was not measured."""
    base = ppl.get(l_tr)
    if base is None or not np.isfinite(base) or base <= 0:
        return {}
    return {L: (p / base if np.isfinite(p) else math.inf) for L, p in ppl.items()}


def is_missing(value) -> bool:
    return value is None or value != value  # NaN != NaN


def flag(value) -> bool:
    """A yes/no cell of a table as a bool: missing (None, or NaN where a row lacks the
    column) reads as no."""
    return not is_missing(value) and bool(value)


def erf_text(erf: int, capped) -> str:
    """An ERF as the book prints it: ``"≥ 508"`` for a lower bound
    (:func:`rflens.measure.receptive.erf_capped`); ``capped`` missing reads as not capped."""
    return f"≥ {int(erf)}" if flag(capped) else f"{int(erf)}"


ERF_AGREEMENT = 0.8  # claim 6: share of Table 1 models whose ERF predicts extrapolation


def erf_within_l_tr(df: pd.DataFrame) -> pd.Series:
    """The prediction of Section 4 for each row of a table: its ERF fits inside its L_tr."""
    return df["erf"].astype(int) <= df["l_tr"].astype(int)


def extrapolates(ppl: dict, l_tr: int, *, tol: float | None = None,
                 horizon: int = EXTRAPOLATION_HORIZON, upper: dict | None = None) -> bool | None:
    """The criterion: r(L) <= tol (default: :func:`tol_level`) for every measured L_tr < L <= horizon * L_tr.

    ``ppl`` maps L_ex -> perplexity. With ``upper`` (L_ex -> upper confidence bound of r(L),
    from :func:`paired_ratio`) the bound must stay within ``tol``, not only the
    point value: "stays flat" is then a statement the evaluation sample supports. None when
    ppl(L_tr) or every longer length is missing. A non-finite perplexity (a diverged model)
    counts as a failure.
    """
    tol = tol_level() if tol is None else tol
    r = ratio(ppl, l_tr)
    beyond = {L: v for L, v in r.items() if l_tr < L <= horizon * l_tr}
    if not beyond:
        return None
    if upper is not None:
        beyond = {L: max(v, upper.get(L, math.inf)) for L, v in beyond.items()}
    return bool(all(np.isfinite(v) and v <= tol + 1e-12 for v in beyond.values()))  # 1e-12: binary rounding
