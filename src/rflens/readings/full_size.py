"""Chapter 11's sentences: the phenomena pilot's rule and findings, and the design of the
CPU presets it led to (tiny, in chapter 11, and the long run, in chapter 10), each computed from the pilot's shipped
measurements (:mod:`rflens.readings.pilot`) and the presets (:mod:`rflens.setup.presets`)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rflens.measure.criterion import BREAKS, EXTRAPOLATION_TOLERANCE
from rflens.readings.notation import _join, _tokens, Prose
from rflens.readings.pilot import PILOT_FAILING, PILOT_STABLE, pilot_summary, PILOT_WINDOW_RATIO
from rflens.setup.presets import get
from rflens.training.trainer import point_steps

TOL = EXTRAPOLATION_TOLERANCE
_R16 = "r(16 L_tr)"


def _tex(text: str) -> str:
    return text.replace("r(16 L_tr)", "r(16 $L_{tr}$)").replace("L_tr", "$L_{tr}$")


def pilot_rule() -> Prose:
    """The pilot's selection rule, with its models' window ratios R·w/L_tr and thresholds."""
    fail = _join([f"{PILOT_WINDOW_RATIO[m]:g}" for m in PILOT_FAILING if m in PILOT_WINDOW_RATIO])
    stable = _join([f"{PILOT_WINDOW_RATIO[m]:g}" for m in PILOT_STABLE if m in PILOT_WINDOW_RATIO])
    return Prose(_tex(f"Its rule, written before the first result: a configuration qualifies when every failing-side "
                      f"model (the paper's Δ = 8 mapped to L_tr, windows at R·w/L_tr ≈ {fail}) reaches r(16 L_tr) ≥ "
                      f"{BREAKS:g} on the lower bound of its interval while every stable-side model (R·w/L_tr ≈ "
                      f"{stable}, the paper's Δ = −3) keeps the upper bound of r within {TOL:.2f}."))


def _corner(sweep: pd.DataFrame) -> tuple[int, int, int]:
    """(R, d, L_tr) of the configuration the pilot trained at the most token budgets."""
    flat = sweep[sweep["model"] == "alibi_max"]
    return max(flat.groupby(["R", "d", "l_tr"]), key=lambda kv: kv[1]["tokens"].nunique())[0]


def _at(sweep: pd.DataFrame, model: str, R: int, d: int, l_tr: int) -> pd.DataFrame:
    """One model's rows at one configuration, in order of training tokens."""
    sub = sweep[(sweep["model"] == model) & (sweep["R"] == R) & (sweep["d"] == d) & (sweep["l_tr"] == l_tr)]
    return sub.assign(_n=sub["tokens"].map(_count)).sort_values("_n")


def _count(label: str) -> float:
    """Tokens from a label such as "3M"."""
    return float(str(label).rstrip("M")) * 1e6


def _trend(rows: pd.DataFrame) -> str:
    return _join([f"{float(r[_R16]):.2f} at {r['tokens']}" for _, r in rows.iterrows()])


def pilot_findings(sweep: pd.DataFrame) -> Prose:
    """What the pilot shows: whether any configuration meets the rule, how flat the stable
    side is and how far the failing side gets, how r(16 L_tr) of the flattest ALiBi moves
    with training tokens and with the other knobs, where its token trend crosses 2, and how
    NoPE, the windows, Sinusoidal and Rotary read."""
    if sweep is None or sweep.empty:
        return Prose("The pilot's measurements are not in this checkout.")
    summary = pilot_summary(sweep)
    out = []
    good = summary[summary["qualifies"]]
    out.append("No configuration within reach of two CPU cores meets the rule." if good.empty else
               f"{len(good)} configuration{'s meet' if len(good) > 1 else ' meets'} the rule.")
    stable = sweep[sweep["model"].isin(PILOT_STABLE)]
    failing = sweep[sweep["model"].isin(PILOT_FAILING)]
    out.append(f"The stable side's highest upper bound of r is {stable['max r high'].max():.3f}, within {TOL:.2f}: the "
               f"rule is not held back by noise. The failing side's best lower bound of r(16 L_tr) is "
               f"{failing['r(16 L_tr) low'].max():.2f}, short of {BREAKS:g}.")
    R, d, l_tr = _corner(sweep)
    flat = _at(sweep, "alibi_max", R, d, l_tr)
    last = flat.iloc[-1]
    out.append(f"Training tokens are the knob that moves it: the flattest ALiBi (the paper's Δ = 8 at L_tr = {l_tr}, "
               f"R = {R}, d = {d}) reads r(16 L_tr) = {_trend(flat)} tokens (the last "
               f"[{float(last['r(16 L_tr) low']):.2f}, {float(last['r(16 L_tr) high']):.2f}]).")
    first = flat.iloc[0]
    knobs = []
    for what, rows in (("two more layers", _at(sweep, "alibi_max", R + 2, d, l_tr)),
                       ("twice the L_tr", _at(sweep, "alibi_max", R, d, 2 * l_tr)),
                       ("half the width", _at(sweep, "alibi_max", R, d // 2, l_tr))):
        same = rows[rows["tokens"] == first["tokens"]]
        if not same.empty:
            knobs.append(f"{what} {float(same.iloc[0][_R16]) - float(first[_R16]):+.2f}")
    if knobs:
        out.append(f"At {first['tokens']} tokens the other knobs move it far less: {_join(knobs)}.")
    if len(flat) >= 2:
        x = np.log([_count(t) for t in flat["tokens"]])
        y = np.log(np.maximum(flat[_R16].astype(float).to_numpy() - 1, 1e-6))
        slope, icpt = np.polyfit(x, y, 1)
        if slope > 0:
            reach = math.exp((math.log(BREAKS - 1) - icpt) / slope)
            minutes = float(last["minutes"]) * reach / _count(last["tokens"])
            out.append(f"Its excess r − 1 grows about as tokens$^{{{slope:.1f}}}$; read from these {len(flat)} points it "
                       f"reaches r = {BREAKS:g} near {_tokens(reach)} tokens, about {minutes:.0f} minutes a model on "
                       f"one thread at this width.")
    nope = _at(sweep, "nope", R, d, l_tr)
    if len(nope):
        out.append(f"NoPE rises the same way: {_trend(nope)} tokens.")
    windows = failing[failing["model"] != "alibi_max"]
    if len(windows):
        out.append(f"The failing-side windows are the furthest from failing: r(16 L_tr) between "
                   f"{windows[_R16].min():.2f} and {windows[_R16].max():.2f} in every configuration, and a window "
                   f"model cannot change beyond R(w − 1) + 1 positions at all.")
    for model, name in (("sin_scaled", "Sinusoidal with its embeddings scaled"), ("rotary", "Rotary")):
        rows = _at(sweep, model, R, d, l_tr)
        if len(rows):
            r = rows.iloc[0]
            out.append(f"{name} at {r['tokens']} tokens: r(2 L_tr) = {float(r['r(2 L_tr)']):.2f}, r(16 L_tr) = "
                       f"{float(r[_R16]):.2f} [{float(r['r(16 L_tr) low']):.2f}, {float(r['r(16 L_tr) high']):.2f}].")
    return Prose(_tex(" ".join(out)))


def tiny_design(scale: str = "tiny") -> Prose:
    """The CPU preset's model and budget, from the preset itself."""
    from rflens.experiments.book_models import model_plan  # the book's experiments: torch

    sc = get(scale)
    m, t = sc.model, sc.train
    widest = max(sc.sweeps.window)
    return Prose(_tex(
        f"The `{scale}` preset: R = {m.n_layer} layers, whose widest window (w = {widest}) reaches "
        f"R·w/L_tr = {m.n_layer * widest / t.l_tr:g} with w ≤ L_tr; L_tr = {t.l_tr}; d = {m.d_model}; and "
        f"{t.steps} steps of {t.batch_size} × {t.l_tr} tokens, {_tokens(t.steps * t.batch_size * t.l_tr)} tokens a "
        f"model, for the {len(model_plan(sc))} models of the book."))


def long_design(scale: str = "long", book: str = "tiny") -> Prose:
    """The long run's preset: its budget against the book's, its schedule, its measured
    sizes and what each size keeps, from the preset itself."""
    sc, small = get(scale), get(book)
    t, ev = sc.train, sc.eval
    per_step = t.batch_size * t.l_tr
    tokens = t.steps * per_step
    book_tokens = small.train.steps * small.train.batch_size * small.train.l_tr
    sizes = [_tokens(s * per_step) for s in point_steps(t)]
    widest = max(sc.sweeps.window)
    return Prose(_tex(
        f"The `{scale}` preset is the `{book}` model trained on $2^{{{int(math.log2(tokens))}}}$ = {_tokens(tokens)} tokens "
        f"({tokens / book_tokens:.0f} times the `{book}` budget), with a warmup-stable-decay schedule: a fixed "
        f"{t.warmup}-step warm-up, a constant rate, then a linear cool-down over the last {t.cooldown_frac:.0%} of "
        f"the steps. It is measured at {len(sizes)} sizes ({sizes[0]}, {sizes[1]}, ..., {sizes[-1]} tokens): "
        f"per-segment last-token NLLs at L_tr × {{{', '.join(str(k) for k in ev.length_mults)}}} on "
        f"{ev.n_segments} segments, and the receptive field over segments of {ev.erf_length_mult} L_tr = "
        f"{ev.erf_length_mult * t.l_tr} tokens. Its windowed models keep R = {sc.model.n_layer}: the widest "
        f"window reaches R·w/L_tr = {sc.model.n_layer * widest / t.l_tr:g}."))


def board_by_size(grown: pd.DataFrame) -> Prose:
    """When each claim of the long run is decided as its models train: for every claim
    checked at some size, its result over the runs of sizes that share it
    (:func:`rflens.claims.scoreboard.by_size`)."""
    from rflens.claims.statements import BY_ID, CONSTRUCTION

    if grown is None or grown.empty:
        return Prose("The long run's bundle holds no model yet.")
    out = []
    for cid, row in grown.iterrows():
        if (row == "not run").all() or BY_ID[int(cid)].evidence == CONSTRUCTION:
            continue
        runs, start = [], 0
        values = list(row)
        for i in range(1, len(values) + 1):
            if i == len(values) or values[i] != values[start]:
                sizes = list(grown.columns[start:i])
                span = _tokens(sizes[0]) if len(sizes) == 1 else f"{_tokens(sizes[0])} to {_tokens(sizes[-1])}"
                runs.append(f"{values[start]} at {span}")
                start = i
        out.append(f"- Claim {cid} ({_tex(BY_ID[int(cid)].statement)}): {'; '.join(runs)} tokens.")
    if not out:
        return Prose("No claim that rests on trained models is checked by the long run yet: its bundle lacks "
                     "a model each of them reads.")
    return Prose("\n".join(out))
