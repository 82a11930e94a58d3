"""The claims of Chi et al. (ACL 2023), each checked with a fixed criterion.

The sixteen claims and their criteria were fixed before any result was seen: they are
never re-tuned to the numbers a scale happens to give. Notation: r(L) = ppl(L) / ppl(L_tr)
with the last-token protocol; a model "extrapolates" when r(L) <= 1.10 for every measured
L_tr < L <= 16 L_tr (:func:`rflens.results.extrapolates`).

Each claim is a check declared with ``@claim(id, statement, criterion, needs)`` right above
it; the thresholds are the constants below, from which the criterion texts are formatted.
Each check reads the tables of :mod:`rflens.experiments` (a dict of results, so the checks
can be tested on synthetic tables) and returns the measured figure as text and its outcome:
True (the claim holds), False (it does not), :data:`UNDECIDED` (the 95% interval straddles
the criterion's threshold: this scale cannot tell), or None when the data it needs is
missing. A missing experiment is reported as "not run", never as passed. The criteria are
the same either way; only the reading of their intervals has the third value.

:func:`gather` runs (or reads from the run store) every table the checks need;
:mod:`rflens.claims_base` holds the outcomes and the readers of the tables the checks
share; :mod:`rflens.scoreboard` stores and shows the board (``python -m rflens claims
--scale tiny``).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from . import experiments as ex
from . import paper
from .claims_base import (UNDECIDED, Missing, _all, _at_least, _extrap, _family, _ppl_ratio, _r_at, _r_at_length,
                          _row, _table)
from .receptive import JUMP_TOLERANCE
from .speed import speed_ratio
from .errors import UserError
from .results import BREAKS, EXTRAPOLATION_HORIZON, EXTRAPOLATION_TOLERANCE, erf_text, erf_within_l_tr, lengths_of, row_ppl
from .scales import mapped_exponents
from .schemes import TABLE3_LEARNABLE, TABLE3_PARAMETER_FREE, title

# The thresholds of the criteria, each written once: the checks compare against these and
# the criterion texts are formatted from them.
TOL = EXTRAPOLATION_TOLERANCE  # "extrapolates": r(L) <= 1.10 up to 16 L_tr
HORIZON = EXTRAPOLATION_HORIZON
RISES = 1.01  # "rises": r(L) >= 1.01 somewhere beyond L_tr (claim 3)
ERF_AGREEMENT = 0.8  # claim 6: share of Table 1 models whose ERF predicts extrapolation
SHARE_IN_LTR = (0.3, 0.9)  # claim 11: a band around the paper's paper.SANDWICH_SHARE_IN_LTR
LOG_FIT_TARGET = paper.SMOOTHED_SANDWICH  # the paper's smoothed Sandwich: a * log(1 + k) + b
LOG_FIT_TOL = 0.02
PARAMETER_FREE = TABLE3_PARAMETER_FREE
LEARNED = TABLE3_LEARNABLE
_EX = f"r(L) <= {TOL:.2f} for every L up to {HORIZON} L_tr, upper bound of its 95% paired interval"
_LB = "lower bound of its 95% paired interval"


# the results a claim can have on the board, in the order they are counted and shown
RESULTS = ("pass", "fail", "not decided", "not run")


# What a claim's verdict rests on: models trained and measured, or a property the scheme has
# by construction (a closed form of the bias, or a window whose field fits in L_tr, which
# cannot see past it), which holds at any scale and is counted apart on the board.
TRAINED, CONSTRUCTION = "trained models", "by construction"

# What the paper itself reports for each claim (its tables' numbers are not reproduced here:
# the models differ in size; these are the findings and the values it states), shown beside
# the measurement on the board.
PAPER = {
    1: "w <= 100 extrapolate (12 layers, L_tr = 512)",
    2: "w >= 120 diverge; ERF 768 / 1024 / 1536 for w = 120 / 160 / 320",
    3: "ALiBi's perplexity rises beyond L_tr",
    4: "Δ = -3 plateaus soonest (ERF 768); Δ = 6 and 8 explode",
    5: "only the large slopes (small h) extrapolate",
    6: "the ERF explains which Table 1 models extrapolate",
    7: "w = 160 at L_tr = 1024 and Δ = 6 at L_tr = 2048 become stable",
    8: "the gradient jumps at the absolute position L_tr (512 at L_tr = 512, 128 at L_tr = 128)",
    9: "Rotary does not keep its gradient on the last L_tr tokens and does not extrapolate",
    10: "Sandwich reaches a lower perplexity at some L_ex > L_tr",
    11: f"about {paper.SANDWICH_SHARE_IN_LTR:.0%} of the cumulative gradient on the last L_tr tokens",
    12: f"{LOG_FIT_TARGET[0]:g} log(1 + k) - {-LOG_FIT_TARGET[1]:g}",
    13: "a larger d_bar windows more strongly (Figure 10)",
    14: "Sandwich beats every parameter-free baseline on ArXiv and GitHub beyond L_tr",
    15: "KERPLE and T5 are lower at L_ex = L_tr",
    16: f"T5 trains about {paper.T5_SLOWDOWN:.0%} slower than Sandwich",
}


@dataclass(frozen=True)
class Claim:
    id: int
    statement: str  # the paper's claim, in our words
    criterion: str  # the fixed test, decided before any result was seen
    needs: tuple  # result keys the check reads
    check: Callable[[dict], tuple[str, bool | str]]
    evidence: str = TRAINED  # TRAINED or CONSTRUCTION

    @property
    def paper(self) -> str:
        """What the paper reports for this claim."""
        return PAPER[self.id]


CLAIMS: list[Claim] = []  # in the order of the paper, filled by @claim


def claim(cid: int, statement: str, criterion: str, needs: tuple, evidence: str = TRAINED):
    """Declare the check below it as claim ``cid``, with its statement and criterion."""
    def add(check):
        CLAIMS.append(Claim(cid, statement, criterion, needs, check, evidence))
        return check

    return add


# the readers of the tables, the outcomes and their three-valued comparisons: rflens.claims_base
def _max_r_text(row) -> str:
    return f"max r = {float(row['max_r']):.2f}"


# --------------------------------------------------------------------------------------
# the sixteen checks
# --------------------------------------------------------------------------------------
@claim(1, "Windowed attention with a small window extrapolates.",
       f"the smallest w of the sweep extrapolates: {_EX}", ("table1",), CONSTRUCTION)
def _c1(res):
    row = _family(res, "window").iloc[0]
    ok = _extrap(row)
    return f"{row['label']}: {_max_r_text(row)} (limit {TOL})", ok


@claim(2, "Windowed attention with a large window breaks beyond L_tr: its perplexity at least doubles.",
       f"the largest w of the sweep has r({HORIZON} L_tr) >= {BREAKS:g} ({_LB})", ("table1",))
def _c2(res):
    row = _family(res, "window").iloc[-1]
    _, lo, hi, text = _r_at(row, HORIZON)
    return f"{row['label']}: {text}", _at_least(lo, hi, BREAKS)


def _alibi_row(res):
    """ALiBi as the paper trains it: the slope-shift row that maps the paper's Delta = 0 to
    this L_tr (rflens.scales.mapped_exponents), else Delta = 0 itself (the Table 1 row, or
    the identical Table 3 model)."""
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


@claim(3, "ALiBi itself is not flat beyond L_tr: its perplexity rises.",
       f"ALiBi (the paper's Δ = 0, mapped to this L_tr): r(L) >= {RISES:g} for some L > L_tr ({_LB})",
       ("table1",))
def _c3(res):
    row, df = _alibi_row(res)
    rs = {}
    for L in lengths_of(df, "r"):
        if L > int(row["l_tr"]):
            try:
                rs[L] = _r_at_length(row, L)
            except Missing:
                continue
    if not rs:
        raise Missing("no L > L_tr measured for ALiBi")
    L, (r, lo, _, _) = max(rs.items(), key=lambda kv: kv[1][1])  # the largest lower bound
    top = max(hi for _, _, hi, _ in rs.values())  # no L rises if even the largest upper bound stays below
    outcome = True if lo >= RISES else (False if top < RISES else UNDECIDED)
    return f"ALiBi {row['label']}: r = {r:.3f} (lower bound {lo:.3f}) at L = {L}, the largest lower bound", outcome


def _stable_and_breaking(res, family: str, names: tuple[str, str]):
    """The two ends of a Table 1 sweep (sorted by value): the first must extrapolate, the
    last must break at 16 L_tr."""
    fam = _family(res, family)
    first, last = fam.iloc[0], fam.iloc[-1]
    ok_first, (_, lo, hi, text) = _extrap(first), _r_at(last, HORIZON)
    return (f"{names[0]}{first['label']}: {_max_r_text(first)}; {names[1]}{last['label']}: {text}",
            _all(ok_first, _at_least(lo, hi, BREAKS)))


@claim(4, "Shifting ALiBi's slopes: the steepest extrapolates, the flattest breaks (its perplexity at least doubles).",
       f"the most negative Δ extrapolates ({_EX}); the largest Δ has r({HORIZON} L_tr) >= {BREAKS:g} ({_LB})",
       ("table1",))
def _c4(res):
    return _stable_and_breaking(res, "slope_shift", ("", ""))


@claim(5, "One slope for every head: the largest slope extrapolates, the smallest breaks (its perplexity at least "
          "doubles).",
       f"the largest slope extrapolates ({_EX}); the smallest has r({HORIZON} L_tr) >= {BREAKS:g} ({_LB})",
       ("table1",))
def _c5(res):
    # slope 1/2^h: the largest slope is the smallest h
    return _stable_and_breaking(res, "same_slope", ("largest slope ", "smallest slope "))


@claim(6, "An ERF within L_tr predicts extrapolation.",
       f"ERF <= L_tr agrees with 'extrapolates' for at least {ERF_AGREEMENT:.0%} of the Table 1 models", ("table1",))
def _c6(res):
    t1 = _table(res, "table1")
    sub = t1[t1["extrapolates"].notna()] if "extrapolates" in t1.columns else t1.iloc[0:0]
    if sub.empty or "erf" not in sub.columns:
        raise Missing("Table 1 has no ERF or extrapolation results")
    predicted = erf_within_l_tr(sub)
    agree = (predicted == sub["extrapolates"].astype(bool))
    share = float(agree.mean())
    wrong = ", ".join(sub.loc[~agree, "label"].astype(str))
    return (f"{int(agree.sum())}/{len(sub)} models = {share:.0%}" + (f" (mispredicted: {wrong})" if wrong else ""),
            share >= ERF_AGREEMENT)


@claim(7, "Training on an L_tr that covers the ERF fixes the failures: the retrained models extrapolate.",
       f"every failing Table 1 model, retrained with a longer L_tr, extrapolates ({_EX}, same absolute L)",
       ("table2",))
def _c7(res):
    t2 = _table(res, "table2")
    if t2.empty:
        raise Missing("no Table 1 model failed, so nothing was retrained")
    parts, outcomes = [], []
    for _, row in t2.iterrows():
        horizon = HORIZON * int(row["old_l_tr"])
        if horizon <= int(row["l_tr"]):
            raise Missing(f"{row['label']}: Table 1's lengths end at {horizon} ({HORIZON} x its old L_tr), "
                          f"none beyond its new L_tr")
        outcomes.append(_extrap(row))
        before = erf_text(int(row["old_erf"]), row.get("old_erf_capped"))
        after = erf_text(int(row["erf"]), row.get("erf_capped")) if "erf" in row else "not measured"
        parts.append(f"{row['label']} (ERF {before} before, {after} after, new L_tr {int(row['l_tr'])}): "
                     f"{_max_r_text(row)}")
    return "; ".join(parts), _all(*outcomes)


@claim(8, "Sinusoidal breaks beyond L_tr (its perplexity at least doubles), and its gradient jumps at the "
          "absolute position L_tr.",
       f"r(4 L_tr) >= {BREAKS:g} ({_LB}), and the largest normalised gradient outside the most recent few tokens "
       f"sits within {JUMP_TOLERANCE:.0%} of the absolute position L_tr (every L_tr of the sweep)", ("figure7",))
def _c8(res):
    f7 = _table(res, "figure7")
    sin = f7[f7["pos"] == "sinusoidal"] if "pos" in f7.columns else f7.iloc[0:0]
    if sin.empty:
        raise Missing("no Sinusoidal model in Figure 7")
    default = sin[sin["default_l_tr"].astype(bool)] if "default_l_tr" in sin.columns else sin.iloc[0:0]
    if default.empty:
        raise Missing("no Sinusoidal model at the scale's L_tr")
    _, lo, hi, text = _r_at(default.iloc[0], 4)
    jumps, ok = [], True
    for _, row in sin.iterrows():
        if row.get("jump_ok") is None or (isinstance(row.get("jump_ok"), float) and math.isnan(row["jump_ok"])):
            raise Missing(f"no gradient curve for {row['label']}")
        ok &= bool(row["jump_ok"])
        jumps.append(f"L_tr={int(row['l_tr'])}: peak at position {int(row['jump_abs_pos'])}")
    return f"{text}; " + "; ".join(jumps), _all(_at_least(lo, hi, BREAKS), ok)


@claim(9, "Rotary breaks beyond L_tr: its perplexity at least doubles by 4 L_tr.", f"r(4 L_tr) >= {BREAKS:g} ({_LB})", ("figure7",))
def _c9(res):
    row = None
    if res.get("figure7") is not None and not isinstance(res["figure7"], Exception):
        f7 = res["figure7"]
        if "pos" in f7.columns and (f7["pos"] == "rotary").any():
            row = f7[f7["pos"] == "rotary"].iloc[0]
    if row is None:
        row = _row(_table(res, "table3"), "Rotary model", pos="rotary", corpus=res.get("corpus", "prose"))
    _, lo, hi, text = _r_at(row, 4)
    return f"Rotary: {text}", _at_least(lo, hi, BREAKS)


@claim(10, "Sandwich extrapolates and uses tokens beyond L_tr.",
       f"{_EX}, and min over L > L_tr of ppl(L) < ppl(L_tr)", ("table3",))
def _c10(res):
    row = _row(_table(res, "table3"), "Sandwich model", pos="sandwich", corpus=res.get("corpus", "prose"))
    ppl = row_ppl(row)
    l_tr = int(row["l_tr"])
    beyond = {L: p for L, p in ppl.items() if L > l_tr}
    if l_tr not in ppl or not beyond:
        raise Missing("Sandwich perplexity at L_tr or beyond not measured")
    e = _extrap(row)
    L, best = min(beyond.items(), key=lambda kv: kv[1])
    return (f"{_max_r_text(row)}; lowest ppl beyond L_tr {best:.2f} at L = {L} vs ppl(L_tr) {ppl[l_tr]:.2f} "
            f"(ratio {best / ppl[l_tr]:.4f})", _all(e, best < ppl[l_tr]))


@claim(11, f"Sandwich spreads its gradient beyond the last L_tr tokens (the paper: about "
              f"{paper.SANDWICH_SHARE_IN_LTR:.0%} inside).",
       f"between {SHARE_IN_LTR[0]:.0%} and {SHARE_IN_LTR[1]:.0%} of the cumulative gradient on the last L_tr tokens",
       ("figure11",))
def _c11(res):
    row = _row(_table(res, "figure11"), "Sandwich model", pos="sandwich")
    s = float(row["share_in_ltr"])
    return f"Sandwich: {s:.0%} of the cumulative gradient in the last L_tr tokens", SHARE_IN_LTR[0] <= s <= SHARE_IN_LTR[1]


@claim(12, f"Sandwich's bias is close to a log curve {LOG_FIT_TARGET[0]:g} log(1 + k) - {-LOG_FIT_TARGET[1]:g}.",
       f"least-squares fit a log(1 + k) + b: |a + {-LOG_FIT_TARGET[0]:g}| <= {LOG_FIT_TOL:g} and "
       f"|b + {-LOG_FIT_TARGET[1]:g}| <= {LOG_FIT_TOL:g}", ("log_fit",), CONSTRUCTION)
def _c12(res):
    fit = res.get("log_fit")
    if fit is None:
        raise Missing("log-curve fit not run")
    if isinstance(fit, Exception):
        raise Missing(f"log-curve fit failed: {fit}")
    a, b = float(fit["a"]), float(fit["b"])
    # 1e-12: a bound given in decimals must not fail on binary rounding (-0.845 + 0.825)
    ok = abs(a - LOG_FIT_TARGET[0]) <= LOG_FIT_TOL + 1e-12 and abs(b - LOG_FIT_TARGET[1]) <= LOG_FIT_TOL + 1e-12
    return f"a = {a:.3f}, b = {b:.3f}", ok


@claim(13, "A larger d_bar makes Sandwich window more strongly.",
       "a larger d_bar gives a more negative bias at every distance > 0 (every head)", ("d_bar",), CONSTRUCTION)
def _c13(res):
    curves = res.get("d_bar")
    if curves is None:
        raise Missing("d_bar curves not computed")
    if isinstance(curves, Exception):
        raise Missing(f"d_bar curves failed: {curves}")
    d_bars = sorted(curves)
    if len(d_bars) < 2:
        raise Missing("fewer than two d_bar values")
    # margin: bias(smaller d_bar) - bias(larger d_bar) at distances > 0; must be > 0 everywhere
    worst = None
    for lo, hi in zip(d_bars, d_bars[1:]):
        margin = np.asarray(curves[lo])[1:] - np.asarray(curves[hi])[1:]
        i = int(np.argmin(margin))
        if worst is None or margin[i] < worst[0]:
            worst = (float(margin[i]), lo, hi, i + 1)
    m, lo, hi, dist = worst
    n = len(curves[d_bars[0]]) - 1
    return (f"d_bar {', '.join(map(str, d_bars))} over distances 1..{n}: smallest margin {m:.3g} "
            f"(d_bar {lo} vs {hi} at distance {dist})", m > 0)


@claim(14, "On code, Sandwich beats the other parameter-free baselines beyond L_tr.",
       "ppl(X) / ppl(Sandwich) > 1 for X = Sinusoidal, Rotary and ALiBi at every L_ex > L_tr on the code corpus: "
       "the whole 95% interval of each ratio, paired over the same segments, above 1", ("table3",))
def _c14(res):
    t3 = _table(res, "table3")
    if "code" not in set(t3.get("corpus", [])):
        raise Missing("code corpus not in Table 3")
    code = t3[t3["corpus"] == "code"]
    sand_row = _row(code, "Sandwich on code", pos="sandwich")
    sand, l_tr = row_ppl(sand_row), int(sand_row["l_tr"])
    worst, outcomes = [], []
    for pos in ("sinusoidal", "rotary", "alibi"):
        other_row = _row(code, f"{pos} on code", pos=pos)
        Ls = [L for L in sand if L > l_tr and L in row_ppl(other_row)]
        if not Ls:
            raise Missing(f"no common L_ex > L_tr for Sandwich and {pos}")
        ratios = {L: _ppl_ratio(other_row, sand_row, L) for L in Ls}
        L = min(ratios, key=lambda k: ratios[k][1])  # the length where Sandwich's lead is least sure
        r, lo, hi = ratios[L]
        outcomes.append(True if lo > 1 else (False if hi < 1 else UNDECIDED))
        worst.append(f"{title(pos)} / Sandwich {r:.3f} [{lo:.3f}, {hi:.3f}] at L = {L}")
    return "smallest lead: " + "; ".join(worst), _all(*outcomes)


@claim(15, "The learnable KERPLE and T5 are better at L_ex = L_tr than the parameter-free schemes.",
       "ppl(KERPLE) and ppl(T5) < every parameter-free scheme's at L_tr, on each corpus: the whole 95% interval of "
       "each ratio learnable / parameter-free, paired over the same segments, below 1", ("table3",))
def _c15(res):
    t3 = _table(res, "table3")
    if t3.attrs.get("lacking_corpora"):
        raise Missing(f"Table 3 has no models on {', '.join(t3.attrs['lacking_corpora'])} yet")
    corpora = list(dict.fromkeys(t3["corpus"])) if "corpus" in t3.columns else []
    if not corpora:
        raise Missing("Table 3 is empty")
    parts, outcomes = [], []
    for c in corpora:
        sub = t3[t3["corpus"] == c]
        l_tr = int(sub["l_tr"].iloc[0])
        rows = {r["pos"]: r for _, r in sub.iterrows() if row_ppl(r).get(l_tr) is not None}
        free = {p: r for p, r in rows.items() if p in PARAMETER_FREE}
        learned = {p: r for p, r in rows.items() if p in LEARNED}
        if not free or len(learned) < len(LEARNED):
            raise Missing(f"Table 3 on {c} lacks parameter-free or learnable models")
        # each learnable scheme against every parameter-free one; shown: the pair least surely below 1
        pairs = {(p, q): _ppl_ratio(learned[p], free[q], l_tr) for p in learned for q in free}
        (p, q), (r, lo, hi) = max(pairs.items(), key=lambda kv: kv[1][2])
        outcomes += [True if h < 1 else (False if low > 1 else UNDECIDED) for _, low, h in pairs.values()]
        best = min(free, key=lambda k: row_ppl(free[k])[l_tr])
        parts.append(f"{c}: " + ", ".join(f"{title(k)} {row_ppl(v)[l_tr]:.2f}" for k, v in learned.items())
                     + f" vs best parameter-free {title(best)} {row_ppl(free[best])[l_tr]:.2f}; least favourable pair "
                     f"{title(p)} / {title(q)} {r:.3f} [{lo:.3f}, {hi:.3f}]")
    return "; ".join(parts), _all(*outcomes)


@claim(16, "T5 trains slower than Sandwich.",
       "T5 tokens/s < Sandwich tokens/s: the 95% interval of their ratio over interleaved rounds of training "
       "steps, timed side by side in one process, lies below 1", ("table3",))
def _c16(res):
    t3 = _table(res, "table3")
    corpus = res.get("corpus", "prose")
    t5 = _row(t3, f"T5 on {corpus}", pos="t5", corpus=corpus)
    sw = _row(t3, f"Sandwich on {corpus}", pos="sandwich", corpus=corpus)
    a, b = t5.get("tokens_per_s_rounds"), sw.get("tokens_per_s_rounds")
    if not isinstance(a, (list, tuple)) or not isinstance(b, (list, tuple)) or len(a) != len(b) or len(a) < 2:
        raise Missing("training speed not timed in paired rounds")
    ratio, lo, hi = speed_ratio(a, b)
    return (f"T5 / Sandwich tokens/s = {ratio:.3f} [{lo:.3f}, {hi:.3f}] over {len(a)} rounds "
            f"({ratio - 1:+.1%}) on {corpus}", True if hi < 1 else (False if lo >= 1 else UNDECIDED))


CLAIMS.sort(key=lambda c: c.id)
BY_ID = {c.id: c for c in CLAIMS}


def check(results: dict, ids=None) -> list[dict]:
    """Evaluate claims ``ids`` (default: all) on ``results`` (a dict of experiment tables:
    table1, table2, figure7, table3, figure11, log_fit, d_bar; plus ``corpus``)."""
    rows = []
    for cid in ids or [c.id for c in CLAIMS]:
        claim = BY_ID[int(cid)]
        try:
            measured, passed = claim.check(results)
            passed = passed if passed == UNDECIDED else bool(passed)
        except Missing as why:
            measured, passed = f"not run: {why}", None
        rows.append({"id": claim.id, "statement": claim.statement, "criterion": claim.criterion,
                     "measured": measured, "paper": claim.paper, "evidence": claim.evidence, "passed": passed,
                     "result": _result(passed)})
    return rows


def _result(passed) -> str:
    if passed is None:
        return "not run"
    return "not decided" if passed == UNDECIDED else ("pass" if passed else "fail")


# --------------------------------------------------------------------------------------
# the results the claims read
# --------------------------------------------------------------------------------------
def log_fit() -> dict:
    """The least-squares log-curve fit of the Sandwich bias (Section 7): d_bar = 128, one
    head with h_c = 8, distances 0..8191 (rflens.analysis)."""
    from .analysis import sandwich_log_fit

    return sandwich_log_fit()


def d_bar_curves(scale) -> dict:
    """{d_bar: Sandwich bias of one head (h_c = 8) at distances 0 .. 16 L_tr - 1} for the
    d_bar sweep of the scale (Figure 10). A positive compression ratio only rescales the
    bias, so one head decides the sign of every difference."""
    from .analysis import sandwich_by_d_bar

    sc = ex.get_scale(scale)
    return sandwich_by_d_bar(ex.d_bar_values(sc), compression=paper.SANDWICH_COMPRESSION, length=HORIZON * sc.train.l_tr)


def gather(scale: str, corpus: str = "prose", *, compute: bool = True, progress: bool = True) -> dict:
    """Every experiment table the claims read. With compute=False nothing is trained: a
    model missing from the run store leaves its experiment "not run". An experiment that
    fails is kept as its exception, so the claims that need it say why."""
    res: dict = {"corpus": corpus}
    steps = {
        "table1": lambda: ex.table1(scale, corpus, progress=progress, train=compute),
        "table2": lambda: ex.table2(scale, corpus, t1=res["table1"], progress=progress, train=compute),
        "figure7": lambda: ex.figure7(scale, corpus, progress=progress, train=compute),
        # a shipped preset trains nothing: its Table 3 is read over the corpora it holds
        "table3": lambda: (ex.table3(scale, progress=progress) if compute and not ex.get_scale(scale).shipped
                           else ex.table3_stored(scale, progress=progress)),
        "figure11": lambda: ex.figure11(scale, corpus, progress=progress, train=compute),
        "log_fit": log_fit,
        "d_bar": lambda: d_bar_curves(scale),
    }
    for key, fn in steps.items():
        if key == "table2" and not isinstance(res.get("table1"), pd.DataFrame):
            res[key] = None
            continue
        try:
            res[key] = fn()
        except Missing:
            res[key] = None
        except (UserError, ImportError, FileNotFoundError) as err:  # not run: missing model, module or data
            res[key] = None if not compute else err
            print(f"claims: {key} not run: {err}", file=sys.stderr)
    return res
