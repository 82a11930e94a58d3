"""The wide result table of the experiments: its columns, their readers, and how the book
shows it.

Every experiment of :mod:`rflens.experiments.tables` returns one row per model with, for
every evaluation length L, the columns ``ppl@L`` (last-token perplexity), ``ci_low@L`` /
``ci_high@L`` (its confidence interval), ``r@L`` (= ppl(L) / ppl(L_tr)) and ``r_lo@L`` /
``r_hi@L`` (the paired confidence interval of r on the same evaluation tokens,
:mod:`rflens.measure.intervals`), beside the model's own columns (label, scheme, L_tr, ERF,
...). :func:`lengths_of` reads the lengths back from the column names, :func:`long_form`
turns a wide table into one row per (model, L), and :func:`display_table` is how a chapter
prints one.
"""

from __future__ import annotations

import math
import re
from typing import Iterable

import numpy as np
import pandas as pd

from rflens.measure.criterion import erf_text, extrapolates, EXTRAPOLATION_HORIZON, is_missing, ratio
from rflens.measure.intervals import n_docs, paired_interval


def token_count(n: float) -> str:
    """A number of tokens as the book writes it: 33.6M, 4k."""
    return f"{n / 1e6:.1f}M" if n >= 1e5 else f"{n / 1e3:.0f}k"


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
    "label": "model", "family": "family", "value": "value trained", "pos": "scheme", "corpus": "corpus", "l_tr": "L_tr",
    "old_l_tr": "L_tr before", "extrapolates": "extrapolates", "max_r": "largest r", "erf": "ERF",
    "old_erf": "ERF before", "covers_erf": "L_tr covers that ERF", "theoretical": "R·w", "share_in_ltr": "gradient in L_tr",
    "erf_within_l_tr": "ERF ≤ L_tr", "few": "recent tokens skipped", "jump_abs_pos": "gradient peak at",
    "jump_ok": "peak at L_tr", "learnable": "learnable", "tokens_per_s": "tokens/s", "tokens": "training tokens", "erf_length": "ERF segment",
    "ppl_l_tr": "ppl(L_tr)", "r_horizon": f"r({EXTRAPOLATION_HORIZON} L_tr)",
    "r_horizon_lo": f"r({EXTRAPOLATION_HORIZON} L_tr) low", "r_horizon_hi": f"r({EXTRAPOLATION_HORIZON} L_tr) high",
    "l_ex": "L_ex", "vs_plain": "r ÷ plain", "vs_plain_lo": "r ÷ plain, low", "vs_plain_hi": "r ÷ plain, high", "val_loss": "validation loss",
    "n_docs": "documents", "max r high": "largest r, high",  # the last: the phenomena pilot's (rflens.readings.pilot)
    # the long run's schedule check (rflens.store.bundle.schedule_table): a point of the warmup-stable-decay run
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
    from rflens.setup.presets import FAMILIES

    return FAMILIES[value].title if value in FAMILIES else str(value)


def _scheme_title(value) -> str:
    from rflens.setup.schemes import title

    return title(str(value))


# columns whose values are code names, shown in the words of their one home: a Table 1 family
# by its title (rflens.setup.presets.FAMILIES), a scheme by its printed name (rflens.setup.schemes)
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
    if is_missing(value):
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
    ``attrs["csv"]`` keeps the rows at full precision for the chapter's CSV download, and
    ``attrs["run"]`` the long run they come from, where ``df`` names one."""
    full, run = df.attrs.get("csv"), df.attrs.get("run")
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
            cells = ["–" if is_missing(v) else erf_text(v, c) for v, c in zip(values, df[f"{col}_capped"])]
        elif col in _SHARES:
            cells = ["–" if is_missing(v) else f"{float(v):.0%}" for v in values]
        elif col in _NAMED:
            cells = ["–" if is_missing(v) else _NAMED[col](v) for v in values]
        else:
            cells = [_cell(v, digits) for v in values]
        name = header(col)
        if col == "erf" and one_length:
            name = f"ERF (of {int(df['erf_length'].iloc[0])})"
        out[name] = cells
    out.index = out.index.set_names([header(n) if n is not None else None for n in df.index.names])
    out.columns.name = None if df.columns.name is None else header(df.columns.name)
    out.attrs["csv"] = full
    if run is not None:
        out.attrs["run"] = run
    return out


def display_table(df: pd.DataFrame, what: str = "ppl", extra: Iterable[str] = (), index: str | list = "label",
                  digits: int = 2) -> pd.DataFrame:
    """The paper-style view of a wide table: ``what`` ("ppl" or "r") at each L_ex as columns
    named by L_ex, then the ``extra`` columns, as :func:`readable` renders them.
    ``attrs["csv"]`` holds the same rows (as lists by column) at full precision with every
    interval (ppl's and r's bounds at each L_ex): what a chapter's CSV download writes
    (:func:`rflens.publish.csv_files.offer_tables`)."""
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
    if "run" in df.attrs:  # the long run the rows come from, for the CSV's header
        out.attrs["run"] = df.attrs["run"]
    view = readable(out, digits)
    view.columns.name = f"{what} at L_ex" if what == "ppl" else "r(L) at L_ex"
    return view
