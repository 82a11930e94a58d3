"""The index page's first screen.

:func:`first_screen`: what the book finds at each scale beside what the paper reports (at the
paper's depth too, :func:`at_depth`), the model (its parameters, corpora and tokens), the key
figure's reading (:func:`sweep_states`, which chapter 10 prints under the same figure) and what
training further did to the models still rising (:func:`more_training`), a line each.
:func:`this_build`: the details under it: at which scale the book was built, how the claims
scored at that scale, and how far the long run has got, with the number of training tokens
its first model needed to break.
"""

from __future__ import annotations

import re

import pandas as pd

from rflens.claims.verdicts import RESULTS
from rflens.data import ABOUT
from rflens.measure.criterion import BREAKS, EXTRAPOLATION_HORIZON as HORIZON
from rflens.readings.notation import _join, _tokens, Prose, tex
from rflens.setup.presets import BOOK_LONG, get

PAPER = "full"  # the preset of the paper's own setting


def _counts(counts: dict | None) -> str:
    return ", ".join(f"{counts.get(k, 0)} {k}" for k in RESULTS) if counts else "not computed in this build"


def _tokens_a_model(scale: str) -> int:
    t = get(scale).train
    return t.steps * t.batch_size * t.l_tr


def _model(preset: str, params: tuple[int, int]) -> str:
    """A preset's model in words: its shape, parameters, L_tr and corpora."""
    sc = get(preset)
    m = sc.model
    corpora = _join([f"{c} ({ABOUT[sc.text(c)]})" for c in sc.sweeps.corpora])
    return (f"R = {m.n_layer} layers, H = {m.n_head} heads, d = {m.d_model}: {params[0] / 1e6:.2f}M parameters "
            f"({params[1] / 1e6:.2f}M outside the token embedding), trained at L_tr = {sc.train.l_tr} on {corpora}")


def first_screen(boards: dict[str, list[dict]], depths: pd.DataFrame | None = None) -> str:
    """The box under the index page's title (MyST), short enough to leave the key figure on a
    desktop's first screen, the paper's depth first: the paper's thesis, in defined words, as
    the run at the paper's depth decides it, with which claims hold there (:func:`at_depth`);
    then as the book's 4-layer long run on new text (:data:`BOOK_LONG`) decides it, and why the
    depths differ (:func:`why_depths`, from ``depths``: :func:`rflens.longrun.compare.depths`).
    The key figure follows it, and :func:`under_the_figure` after that."""
    from rflens.claims.statements import BY_ID, THESIS_CLAIM

    long = BOOK_LONG
    lines = []
    deep = at_depth(boards)
    if deep:
        lines.append(deep)
    central = {int(c["id"]): c for c in boards.get(long, [])}.get(THESIS_CLAIM)
    if central is not None:
        verdict = {"pass": "holds", "fail": "does not hold", "not decided": "is not decided",
                   "not run": "is not run yet"}[central["result"]]
        thesis = (f"the thesis {verdict}" if deep else
                  f"**The paper's thesis** ([chapter 4](04_receptive_fields.ipynb)), {THESIS_WORDS} (claim "
                  f"{THESIS_CLAIM}; in short, {BY_ID[THESIS_CLAIM].short}), {verdict}")
        lines.append(tex(f"**At {get(long).model.n_layer} layers** (`{long}`, the book's long run on new text) "
                         f"{thesis}: {_agreement(str(central['measured']), short=bool(deep))}." + why_depths(depths)))
    return _box("What this book finds", lines)


def under_the_figure(boards: dict[str, list[dict]], sweep: pd.DataFrame, outcome: pd.DataFrame | None = None) -> str:
    """The box under the key figure (MyST): what it shows, read from ``sweep``: rows of
    :func:`rflens.store.bundle.table` (both depths' ends of ALiBi's Δ sweep,
    :func:`rflens.longrun.compare.sweep_ends`), with r(16 L_tr), breaking and Δ defined; every
    claim read at both depths (:func:`rflens.readings.long_runs.by_depth`); what training further
    did to the models still rising at the long run's end (``outcome``:
    :func:`rflens.longrun.forecast.outcome`, None or empty: not said); where every claim is."""
    lines = []
    if not sweep.empty:
        lines.append(f"**The key figure** ([chapter 10](10_long_runs.ipynb)): r({HORIZON} $L_{{tr}}$), the "
                     f"perplexity at {HORIZON} times $L_{{tr}}$ over that at $L_{{tr}}$ (a model *breaks* when the lower "
                     f"end of its 95% interval reaches {BREAKS:g}), as training grows, for the two ends of ALiBi's "
                     f"slope sweep (Δ shifts every head's slope exponent: the paper's Δ = -3 keeps the slopes steep, "
                     f"Δ = 8 makes them the flattest) at both depths: {sweep_states(sweep)}.")
    both = both_depths(boards)
    if both:
        lines.append(both)
    if outcome is not None and not outcome.empty and outcome["r"].notna().any():
        lines.append(more_training(outcome))
    lines.append("**Every claim** at every scale: below, and in [chapter 9](09_claims.ipynb).")
    return _box("Reading the key figure", lines)


def _box(title: str, lines: list[str]) -> str:
    body = "\n".join(f"- {line}" for line in lines)
    return f":::{{admonition}} {title}\n:class: tip\n{body}\n:::\n"


# the thesis in defined words, where the first screen first states it
THESIS_WORDS = ("that a model extrapolates when its *effective receptive field* (ERF: the span of recent tokens "
                "that holds 99% of the gradient of its last prediction) fits inside its training length L_tr")


def why_depths(depths: pd.DataFrame | None) -> str:
    """One sentence: why the 4-layer run reads the windows differently from the paper's depth,
    from each depth's measured ERF / w (:func:`rflens.longrun.compare.depths`); empty without
    windows measured at both depths."""
    if depths is None or depths.empty or "ERF / w" not in depths.columns:
        return ""
    ratios = depths.dropna(subset=["ERF / w"]).groupby("layers")["ERF / w"]
    if len(ratios) < 2:
        return ""
    (shallow, low), (deep, high) = sorted(ratios)[0], sorted(ratios)[-1]
    grew = float(high.median() / low.median())
    return (f" Why the depths differ: the {shallow}-layer run maps the paper's windows by keeping R·w / L_tr, as if "
            f"a window's field grew in proportion to the depth R, but its ERF measures {low.min():.1f} to "
            f"{low.max():.1f} times w at {shallow} layers and {high.min():.1f} to {high.max():.1f} at {deep}: "
            f"{grew:.1f} times as much for {deep / shallow:g} times the depth.")


def at_depth(boards: dict[str, list[dict]]) -> str:
    """One line: the paper's thesis in the run at the paper's depth (``boards``: {run: its
    board}), and which of the claims it decides hold there; empty while that run decides no
    trained claim."""
    from rflens.claims.statements import THESIS_CLAIM
    from rflens.longrun.compare import DEEP

    board = {int(c["id"]): c for c in boards.get(DEEP, [])}
    central = board.get(THESIS_CLAIM)
    if central is None or central["result"] == "not run":
        return ""
    verdict = {"pass": "holds", "fail": "does not hold", "not decided": "is not decided"}[central["result"]]
    heads = {"pass": "held", "fail": "not held", "not decided": "not decided"}
    by = {kind: [str(i) for i, c in sorted(board.items()) if c["result"] == kind] for kind in heads}
    said = [f"{heads[kind]} {_join(ids)}" for kind, ids in by.items() if ids]
    return tex(f"**At the paper's depth** ({get(DEEP).model.n_layer} layers; [chapter 10](10b_paper_depth.ipynb)), "
               f"the paper's thesis ([chapter 4](04_receptive_fields.ipynb)), {THESIS_WORDS} (claim {THESIS_CLAIM}), "
               f"{verdict}: {_agreement(str(central['measured']), short=True)}. Its claims there: "
               f"{'; '.join(said)}.")


def both_depths(boards: dict[str, list[dict]]) -> str:
    """One line: the claims read at both depths (:func:`rflens.readings.long_runs.by_depth`)
    grouped by their two verdicts: those that differ between the book's long run and the run
    at the paper's depth, then those decided alike; empty while that run decides no trained
    claim."""
    from rflens.longrun.compare import DEEP
    from rflens.readings.long_runs import by_depth

    if not at_depth(boards):
        return ""
    deep, long = get(DEEP).model.n_layer, get(BOOK_LONG).model.n_layer
    groups: dict[tuple[str, str], list[str]] = {}
    kept = []
    for i, (then, now) in by_depth(boards, BOOK_LONG, DEEP).items():
        if now != then:
            groups.setdefault((now, then), []).append(str(i))
        elif now in ("pass", "fail"):
            kept.append(str(i))
    said = [f"{a} at {deep} layers and {b} at {long}: claim{'s' * (len(ids) > 1)} {_join(ids)}"
            for (a, b), ids in groups.items()]
    if kept:
        said.append(f"the same at both depths: claim{'s' * (len(kept) > 1)} {_join(kept)}")
    return f"**{deep} layers against {long}** (`{DEEP}`, `{BOOK_LONG}`): {'; '.join(said)}." if said else ""


def more_training(outcome: pd.DataFrame) -> str:
    """One line: the long run's rising models trained on (the rows of
    :func:`rflens.longrun.forecast.outcome`), how many broke, reached the level without breaking,
    or stayed below it, named by the paper's settings, and whether their rise slowed."""
    from rflens.readings.long_runs import forecast_groups, named_by_paper, slowed

    named = named_by_paper(outcome)
    done = named[named["r"].notna()]
    tokens = done["tokens"].iloc[0]
    parts = []
    for rows, what in zip(forecast_groups(done), ("broke", f"reached {BREAKS:g} with an interval still below it",
                                                  f"stayed below {BREAKS:g}")):
        if len(rows):
            parts.append(f"{len(rows)} {what} ({_join(_by_setting(rows['model']))})")
    slower, k = slowed(done)
    pending = len(named) - len(done)
    return (f"**More training** ([chapter 10](10_long_runs.ipynb)): of the long run's models still rising at its "
            f"end, {len(done)} trained on to {tokens} tokens" + (f" ({pending} still training)" if pending else "")
            + f": {'; '.join(parts)}. Their $r - 1$ grew more slowly per doubling of tokens than over the long "
            f"run's last sizes for {slower} of {k}.")


def _by_setting(names) -> list[str]:
    """Models named "ALiBi Δ = 8, seed 2" gathered by setting: "ALiBi Δ = 8 (seeds 0 and 2)"."""
    seeds: dict[str, list[str]] = {}
    for name in names:
        base, _, seed = str(name).partition(", seed ")
        seeds.setdefault(base, []).append(seed or "0")
    return [base if s == ["0"] else f"{base} (seed{'s' if len(s) > 1 else ''} {_join(s)})" for base, s in seeds.items()]


def claims_at_each_scale(scale: str, board: list[dict] | None, boards: dict[str, list[dict]]) -> str:
    """The index page's claims at each scale (MyST): which hold, fail or are not decided at
    this build's ``scale`` (``board``, None when chapter 9 did not run) and in each shipped
    long run (``boards``: {run: its board}), by number, the book's long run with each claim
    in a few words; a run whose trained claims all wait for models is said in one clause."""
    from rflens.claims.statements import BY_ID, TRAINED

    long = BOOK_LONG
    n = len(board) if board else 16
    said = [f"{_counts(_count(board))} at this build's scale (`{scale}`, {_tokens(_tokens_a_model(scale))} training "
            f"tokens a model){_which(board)}."]
    waiting = []
    for run, rows in sorted(boards.items(), key=lambda kv: kv[0] != long):  # the book's long run first
        if run == scale:
            continue
        if all(c["result"] == "not run" for c in rows if BY_ID[int(c["id"])].evidence == TRAINED):
            waiting.append(f"`{run}`")  # nothing trained is read yet: its models are still training
            continue
        said.append(f"{_counts(_count(rows))} in the long run (`{run}`, {get(run).model.n_layer} layers, "
                    f"{_tokens(_tokens_a_model(run))} tokens a model){_which(rows, named=run == long)}.")
    if waiting:
        said.append(f"The claims of {_join(waiting)} wait for models still training ([chapter 10](10_long_runs.ipynb)).")
    body = "\n".join(f"- {tex(part)}" for part in said)
    return (f":::{{admonition}} The claims at each scale\n:class: note\nOf the paper's {n} claims, which it reports "
            f"all hold for models of {get(PAPER).model.n_layer} layers trained on {_tokens(_tokens_a_model(PAPER))} "
            f"tokens each ([chapter 9](09_claims.ipynb)):\n\n{body}\n:::\n")


def reading_notes(scale: str, params: dict[str, tuple[int, int]]) -> str:
    """The lines under the key figure (MyST): what r(16 L_tr) and Δ mean, and the models
    (``params``: {preset: (all its parameters, those outside the token embedding)}) with
    their corpora in words."""
    long = BOOK_LONG
    lines = []
    shown = list(dict.fromkeys(p for p in (scale, long) if p in params))
    lines.append(tex(f"**Reading the numbers.** r({HORIZON} L_tr) is the perplexity at {HORIZON} times the training "
                     f"length over the perplexity at the training length: 1 is a model that extrapolates, and a model "
                     f"*breaks* when the lower end of its interval reaches {BREAKS:g}. Δ shifts the exponent of "
                     "every ALiBi slope 1/2^h: Δ = 8 makes every slope 2^8 times flatter. The book names the paper's "
                     "values; its smaller L_tr trains the same slope × L_tr with a smaller Δ (chapter 3)."))
    lines.append(tex("**The models.** " + "; ".join(
        f"{'At this build' if p == scale else 'in the long run'} (`{p}`): {_model(p, params[p])}" for p in shown)
        + ": small stand-ins for the paper's Pile subsets."))
    body = "\n".join(f"- {line}" for line in lines)
    return f":::{{admonition}} Reading the numbers\n:class: note\n{body}\n:::\n"


def _agreement(measured: str, short: bool = False) -> str:
    """Claim 6's measurement in a clause: how many Table 1 models the ERF predicts at each seed
    against the share the criterion asks (the measured text itself if it says otherwise)."""
    from rflens.measure.criterion import ERF_AGREEMENT

    found = re.findall(r"(\d+)/(\d+) models = (\d+)%", measured)
    if not found:
        return measured
    shares = sorted({int(p) for _, _, p in found})
    counts = sorted({int(k) for k, _, _ in found})
    seeds = f" over {len(found)} seeds" if len(found) > 1 else ""
    share = f"{shares[0]}%" if len(shares) == 1 else f"{shares[0]}% to {shares[-1]}%"
    count = str(counts[0]) if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
    if short:  # the ERF's side of L_tr defined in the same sentence
        return f"it predicts {count} of {found[0][1]} Table 1 models ({share}{seeds}; the criterion asks {ERF_AGREEMENT:.0%})"
    return (f"the ERF's side of L_tr agrees with whether a model extrapolates for {count} of its {found[0][1]} "
            f"Table 1 models ({share}{seeds}), where the criterion asks {ERF_AGREEMENT:.0%}")


def _count(board: list[dict] | None) -> dict | None:
    from rflens.claims.scoreboard import summary

    return None if board is None else summary(board)


def _which(board: list[dict] | None, *, named: bool = False) -> str:
    """': hold 1, 7; fail 2, 3; not decided 4', each claim in a few words where ``named``."""
    from rflens.claims.statements import BY_ID

    if not board:
        return ""
    words = {"pass": "hold", "fail": "fail", "not decided": "not decided", "not run": "not run"}
    parts = []
    for key in RESULTS:
        got = [int(c["id"]) for c in board if c["result"] == key]
        if got:
            ids = [f"{i} ({BY_ID[i].short})" if named else str(i) for i in got]
            parts.append(f"{words[key]} {', '.join(ids)}")
    return ": " + "; ".join(parts)


def sweep_states(sweep: pd.DataFrame) -> Prose:
    """Which models of ``sweep`` (rows of :func:`rflens.store.bundle.table`) break, and from how many
    training tokens, which rise without breaking and which extrapolate, each read at its last
    size by :func:`rflens.longrun.compare.state`: one clause, breaking first."""
    from rflens.longrun.compare import state

    last = sweep.sort_values("tokens").groupby("name", sort=False).tail(1)
    groups: dict[str, list] = {}
    for _, row in last.iterrows():
        groups.setdefault(state(row), []).append(row)
    said = []
    for kind, rows in sorted(groups.items(), key=lambda kv: ["breaks", "rises", "extrapolates"].index(kv[0])):
        names = _join([tex(str(r["label"])) for r in rows])
        one = len(rows) == 1
        if kind == "breaks":
            first = [int(sweep[(sweep["name"] == r["name"]) & (sweep["r_horizon_lo"] >= BREAKS)]["tokens"].min())
                     for r in rows]
            said.append(f"{names} break{'s' if one else ''} (from {_join([_tokens(t) for t in first])} training tokens)")
        elif kind == "rises":
            said.append(f"{names} rise{'s' if one else ''} without breaking (the lower end of "
                        f"{'its' if one else 'each'} interval below {BREAKS:g}, whatever the estimate)")
        else:
            said.append(f"{names} extrapolate{'s' if one else ''}")
    return Prose(_join(said, "while"))


def this_build(scale: str, counts: dict | None, long: pd.DataFrame, planned: int, trained: dict | None = None,
               second: tuple[int, int] | None = None, downloads: dict[str, tuple[str, int]] | None = None) -> str:
    """The "this build" box of the index page (MyST): the scale's model and tokens a model,
    the scoreboard's counts (``counts``, None when the board was not computed; ``trained``,
    the counts of the claims that rest on trained models), and from the
    long run's table (:func:`rflens.store.bundle.table`) how many of its ``planned`` models are
    shipped, on how many tokens, and from how many tokens its first model breaks; ``second``:
    (shipped, planned) models of the second long run while the book reads the first; ``downloads``:
    {preset: (path from the index, bytes)} of the zipped bundles it links to."""
    sc = get(scale)
    m, t = sc.model, sc.train
    tokens = _tokens_a_model(scale)
    lines = [f"Scale `{scale}`: R = {m.n_layer} layers, H = {m.n_head} heads, d = {m.d_model}, "
             f"$L_{{tr}}$ = {t.l_tr}; {_tokens(tokens)} training tokens a model."]
    if counts is None:
        lines.append("The claims scoreboard was not computed in this build (chapter 9 computes it).")
    else:
        parts = ", ".join(f"{counts.get(k, 0)} {k}" for k in RESULTS)
        line = f"Of the paper's {sum(counts.values())} claims, at this scale: {parts}"
        if trained is not None:
            line += (f"; of the {sum(trained.values())} that rest on trained models (the others on a closed "
                     f"form, the same at every scale): " + ", ".join(f"{trained.get(k, 0)} {k}" for k in RESULTS))
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
        more = budgets[budgets > usual]
        line += f", trained on {_tokens(usual)} tokens each"
        if len(more):  # said with the reason: the same steps at a longer L_tr
            rows = [done[done["name"] == name].iloc[-1] for name in more.index]
            longer = all(r["l_tr"] > done["l_tr"].min() for r in rows)
            line += (" (" + _join([f"{tex(str(r.get('label', r['name'])))} on {_tokens(more[r['name']])}" for r in rows])
                     + (": the same steps at a longer $L_{tr}$" if longer else "") + ")")
    lines.append(line + ".")
    if second is not None:
        lines.append(f"The second long run, on text it repeats at most 4 times and with three seeds where verdicts "
                     f"are decided: {second[0]} of its {second[1]} models shipped.")
    if downloads:
        lines.append("The shipped bundles, every model's measurements with their provenance: " + _join(
            [f"{{download}}`{name} <{path}>` ({size / 1e6:.1f} MB)" for name, (path, size) in downloads.items()]) + ".")
    body = "\n".join(f"- {line}" for line in lines)
    return f":::{{admonition}} This build\n:class: note\n{body}\n:::\n"
