"""Where a claim's check finds its numbers: a table, a row, r(L) with its paired interval.

The readers here pick a table, a row or a value r(L) with its paired interval out of the
results (:func:`rflens.claims.gather.gather`) and raise :class:`~rflens.claims.outcomes.Missing`
when a piece is absent; :func:`extrapolates_row` reads a row as "stays flat" (three-valued),
and :func:`ppl_ratio` compares two schemes on the same segments. Every interval is widened for
the k intervals its verdict reads (:func:`rflens.claims.outcomes.simultaneous`). The checks of
:mod:`rflens.claims.statements` and :mod:`rflens.claims.legacy` read through these.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rflens.claims.outcomes import UNDECIDED, Missing, simultaneous, straddles
from rflens.measure.columns import lengths_of, row_ppl
from rflens.measure.criterion import EXTRAPOLATION_HORIZON as HORIZON, tol_level
from rflens.measure.intervals import paired_interval
from rflens.setup.presets import mapped_exponents
from rflens.setup.schemes import TABLE3_LEARNABLE, TABLE3_PARAMETER_FREE


def table_of(results: dict, key: str) -> pd.DataFrame:
    df = results.get(key)
    if df is None:
        raise Missing(f"{key} not run")
    if isinstance(df, Exception):
        raise Missing(f"{key} failed: {df}")
    return df


def row_of(df: pd.DataFrame, what: str, **where):
    sub = df
    for k, v in where.items():
        if k not in sub.columns:
            raise Missing(f"no column {k!r}")
        sub = sub[sub[k] == v]
    if sub.empty:
        raise Missing(f"no {what}")
    return sub.iloc[0]


def family_rows(results, family):
    t1 = table_of(results, "table1")
    sub = t1[t1["family"] == family] if "family" in t1.columns else t1.iloc[0:0]
    if sub.empty:
        raise Missing(f"no {family} models in Table 1")
    return sub.sort_values("value")


def r_at(row, mult: int, k: int = 1) -> tuple[float, float, float, str]:
    """r(mult L_tr) of a row: (point value, lower and upper bound of its paired interval, as text)."""
    return r_at_length(row, int(row["l_tr"]) * mult, f"{mult} L_tr", k)


def r_at_length(row, L: int, name: str | None = None, k: int = 1) -> tuple[float, float, float, str]:
    """r(L) of a row: (point value, lower bound, upper bound, as text), the bounds of the
    paired interval widened for ``k`` simultaneous intervals (:func:`simultaneous`). Without
    per-segment losses (a table built by hand) the bounds are the point value."""
    name = name or f"L = {L}"
    v = row.get(f"r@{L}")
    if v is None or (isinstance(v, float) and math.isnan(v)):
        raise Missing(f"r({name}) of {row['label']} not measured")
    lo, hi = row.get(f"r_lo@{L}"), row.get(f"r_hi@{L}")
    if lo is None or (isinstance(lo, float) and math.isnan(lo)):
        return float(v), float(v), float(v), f"r({name}) = {_fmt(float(v))}"
    lo, hi = simultaneous(float(v), float(lo), float(hi), k)
    return float(v), lo, hi, f"r({name}) = {_fmt(float(v))} [{_fmt(lo)}, {_fmt(hi)}]"


def lengths_beyond(row, horizon: int = HORIZON) -> list[int]:
    """The measured lengths L_tr < L <= horizon L_tr of a row."""
    l_tr = int(row["l_tr"])
    return [L for L in lengths_of(pd.DataFrame(columns=[str(c) for c in dict(row)]), "r")
            if l_tr < L <= horizon * l_tr and not _missing(row.get(f"r@{L}"))]


def ppl_ratio(row_a, row_b, L: int, k: int = 1) -> tuple[float, float, float]:
    """ppl_a(L) / ppl_b(L) of two rows of one table with its interval, paired over the
    segments both scored (``nll``: {L: per-segment NLLs}, :func:`rflens.measure.columns.segment_nlls`;
    whole documents resampled where both rows record them, ``segment_docs``),
    widened for ``k`` simultaneous intervals (:func:`simultaneous`). Without per-segment
    losses (a table built by hand) the bounds are the point value."""
    a, b = row_a.get("nll"), row_b.get("nll")
    if not isinstance(a, dict) or not isinstance(b, dict) or L not in a or L not in b:
        ratio = float(row_a[f"ppl@{L}"]) / float(row_b[f"ppl@{L}"])
        return ratio, ratio, ratio
    if len(a[L]) != len(b[L]):
        raise Missing(f"{row_a['label']} and {row_b['label']} were scored on different segments at L = {L}")
    r, lo, hi = paired_interval(np.stack([b[L], a[L]]), docs=_shared_docs(row_a, row_b))
    return (float(r[1]), *simultaneous(float(r[1]), float(lo[1]), float(hi[1]), k))


def _shared_docs(row_a, row_b):
    """The document of each segment two rows both scored (``segment_docs``), or None when
    either row does not record them or they disagree (then the segments are resampled)."""
    a, b = row_a.get("segment_docs"), row_b.get("segment_docs")
    if not isinstance(a, (list, tuple, np.ndarray)) or not isinstance(b, (list, tuple, np.ndarray)):
        return None
    return a if len(a) == len(b) and np.array_equal(np.asarray(a), np.asarray(b)) else None


def extrapolates_row(row, k: int | None = None) -> bool | str:
    """Whether the row stays flat: True when the upper bound of r(L) is within TOL at every
    measured L_tr < L <= HORIZON L_tr, False when the lower bound exceeds TOL at one of them
    (or r is not finite), else UNDECIDED. The intervals are widened for ``k`` simultaneous
    ones (default: the lengths read here; a claim reading more passes its own count)."""
    Ls = lengths_beyond(row)
    if not Ls:
        raise Missing(f"r(L) of {row['label']} beyond L_tr not measured")
    k = len(Ls) if k is None else k
    bounds = [r_at_length(row, L, k=k) for L in Ls]
    tol = tol_level()  # TOL, or the level a sensitivity reads (rflens.measure.criterion.levels)
    if any(not np.isfinite(r) or lo > tol + 1e-12 for r, lo, _, _ in bounds):
        return False
    if all(hi <= tol + 1e-12 for _, _, hi, _ in bounds):
        return True
    for r, lo, hi, _ in bounds:
        if hi > tol + 1e-12:
            straddles(lo, hi, tol, r, above=False)
    return UNDECIDED


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def number_or(v, fallback=None) -> float:
    """A table cell as a float; NaN or missing reads as ``fallback`` (a point value stands in
    for its own bounds in a table built without intervals)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return float("nan") if fallback is None else number_or(fallback)
    return float(v)


def _fmt(v: float) -> str:
    return "inf" if not np.isfinite(v) else f"{v:.2f}"


def alibi_row(res):
    """ALiBi as the paper trains it: the slope-shift row that maps the paper's Δ = 0 to this
    L_tr (rflens.setup.presets.mapped_exponents), else Δ = 0 itself (the Table 1 row, or the
    identical Table 3 model).

    Why the mapped row and not Table 3's ALiBi: the sentence of claim 3 reads Table 1, whose
    Δ = 0 row is ALiBi with h = n 8 / H at L_tr = 512 (Section 3). What those slopes do is set
    by slope x distance across the training window; the mapped Δ keeps that product, so that
    the implicit window is the same share of L_tr as in the paper. Table 3's ALiBi keeps the
    paper's h at a 16 times shorter L_tr: a far flatter bias over the window it trained on."""
    t1 = res.get("table1")
    if isinstance(t1, pd.DataFrame) and "family" in t1.columns:
        shifts = t1[t1["family"] == "slope_shift"]
        if not shifts.empty:
            mapped = float(mapped_exponents((0,), int(shifts["l_tr"].iloc[0]))[0])
            for value in (mapped, 0.0):
                sub = shifts[shifts["value"].astype(float) == value]
                if not sub.empty:
                    return sub.iloc[0], t1
    t3 = res.get("table3")
    if isinstance(t3, pd.DataFrame) and "pos" in t3.columns:
        sub = t3[(t3["pos"] == "alibi") & (t3["corpus"] == res.get("corpus", "prose"))]
        if not sub.empty:
            return sub.iloc[0], t3
    if t1 is None or isinstance(t1, Exception):
        raise Missing("table1 not run")
    raise Missing("ALiBi with Δ = 0 is neither in the slope-shift sweep nor in Table 3")


def learned_and_free(t3: pd.DataFrame, corpus: str) -> tuple[int, dict, dict]:
    """(L_tr, {pos: row} of the learnable schemes, {pos: row} of the parameter-free ones) of
    Table 3 on ``corpus``, the rows that have ppl(L_tr); Missing unless both sides are there."""
    sub = t3[t3["corpus"] == corpus]
    l_tr = int(sub["l_tr"].iloc[0])
    rows = {r["pos"]: r for _, r in sub.iterrows() if row_ppl(r).get(l_tr) is not None}
    free = {p: r for p, r in rows.items() if p in TABLE3_PARAMETER_FREE}
    learned = {p: r for p, r in rows.items() if p in TABLE3_LEARNABLE}
    if not free or len(learned) < len(TABLE3_LEARNABLE):
        raise Missing(f"Table 3 on {corpus} lacks parameter-free or learnable models")
    return l_tr, learned, free


def paper_sinusoidal(f7: pd.DataFrame) -> pd.DataFrame:
    """Figure 7's Sinusoidal rows that claim 8 reads: those trained as the paper's code trains
    Sinusoidal (token embeddings added unscaled) where the table has any, else the book's
    (embeddings scaled by sqrt(d): rflens.setup.deviations)."""
    sin = f7[f7["pos"] == "sinusoidal"] if "pos" in f7.columns else f7.iloc[0:0]
    if "scale_embeddings" in sin.columns:
        unscaled = sin[~sin["scale_embeddings"].astype(bool)]
        if not unscaled.empty:
            return unscaled
    return sin
