"""The "this build" box of the index page.

It says at which scale the book was built (the model and the training tokens of each
model), how the claims scored at that scale, and how far the long run has got, with the
number of training tokens its first model needed to break.
"""

from __future__ import annotations

import pandas as pd

from ..claims import RESULTS
from ..results import BREAKS
from ..results import EXTRAPOLATION_HORIZON as HORIZON
from ..scales import get
from .notation import _tokens


def this_build(scale: str, counts: dict | None, long: pd.DataFrame, planned: int, trained: dict | None = None,
               second: tuple[int, int] | None = None) -> str:
    """The "this build" box of the index page (MyST): the scale's model and tokens a model,
    the scoreboard's counts (``counts``, None when the board was not computed; ``trained``,
    the counts of the claims that rest on trained models), and from the
    long run's table (:func:`rflens.bundle.table`) how many of its ``planned`` models are
    shipped, on how many tokens, and from how many tokens its first model breaks; ``second``:
    (shipped, planned) models of the second long run while the book reads the first."""
    sc = get(scale)
    m, t = sc.model, sc.train
    tokens = t.steps * t.batch_size * t.l_tr
    lines = [f"Scale `{scale}`: R = {m.n_layer} layers, H = {m.n_head} heads, d = {m.d_model}, "
             f"$L_{{tr}}$ = {t.l_tr}; {_tokens(tokens)} training tokens a model."]
    if counts is None:
        lines.append("The claims scoreboard was not computed in this build (chapter 9 computes it).")
    else:
        parts = ", ".join(f"{counts.get(k, 0)} {k}" for k in RESULTS)
        line = f"Of the paper's {sum(counts.values())} claims, at this scale: {parts}"
        if trained is not None:
            line += (f"; of the {sum(trained.values())} that rest on trained models (the others hold by "
                     f"construction): " + ", ".join(f"{trained.get(k, 0)} {k}" for k in RESULTS))
        lines.append(line + " ([chapter 9](09_claims.ipynb)).")
    names = long.loc[long["complete"].astype(bool), "name"].nunique() if not long.empty else 0
    broke = long[long["r_horizon_lo"] >= BREAKS] if not long.empty else long  # each model at its own L_tr
    if not broke.empty and tokens < broke["tokens"].min():
        lines.append(f"Why the paper's blow-ups are absent at this scale: in the long run the first model to break "
                     f"(r({HORIZON} $L_{{tr}}$) ≥ {BREAKS:g} on the lower bound of its interval) needed "
                     f"{_tokens(broke['tokens'].min())} training tokens; a model here sees {_tokens(tokens)}.")
    line = f"The long run ([chapter 10](10_long_runs.ipynb)): {names} of its {planned} models shipped"
    if not long.empty:
        done = long[long["complete"].astype(bool)]
        budgets = (done if not done.empty else long).groupby("name")["tokens"].max()
        usual = budgets.mode().iloc[0]
        more = int((budgets > usual).sum())
        line += f", trained on {_tokens(usual)} tokens each" + (f" ({more} on more)" if more else "")
    lines.append(line + ".")
    if second is not None:
        lines.append(f"The second long run, on text it repeats at most 4 times and with three seeds where verdicts "
                     f"are decided: {second[0]} of its {second[1]} models shipped.")
    body = "\n".join(f"- {line}" for line in lines)
    return f":::{{admonition}} This build\n:class: note\n{body}\n:::\n"
