"""The wide result tables of the experiments, and the criterion "extrapolates".

Every experiment of :mod:`rflens.experiments` returns one row per model with, for every
evaluation length L, the columns ``ppl@L`` (last-token perplexity), ``ci_low@L`` /
``ci_high@L`` (its confidence interval), ``r@L`` (= ppl(L) / ppl(L_tr)) and ``r_lo@L`` /
``r_hi@L`` (the paired confidence interval of r on the same evaluation tokens), beside the
model's own columns (label, scheme, L_tr, ERF, ...). :func:`lengths_of` reads the lengths
back from the column names and :func:`long_form` turns a wide table into one row per
(model, L).

r(L) and its interval are computed from the per-segment losses of the last-token protocol
by :func:`paired_interval`: a paired bootstrap that resamples whole documents of the test
split where the result records the document of each segment (``segment_docs``), since the
segments of one document are not independent observations, and says how many documents it
rests on (``n_docs``; fewer than :data:`MIN_DOCS` are flagged, :func:`docs_note`).

Chi et al. (ACL 2023) call a model extrapolating when its perplexity stays flat beyond
L_tr. The book fixes that reading once (:func:`extrapolates`): r(L) <= 1.10 for every
measured L_tr < L <= 16 L_tr, for the upper confidence bound of r wherever the per-segment
losses are known; the claims (rflens.claims) and the figures use it.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import re
from typing import Iterable

import numpy as np
import pandas as pd

from .errors import UserError

# "extrapolates": r(L) = ppl(L) / ppl(L_tr) <= 1.10 for every L up to 16 L_tr.
EXTRAPOLATION_TOLERANCE = 1.10
EXTRAPOLATION_HORIZON = 16  # in units of L_tr
# "breaks" (does not extrapolate): r(L) >= 2 at the stated length
BREAKS = 2.0
# confidence intervals: percentile bootstrap, 1000 resamples, 95%
N_BOOTSTRAP = 1000
CI_LEVEL = 0.95
# A bootstrap over documents needs enough of them: with few clusters its percentile interval
# covers less often than it says (Cameron, Gelbach & Miller 2008, "Bootstrap-based
# improvements for inference with clustered errors"; Cameron & Miller 2015, "A
# practitioner's guide to cluster-robust inference": a few dozen clusters at least). An
# interval over fewer documents than this is shown with a warning, as a lower bound on the
# uncertainty, not as a 95% interval.
MIN_DOCS = 20
# What the paired intervals resample (:func:`bootstrap_over`): "documents" (whole documents
# of the test split, where a result records them) or "segments" (each segment on its own).
_OVER = contextvars.ContextVar("rflens_bootstrap_over", default="documents")


def bootstrap_indices(n: int, seed: int = 0, n_boot: int = N_BOOTSTRAP, clusters=None):
    """Resampled segment indices: one draw per replicate, the same for every length and
    every model evaluated on the same n segments with the same seed.

    Without ``clusters``: an (n_boot, n) array, each segment drawn independently. With
    ``clusters`` (n,), the cluster of each segment (its end position in the text, say, so
    that a segment drawn twice is one cluster): a replicate draws as many clusters as there
    are, with replacement, and takes every segment of each, so the interval rests on the
    distinct clusters and not on the repeated draws. Returns a list of n_boot index arrays
    (their lengths vary with the clusters drawn); clusters all distinct give the rows of the
    unclustered draw, in the same order.
    """
    if clusters is None:
        return np.random.default_rng([seed, n]).integers(0, n, size=(n_boot, n))
    label, rows = _cluster_draws(n, seed, n_boot, clusters)
    order = np.argsort(label, kind="stable")  # the segments grouped by cluster
    size = np.bincount(label)  # (k,) segments a cluster
    start = np.cumsum(size) - size  # where each cluster's segments begin in ``order``
    out = []
    for row in rows:
        sizes = size[row]
        ends = np.cumsum(sizes)
        out.append(order[np.repeat(start[row] - (ends - sizes), sizes) + np.arange(ends[-1])])
    return out


def _cluster_draws(n: int, seed: int, n_boot: int, clusters) -> tuple[np.ndarray, np.ndarray]:
    """(label, rows): the cluster number of each of the n segments (clusters numbered in the
    order of their first segment, so that distinct clusters keep the plain draw) and the
    (n_boot, k) clusters each replicate draws."""
    clusters = np.asarray(clusters)
    if clusters.shape != (n,):
        raise UserError(f"clusters must give one cluster per segment, shape ({n},), got {clusters.shape}")
    _, first, label = np.unique(clusters, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    k = first.size
    return rank[label.reshape(-1)], np.random.default_rng([seed, k]).integers(0, k, size=(n_boot, k))


def cluster_bootstrap_sums(values: np.ndarray, clusters, seed: int = 0, n_boot: int = N_BOOTSTRAP) -> np.ndarray:
    """The sums over each replicate of :func:`bootstrap_indices` with ``clusters``, without
    gathering its index arrays: ``values`` (..., n) summed over the segments a replicate
    draws, as (..., n_boot). A replicate takes each cluster as often as it draws it, so its
    sum is the per-cluster sums weighted by those counts (equal to the gathered sums up to
    the order of the additions)."""
    values = np.asarray(values, dtype=np.float64)
    n = values.shape[-1]
    label, rows = _cluster_draws(n, seed, n_boot, clusters)
    k = rows.shape[1]
    flat = values.reshape(-1, n)
    per_cluster = np.stack([np.bincount(label, weights=v, minlength=k) for v in flat])  # (m, k)
    out = np.empty((flat.shape[0], n_boot))
    for start in range(0, n_boot, _BLOCK):  # a block of replicates at a time: memory stays O(n)
        block = rows[start:start + _BLOCK]
        counts = np.bincount((np.arange(len(block))[:, None] * k + block).ravel(), minlength=len(block) * k)
        out[:, start:start + len(block)] = per_cluster @ counts.reshape(len(block), k).T
    return out.reshape(*values.shape[:-1], n_boot)


_BLOCK = 64


@contextlib.contextmanager
def bootstrap_over(unit: str):
    """Within the block, the paired intervals (:func:`add_ppl_columns`, the claims' ratios
    between schemes) resample ``unit``: "documents" (the default: whole documents of the
    test split, all segments of a drawn document together, wherever a result records the
    document of each segment) or "segments" (each segment on its own, as if independent)."""
    if unit not in ("documents", "segments"):
        raise UserError(f"bootstrap over {unit!r}: choose documents or segments")
    token = _OVER.set(unit)
    try:
        yield
    finally:
        _OVER.reset(token)


def clusters_of(docs) -> np.ndarray | None:
    """The clusters a paired interval resamples: the documents ``docs`` of the segments
    (None when not known), or None inside ``bootstrap_over("segments")``."""
    if docs is None or _OVER.get() == "segments":
        return None
    return np.asarray(docs, dtype=np.int64)


def n_docs(docs) -> int | None:
    """How many distinct documents hold the scored tokens (None when not known)."""
    return None if docs is None else int(np.unique(np.asarray(docs)).size)


def docs_note(k: int | None) -> str:
    """A warning for an interval over ``k`` documents: empty when there are at least
    :data:`MIN_DOCS` (or the documents are not known)."""
    if k is None or k >= MIN_DOCS:
        return ""
    return (f"the scored tokens come from {k} document{'s' * (k != 1)} of the test split, fewer than {MIN_DOCS}: "
            f"a bootstrap over so few documents is unreliable, so each interval is the wider of the document and "
            f"segment intervals; read it as a lower bound on the uncertainty, not as a 95% interval")


def paired_interval(nll: np.ndarray, base: int = 0, seed: int = 0, docs=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(r, low, high) of :func:`paired_ratio` as the book reports it: over whole documents
    when ``docs`` (the document of each segment) is known and :func:`bootstrap_over` does not
    say segments, else over segments (then bitwise :func:`paired_ratio` without clusters).

    The rule for few documents: from :data:`MIN_DOCS` documents on, the document interval;
    below, the bootstrap over so few clusters is unreliable and often too narrow itself, so
    the interval is the union of the document and the segment intervals (never narrower than
    either), and :func:`docs_note` says it is a lower bound on the uncertainty."""
    clusters = clusters_of(docs)
    if clusters is None:
        return paired_ratio(nll, base=base, seed=seed)
    r, dlo, dhi = paired_ratio(nll, base=base, seed=seed, clusters=clusters)
    if n_docs(clusters) >= MIN_DOCS:
        return r, dlo, dhi
    _, lo, hi = paired_ratio(nll, base=base, seed=seed)  # the segment interval, for the union
    return r, np.minimum(lo, dlo), np.maximum(hi, dhi)


def paired_ratio(nll: np.ndarray, base: int = 0, seed: int = 0, n_boot: int = N_BOOTSTRAP,
                 level: float = CI_LEVEL, clusters=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """r(L) = ppl(L) / ppl(L_base) and its paired percentile-bootstrap interval.

    ``nll``: (lengths, N) per-segment NLLs of the last-token protocol, the same N tokens at
    every length. r(L) = exp(mean_i [NLL_i(L) - NLL_i(L_base)]): a mean of per-segment
    differences, so the interval reflects how consistently the extra context helps or
    hurts on the same tokens, not how hard the tokens are (which the interval of ppl
    itself mostly measures). Each replicate resamples the segments once
    (:func:`bootstrap_indices`) and uses that draw at every length. ``clusters`` (N,): the
    document of each segment; a replicate then draws whole documents (as many as there are,
    with replacement) with all their segments, so segments of one text, which tend to move
    together, count as one observation. Without it each segment is drawn on its own.
    Returns (r, low, high), each of shape (lengths,).
    """
    nll = np.asarray(nll, dtype=np.float64)
    if nll.ndim != 2 or nll.shape[1] == 0:
        raise UserError(f"per-segment NLLs must be a (lengths, N) array, got shape {nll.shape}")
    diff = nll - nll[base]  # (lengths, N)
    r = np.exp(diff.mean(1))
    if clusters is None:
        boot = np.exp(diff[:, bootstrap_indices(nll.shape[1], seed, n_boot)].mean(-1))  # (lengths, n_boot)
    else:
        sums = cluster_bootstrap_sums(np.concatenate([diff, np.ones((1, diff.shape[1]))]), clusters, seed, n_boot)
        boot = np.exp(sums[:-1] / sums[-1])  # (lengths, n_boot): each replicate's mean difference
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2], axis=1)
    return r, lo, hi


def ratio(ppl: dict, l_tr: int) -> dict[int, float]:
    """r(L) = ppl(L) / ppl(L_tr) for every measured L; empty when ppl(L_tr) was not measured."""
    base = ppl.get(l_tr)
    if base is None or not np.isfinite(base) or base <= 0:
        return {}
    return {L: (p / base if np.isfinite(p) else math.inf) for L, p in ppl.items()}


def _missing(value) -> bool:
    return value is None or value != value  # NaN != NaN


def flag(value) -> bool:
    """A yes/no cell of a table as a bool: missing (None, or NaN where a row lacks the
    column) reads as no."""
    return not _missing(value) and bool(value)


def erf_text(erf: int, capped) -> str:
    """An ERF as the book prints it: ``"≥ 508"`` for a lower bound
    (:func:`rflens.receptive.erf_capped`); ``capped`` missing reads as not capped."""
    return f"≥ {int(erf)}" if flag(capped) else f"{int(erf)}"


def erf_within_l_tr(df: pd.DataFrame) -> pd.Series:
    """The prediction of Section 4 for each row of a table: its ERF fits inside its L_tr."""
    return df["erf"].astype(int) <= df["l_tr"].astype(int)


def extrapolates(ppl: dict, l_tr: int, *, tol: float = EXTRAPOLATION_TOLERANCE,
                 horizon: int = EXTRAPOLATION_HORIZON, upper: dict | None = None) -> bool | None:
    """The criterion: r(L) <= tol for every measured L_tr < L <= horizon * L_tr.

    ``ppl`` maps L_ex -> perplexity. With ``upper`` (L_ex -> upper confidence bound of r(L),
    from :func:`paired_ratio`) the bound must stay within ``tol``, not only the
    point value: "stays flat" is then a statement the evaluation sample supports. None when
    ppl(L_tr) or every longer length is missing. A non-finite perplexity (a diverged model)
    counts as a failure.
    """
    r = ratio(ppl, l_tr)
    beyond = {L: v for L, v in r.items() if l_tr < L <= horizon * l_tr}
    if not beyond:
        return None
    if upper is not None:
        beyond = {L: max(v, upper.get(L, math.inf)) for L, v in beyond.items()}
    return bool(all(np.isfinite(v) and v <= tol + 1e-12 for v in beyond.values()))  # 1e-12: binary rounding


def segment_nlls(res: dict) -> dict[int, np.ndarray] | None:
    """{L: the per-segment last-token NLLs at L} of a perplexity result, or None when it holds
    none (another protocol). Two models measured on one corpus with the same evaluation
    settings score the same segments, so their NLLs pair up segment by segment."""
    if res.get("nll_per_segment") is None:
        return None
    return {int(L): np.asarray(v, dtype=np.float64) for L, v in zip(res["lengths"], res["nll_per_segment"])}


def add_ppl_columns(row: dict, res: dict, l_tr: int, horizon: int = EXTRAPOLATION_HORIZON) -> dict:
    """Add ppl@L, ci_low@L, ci_high@L, r@L, extrapolates, max_r to a table row, and, when the
    result holds per-segment NLLs (the last-token protocol), the paired 95% interval of r(L):
    r_lo@L, r_hi@L (:func:`paired_interval`). Where the result records the document of each
    segment (``segment_docs``) the interval resamples whole documents (unless
    :func:`bootstrap_over` says segments) and ``n_docs`` says how many it rests on."""
    lengths = [int(L) for L in res["lengths"]]
    ppl = {L: float(p) for L, p in zip(lengths, res["ppl"])}
    for L, lo, hi in zip(lengths, res.get("ci_low") or [math.nan] * len(ppl), res.get("ci_high") or [math.nan] * len(ppl)):
        row[f"ppl@{L}"] = ppl[L]
        row[f"ci_low@{L}"] = float(lo)
        row[f"ci_high@{L}"] = float(hi)
    r = ratio(ppl, l_tr)
    for L in ppl:
        row[f"r@{L}"] = r.get(L, math.nan)
    upper = None
    if res.get("nll_per_segment") is not None and l_tr in lengths:
        docs = res.get("segment_docs")
        _, r_lo, r_hi = paired_interval(np.asarray(res["nll_per_segment"]), base=lengths.index(l_tr),
                                        seed=int(res.get("seed", 0)), docs=docs)
        if docs is not None:
            row["n_docs"] = n_docs(docs)
        for L, lo, hi in zip(lengths, r_lo, r_hi):
            row[f"r_lo@{L}"], row[f"r_hi@{L}"] = float(lo), float(hi)
        upper = dict(zip(lengths, map(float, r_hi)))
    row["extrapolates"] = extrapolates(ppl, l_tr, horizon=horizon, upper=upper)
    beyond = [v for L, v in r.items() if L > l_tr]
    row["max_r"] = max(beyond) if beyond else math.nan
    return row


def add_erf_columns(row: dict, rf: dict) -> dict:
    row["erf"] = int(rf["erf"])
    row["erf_capped"] = bool(rf["capped"])  # a lower bound: the segment, not the model, set it
    row["share_in_ltr"] = float(rf["share_in_ltr"])
    row["theoretical"] = rf.get("theoretical")
    row["erf_length"] = int(rf["length"])
    return row



_COL = re.compile(r"^(ppl|r|r_lo|r_hi|ci_low|ci_high)@(\d+)$")


def lengths_of(df: pd.DataFrame, kind: str = "ppl") -> list[int]:
    """The evaluation lengths of a wide table, read from its ``ppl@L`` columns."""
    return sorted({int(m.group(2)) for c in df.columns if (m := _COL.match(str(c))) and m.group(1) == kind})


def row_ppl(row) -> dict[int, float]:
    """{L: ppl} of one row of a wide table (NaN entries dropped)."""
    out = {}
    for c, v in dict(row).items():
        m = _COL.match(str(c))
        if m and m.group(1) == "ppl" and v is not None and not (isinstance(v, float) and math.isnan(v)):
            out[int(m.group(2))] = float(v)
    return out


def long_form(df: pd.DataFrame, id_cols: Iterable[str] | None = None) -> pd.DataFrame:
    """One row per (model, L_ex): columns ``l_ex, ppl, ci_low, ci_high, r`` plus the ids."""
    id_cols = [c for c in (id_cols or df.columns) if not _COL.match(str(c))]
    rows = []
    for _, rec in df.iterrows():
        base = {c: rec[c] for c in id_cols}
        for L in lengths_of(df):
            rows.append({**base, "l_ex": L, "ppl": rec.get(f"ppl@{L}"), "ci_low": rec.get(f"ci_low@{L}"),
                         "ci_high": rec.get(f"ci_high@{L}"), "r": rec.get(f"r@{L}")})
    return pd.DataFrame(rows)


# The headers a rendered table shows instead of the column names of the code; a column not
# listed keeps its name with spaces for underscores.
HEADERS = {
    "label": "model", "family": "family", "value": "value", "pos": "scheme", "corpus": "corpus", "l_tr": "L_tr",
    "old_l_tr": "L_tr before", "extrapolates": "extrapolates", "max_r": "largest r", "erf": "ERF",
    "old_erf": "ERF before", "covers_erf": "L_tr covers that ERF", "theoretical": "R·w", "share_in_ltr": "gradient in L_tr",
    "erf_within_l_tr": "ERF ≤ L_tr", "few": "recent tokens skipped", "jump_abs_pos": "gradient peak at",
    "jump_ok": "peak at L_tr", "learnable": "learnable", "tokens_per_s": "tokens/s", "tokens": "training tokens", "erf_length": "ERF segment",
    "ppl_l_tr": "ppl(L_tr)", "r_horizon": f"r({EXTRAPOLATION_HORIZON} L_tr)",
    "r_horizon_lo": f"r({EXTRAPOLATION_HORIZON} L_tr) low", "r_horizon_hi": f"r({EXTRAPOLATION_HORIZON} L_tr) high",
    "l_ex": "L_ex", "vs_plain": "r ÷ plain", "vs_plain_lo": "r ÷ plain, low", "vs_plain_hi": "r ÷ plain, high", "val_loss": "validation loss",
    "n_docs": "documents", "max r high": "largest r, high",  # the last: the phenomena pilot's (rflens.pilot)
    # the long run's schedule check (rflens.bundle.schedule_table): a point of the warmup-stable-decay run
    # against a cosine run of the same size, on the same segments
    "r wsd": "r(L), warmup-stable-decay", "r wsd low": "r(L), warmup-stable-decay, low",
    "r wsd high": "r(L), warmup-stable-decay, high", "r cosine": "r(L), cosine", "r cosine low": "r(L), cosine, low",
    "r cosine high": "r(L), cosine, high", "wsd / cosine": "warmup-stable-decay ÷ cosine",
    "wsd / cosine low": "warmup-stable-decay ÷ cosine, low", "wsd / cosine high": "warmup-stable-decay ÷ cosine, high",
}
_WIDE_HEADERS = {"ppl": "ppl({})", "r": "r({})", "r_lo": "r({}) low", "r_hi": "r({}) high", "ci_low": "ppl({}) low",
                 "ci_high": "ppl({}) high"}
_SHARES = {"share_in_ltr"}  # shown as percentages
_FOLDED = {"erf_capped", "old_erf_capped", "erf_length"}  # shown inside the ERF cells and header


def _family_title(value) -> str:
    from .scales import FAMILIES

    return FAMILIES[value].title if value in FAMILIES else str(value)


def _scheme_title(value) -> str:
    from .schemes import title

    return title(str(value))


# columns whose values are code names, shown in the words of their one home: a Table 1 family
# by its title (rflens.scales.FAMILIES), a scheme by its printed name (rflens.schemes)
_NAMED = {"family": _family_title, "pos": _scheme_title}
_ROW_NAMES = ("label", "model")  # the columns that name a table's rows, as the book prints them


def by_model(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with its rows named: a table numbered 0, 1, ... (pandas' default index) that has
    a column naming its models (``label`` or ``model``) is indexed by that column, so a
    rendered table never shows a bare row number."""
    numbered = isinstance(df.index, pd.RangeIndex) and df.index.name is None and df.index.start == 0 \
        and df.index.step == 1
    column = next((c for c in _ROW_NAMES if c in df.columns), None)
    if not numbered or column is None:
        return df
    return df.set_index(column)


def header(name) -> str:
    """The header a rendered table gives the column ``name`` (a tuple: each level's, joined)."""
    if isinstance(name, tuple):
        return ", ".join(header(part) for part in name)
    m = _COL.match(str(name))
    if m:
        return _WIDE_HEADERS[m.group(1)].format(m.group(2))
    if str(name) in HEADERS:
        return HEADERS[str(name)]
    return re.sub(r"(?<![A-Za-z])[lL]_tr(?![a-z])", "L§tr", str(name)).replace("_", " ").replace("§", "_")


def _cell(value, digits: int) -> str:
    if _missing(value):
        return "–"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}" if abs(int(value)) >= 10_000 else str(int(value))
    if isinstance(value, (float, np.floating)):
        if not np.isfinite(value):
            return "∞" if value > 0 else "-∞"
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.{digits}f}"
    return str(value)


def readable(df: pd.DataFrame, digits: int = 2) -> pd.DataFrame:
    """``df`` as the book renders it: headers in words (:func:`header`), rows named by their
    model rather than numbered (:func:`by_model`), families and schemes by their titles, every
    number of a column with the same decimals, shares as percentages, yes/no for flags, "–"
    for a value not measured, and an ERF the segment capped as "≥ N" (its segment length in
    the header).
    ``attrs["csv"]`` keeps the rows at full precision for the chapter's CSV download."""
    full = df.attrs.get("csv")
    if full is None:
        named = any(n is not None for n in df.index.names)
        full = (df.reset_index() if named else df).to_dict(orient="list")
    df = by_model(df)
    out = pd.DataFrame(index=df.index)
    one_length = "erf_length" in df.columns and df["erf_length"].nunique() == 1
    for col in df.columns:
        if col in _FOLDED and not (col == "erf_length" and not one_length):
            continue
        values = df[col]
        if col in ("erf", "old_erf") and f"{col}_capped" in df.columns:
            cells = ["–" if _missing(v) else erf_text(v, c) for v, c in zip(values, df[f"{col}_capped"])]
        elif col in _SHARES:
            cells = ["–" if _missing(v) else f"{float(v):.0%}" for v in values]
        elif col in _NAMED:
            cells = ["–" if _missing(v) else _NAMED[col](v) for v in values]
        else:
            cells = [_cell(v, digits) for v in values]
        name = header(col)
        if col == "erf" and one_length:
            name = f"ERF (of {int(df['erf_length'].iloc[0])})"
        out[name] = cells
    out.index = out.index.set_names([header(n) if n is not None else None for n in df.index.names])
    out.columns.name = None if df.columns.name is None else header(df.columns.name)
    out.attrs["csv"] = full
    return out


def display_table(df: pd.DataFrame, what: str = "ppl", extra: Iterable[str] = (), index: str | list = "label",
                  digits: int = 2) -> pd.DataFrame:
    """The paper-style view of a wide table: ``what`` ("ppl" or "r") at each L_ex as columns
    named by L_ex, then the ``extra`` columns, as :func:`readable` renders them.
    ``attrs["csv"]`` holds the same rows (as lists by column) at full precision with every
    interval (ppl's and r's bounds at each L_ex): what a chapter's CSV download writes
    (:func:`rflens.tables.offer_tables`)."""
    cols = [f"{what}@{L}" for L in lengths_of(df, what)]
    kept = [c for c in extra if c in df.columns]
    folded = [c for c in ("erf_capped", "erf_length", "old_erf_capped") if c in df.columns
              and c.removesuffix("_capped").removesuffix("_length") in kept]
    out = df.set_index(index)[cols + kept + folded].copy()
    out = out.rename(columns={f"{what}@{L}": f"{L}" for L in lengths_of(df, what)})
    full = [f"{k}@{L}" for L in lengths_of(df, what) for k in ("ppl", "ci_low", "ci_high", "r", "r_lo", "r_hi")
            if f"{k}@{L}" in df.columns]
    # as plain lists: pandas compares attrs when it combines frames, which a DataFrame cannot take
    out.attrs["csv"] = df.set_index(index)[full + kept + folded].reset_index().to_dict(orient="list")
    view = readable(out, digits)
    view.columns.name = f"{what} at L_ex" if what == "ppl" else "r(L) at L_ex"
    return view
