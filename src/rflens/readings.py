"""The book's sentences about its own results, each computed from the table it describes.

A chapter never states a measured fact in fixed prose: it shows the reading of this module
for the tables it has just computed, so the text agrees with the numbers on the page at
whatever scale the chapter was built. Every function returns :class:`Prose`, a Markdown
string that a notebook displays as formatted text (with the book's notation typeset by
MathJax); the tests call the same functions on synthetic tables.

Readings by chapter: :func:`verdicts` and :func:`held` (every chapter with claims),
:func:`table1` (3), :func:`erf_agreement` and :func:`table2` (4), :func:`figure7` (5),
:func:`table3` (6), :func:`log_fit` and :func:`log_like` (7), :func:`protocols` (8),
:func:`board` (9).
"""

from __future__ import annotations

import math
import re

import pandas as pd

from .claims import RESULTS
from .results import BREAKS, EXTRAPOLATION_HORIZON, EXTRAPOLATION_TOLERANCE, erf_text, erf_within_l_tr, lengths_of, row_ppl

TOL, HORIZON = EXTRAPOLATION_TOLERANCE, EXTRAPOLATION_HORIZON


class Prose(str):
    """Markdown text that a notebook displays formatted."""

    def _repr_markdown_(self) -> str:
        return str(self)


# --------------------------------------------------------------------------------------
# notation: the plain-text names of the tables and the command line, typeset for the book
# --------------------------------------------------------------------------------------
_NOTATION = [(re.compile(r"\bL_tr\b"), r"$L_{tr}$"), (re.compile(r"\bL_ex\b"), r"$L_{ex}$"),
             (re.compile(r"\bd_bar\b"), r"$\\bar d$"), (re.compile(r"<="), "≤"), (re.compile(r">="), "≥")]


def tex(text: str) -> str:
    """Plain notation (``L_tr``, ``L_ex``, ``d_bar``, ``<=``) as the book typesets it; text
    in backticks is left as it is."""
    parts = re.split(r"(`[^`]*`)", str(text))
    for i in range(0, len(parts), 2):
        for pattern, repl in _NOTATION:
            parts[i] = pattern.sub(repl, parts[i])
    return "".join(parts)


def _join(items: list[str], word: str = "and") -> str:
    items = [str(i) for i in items]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {word} " + items[-1]


def _erf(row, column: str = "erf") -> str:
    """A row's ERF as the book prints it, "≥ N" where the segment capped it."""
    return erf_text(int(row[column]), row.get(f"{column}_capped"))


def _bullets(sentences: list[str]) -> Prose:
    return Prose("\n".join(f"- {s}" for s in sentences))


def _num(v) -> float:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return math.nan
    return v


def _r(row, L: int) -> str:
    """r(L) of a row with its paired 95% interval, as text."""
    v, lo, hi = _num(row.get(f"r@{L}")), _num(row.get(f"r_lo@{L}")), _num(row.get(f"r_hi@{L}"))
    if math.isnan(v):
        return "not measured"
    if math.isnan(lo) or math.isnan(hi):
        return f"{v:.3f}"
    return f"{v:.3f} [{lo:.3f}, {hi:.3f}]"


def _breaks(row, L: int) -> bool:
    return _num(row.get(f"r_lo@{L}")) >= BREAKS


def _label(row) -> str:
    return tex(str(row["label"]))


def _top(df: pd.DataFrame, row) -> int:
    """The longest measured length of a row, at most HORIZON L_tr."""
    l_tr = int(row["l_tr"])
    lengths = [L for L in lengths_of(df, "r") if L <= HORIZON * l_tr and not math.isnan(_num(row.get(f"r@{L}")))]
    return max(lengths) if lengths else l_tr


def _mult(L: int, l_tr: int) -> str:
    return f"{L // l_tr} $L_{{tr}}$" if L % l_tr == 0 else f"$L$ = {L}"


# --------------------------------------------------------------------------------------
# claims
# --------------------------------------------------------------------------------------
_WORD = {"pass": "holds", "fail": "does not hold", "not decided": "is not decided at this scale",
         "not run": "was not checked"}


def verdicts(rows: list[dict], scale: str) -> Prose:
    """The computed verdict of each claim in ``rows`` (from :func:`rflens.claims.check`):
    what the paper says, the fixed criterion, and what this build measured."""
    out = [f"Computed at the `{scale}` scale:", ""]
    for c in rows:
        out.append(f"- **Claim {c['id']} {_WORD[c['result']]}.** {tex(c['statement'])} "
                   f"*Criterion:* {tex(c['criterion'])}. *Measured:* {tex(c['measured'])}.")
    return Prose("\n".join(out))


def held(rows: list[dict], scale: str) -> Prose:
    """A chapter summary's list of its claims that held, did not hold, or were not checked."""
    groups = {k: [c for c in rows if c["result"] == k] for k in RESULTS}
    heads = {"pass": "Held", "fail": "Did not hold",
             "not decided": "Not decided (the interval straddles the criterion's threshold)",
             "not run": "Not checked (the scale does not produce the data)"}
    out = []
    for key, items in groups.items():
        if items:
            out.append(f"- {heads[key]} at the `{scale}` scale:")
            out += [f"  - claim {c['id']}: {tex(c['statement'])}" for c in items]
    return Prose("\n".join(out))


def board(rows: list[dict], scale: str) -> Prose:
    """Chapter 9's count of the board, and the claims of each result by number."""
    groups = {k: [str(c["id"]) for c in rows if c["result"] == k] for k in RESULTS}
    parts = [f"{len(v)} {w}" + (f" (claim{'s' if len(v) > 1 else ''} {_join(v)})" if v else "")
             for v, w in ((groups["pass"], "pass"), (groups["fail"], "fail"),
                          (groups["not decided"], "not decided"),
                          (groups["not run"], "were not run"))]
    return Prose(f"At the `{scale}` scale, of {len(rows)} claims: {'; '.join(parts)}.")


def by_scale(boards: dict[str, list[dict]]) -> Prose:
    """Chapter 9's count at each scale, and the claims whose result differs between them."""
    out = []
    for name, rows in boards.items():
        n = {k: sum(c["result"] == k for c in rows) for k in RESULTS}
        out.append(f"`{name}`: {n['pass']} pass, {n['fail']} fail, {n['not decided']} not decided, {n['not run']} not run")
    names = list(boards)
    differ = [str(c["id"]) for i, c in enumerate(boards[names[0]])
              if len({boards[s][i]["result"] for s in names if boards[s][i]["result"] in ("pass", "fail")}) > 1]
    text = f"Of the {len(boards[names[0]])} claims, " + "; ".join(out) + "."
    if differ:
        text += f" Decided at more than one scale with different results: claim{'s' if len(differ) > 1 else ''} {_join(differ)}."
    return Prose(text)


def long_run(experiment: str, rows: list[dict], lacking: list[str]) -> Prose:
    """The long run's verdicts on an experiment read from its bundle, or what the bundle
    still lacks for it (:func:`rflens.shipped.experiment`)."""
    if lacking:
        more = f" and {len(lacking) - 1} more" if len(lacking) > 1 else ""
        return Prose(f"The long run's {experiment} is not complete yet: the bundle lacks {tex(lacking[0])}{more}. "
                     f"Its verdicts appear here once it holds them; chapter 10 lists the shipped models and how far "
                     f"each has trained.")
    return verdicts(rows, "long")


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
        from .scales import get

        n_layer = get(scale).model.n_layer
    if pilot is None:
        from .pilot import pilot_table

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
        exact = [f"w = {int(w)}" for w in windows["value"] if n_layer * (int(w) - 1) + 1 <= l_tr]
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
    return (f"In the pilot of chapter 10 (R = {R}, d = {d}, $L_{{tr}}$ = {l_tr}) the paper's Δ = 8 rose further with "
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
        base = row["label"].rsplit(", L_tr=", 1)[0]
        old = t1[t1["label"] == base]
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
    if row["passed"] is None:
        return Prose(f"was not timed ({row['measured']})")
    return Prose(tex(row["measured"]) + (": T5 is the slower" if row["passed"] else ": no difference is established"))


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
    """Which of the log-like schemes extrapolate on this corpus at this scale."""
    if family is None or family.empty:
        return Prose(f"The `{scale}` preset trains none of the log-like schemes.")
    flat = [tex(r["label"]) for _, r in family.iterrows() if bool(r["extrapolates"])]
    rise = [f"{tex(r['label'])} (largest r {float(r['max_r']):.3f})" for _, r in family.iterrows()
            if not bool(r["extrapolates"])]
    if not rise:
        return Prose(f"At the `{scale}` scale all {len(family)} log-like schemes extrapolate.")
    if not flat:
        return Prose(f"At the `{scale}` scale none of the log-like schemes extrapolates: {_join(rise)}.")
    return Prose(f"At the `{scale}` scale the log-like schemes split: {_join(flat)} extrapolate, while {_join(rise)} "
                 "do not; a logarithmic decay alone does not make a model extrapolate here.")


# --------------------------------------------------------------------------------------
# chapter 8: protocols
# --------------------------------------------------------------------------------------
def protocols(pr: pd.DataFrame, *, brief: bool = False) -> Prose:
    """Per model: the non-overlapping and sliding perplexity against the last-token one at
    L_ex = L_tr, and how the non-overlapping value moves from L_tr to the longest chunk.
    ``brief``: the first sentence only (for a summary)."""
    if pr is None or pr.empty:
        return Prose("No protocol comparison was run at this scale.")
    out, higher, n = [], 0, 0
    for label in dict.fromkeys(pr["label"]):
        sub = pr[pr["label"] == label]
        l_tr = int(sub["l_tr"].iloc[0])
        at = sub[sub["l_ex"] == l_tr].set_index("protocol")["ppl"]
        if "last_token" not in at or "non_overlapping" not in at:
            continue
        n += 1
        gap = at["non_overlapping"] / at["last_token"] - 1
        higher += gap > 0
        non = sub[sub["protocol"] == "non_overlapping"].sort_values("l_ex")
        first, last = non.iloc[0], non.iloc[-1]
        move = last["ppl"] / first["ppl"] - 1
        overlap = last["ci_low"] <= first["ci_high"] and first["ci_low"] <= last["ci_high"]
        text = (f"{tex(label)}: at $L_{{ex}}$ = $L_{{tr}}$ the non-overlapping perplexity is {gap:+.1%} against the "
                f"last-token one")
        if "sliding" in at:
            text += f" (sliding {at['sliding'] / at['last_token'] - 1:+.1%})"
        text += (f"; from $L_{{ex}}$ = {int(first['l_ex'])} to {int(last['l_ex'])} it {'falls' if move < 0 else 'rises'} "
                 f"by {abs(move):.1%}" + (", within the overlap of the two 95% intervals" if overlap else
                                         ", beyond the overlap of the two 95% intervals"))
        out.append("- " + text + ".")
    if not n:
        return Prose("The comparison lacks the last-token or non-overlapping numbers.")
    head = (f"The non-overlapping perplexity at $L_{{tr}}$ is above the last-token one for {higher} of {n} models"
            + (" (the early-token curse shows for every model):" if higher == n else
               " (the early-token curse does not show for every model):"))
    if brief:
        return Prose("- " + head[:-1] + ".")
    return Prose("\n".join([head, ""] + out))


# --------------------------------------------------------------------------------------
# the long run (chapter 10)
# --------------------------------------------------------------------------------------
def _tokens(n: float) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e5 else f"{n / 1e3:.0f}k"


def emergence(em: pd.DataFrame) -> Prose:
    """Per long-run model: r(16 L_tr) at its first and last measured size, whether and from
    which size it breaks (the lower end of the paired interval >= 2) or extrapolates (the
    upper end <= 1.10), and its ERF against L_tr; an unfinished run says how far it got."""
    if em.empty:
        return Prose("No long-run model is shipped yet (`python -m rflens emergence --list`).")
    out = []
    for name in dict.fromkeys(em["name"]):
        d = em[em["name"] == name].sort_values("tokens")
        first, last = d.iloc[0], d.iloc[-1]
        l_tr = int(last["l_tr"])
        top = _top(em, last)
        broke = d[d[f"r_lo@{top}"] >= BREAKS]
        flat = d[d[f"r_hi@{top}"] <= TOL]
        where = _mult(top, l_tr)
        s = (f"{_label(last)}: r({where}) = {_r(first, top)} at {_tokens(first['tokens'])} tokens, "
             f"{_r(last, top)} at {_tokens(last['tokens'])}; ")
        if len(broke):
            s += f"it breaks from {_tokens(broke.iloc[0]['tokens'])} tokens on"
        elif len(flat) == len(d):
            s += f"it stays within {TOL:.2f} at every size"
        elif _num(last[f"r_hi@{top}"]) <= TOL:
            s += f"it stays within {TOL:.2f} from {_tokens(flat.iloc[0]['tokens'])} tokens on"
        else:
            s += f"it has not broken by {_tokens(last['tokens'])} tokens"
        side = "inside" if int(last["erf"]) <= l_tr else "beyond"
        capped = f" (a lower bound: the {int(last['erf_length'])}-token segment capped it)" if bool(last["erf_capped"]) else ""
        s += f"; its ERF is {_erf(last)} tokens{capped}, {side} $L_{{tr}}$ = {l_tr}"
        if not bool(last["complete"]):
            s += f" (the run stopped part-way; its last measured size is {_tokens(last['tokens'])})"
        out.append(s + ".")
    return _bullets(out)


def schedule_check(sc: pd.DataFrame | None) -> Prose:
    """Whether a cooled-down point of the long run agrees with a cosine run of its size, at
    the longest length: the paired interval of the ratio of their r(L)."""
    if sc is None or sc.empty:
        return Prose("The schedule check has not been run (`rflens.emergence.schedule_check`).")
    row = sc.iloc[-1]
    agree = row["low"] <= 1 <= row["high"]
    return Prose(
        f"At {_tokens(row['tokens'])} tokens, r({int(row['L'])}) of the cooled-down point is "
        f"{row['r wsd']:.3f} [{row['r wsd low']:.3f}, {row['r wsd high']:.3f}] and that of a cosine run of the same "
        f"size {row['r cosine']:.3f} [{row['r cosine low']:.3f}, {row['r cosine high']:.3f}]; their ratio over the same "
        f"segments is {row['wsd / cosine']:.4f} [{row['low']:.4f}, {row['high']:.4f}], "
        + ("an interval that holds 1: the two schedules agree at this size." if agree else
           "an interval that excludes 1: the schedules differ at this size, and the curves are read as the "
           "warmup-stable-decay runs they are."))


# --------------------------------------------------------------------------------------
# chapter 11
# --------------------------------------------------------------------------------------
def thesis_verdict(df: pd.DataFrame) -> str:
    """Computed sentences (Markdown) on rows with Table 1's columns and an ERF: whether each
    model stays flat up to the longest length (the paired interval of r within 1.10), its
    ERF against L_tr, and for how many rows the paper's thesis holds (flat exactly when the
    ERF fits in L_tr)."""
    if df is None or df.empty:
        return "Nothing was measured."
    longest = max(lengths_of(df))
    parts, agree = [], 0
    for _, row in df.iterrows():
        l_tr = int(row["l_tr"])
        flat, fits = bool(row["extrapolates"]), int(row["erf"]) <= l_tr
        agree += flat == fits
        where = f" ({row['corpus']})" if df["corpus"].nunique() > 1 else ""
        parts.append(f"- **{row['label']}**{where}: r({longest // l_tr} L<sub>tr</sub>) = {row[f'r@{longest}']:.2f} "
                     f"[{row[f'r_lo@{longest}']:.2f}, {row[f'r_hi@{longest}']:.2f}], "
                     f"{'flat' if flat else 'not flat'}; ERF {_erf(row)} tokens, "
                     f"{'inside' if fits else 'beyond'} L<sub>tr</sub> = {l_tr}.")
    return "\n".join(parts) + (f"\n\nThe thesis (flat exactly when the ERF fits in L<sub>tr</sub>) describes "
                               f"{agree} of these {len(df)} models.")


# --------------------------------------------------------------------------------------
# the index page: what this build is
# --------------------------------------------------------------------------------------
def this_build(scale: str, counts: dict | None, long: pd.DataFrame, planned: int) -> str:
    """The "this build" box of the index page (MyST): the scale's model and tokens a model,
    the scoreboard's counts (``counts``, None when the board was not computed), and from the
    long run's table (:func:`rflens.bundle.table`) how many of its ``planned`` models are
    shipped and from how many tokens its first model breaks."""
    from .scales import get

    sc = get(scale)
    m, t = sc.model, sc.train
    tokens = t.steps * t.batch_size * t.l_tr
    lines = [f"Scale `{scale}`: R = {m.n_layer} layers, H = {m.n_head} heads, d = {m.d_model}, "
             f"$L_{{tr}}$ = {t.l_tr}; {_tokens(tokens)} training tokens a model."]
    if counts is None:
        lines.append("The claims scoreboard was not computed in this build (chapter 9 computes it).")
    else:
        parts = ", ".join(f"{counts.get(k, 0)} {k}" for k in RESULTS)
        lines.append(f"Of the paper's {sum(counts.values())} claims, at this scale: {parts} "
                     f"([chapter 9](09_claims.ipynb)).")
    names = long.loc[long["complete"].astype(bool), "name"].nunique() if not long.empty else 0
    top = f"r_lo@{HORIZON * int(long['l_tr'].iloc[0])}" if not long.empty else None  # at the long run's own L_tr
    broke = long[long[top] >= BREAKS] if top in long else long.iloc[0:0]
    if not broke.empty and tokens < broke["tokens"].min():
        lines.append(f"Why the paper's blow-ups are absent at this scale: in the long run the first model to break "
                     f"(r({HORIZON} $L_{{tr}}$) >= {BREAKS:g} on the lower bound of its interval) needed "
                     f"{_tokens(broke['tokens'].min())} training tokens; a model here sees {_tokens(tokens)}.")
    lines.append(f"The long run ([chapter 10](10_full_size.ipynb)): {names} of its {planned} models shipped"
                 + (f", trained on up to {_tokens(long['tokens'].max())} tokens each." if not long.empty else "."))
    body = "\n".join(f"- {line}" for line in lines)
    return f":::{{admonition}} This build\n:class: note\n{body}\n:::\n"
