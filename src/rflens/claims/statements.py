"""The sixteen claims of Chi et al. (ACL 2023), each declared beside the check that tests it.

Each claim tests one sentence of the paper, and states it once, in its ``@claim``
declaration: ``sentence`` (the paper's words, quoted, and where they stand; shown in
chapter 9), ``statement`` (the claim in our words), ``criterion`` (how this book reads the
sentence, never re-tuned to the numbers a scale happens to give), ``paper`` (what the paper
reports) and ``short`` (the claim in a few words). The check below it is named for what it
checks, and its docstring says how it reads the sentence. Where a criterion was reworded to
follow its sentence more closely, the earlier check is kept in :mod:`rflens.claims.legacy`
and the board shows both verdicts. Notation: r(L) = ppl(L) / ppl(L_tr) with the last-token
protocol; a model "extrapolates" when r(L) <= 1.10 for every measured L_tr < L <= 16 L_tr
(:func:`rflens.measure.criterion.extrapolates`).

Several comparisons, one verdict: a claim that reads k intervals (several lengths, pairs of
schemes or corpora) decides on intervals widened from 95% to 1 - 0.05 / k
(Bonferroni, :func:`rflens.claims.outcomes.simultaneous`), so that all k hold together with 95%
probability whatever the verdict; every claim is treated alike, and the board shows k.

The thresholds are the constants below, from which the criterion texts are formatted. Each
check reads the tables of :func:`rflens.claims.gather.gather` (a dict of results, so the
checks can be tested on synthetic tables) through :mod:`rflens.claims.rows`, and returns the
measured figure as text, its outcome (:mod:`rflens.claims.outcomes`: True, False or
``UNDECIDED``) and the number of intervals the verdict reads; it raises ``Missing`` when the
data it needs was not produced. :mod:`rflens.claims.verdicts` turns these into the board's
rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from rflens import paper
from rflens.setup import presets
from rflens.claims.legacy import LEGACY
from rflens.claims.outcomes import LEVEL, Missing, all_of, at_least, straddles
from rflens.claims.rows import (alibi_row, extrapolates_row, family_rows, learned_and_free, lengths_beyond,
    paper_sinusoidal, ppl_ratio, r_at, r_at_length, row_of, table_of)
from rflens.experiments.speed import speed_ratio
from rflens.measure.columns import lengths_of, row_ppl
from rflens.measure.criterion import (BREAKS, ERF_AGREEMENT, EXTRAPOLATION_HORIZON, EXTRAPOLATION_TOLERANCE, breaks_level,
    erf_text,
    erf_within_l_tr, extrapolates, tol_level)
from rflens.measure.receptive import step_at_l_tr
from rflens.setup.presets import mapped_windows
from rflens.setup.schemes import TABLE3_LEARNABLE, TABLE3_PARAMETER_FREE, title


# The thresholds of the criteria, each written once: the checks compare against these and
# the criterion texts are formatted from them.
TOL = EXTRAPOLATION_TOLERANCE  # "extrapolates": r(L) <= 1.10 up to 16 L_tr
HORIZON = EXTRAPOLATION_HORIZON
RISES = 1.01  # "rises": r(L) >= 1.01 (claim 3)
# claim 11: "about 60%" is stated to one significant figure, so 10 percentage points is the
# finest difference the sentence resolves: the band around 60%, and the least gap that makes
# Sandwich's share distinct from ALiBi's and the windows'
SHARE_RESOLUTION = 0.10
LOG_FIT_TARGET = paper.SMOOTHED_SANDWICH  # the paper's smoothed Sandwich: a * log(1 + k) + b
LOG_FIT_TOL = 0.02
PARAMETER_FREE = TABLE3_PARAMETER_FREE
LEARNED = TABLE3_LEARNABLE
BASELINES = ("sinusoidal", "rotary", "alibi")  # claim 14: the parameter-free baselines of Table 3's left part
ARXIV_AND_GITHUB = ("code", "math")  # claim 14: the paper's GitHub and ArXiv (rflens.setup.presets: corpora)
_SIM = f"every interval the verdict reads widened so that all hold together with {LEVEL:.0%} probability"
_EX = f"r(L) <= {TOL:.2f} for every L up to {HORIZON} L_tr, upper bound of its paired interval"
_LB = "lower bound of its paired interval"


# What a claim's verdict rests on: models trained and measured, or a property the scheme has
# by construction (a closed form of the bias, or a window whose field fits in L_tr, which
# cannot see past it), which holds at any scale and is counted apart on the board.
TRAINED, CONSTRUCTION = "trained models", "by construction"
THESIS_CLAIM = 6  # the paper's central claim: the receptive field explains extrapolation


@dataclass(frozen=True)
class Claim:
    id: int
    statement: str  # the paper's claim, in our words
    criterion: str  # the fixed test of the sentence
    needs: tuple  # result keys the check reads
    check: Callable[[dict], tuple]
    evidence: str = TRAINED  # TRAINED or CONSTRUCTION
    sentence: str = ""  # the paper's words the claim tests, quoted, and where they stand
    # What the paper itself reports (its tables' numbers are not reproduced here: the models
    # differ in size; these are the findings and the values it states), shown beside the
    # measurement on the board
    paper: str = ""
    short: str = ""  # the claim in a few words, in the paper's values (the first screen, the compact board)

    @property
    def legacy_criterion(self) -> str | None:
        """The earlier criterion, for a claim whose criterion was reworded (else None)."""
        return LEGACY[self.id][0] if self.id in LEGACY else None


CLAIMS: list[Claim] = []  # in the order of the paper, filled by @claim


def claim(cid: int, statement: str, criterion: str, needs: tuple, evidence: str = TRAINED, *, sentence: str,
          paper: str, short: str):
    """Declare the check below it as claim ``cid``: its statement, its criterion, the paper's
    sentence it tests, what the paper reports and the claim in a few words (the check's
    docstring says how it reads the sentence)."""
    def add(check):
        CLAIMS.append(Claim(cid, statement, criterion, needs, check, evidence, sentence, paper, short))
        return check

    return add


def _max_r_text(row) -> str:
    return f"max r = {float(row['max_r']):.2f}"


# --------------------------------------------------------------------------------------
# the sixteen checks
# --------------------------------------------------------------------------------------
@claim(1, "Windowed attention extrapolates for every window up to the paper's w = 100.",
       f"every window of the sweep that maps inside the paper's w <= {paper.WINDOW_STABLE} "
       f"(mapped to the preset's depth and L_tr with the same R w / L_tr) extrapolates: {_EX}; {_SIM}", ("table1",),
       sentence="\"windowed attention models are extrapolatable up to $w=100$\" (Section 3)",
       paper="w <= 100 extrapolate (12 layers, L_tr = 512)",
       short=f"windows up to w = {paper.WINDOW_STABLE} extrapolate")
def small_windows_extrapolate(res):
    """Read as: every window of the sweep at or below the paper's w = 100, mapped to this depth
    and L_tr (:func:`rflens.setup.presets.mapped_windows` keeps R w / L_tr), stays flat. Not
    by construction: a window whose field R (w - 1) + 1 fits in L_tr cannot see past it (the
    smallest, at the tiny presets), but the mapped w = 80 and 100 reach beyond L_tr."""
    fam = family_rows(res, "window")
    inside = _stable_windows(fam)
    k = sum(len(lengths_beyond(r)) for _, r in inside.iterrows())
    parts, outcomes = [], []
    for _, row in inside.iterrows():
        outcomes.append(extrapolates_row(row, k))
        worst = max(lengths_beyond(row), key=lambda L: r_at_length(row, L, k=k)[2])
        parts.append(f"{row['label']}: {r_at_length(row, worst, k=k)[3]} (the largest upper bound)")
    return "; ".join(parts) + f" (limit {TOL})", all_of(*outcomes), k


def _stable_windows(fam: pd.DataFrame) -> pd.DataFrame:
    """The rows of a window sweep whose w maps inside the paper's w <= WINDOW_STABLE: w at
    most the mapped WINDOW_STABLE (at a depth R read from the rows' R w, ``theoretical``)."""
    if "theoretical" not in fam.columns or fam["theoretical"].isna().any():
        raise Missing("the window rows carry no theoretical field R·w, so their depth is unknown")
    n_layer = int(round(float(fam["theoretical"].iloc[0]) / float(fam["value"].iloc[0])))
    l_tr = int(fam["l_tr"].iloc[0])
    mapped = mapped_windows((paper.WINDOW_STABLE,), n_layer, l_tr)
    limit = mapped[0] if mapped else l_tr  # wider than L_tr: every window of the sweep is inside
    inside = fam[fam["value"].astype(float) <= limit]
    if inside.empty:
        raise Missing(f"no window of the sweep maps inside the paper's w <= {paper.WINDOW_STABLE} (w <= {limit} here)")
    return inside


@claim(2, "Windowed attention with a large window breaks beyond L_tr: its perplexity at least doubles.",
       f"the largest w of the sweep has r({HORIZON} L_tr) >= {BREAKS:g} ({_LB})", ("table1",),
       sentence="\"diverges on long $L_{ex}$ at large $w$\" (Section 3)",
       paper=(f"w >= 120 diverge; ERF {' / '.join(map(str, paper.WINDOW_ERF.values()))} for "
             f"w = {' / '.join(map(str, paper.WINDOW_ERF))}"),
       short="the widest window of the sweep breaks")
def large_window_breaks(res):
    """Read as: the largest window of the sweep (the paper's 320 or its largest mapped one) at
    least doubles its perplexity by 16 L_tr. One interval. Not by construction."""
    row = family_rows(res, "window").iloc[-1]
    r, lo, hi, text = r_at(row, HORIZON)
    return f"{row['label']}: {text}", at_least(lo, hi, breaks_level(), r), 1


@claim(3, "ALiBi itself is not flat beyond L_tr: its perplexity rises at every L_ex > L_tr.",
       f"ALiBi (the paper's Δ = 0, mapped to this L_tr): r(L) >= {RISES:g} at every L_tr < L <= {HORIZON} L_tr "
       f"({_LB}); {_SIM}", ("table1",),
       sentence="\"ALiBi does not in fact extrapolate since its perplexities all increase instead of staying the "
                "same when $L_{ex}>L_{tr}$\" (Section 3)",
       paper="ALiBi's perplexity rises beyond L_tr",
       short="ALiBi's perplexity rises beyond L_tr")
def alibi_rises_beyond_l_tr(res):
    """Read as: at every measured L_tr < L <= 16 L_tr, r(L) >= 1.01 for ALiBi as the paper
    trains it (:func:`alibi_row` says which model and why). "All increase" is every length,
    not some. Fails when one length's upper bound stays below 1.01. Not by construction."""
    row, _ = alibi_row(res)
    Ls = lengths_beyond(row)
    if not Ls:
        raise Missing("no L > L_tr measured for ALiBi")
    k = len(Ls)
    bounds = {L: r_at_length(row, L, k=k) for L in Ls}
    outcome = all_of(*(at_least(lo, hi, RISES, r) for r, lo, hi, _ in bounds.values()))
    L = min(bounds, key=lambda n: bounds[n][1])  # the length least surely risen
    name = row["label"] if str(row["label"]).startswith("ALiBi") else f"ALiBi {row['label']}"
    return f"{name}: {bounds[L][3]} at L = {L}, the smallest lower bound", outcome, k


def _stable_and_breaking(res, family: str, names: tuple[str, str]):
    """The two ends of a Table 1 sweep (sorted by value): the first must extrapolate, the
    last must break at 16 L_tr. Its intervals: the first's lengths and the last's one."""
    fam = family_rows(res, family)
    first, last = fam.iloc[0], fam.iloc[-1]
    k = len(lengths_beyond(first)) + 1
    ok_first, (r, lo, hi, text) = extrapolates_row(first, k), r_at(last, HORIZON, k)
    return (f"{names[0]}{first['label']}: {_max_r_text(first)}; {names[1]}{last['label']}: {text}",
            all_of(ok_first, at_least(lo, hi, breaks_level(), r)), k)


@claim(4, "Shifting ALiBi's slopes: the steepest extrapolates, the flattest breaks (its perplexity at least doubles).",
       f"the most negative Δ extrapolates ({_EX}); the largest Δ has r({HORIZON} L_tr) >= {BREAKS:g} ({_LB}); {_SIM}",
       ("table1",),
       sentence="\"the $\\Delta=-3$ model ... its perplexity plateaus the soonest\"; \"For $\\Delta\\in[6,8]$ models "
                "... resulting in exploded perplexities\" (Section 4)",
       paper="Δ = -3 plateaus soonest (ERF 768); Δ = 6 and 8 explode",
       short=f"Δ = {min(paper.SLOPE_SHIFT)} plateaus, Δ = {max(paper.SLOPE_SHIFT)} explodes")
def steepest_shift_flat_flattest_breaks(res):
    """Read as: the steepest shift stays flat, the flattest at least doubles by 16 L_tr. Not by
    construction."""
    return _stable_and_breaking(res, "slope_shift", ("", ""))


@claim(5, "One slope for every head: the largest slope extrapolates, the smallest breaks (its perplexity at least "
          "doubles).",
       f"the largest slope extrapolates ({_EX}); the smallest has r({HORIZON} L_tr) >= {BREAKS:g} ({_LB}); {_SIM}",
       ("table1",),
       sentence="\"only large slopes ($\\frac{1}{2^{h}}$), or equivalently small $h$, allow a model to extrapolate "
                "well\" (Section 3)",
       paper="only the large slopes (small h) extrapolate",
       short="only large shared slopes extrapolate")
def largest_slope_flat_smallest_breaks(res):
    """Read as: the largest slope of the sweep stays flat and the smallest at least doubles by
    16 L_tr. Not by construction."""
    # slope 1/2^h: the largest slope is the smallest h
    return _stable_and_breaking(res, "same_slope", ("largest slope ", "smallest slope "))


@claim(6, "An ERF within L_tr predicts extrapolation.",
       f"ERF <= L_tr agrees with 'extrapolates' for at least {ERF_AGREEMENT:.0%} of the Table 1 models (a count of "
       f"models, each read as its table does; no interval is compared with a threshold)", ("table1",),
       sentence="\"Since $L_{tr}=512$ does not fully cover their ERFs, they fail to extrapolate well\" (Section 4)",
       paper="the ERF explains which Table 1 models extrapolate",
       short="an ERF within L_tr predicts extrapolation")
def erf_predicts_extrapolation(res):
    """Read as: the prediction "ERF <= L_tr" agrees with each Table 1 model's "extrapolates"
    for at least 80% of them. A count, not an interval: k = 0. Not by construction."""
    t1 = table_of(res, "table1")
    sub = t1[t1["extrapolates"].notna()] if "extrapolates" in t1.columns else t1.iloc[0:0]
    if sub.empty or "erf" not in sub.columns:
        raise Missing("Table 1 has no ERF or extrapolation results")
    predicted = erf_within_l_tr(sub)
    flat = sub["extrapolates"].astype(bool)
    if tol_level() != TOL:  # under another level (criterion.levels) each model is read again from its r columns
        flat = sub.apply(lambda row: bool(extrapolates(row_ppl(row), int(row["l_tr"]), upper={
            L: float(row[f"r_hi@{L}"]) for L in lengths_of(pd.DataFrame([row]), "r_hi") if not pd.isna(row[f"r_hi@{L}"])}
            or None)), axis=1)
    agree = (predicted == flat)
    share = float(agree.mean())
    # a miss named with the share of its gradient within L_tr: how near its ERF came to L_tr
    wrong = ", ".join(f"{row['label']}" + (f" with {float(row['share_in_ltr']):.1%} of its gradient within L_tr"
                                           if not pd.isna(row.get("share_in_ltr", float("nan"))) else "")
                      for _, row in sub.loc[~agree].iterrows())
    return (f"{int(agree.sum())}/{len(sub)} models = {share:.0%}" + (f" (mispredicted: {wrong})" if wrong else ""),
            share >= ERF_AGREEMENT, 0)


@claim(7, "Training on an L_tr that covers the ERF fixes the failures: the retrained models extrapolate.",
       f"every failing Table 1 model, retrained with a longer L_tr, extrapolates ({_EX}, same absolute L); {_SIM}",
       ("table2",),
       sentence="\"Table 2 shows that both are now able to maintain stable perplexities\" (Section 4)",
       paper="w = 160 at L_tr = 1024 and Δ = 6 at L_tr = 2048 become stable",
       short="an L_tr that covers the ERF fixes a failure (Table 2)")
def retrained_models_extrapolate(res):
    """Read as: every retrained model stays flat over the lengths beyond its new L_tr. Not by
    construction."""
    t2 = table_of(res, "table2")
    if t2.empty:
        raise Missing("no Table 1 model failed, so nothing was retrained")
    for _, row in t2.iterrows():
        horizon = HORIZON * int(row["old_l_tr"])
        if horizon <= int(row["l_tr"]):
            raise Missing(f"{row['label']}: Table 1's lengths end at {horizon} ({HORIZON} x its old L_tr), "
                          f"none beyond its new L_tr")
    k = sum(len(lengths_beyond(row)) for _, row in t2.iterrows())
    parts, outcomes = [], []
    for _, row in t2.iterrows():
        outcomes.append(extrapolates_row(row, k))
        before = erf_text(int(row["old_erf"]), row.get("old_erf_capped"))
        after = erf_text(int(row["erf"]), row.get("erf_capped")) if "erf" in row else "not measured"
        drawn = (f", on all {int(row['n_docs'])} test documents" if row.get("draw") == "documents"
                 and not pd.isna(row.get("n_docs", float("nan"))) else "")
        parts.append(f"{row['label']} (ERF {before} before, {after} after, new L_tr {int(row['l_tr'])}{drawn}): "
                     f"{_max_r_text(row)}")
    return "; ".join(parts), all_of(*outcomes), k


@claim(8, "Sinusoidal breaks beyond L_tr (its perplexity at least doubles), and its gradient jumps at the "
          "absolute position L_tr.",
       f"r(4 L_tr) >= {BREAKS:g} ({_LB}); and, at every L_tr of the sweep, the normalised gradient's step from the "
       f"L_tr-th token to the next exceeds every step within L_tr / 2 on both sides ("
       f"the stored gradient is a mean over segments, so the jump has no interval); read on the Sinusoidal models "
       f"trained as the paper's code trains them (embeddings unscaled) where a run has them", ("figure7",),
       sentence="\"Sinusoidal focuses on the 512-th token when $L_{tr}=512$ and the 128-th token when "
                "$L_{tr}=128$ as indicated by the sudden jump on their normalized gradient plots\" (Section 5)",
       paper="the gradient jumps at the absolute position L_tr (512 at L_tr = 512, 128 at L_tr = 128)",
       short="Sinusoidal's gradient jumps at L_tr")
def sinusoidal_jumps_at_l_tr(res):
    """Read as: r(4 L_tr) at least doubles (Section 5 calls Sinusoidal "non-extrapolatable"),
    and at each L_tr the gradient jumps at the absolute position L_tr: the step there is
    larger than any step around it (:func:`rflens.measure.receptive.step_at_l_tr`). Not by
    construction."""
    sin = paper_sinusoidal(table_of(res, "figure7"))
    if sin.empty:
        raise Missing("no Sinusoidal model in Figure 7")
    default = sin[sin["default_l_tr"].astype(bool)] if "default_l_tr" in sin.columns else sin.iloc[0:0]
    if default.empty:
        raise Missing("no Sinusoidal model at the scale's L_tr")
    r, lo, hi, text = r_at(default.iloc[0], 4)
    jumps, outcomes = [], []
    for _, row in sin.iterrows():
        curve = row.get("normalized")
        if not isinstance(curve, (list, tuple, np.ndarray)):
            raise Missing(f"no gradient curve for {row['label']}")
        s = step_at_l_tr(curve, int(row["l_tr"]))
        if s["jump"] is None:
            raise Missing(f"the gradient curve of {row['label']} ends before L_tr")
        outcomes.append(s["jump"])
        jumps.append(f"L_tr = {int(row['l_tr'])}: step at L_tr {s['step']:.4f} vs largest neighbour "
                     f"{s['neighbour_step']:.4f}")
    return f"{text}; " + "; ".join(jumps), all_of(at_least(lo, hi, breaks_level(), r), *outcomes), 1


@claim(9, "Rotary breaks beyond L_tr: its perplexity at least doubles by 4 L_tr.", f"r(4 L_tr) >= {BREAKS:g} ({_LB})",
       ("figure7",), sentence="\"the non-extrapolatable Sinusoidal and Rotary positional embeddings\" (Section 5)",
       paper="Rotary does not keep its gradient on the last L_tr tokens and does not extrapolate",
       short="Rotary does not extrapolate")
def rotary_breaks(res):
    """Read as: Rotary's perplexity at least doubles by 4 L_tr. One interval. Not by
    construction."""
    row = None
    if res.get("figure7") is not None and not isinstance(res["figure7"], Exception):
        f7 = res["figure7"]
        if "pos" in f7.columns and (f7["pos"] == "rotary").any():
            row = f7[f7["pos"] == "rotary"].iloc[0]
    if row is None:
        row = row_of(table_of(res, "table3"), "Rotary model", pos="rotary", corpus=res.get("corpus", "prose"))
    r, lo, hi, text = r_at(row, 4)
    return f"Rotary: {text}", at_least(lo, hi, breaks_level(), r), 1


def _corpora(t3: pd.DataFrame, want=None) -> list[str]:
    """The corpora of Table 3 a claim reads (``want``: those it names), Missing when one is
    lacking: a claim about several corpora is not decided on part of them."""
    lacking = list(t3.attrs.get("lacking_corpora") or [])
    have = list(dict.fromkeys(t3["corpus"])) if "corpus" in t3.columns else []
    if want is not None:
        lacking += [c for c in want if c not in have and c not in lacking]
        have = [c for c in have if c in want]
    if lacking:
        raise Missing(f"Table 3 lacks models on {', '.join(lacking)} yet")
    if not have:
        raise Missing("Table 3 is empty")
    return have


@claim(10, "Sandwich uses tokens beyond L_tr: on every corpus its perplexity goes below ppl(L_tr) at some longer L_ex.",
       f"on each corpus of Table 3: r(L) < 1 at some L_tr < L <= {HORIZON} L_tr (upper bound of its paired interval "
       f"below 1; fails when every lower bound is >= 1); {_SIM}", ("table3",),
       sentence="\"Sandwich is the first parameter-free RPE that truly makes use of distant token information beyond "
                "$L_{tr}=512$. To see this, notice that lower (better) perplexities occur at $L_{ex}>L_{tr}=512$\" "
                "(Section 6, on Table 3's three datasets)",
       paper="Sandwich reaches a lower perplexity at some L_ex > L_tr",
       short="Sandwich is lower beyond L_tr")
def sandwich_lower_beyond_l_tr(res):
    """Read as: on every corpus, r(L) < 1 at some L beyond L_tr, decided on the paired
    interval. Whether Sandwich also stays flat up to 16 L_tr is not part of the sentence
    (the paper says its perplexity rises again after some L_ex, 4096 on ArXiv): the earlier
    criterion asked it, this one does not. Not by construction."""
    t3 = table_of(res, "table3")
    corpora = _corpora(t3)
    rows = {c: row_of(t3[t3["corpus"] == c], f"Sandwich on {c}", pos="sandwich") for c in corpora}
    k = sum(len(lengths_beyond(r)) for r in rows.values())
    if not k:
        raise Missing("Sandwich perplexity beyond L_tr not measured")
    parts, outcomes = [], []
    for c, row in rows.items():
        bounds = {L: r_at_length(row, L, k=k) for L in lengths_beyond(row)}
        L = min(bounds, key=lambda n: bounds[n][2])  # the length most surely below ppl(L_tr)
        lower = True if bounds[L][2] < 1 else (False if all(lo >= 1 for _, lo, _, _ in bounds.values())
                                                else straddles(bounds[L][1], bounds[L][2], 1, bounds[L][0], above=False))
        outcomes.append(lower)
        parts.append(f"{c}: lowest {bounds[L][3]} at L = {L}")
    return "; ".join(parts), all_of(*outcomes), k


@claim(11, f"Sandwich's receptive field is distinct from ALiBi's and the windows': about "
           f"{paper.SANDWICH_SHARE_IN_LTR:.0%} of its gradient inside L_tr, the rest beyond.",
       f"Sandwich's share of the cumulative gradient on the last L_tr tokens is within {SHARE_RESOLUTION:.0%} points "
       f"of {paper.SANDWICH_SHARE_IN_LTR:.0%}, and at least {SHARE_RESOLUTION:.0%} points below the share of ALiBi "
       f"(the paper's Δ = 0) and of every window that maps inside w <= {paper.WINDOW_STABLE} (the stored gradient is "
       f"a mean over segments: no interval)", ("figure11", "table1"),
       sentence="\"a receptive field pattern distinct from that of ALiBi and windowed attention. Even though Sandwich "
                "allocates about 60% of the total cumulative gradient on the most recent $L_{tr}=512$ tokens, distant "
                "tokens beyond $L_{tr}$ still contribute substantially\" (Section 6, Figure 11)",
       paper=f"about {paper.SANDWICH_SHARE_IN_LTR:.0%} of the cumulative gradient on the last L_tr tokens",
       short=f"Sandwich keeps about {paper.SANDWICH_SHARE_IN_LTR:.0%} of its gradient within L_tr")
def sandwich_share_within_l_tr(res):
    """Read as two parts, both at the resolution of "about 60%" (one significant figure: 10
    points): Sandwich's share inside L_tr is 50-70%, and it is at least 10 points below the
    share of ALiBi as the paper trains it (:func:`alibi_row`) and of each window the paper
    calls extrapolating (w <= 100, mapped), so that tokens beyond L_tr carry distinctly more
    of Sandwich's gradient. ALiBi and the windows come from Table 1, measured on segments of
    the same length. The stored receptive field is a mean over its segments, so no interval
    can be read: the check has no undecided outcome. Not by construction."""
    sand = float(row_of(table_of(res, "figure11"), "Sandwich model", pos="sandwich")["share_in_ltr"])
    alibi, _ = alibi_row({"table1": table_of(res, "table1")})
    others = [alibi] + [r for _, r in _stable_windows(family_rows(res, "window")).iterrows()]
    shares = {str(r["label"]): float(r["share_in_ltr"]) for r in others}
    about = abs(sand - paper.SANDWICH_SHARE_IN_LTR) <= SHARE_RESOLUTION + 1e-12
    distinct = all(s - sand >= SHARE_RESOLUTION - 1e-12 for s in shares.values())
    return (f"Sandwich {sand:.0%} in the last L_tr tokens; " + ", ".join(f"{k} {v:.0%}" for k, v in shares.items()),
            about and distinct, 0)


@claim(12, f"Sandwich's bias is close to a log curve {LOG_FIT_TARGET[0]:g} log(1 + k) - {-LOG_FIT_TARGET[1]:g}, "
           f"fitted over the {paper.LOG_FIT_RECENT} most recent distances.",
       f"least-squares fit a log(1 + k) + b to Sandwich (d_bar = {paper.SANDWICH_D_BAR}, h = 8) over the distances "
       f"k = 0..{paper.LOG_FIT_RECENT - 1}: |a + {-LOG_FIT_TARGET[0]:g}| <= {LOG_FIT_TOL:g} and "
       f"|b + {-LOG_FIT_TARGET[1]:g}| <= {LOG_FIT_TOL:g} (the fit over 0..{paper.LOG_FIT_LENGTH - 1} shown beside it)",
       ("log_fit",), CONSTRUCTION,
       sentence="\"$y=-0.825\\cdot\\log\\left(1+|m-n|\\right)-0.8$\"; footnote 7: \"we fit the curve using the most "
                "recent 50 points of Sandwich\" (Section 7)",
       paper=f"{LOG_FIT_TARGET[0]:g} log(1 + k) - {-LOG_FIT_TARGET[1]:g}",
       short=f"the footnote's {paper.LOG_FIT_RECENT}-distance fit gives the paper's log curve")
def sandwich_is_a_log_curve(res):
    """Read as the footnote describes the fit: distances 0..49 of the bias of Figure 9 (d_bar =
    128, h = 8). The fit over every distance 0..8191 is shown beside it, with which of the
    two yields the paper's constants. By construction: a closed form, at any scale."""
    fit = res.get("log_fit")
    if fit is None:
        raise Missing("log-curve fit not run")
    if isinstance(fit, Exception):
        raise Missing(f"log-curve fit failed: {fit}")
    recent = fit.get("recent")
    if recent is None:
        raise Missing(f"no fit over the {paper.LOG_FIT_RECENT} most recent distances")

    def near(f):  # 1e-12: a bound given in decimals must not fail on binary rounding (-0.845 + 0.825)
        return (abs(float(f["a"]) - LOG_FIT_TARGET[0]) <= LOG_FIT_TOL + 1e-12
                and abs(float(f["b"]) - LOG_FIT_TARGET[1]) <= LOG_FIT_TOL + 1e-12)

    yields = [name for name, f in ((f"0..{paper.LOG_FIT_RECENT - 1}", recent), ("the whole range", fit)) if near(f)]
    return (f"over k = 0..{paper.LOG_FIT_RECENT - 1}: a = {float(recent['a']):.3f}, b = {float(recent['b']):.3f}; over "
            f"the whole range: a = {float(fit['a']):.3f}, b = {float(fit['b']):.3f}; the paper's constants come from "
            + (" and ".join(yields) if yields else "neither"), near(recent), 0)


@claim(13, "A larger d_bar makes Sandwich window more strongly.",
       "a larger d_bar gives a more negative bias at every distance > 0 (every head)", ("d_bar",), CONSTRUCTION,
       sentence="\"A larger $\\bar{d}$ leads to a stronger windowed attention effect as shown in Figure 10\" "
                "(Section 6)",
       paper="a larger d_bar windows more strongly (Figure 10)",
       short="a larger d_bar windows more strongly")
def larger_d_bar_windows_more(res):
    """Read as: the bias of a larger d_bar is lower at every distance > 0. By construction: a
    closed form, at any scale."""
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
            f"(d_bar {lo} vs {hi} at distance {dist})", m > 0, 0)


@claim(14, "On GitHub and ArXiv (code and math here), Sandwich beats every parameter-free baseline beyond L_tr.",
       "ppl(X) / ppl(Sandwich) > 1 for X = Sinusoidal, Rotary and ALiBi at every L_ex > L_tr on the code and the math "
       f"corpora: the interval of each ratio, paired over the same segments, above 1; {_SIM}", ("table3",),
       sentence="\"On ArXiv and GitHub, it is consistently better than all the baselines\" (Section 6)",
       paper="Sandwich beats every parameter-free baseline on ArXiv and GitHub beyond L_tr",
       short="Sandwich beats the parameter-free schemes on code and math")
def sandwich_beats_baselines_on_code_and_math(res):
    """Read as: on both corpora (code for GitHub, math for ArXiv) and at every L_ex > L_tr,
    each parameter-free baseline's perplexity over Sandwich's is above 1. Not by
    construction."""
    t3 = table_of(res, "table3")
    corpora = _corpora(t3, ARXIV_AND_GITHUB)
    pairs = []
    for c in corpora:
        sub = t3[t3["corpus"] == c]
        sand_row = row_of(sub, f"Sandwich on {c}", pos="sandwich")
        sand, l_tr = row_ppl(sand_row), int(sand_row["l_tr"])
        for pos in BASELINES:
            other_row = row_of(sub, f"{pos} on {c}", pos=pos)
            Ls = [L for L in sand if L > l_tr and L in row_ppl(other_row)]
            if not Ls:
                raise Missing(f"no common L_ex > L_tr for Sandwich and {pos} on {c}")
            pairs += [(c, pos, L, other_row, sand_row) for L in Ls]
    k = len(pairs)
    ratios = {(c, pos, L): ppl_ratio(o, s, L, k) for c, pos, L, o, s in pairs}
    outcomes = [True if lo > 1 else (False if hi < 1 else straddles(lo, hi, 1, r)) for r, lo, hi in ratios.values()]
    worst = []
    for c in corpora:  # per corpus and baseline: the length where Sandwich's lead is least sure
        for pos in BASELINES:
            key = min((key for key in ratios if key[:2] == (c, pos)), key=lambda key: ratios[key][1])
            r, lo, hi = ratios[key]
            worst.append(f"{c}: {title(pos)} / Sandwich {r:.3f} [{lo:.3f}, {hi:.3f}] at L = {key[2]}")
    return "smallest lead: " + "; ".join(worst), all_of(*outcomes), k


@claim(15, "The learnable KERPLE and T5 are better at L_ex = L_tr than the parameter-free schemes.",
       "ppl(KERPLE) and ppl(T5) < every parameter-free scheme's at L_tr, on each corpus: the interval of each ratio "
       f"learnable / parameter-free, paired over the same segments, below 1; {_SIM}", ("table3",),
       sentence="\"models on the right achieve lower perplexities across the three datasets\" (Section 6)",
       paper="KERPLE and T5 are lower at L_ex = L_tr",
       short="KERPLE and T5 are lower at L_tr")
def learnable_lower_at_l_tr(res):
    """Read at L_ex = L_tr, the one length where every model is inside its training window:
    each learnable model below each parameter-free one, on every corpus. Not by
    construction."""
    t3 = table_of(res, "table3")
    corpora = _corpora(t3)
    pairs = {}
    for c in corpora:
        l_tr, learned, free = learned_and_free(t3, c)
        pairs.update({(c, p, q): (learned[p], free[q], l_tr) for p in learned for q in free})
    k = len(pairs)
    ratios = {key: ppl_ratio(a, b, L, k) for key, (a, b, L) in pairs.items()}
    outcomes = [True if h < 1 else (False if low > 1 else straddles(low, h, 1, r, above=False)) for r, low, h in ratios.values()]
    parts = []
    for c in corpora:
        sub = t3[t3["corpus"] == c]
        l_tr = int(sub["l_tr"].iloc[0])
        free = {r["pos"]: r for _, r in sub.iterrows() if r["pos"] in PARAMETER_FREE and row_ppl(r).get(l_tr)}
        learned = {r["pos"]: r for _, r in sub.iterrows() if r["pos"] in LEARNED}
        # shown: the pair least surely below 1
        (_, p, q), (r, lo, hi) = max(((key, v) for key, v in ratios.items() if key[0] == c), key=lambda kv: kv[1][2])
        best = min(free, key=lambda name: row_ppl(free[name])[l_tr])
        parts.append(f"{c}: " + ", ".join(f"{title(n)} {row_ppl(v)[l_tr]:.2f}" for n, v in learned.items())
                     + f" vs best parameter-free {title(best)} {row_ppl(free[best])[l_tr]:.2f}; least favourable pair "
                     f"{title(p)} / {title(q)} {r:.3f} [{lo:.3f}, {hi:.3f}]")
    return "; ".join(parts), all_of(*outcomes), k


@claim(16, "T5 trains slower than Sandwich.",
       "T5 tokens/s < Sandwich tokens/s: the 95% interval of their ratio over interleaved rounds of training steps, "
       "recorded once beside the models with the machine named, lies below 1; "
       "no record: not run", ("speed_record",),
       sentence="\"T5 is 10% slower than Sandwich during the training stage\" (Section 6)",
       paper=f"T5 trains about {paper.T5_SLOWDOWN:.0%} slower than Sandwich",
       short="T5 trains slower than Sandwich")
def t5_slower_than_sandwich(res):
    """Read as: T5's training speed over Sandwich's, from interleaved rounds recorded once on
    one named machine (:func:`rflens.experiments.speed.record_speed`), is below 1. The board
    never times anything itself: without a record the claim is not run. One interval. Not by
    construction."""
    rec = res.get("speed_record")
    if not isinstance(rec, dict):
        if res.get("scale") and not presets.get(res["scale"]).sweeps.table3_pos:  # no Table 3 model to time
            raise Missing(f"the {res['scale']} run trains no Table 3 model: its speeds are read at a run that does")
        scale = f" --scale {res['scale']}" if res.get("scale") else ""
        raise Missing(f"no recorded training speed: record it once with `python -m rflens claims{scale} --record-speed`")
    speeds = rec.get("tokens_per_s", {})
    a, b = speeds.get("t5"), speeds.get("sandwich")
    if not isinstance(a, (list, tuple)) or not isinstance(b, (list, tuple)) or len(a) != len(b) or len(a) < 2:
        raise Missing("the speed record holds no paired rounds of T5 and Sandwich")
    ratio, lo, hi = speed_ratio(a, b)
    return (f"T5 / Sandwich tokens/s = {ratio:.3f} [{lo:.3f}, {hi:.3f}] over {len(a)} rounds ({ratio - 1:+.1%}), "
            f"recorded {rec.get('recorded', '?')} on {rec.get('machine', 'an unnamed machine')}",
            True if hi < 1 else (False if lo >= 1 else straddles(lo, hi, 1, ratio, above=False)), 1)


CLAIMS.sort(key=lambda c: c.id)
BY_ID = {c.id: c for c in CLAIMS}
