"""Readings of the paper's tables and figures as this build reproduces them (chapters 3 to 7).

Table 1 and the pilot's growth with training tokens (chapter 3), the agreement of the
ERF with extrapolation and the retraining of Table 2 (chapter 4), Figure 7's Sinusoidal
and Rotary (chapter 5), Table 3, Figure 11 and the training speed (chapter 6), and the
log curve and the log-like schemes (chapter 7).
"""

from __future__ import annotations

import math

import pandas as pd

from rflens.measure.columns import lengths_of, row_ppl
from rflens.measure.criterion import (BREAKS, erf_within_l_tr, EXTRAPOLATION_HORIZON as HORIZON,
    EXTRAPOLATION_TOLERANCE as TOL)
from rflens.readings.notation import _bullets, _erf, _join, _label, _mult, _num, _r, _top, Prose, tex
from rflens.readings.pilot import pilot_table
from rflens.setup.presets import get


def _breaks(row, L: int) -> bool:
    return _num(row.get(f"r_lo@{L}")) >= BREAKS


# --------------------------------------------------------------------------------------
# chapter 3: Table 1
# --------------------------------------------------------------------------------------
def table1(t1: pd.DataFrame, scale, *, n_layer: int | None = None, pilot: pd.DataFrame | None = None) -> Prose:
    """What Table 1 shows at this scale: the models that extrapolate and those that do not
    (with r at the longest length and its interval), whether any breaks, which windows
    cannot fail by construction, what the stable models pay at L_tr, and, from the pilot,
    how the weakest failure grows with training tokens."""
    if t1 is None or t1.empty:
        return Prose("Table 1 was not run at this scale.")
    if n_layer is None:
        n_layer = get(scale).model.n_layer
    if pilot is None:
        pilot = pilot_table()
    t1 = t1[t1["extrapolates"].notna()]
    flat, moving = t1[t1["extrapolates"].astype(bool)], t1[~t1["extrapolates"].astype(bool)]
    out = [f"At the `{scale}` scale {len(flat)} of the {len(t1)} models extrapolate (the upper bound of r "
           f"stays within {TOL:.2f} up to {HORIZON} $L_{{tr}}$)."]
    if not moving.empty:
        rows = [f"{_label(r)}: r({_mult(_top(t1, r), int(r['l_tr']))}) = {_r(r, _top(t1, r))}" for _, r in moving.iterrows()]
        out.append(f"Those that do not: {'; '.join(rows)}.")
        broken = [_label(r) for _, r in moving.iterrows() if _breaks(r, _top(t1, r))]
        out[-1] += " " + (f"{_join(broken)} {'breaks' if len(broken) == 1 else 'break'} (r ≥ {BREAKS:g} on the lower bound)."
                   if broken else f"None breaks: no lower bound reaches r = {BREAKS:g}, so the failures are "
                   "in the direction the paper reports, at a smaller size.")
    near = flat[flat["max_r"].astype(float) <= 1.01]
    if len(near):
        out[0] += f" {len(near)} of them stay within 1% of ppl($L_{{tr}}$) at every length."
    out.append(_cost(t1))
    out = [o for o in out if o]
    windows = t1[t1["family"] == "window"]
    if n_layer and not windows.empty:
        l_tr = int(windows["l_tr"].iloc[0])
        # named as everywhere (the paper's w), with the window trained here: the mapping is the subject
        exact = [f"{lab} (here w = {int(w)})" if lab != f"w = {int(w)}" else lab
                 for lab, w in zip(windows["label"], windows["value"]) if n_layer * (int(w) - 1) + 1 <= l_tr]
        reach = [f"{n_layer * int(w) / l_tr:.1f}" for w in windows["value"]]
        text = (f"Of the windows, {_join(exact)} {'has' if len(exact) == 1 else 'have'} a theoretical field "
                f"R(w − 1) + 1 within $L_{{tr}}$ (R = {n_layer}), so {'its' if len(exact) == 1 else 'their'} "
                "last-token prediction is the same at every longer length and cannot fail; " if exact else
                "No window has a theoretical field R(w − 1) + 1 within $L_{tr}$; ")
        out.append(text + f"R·w / $L_{{tr}}$ runs {reach[0]} to {reach[-1]} over the sweep.")
    growth = pilot_growth(pilot, t1)
    if growth:
        out.append(growth)
    return _bullets(out)


def _cost(t1: pd.DataFrame) -> str:
    """What the steepest settings pay at L_tr: ppl(L_tr) of the first row of each family
    against the best ppl(L_tr) of the table."""
    l_tr = int(t1["l_tr"].iloc[0])
    col = f"ppl@{l_tr}"
    if col not in t1.columns:
        return ""
    best = t1.loc[t1[col].astype(float).idxmin()]
    parts = []
    for fam in dict.fromkeys(t1["family"]):
        first = t1[t1["family"] == fam].sort_values("value").iloc[0]
        if first["label"] != best["label"]:
            parts.append(f"{_label(first)} {float(first[col]):.1f}")
    if not parts:
        return ""
    return (f"Stability has a price at $L_{{tr}}$: the steepest setting of each sweep has ppl($L_{{tr}}$) "
            f"{_join(parts)}, against {float(best[col]):.1f} for the best model of the table, {_label(best)}.")


def pilot_growth(pilot: pd.DataFrame | None, t1: pd.DataFrame) -> str:
    """How the pilot's flattest slope shift (the paper's Delta = 8) rose with training tokens
    at the configuration closest to this scale (same L_tr, the most token budgets)."""
    if pilot is None or pilot.empty:
        return ""
    l_tr = int(t1["l_tr"].iloc[0])
    sub = pilot[(pilot["model"] == "alibi_max") & (pilot["l_tr"] == l_tr)]
    if sub.empty:
        return ""
    (R, d), g = max(sub.groupby(["R", "d"]), key=lambda kv: len(kv[1]))
    if len(g) < 2:
        return ""
    steps = [f"{float(r['r(16 L_tr)']):.2f} after {r['tokens']}" for _, r in g.iterrows()]
    return (f"In the pilot of chapter 11 (R = {R}, d = {d}, $L_{{tr}}$ = {l_tr}) the paper's Δ = 8 rose further with "
            f"more training: r(16 $L_{{tr}}$) = {_join(steps)} training tokens.")


# --------------------------------------------------------------------------------------
# chapter 4: receptive fields and Table 2
# --------------------------------------------------------------------------------------
def erf_agreement(t1: pd.DataFrame) -> Prose:
    """How often "ERF <= L_tr" predicts "extrapolates", which way the misses go, and how the
    share of the gradient inside L_tr orders the slope shifts."""
    sub = t1[t1["extrapolates"].notna()] if t1 is not None and "erf" in t1.columns else None
    if sub is None or sub.empty:
        return Prose("No Table 1 model has both an ERF and a perplexity at this scale.")
    inside = erf_within_l_tr(sub)
    ok = sub["extrapolates"].astype(bool)
    agree = (inside == ok)
    out = [f"The prediction and the outcome agree for {int(agree.sum())} of the {len(sub)} models "
           f"({agree.mean():.0%})."]
    far_ok = sub[~inside & ok]
    near_bad = sub[inside & ~ok]
    if not far_ok.empty:
        out.append(f"{len(far_ok)} {'model extrapolates' if len(far_ok) == 1 else 'models extrapolate'} with an ERF "
                   f"beyond $L_{{tr}}$ ({'; '.join(f'{_label(r)}: ERF {_erf(r)}' for _, r in far_ok.iterrows())}).")
    if not near_bad.empty:
        out.append(f"{len(near_bad)} {'fails' if len(near_bad) == 1 else 'fail'} with an ERF within $L_{{tr}}$ "
                   f"({'; '.join(f'{_label(r)}: ERF {_erf(r)}' for _, r in near_bad.iterrows())}).")
    shifts = sub[sub["family"] == "slope_shift"].sort_values("value")
    if len(shifts) >= 3 and "share_in_ltr" in shifts.columns:
        share = shifts["share_in_ltr"].astype(float)
        rho = share.rank().corr(shifts["max_r"].astype(float).rank())
        seq = _join([f"{s:.2f}" for s in share], "to")
        out.append(f"Among the slope shifts, steepest to flattest, the share of the gradient inside $L_{{tr}}$ runs "
                   f"{seq}; its rank correlation with the largest r is {rho:+.2f}"
                   + (" (less gradient inside, more rise beyond)." if rho < 0 else "."))
    windows = sub[(sub["family"] == "window") & sub["theoretical"].notna()] if "theoretical" in sub.columns else sub.iloc[0:0]
    if not windows.empty:
        below = int((windows["erf"].astype(float) < windows["theoretical"].astype(float)).sum())
        share = f"all {below}" if below == len(windows) else f"{below} of the {len(windows)}"
        out.append(f"{share.capitalize()} windows have an ERF below their theoretical R·w: the gradient "
                   "fades inside the window's reach." if below else "No window has an ERF below its theoretical R·w.")
    return _bullets(out)


def table2(t1: pd.DataFrame, t2: pd.DataFrame, skipped: list[str]) -> Prose:
    """What the retraining of Table 2 did at this scale: which models were retrained (and
    which not, because they already extrapolate), whether they are now flat, and their
    perplexity against the Table 1 model at the same lengths."""
    out = []
    if skipped:
        out.append(f"Not retrained, because {'it already extrapolates' if len(skipped) == 1 else 'they already extrapolate'} "
                   f"in Table 1: {_join([tex(s) for s in skipped])}.")
    if t2 is None or t2.empty:
        out.append("No model of the list fails in Table 1 at this scale, so nothing was retrained and claim 7 is not "
                   "tested here.")
        return Prose(" ".join(out))
    for _, row in t2.iterrows():
        new = int(row["l_tr"])
        old = t1[(t1["family"] == row["family"]) & (t1["value"] == row["value"])]  # its Table 1 model
        flat = bool(row["extrapolates"])
        text = (f"{_label(row)} (ERF {_erf(row, 'old_erf')} before) is "
                + (f"flat from its new $L_{{tr}}$ = {new} on (largest r {float(row['max_r']):.3f})" if flat
                   else f"still not flat (largest r {float(row['max_r']):.3f})"))
        if not math.isnan(_num(row.get("erf"))):
            text += f"; its own ERF is {_erf(row)}, {'inside' if int(row['erf']) <= new else 'beyond'} its new $L_{{tr}}$"
        if not old.empty:
            ratios = [float(row[f"ppl@{L}"]) / float(old.iloc[0][f"ppl@{L}"]) for L in lengths_of(t2)
                      if L >= new and f"ppl@{L}" in old.columns and not math.isnan(_num(row.get(f"ppl@{L}")))]
            if ratios:
                lo, hi = min(ratios), max(ratios)
                word = "higher" if lo > 1 else ("lower" if hi < 1 else "on both sides of it")
                text += (f"; against the Table 1 model at the same lengths ({new} and beyond) its perplexity is "
                         f"{lo:.3f} to {hi:.3f} times as large, {word}")
        out.append(text + ".")
    return Prose(" ".join(out))


# --------------------------------------------------------------------------------------
# chapter 5: Figure 7
# --------------------------------------------------------------------------------------
def figure7(f7: pd.DataFrame) -> Prose:
    """Sinusoidal's rise and its gradient peak at each L_tr, and Rotary's rise."""
    if f7 is None or f7.empty:
        return Prose("Figure 7 was not run at this scale.")
    out = []
    for _, row in f7[f7["pos"] == "sinusoidal"].iterrows():
        l_tr = int(row["l_tr"])
        r2, r4 = (f"r({_mult(m * l_tr, l_tr)}) = {_r(row, m * l_tr)}" for m in (2, 4))
        text = f"Sinusoidal at $L_{{tr}}$ = {l_tr}: {r2}, {r4}" + (" (it breaks)" if _breaks(row, 4 * l_tr) else
                                                                   " (below the r ≥ 2 of a break on the lower bound)")
        pos = _num(row.get("jump_abs_pos"))
        if not math.isnan(pos):
            tol = _num(row.get("jump_tolerance"))
            lo, hi = math.ceil(l_tr - tol), math.floor(l_tr + tol)
            where = ("inside" if bool(row["jump_ok"]) else "outside")
            text += (f"; its largest gradient outside the last {int(row['few'])} tokens is at absolute position "
                     f"{int(pos)}, {where} the window {lo}–{hi} around $L_{{tr}}$ ({int(pos) - l_tr:+d})")
        out.append(text + ".")
    rot = f7[f7["pos"] == "rotary"]
    for _, row in rot.iterrows():
        top = _top(f7, row)
        l_tr = int(row["l_tr"])
        out.append(f"Rotary: r({_mult(4 * l_tr, l_tr)}) = {_r(row, 4 * l_tr)} and r({_mult(top, l_tr)}) = {_r(row, top)}"
                   + (", a break." if _breaks(row, 4 * l_tr) else
                      (", a rise that stays below a break." if not bool(row["extrapolates"]) else ", flat.")))
    return _bullets(out)


# --------------------------------------------------------------------------------------
# chapter 6: Table 3 and Figure 11
# --------------------------------------------------------------------------------------
def table3(t3: pd.DataFrame, f11: pd.DataFrame | None = None) -> Prose:
    """Per corpus: the schemes that extrapolate, rise or break; whether Sandwich's perplexity
    drops beyond L_tr; on code, the schemes below Sandwich beyond L_tr; the lowest
    ppl(L_tr); and the gradient shares of Figure 11."""
    if t3 is None or t3.empty:
        return Prose("Table 3 was not run at this scale.")
    out = []
    for corpus in dict.fromkeys(t3["corpus"]):
        sub = t3[t3["corpus"] == corpus]
        l_tr = int(sub["l_tr"].iloc[0])
        flat = [tex(r["label"]) for _, r in sub.iterrows() if bool(r["extrapolates"])]
        broken = [tex(r["label"]) for _, r in sub.iterrows() if _breaks(r, _top(sub, r))]
        rising = [tex(r["label"]) for _, r in sub.iterrows()
                  if not bool(r["extrapolates"]) and tex(r["label"]) not in broken]
        best = sub.loc[sub[f"ppl@{l_tr}"].astype(float).idxmin()]
        text = (f"**{corpus.capitalize()}:** extrapolate: {_join(flat) or 'none'}; rise without breaking: "
                f"{_join(rising) or 'none'}; break: {_join(broken) or 'none'}. Lowest ppl($L_{{tr}}$): "
                f"{_label(best)} ({float(best[f'ppl@{l_tr}']):.2f}).")
        sw = sub[sub["pos"] == "sandwich"]
        if not sw.empty:
            ppl = row_ppl(sw.iloc[0])
            beyond = {L: p for L, p in ppl.items() if L > l_tr}
            if beyond and l_tr in ppl:
                L, p = min(beyond.items(), key=lambda kv: kv[1])
                hi, lo = _num(sw.iloc[0].get(f"r_hi@{L}")), _num(sw.iloc[0].get(f"r_lo@{L}"))
                verdict = ("it gains from the longer context (the paired interval lies below 1)" if hi < 1 else
                           "it is worse with the longer context (the paired interval lies above 1)" if lo > 1 else
                           "no gain is established (the paired interval contains 1)" if not math.isnan(hi) else
                           ("it gains from the longer context" if p < ppl[l_tr] else "it does not gain"))
                text += (f" Sandwich's lowest perplexity beyond $L_{{tr}}$ is r({_mult(L, l_tr)}) = "
                         f"{_r(sw.iloc[0], L)}: {verdict}.")
            if corpus == "code" and beyond:
                below = []
                for _, r in sub.iterrows():
                    if r["pos"] == "sandwich":
                        continue
                    other = row_ppl(r)
                    if any(other.get(L, math.inf) < ppl[L] for L in beyond):
                        below.append(tex(r["label"]))
                text += (f" Below Sandwich at some length beyond $L_{{tr}}$: {_join(below)}." if below else
                         " No scheme is below Sandwich at any length beyond $L_{tr}$.")
        out.append(text)
    if f11 is not None and not f11.empty:
        shares = _join([f"{tex(r['label'])} {float(r['share_in_ltr']):.0%}" for _, r in f11.iterrows()])
        out.append(f"Share of the cumulative gradient in the last $L_{{tr}}$ tokens (Figure 11): {shares}; "
                   "the paper reports about 60% for these schemes.")
    return _bullets(out)


def speed(row: dict) -> Prose:
    """Claim 16's measurement as a sentence: the ratio and what it establishes."""
    if row["result"] == "not run":
        return Prose(f"was not timed ({row['measured']})")
    return Prose(tex(row["measured"]) + (": T5 is the slower" if row["result"] == "pass" else
                                         ": no difference is established"))


# --------------------------------------------------------------------------------------
# chapter 7: the log curve and the log-like schemes
# --------------------------------------------------------------------------------------
def log_fit(fit: dict, near: dict, target: tuple[float, float]) -> Prose:
    """Which of the two fits (all distances, or the nearest ones) is closer to the paper's
    curve."""
    d_all = max(abs(fit["a"] - target[0]), abs(fit["b"] - target[1]))
    d_near = max(abs(near["a"] - target[0]), abs(near["b"] - target[1]))
    closer = "the fit over all distances" if d_all < d_near else "the fit over the nearest distances"
    return Prose(f"Over all distances the fit gives a = {fit['a']:.3f}, b = {fit['b']:.3f}; over the nearest ones "
                 f"a = {near['a']:.3f}, b = {near['b']:.3f}. The paper's a = {target[0]:g}, b = {target[1]:g} is "
                 f"closer to {closer} (largest difference {min(d_all, d_near):.3f} against {max(d_all, d_near):.3f}).")


def log_like(family: pd.DataFrame, scale: str) -> Prose:
    """Which of the log-like schemes extrapolate at this scale: one sentence per corpus when
    ``family`` (rows of Table 3) spans several."""
    if family is None or family.empty:
        return Prose(f"The `{scale}` preset trains none of the log-like schemes.")
    if "corpus" in family.columns and family["corpus"].nunique() > 1:
        return Prose(" ".join(_log_like(rows, f"`{scale}` scale on {corpus}")
                              for corpus, rows in family.groupby("corpus", sort=False)))
    return Prose(_log_like(family, f"`{scale}` scale"))


def _log_like(family: pd.DataFrame, where: str) -> str:
    flat = [tex(r["label"]) for _, r in family.iterrows() if bool(r["extrapolates"])]
    rise = [f"{tex(r['label'])} (largest r {float(r['max_r']):.3f})" for _, r in family.iterrows()
            if not bool(r["extrapolates"])]
    if not rise:
        return f"At the {where} all {len(family)} log-like schemes extrapolate."
    if not flat:
        return f"At the {where} none of the log-like schemes extrapolates: {_join(rise)}."
    return (f"At the {where} the log-like schemes split: {_join(flat)} "
            f"{'extrapolates' if len(flat) == 1 else 'extrapolate'}, while {_join(rise)} "
            f"{'does not' if len(rise) == 1 else 'do not'}; a logarithmic decay alone does not make a model "
            "extrapolate here.")
