"""The earlier criteria of the claims whose criterion was reworded, kept as named legacy checks.

:mod:`rflens.claims.statements` decides each claim on the paper's own sentence. Where that changed a
criterion (how many windows claim 1 reads, the 50-point fit of claim 12, intervals that hold
together for every claim reading several of them, ...), the earlier check is kept here,
unchanged, so that the board can show for this version what the earlier criterion decided
beside the new one (``legacy`` in each row of :func:`rflens.claims.verdicts.check`). These checks
read every 95% interval alone, as the earlier board did. Nothing else uses them.
"""

from __future__ import annotations

import math

import pandas as pd

from rflens import paper
from rflens.claims.outcomes import UNDECIDED, Missing, all_of, at_least
from rflens.claims.rows import (alibi_row, family_rows, learned_and_free, number_or, ppl_ratio, r_at, r_at_length, row_of,
    table_of)
from rflens.measure.columns import lengths_of, row_ppl
from rflens.measure.criterion import BREAKS, EXTRAPOLATION_HORIZON as HORIZON, EXTRAPOLATION_TOLERANCE as TOL
from rflens.setup.schemes import title

RISES = 1.01
SHARE_IN_LTR = (0.3, 0.9)
_EX = f"r(L) <= {TOL:.2f} for every L up to {HORIZON} L_tr, upper bound of its 95% paired interval"
_LB = "lower bound of its 95% paired interval"


def extrapolates_row(row) -> bool | str:
    """The earlier reading of "stays flat": the table's ``extrapolates`` (every 95% upper
    bound within TOL), False when a lower bound exceeds TOL up to HORIZON L_tr."""
    v = row.get("extrapolates")
    if v is None or (isinstance(v, float) and math.isnan(v)):
        raise Missing(f"r(L) of {row['label']} beyond L_tr not measured")
    if bool(v):
        return True
    l_tr = int(row["l_tr"])
    lows = [number_or(row.get(f"r_lo@{L}"), row.get(f"r@{L}")) for L in lengths_of(pd.DataFrame([row]), "r")
            if l_tr < L <= HORIZON * l_tr]
    return False if any(lo > TOL for lo in lows) or not lows else UNDECIDED


def _max_r(row) -> str:
    return f"max r = {float(row['max_r']):.2f}"


def _smallest_window_extrapolates(res):
    row = family_rows(res, "window").iloc[0]
    return f"{row['label']}: {_max_r(row)} (limit {TOL})", extrapolates_row(row)


def _alibi_rises_somewhere(res):
    row, df = alibi_row(res)
    rs = {}
    for L in lengths_of(df, "r"):
        if L > int(row["l_tr"]):
            try:
                rs[L] = r_at_length(row, L)
            except Missing:
                continue
    if not rs:
        raise Missing("no L > L_tr measured for ALiBi")
    L, (r, lo, _, _) = max(rs.items(), key=lambda kv: kv[1][1])
    top = max(hi for _, _, hi, _ in rs.values())
    outcome = True if lo >= RISES else (False if top < RISES else UNDECIDED)
    return f"ALiBi {row['label']}: r = {r:.3f} (lower bound {lo:.3f}) at L = {L}, the largest lower bound", outcome


def _sweep_ends(res, family):
    fam = family_rows(res, family)
    first, last = fam.iloc[0], fam.iloc[-1]
    ok_first, (_, lo, hi, text) = extrapolates_row(first), r_at(last, HORIZON)
    return f"{first['label']}: {_max_r(first)}; {last['label']}: {text}", all_of(ok_first, at_least(lo, hi, BREAKS))


def _retrained_models_extrapolate(res):
    t2 = table_of(res, "table2")
    if t2.empty:
        raise Missing("no Table 1 model failed, so nothing was retrained")
    parts, outcomes = [], []
    for _, row in t2.iterrows():
        if HORIZON * int(row["old_l_tr"]) <= int(row["l_tr"]):
            raise Missing(f"{row['label']}: Table 1's lengths end at {HORIZON * int(row['old_l_tr'])}, none beyond "
                          f"its new L_tr")
        outcomes.append(extrapolates_row(row))
        parts.append(f"{row['label']}: {_max_r(row)}")
    return "; ".join(parts), all_of(*outcomes)


def _sinusoidal_peaks_near_l_tr(res):
    f7 = table_of(res, "figure7")
    sin = f7[f7["pos"] == "sinusoidal"] if "pos" in f7.columns else f7.iloc[0:0]
    if "scale_embeddings" in sin.columns:  # the models it read: the book's Sinusoidal (embeddings scaled)
        sin = sin[sin["scale_embeddings"].astype(bool)]
    default = sin[sin["default_l_tr"].astype(bool)] if "default_l_tr" in sin.columns else sin.iloc[0:0]
    if default.empty:
        raise Missing("no Sinusoidal model at the scale's L_tr")
    _, lo, hi, text = r_at(default.iloc[0], 4)
    jumps, ok = [], True
    for _, row in sin.iterrows():
        if row.get("jump_ok") is None or (isinstance(row.get("jump_ok"), float) and math.isnan(row["jump_ok"])):
            raise Missing(f"no gradient curve for {row['label']}")
        ok &= bool(row["jump_ok"])
        jumps.append(f"L_tr = {int(row['l_tr'])}: peak at position {int(row['jump_abs_pos'])}")
    return f"{text}; " + "; ".join(jumps), all_of(at_least(lo, hi, BREAKS), ok)


def _sandwich_flat_and_lower_on_one_corpus(res):
    row = row_of(table_of(res, "table3"), "Sandwich model", pos="sandwich", corpus=res.get("corpus", "prose"))
    ppl = row_ppl(row)
    l_tr = int(row["l_tr"])
    beyond = {L: p for L, p in ppl.items() if L > l_tr}
    if l_tr not in ppl or not beyond:
        raise Missing("Sandwich perplexity at L_tr or beyond not measured")
    L, best = min(beyond.items(), key=lambda kv: kv[1])
    return (f"{_max_r(row)}; lowest ppl beyond L_tr {best:.2f} at L = {L} vs ppl(L_tr) {ppl[l_tr]:.2f} "
            f"(ratio {best / ppl[l_tr]:.4f})", all_of(extrapolates_row(row), best < ppl[l_tr]))


def _sandwich_share_in_band(res):
    s = float(row_of(table_of(res, "figure11"), "Sandwich model", pos="sandwich")["share_in_ltr"])
    return f"Sandwich: {s:.0%} of the cumulative gradient in the last L_tr tokens", SHARE_IN_LTR[0] <= s <= SHARE_IN_LTR[1]


def _log_fit_over_every_distance(res):
    fit = res.get("log_fit")
    if fit is None or isinstance(fit, Exception):
        raise Missing("log-curve fit not run")
    a, b = float(fit["a"]), float(fit["b"])
    target = paper.SMOOTHED_SANDWICH
    return f"a = {a:.3f}, b = {b:.3f}", abs(a - target[0]) <= 0.02 + 1e-12 and abs(b - target[1]) <= 0.02 + 1e-12


def _sandwich_beats_baselines_on_code(res):
    t3 = table_of(res, "table3")
    if "code" not in set(t3.get("corpus", [])):
        raise Missing("code corpus not in Table 3")
    code = t3[t3["corpus"] == "code"]
    sand_row = row_of(code, "Sandwich on code", pos="sandwich")
    sand, l_tr = row_ppl(sand_row), int(sand_row["l_tr"])
    worst, outcomes = [], []
    for pos in ("sinusoidal", "rotary", "alibi"):
        other_row = row_of(code, f"{pos} on code", pos=pos)
        Ls = [L for L in sand if L > l_tr and L in row_ppl(other_row)]
        if not Ls:
            raise Missing(f"no common L_ex > L_tr for Sandwich and {pos}")
        ratios = {L: ppl_ratio(other_row, sand_row, L) for L in Ls}
        L = min(ratios, key=lambda k: ratios[k][1])
        r, lo, hi = ratios[L]
        outcomes.append(True if lo > 1 else (False if hi < 1 else UNDECIDED))
        worst.append(f"{title(pos)} / Sandwich {r:.3f} [{lo:.3f}, {hi:.3f}] at L = {L}")
    return "smallest lead: " + "; ".join(worst), all_of(*outcomes)


def _learnable_lower_each_interval_alone(res):
    t3 = table_of(res, "table3")
    if t3.attrs.get("lacking_corpora"):
        raise Missing(f"Table 3 lacks models on {', '.join(t3.attrs['lacking_corpora'])} yet")
    corpora = list(dict.fromkeys(t3["corpus"])) if "corpus" in t3.columns else []
    if not corpora:
        raise Missing("Table 3 is empty")
    parts, outcomes = [], []
    for c in corpora:
        l_tr, learned, free = learned_and_free(t3, c)
        pairs = {(p, q): ppl_ratio(learned[p], free[q], l_tr) for p in learned for q in free}
        (p, q), (r, lo, hi) = max(pairs.items(), key=lambda kv: kv[1][2])
        outcomes += [True if h < 1 else (False if low > 1 else UNDECIDED) for _, low, h in pairs.values()]
        parts.append(f"{c}: least favourable pair {title(p)} / {title(q)} {r:.3f} [{lo:.3f}, {hi:.3f}]")
    return "; ".join(parts), all_of(*outcomes)


def _t5_slower_in_table3_rounds(res):
    from rflens.experiments.speed import speed_ratio

    t3 = table_of(res, "table3")
    corpus = res.get("corpus", "prose")
    t5 = row_of(t3, f"T5 on {corpus}", pos="t5", corpus=corpus)
    sw = row_of(t3, f"Sandwich on {corpus}", pos="sandwich", corpus=corpus)
    a, b = t5.get("tokens_per_s_rounds"), sw.get("tokens_per_s_rounds")
    if not isinstance(a, (list, tuple)) or not isinstance(b, (list, tuple)) or len(a) != len(b) or len(a) < 2:
        raise Missing("training speed not timed in paired rounds")
    ratio, lo, hi = speed_ratio(a, b)
    return (f"T5 / Sandwich tokens/s = {ratio:.3f} [{lo:.3f}, {hi:.3f}] over {len(a)} rounds, "
            f"{t5.get('speed_source') or 'timed when the board was read'}", True if hi < 1 else (False if lo >= 1 else UNDECIDED))


# {claim id: (the earlier criterion, its check)}: the claims whose criterion changed
LEGACY = {
    1: (f"the smallest w of the sweep extrapolates: {_EX}", _smallest_window_extrapolates),
    3: (f"ALiBi (the paper's Δ = 0, mapped to this L_tr): r(L) >= {RISES:g} for some L > L_tr ({_LB})", _alibi_rises_somewhere),
    4: (f"the most negative Δ extrapolates ({_EX}); the largest Δ has r({HORIZON} L_tr) >= {BREAKS:g} ({_LB})",
        lambda res: _sweep_ends(res, "slope_shift")),
    5: (f"the largest slope extrapolates ({_EX}); the smallest has r({HORIZON} L_tr) >= {BREAKS:g} ({_LB})",
        lambda res: _sweep_ends(res, "same_slope")),
    7: (f"every failing Table 1 model, retrained with a longer L_tr, extrapolates ({_EX})", _retrained_models_extrapolate),
    8: (f"r(4 L_tr) >= {BREAKS:g} ({_LB}), and the largest normalised gradient outside the most recent few tokens "
        f"sits within 5% of the absolute position L_tr (at least 1 token; every L_tr of the sweep)", _sinusoidal_peaks_near_l_tr),
    10: (f"{_EX}, and min over L > L_tr of ppl(L) < ppl(L_tr), on the board's corpus", _sandwich_flat_and_lower_on_one_corpus),
    11: (f"between {SHARE_IN_LTR[0]:.0%} and {SHARE_IN_LTR[1]:.0%} of the cumulative gradient on the last L_tr tokens",
         _sandwich_share_in_band),
    12: ("least-squares fit a log(1 + k) + b over the distances 0..8191: a and b within 0.02 of the paper's", _log_fit_over_every_distance),
    14: ("ppl(X) / ppl(Sandwich) > 1 for X = Sinusoidal, Rotary and ALiBi at every L_ex > L_tr on the code corpus "
         "(each 95% paired interval alone)", _sandwich_beats_baselines_on_code),
    15: ("ppl(KERPLE) and ppl(T5) < every parameter-free scheme's at L_tr, on each corpus (each 95% paired interval "
         "alone)", _learnable_lower_each_interval_alone),
    16: ("T5 tokens/s < Sandwich tokens/s: the 95% interval of their ratio over the interleaved rounds of Table 3's "
         "speeds (a shipped preset's recorded ones), below 1", _t5_slower_in_table3_rounds),
}
