"""Chapter 10's readings: the long runs as their models grow.

The models' states as they grow (:func:`emergence`), the two long runs side by side
(:func:`two_runs`), Table 2 as the paper designed it (:func:`table2_designed`), the early
warning of an ERF beyond L_tr (:func:`early_warning`), the check of the learning-rate schedule
(:func:`schedule_check`), the sealed forecast against what was measured
(:func:`forecast_outcome`), chapter 11's pilot reconciled with the runs
(:func:`pilot_reconciled`), and the long run at two depths (:func:`two_depths`).
"""

from __future__ import annotations

import pandas as pd

from rflens.measure.criterion import BREAKS, EXTRAPOLATION_HORIZON as HORIZON, EXTRAPOLATION_TOLERANCE as TOL
from rflens.readings.notation import _erf, _join, _label, _mult, _tokens, _top, Prose, tex


def emergence(em: pd.DataFrame) -> Prose:
    """The long run's models in one paragraph: at its last measured size each model breaks
    (the lower end of the paired interval of r(16 L_tr) reaches 2; from which size on),
    rises without breaking, or stays within 1.10 (at every size, or from a size on); then
    whether the ERF sides with that state as the paper reads it (beyond L_tr for a model that
    does not stay flat, inside for one that does), naming the models where it does not, and
    the runs that stopped part-way. ``em``: rows of :func:`rflens.store.bundle.table`."""
    if em.empty:
        return Prose("No long-run model is shipped yet (`python -m rflens emergence --list`).")
    models = [_grown(em, em[em["name"] == name].sort_values("tokens")) for name in dict.fromkeys(em["name"])]
    sizes = sorted({m["tokens"] for m in models})
    size = (f"{_tokens(sizes[0])} tokens" if len(sizes) == 1 else
            f"between {_tokens(sizes[0])} and {_tokens(sizes[-1])} tokens")
    out = [f"Of the {_count(len(models), 'model')}, read by r({models[0]['where']}) and its paired interval at their "
           f"last measured size ({size}),"]
    groups = []
    broke = sorted((m for m in models if m["state"] == "breaks"), key=lambda m: m["from"])
    if broke:
        groups.append(f"{len(broke)} break{'s' * (len(broke) == 1)} (the lower end reaches {BREAKS:g})" + (", the earliest first: " if len(broke) > 1 else ": ")
                      + _join([f"{m['label']} ({_since(m)})" for m in broke]))
    rose = [m for m in models if m["state"] == "rises"]
    if rose:
        groups.append(f"{len(rose)} rise{'s' * (len(rose) == 1)} without breaking: " + _join([m["label"] for m in rose]))
    flat = [m for m in models if m["state"] == "flat"]
    if flat:
        later = [m for m in flat if m["from"] is not None]
        text = f"{len(flat)} stay{'s' * (len(flat) == 1)} within {TOL:.2f}"
        if not later:
            text += " at every size"
        else:
            text += (f", {len(flat) - len(later)} of them at every size and " if len(later) < len(flat) else ": ") \
                + _join([f"{m['label']} ({_since(m)})" for m in later])
        groups.append(text)
    out[0] += " " + "; ".join(groups) + "."
    odd = [m for m in models if m["beyond"] == (m["state"] == "flat")]
    if not odd:
        out.append("The ERF sides with every one as the paper reads it: beyond $L_{tr}$ for each model that does "
                   "not stay flat, inside for each that does.")
    else:
        out.append(f"The ERF sides with {len(models) - len(odd)} of them as the paper reads it (beyond $L_{{tr}}$ for "
                   f"a model that does not stay flat, inside for one that does).")
        for beyond, words in ((True, f"stay{'s' * (sum(m['beyond'] for m in odd) == 1)} within {TOL:.2f} with an ERF "
                                     f"beyond"),
                              (False, f"do{'es' * (sum(not m['beyond'] for m in odd) == 1)} not with an ERF inside")):
            these = [m for m in odd if m["beyond"] == beyond]
            if these:
                l_trs = {m["l_tr"] for m in these}
                where = f"$L_{{tr}}$ = {l_trs.pop()}" if len(l_trs) == 1 else "their $L_{tr}$"
                out.append(f"{'The exception' if len(odd) == 1 else 'Exceptions'}: "
                           + _join([f"{m['label']} (ERF {m['erf']})" for m in these]) + f" {words} {where}.")
    if any(m["capped"] for m in models):
        out.append("An ERF written ≥ N is a lower bound: its segment capped it.")
    stopped = [m for m in models if not m["complete"]]
    if stopped:
        out.append(f"Read where {'it' if len(stopped) == 1 else 'they'} stopped part-way: "
                   + _join([f"{m['label']} ({_tokens(m['tokens'])} tokens)" for m in stopped]) + ".")
    return Prose(" ".join(out))


def _since(m: dict) -> str:
    return (f"at {_tokens(m['tokens'])} tokens, its last size" if m["from"] == m["tokens"] else
            f"from {_tokens(m['from'])} tokens")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def _grown(em: pd.DataFrame, d: pd.DataFrame) -> dict:
    """One model's curve (its rows, in order of tokens) read as :func:`emergence` reads it."""
    last = d.iloc[-1]
    l_tr = int(last["l_tr"])
    top = _top(em, last)
    broken, flat = d[f"r_lo@{top}"] >= BREAKS, d[f"r_hi@{top}"] <= TOL
    state = "breaks" if broken.iloc[-1] else "flat" if flat.iloc[-1] else "rises"
    since = None
    if state != "rises":  # the first size of the last unbroken stretch of that state
        holds = broken if state == "breaks" else flat
        before = d[~holds]
        since = d["tokens"].iloc[0] if before.empty else d[d["tokens"] > before["tokens"].iloc[-1]]["tokens"].iloc[0]
        if state == "flat" and before.empty:
            since = None  # flat at every size
    return {"label": _label(last), "state": state, "from": since, "tokens": last["tokens"], "where": _mult(top, l_tr),
            "l_tr": l_tr, "erf": _erf(last), "beyond": int(last["erf"]) > l_tr, "capped": bool(last["erf_capped"]),
            "complete": bool(last["complete"])}


def two_runs(sbs: pd.DataFrame, shipped: int, planned: int, cost: str, new: str = "long",
             old: str = "long-repeated") -> Prose:
    """The second long run against the first (rows of :func:`rflens.longrun.compare.side_by_side`):
    how many of its models are shipped; of the models shipped in both, how many end in the
    same state, which end in another, and how many of those that rise somewhere rise less on
    new text (and for how many the two intervals do not overlap), and from which size those
    that break in both runs break in each; then one table of them all."""
    head = f"The second long run holds {shipped} of its {planned} models" + (
        "." if shipped == planned else f"; the rest need {cost}.")
    if sbs is None or sbs.empty or new not in sbs.columns.get_level_values(0):
        return Prose(head + " None of its thesis models is shipped yet: the comparison appears as they are.")
    both = sbs[sbs[(new, "state")].notna() & sbs[(old, "state")].notna()]
    if both.empty:
        return Prose(head + " None of its shipped models is in both runs yet.")

    def r(row, run):
        broke = row[(run, "breaks from")]
        return (f"{row[(run, 'r(16 L_tr)')]:.2f} [{row[(run, 'low')]:.2f}, {row[(run, 'high')]:.2f}]",
                str(row[(run, "state")]) + (f" from {_tokens(broke)}" if not pd.isna(broke) else ""))

    moved = [f"{tex(row[('', 'model')])} ({row[(old, 'state')]} on repeated text, {row[(new, 'state')]} on new)"
             for _, row in both.iterrows() if row[(new, "state")] != row[(old, "state")]]
    rising = both[(both[(new, "state")] != "extrapolates") | (both[(old, "state")] != "extrapolates")]
    less = rising[rising[(new, "r(16 L_tr)")] < rising[(old, "r(16 L_tr)")]]
    apart = less[less[(new, "high")] < less[(old, "low")]]
    broke = both[(both[(new, "state")] == "breaks") & (both[(old, "state")] == "breaks")]
    early = [f"{tex(row[('', 'model')])} (from {_tokens(row[(new, 'breaks from')])} tokens on new text, "
             f"{_tokens(row[(old, 'breaks from')])} on repeated)" for _, row in broke.iterrows()]
    n, tokens = len(both), _tokens(both[(new, "tokens")].max())
    from rflens.longrun.compare import THESIS
    from rflens.longrun.plan import by_experiment
    from rflens.setup.presets import get

    groups = list(dict.fromkeys(group.split(":")[0] for group, specs in by_experiment(get(new)).items()
                                if group.startswith(THESIS) and any(spec.name in both.index for spec in specs)))
    text = (f"{head} Of the {_count(n, 'thesis model')} ({'; '.join(groups)}) shipped in both, {n - len(moved)} end in the same state at their last "
            "size" + (f"; {_join(moved)} {'end' if len(moved) > 1 else 'ends'} in another." if moved else ".")
            + (f" Of the {len(rising)} that rise or break in either run, {len(less)} rise less on new text, "
               f"{len(apart)} of them with intervals that do not overlap (the runs differ in their corpora as well "
               "as in repetition, so this is not repetition's effect alone)." if len(rising) else "")
            + (f" {_join(early)} break{'s' if len(early) == 1 else ''} in both runs." if early else ""))
    lines = ["| model | new text: r(16 $L_{tr}$) | state | repeated text: r(16 $L_{tr}$) | state |",
             "|---|---|---|---|---|"]
    for _, row in both.iterrows():
        (r_new, s_new), (r_old, s_old) = r(row, new), r(row, old)
        lines.append(f"| {tex(row[('', 'model')])} | {r_new} | {s_new} | {r_old} | {s_old} |")
    return Prose(text + f" Each at its last size ({tokens} tokens; state: breaks, rises, or extrapolates):\n\n"
                 + "\n".join(lines))


_STATES = {"breaks": "breaks", "rises": "rises without breaking", "extrapolates": "stays flat"}


def table2_designed(pairs: pd.DataFrame, em: pd.DataFrame) -> Prose:
    """Chapter 10: Table 2 as the paper designed it. For each retrained model (rows of
    :func:`rflens.longrun.compare.table2_pairs`, its curve in ``em``, rows of
    :func:`rflens.store.bundle.table`): what it does beyond its own L_tr at its last size, its ERF
    against that L_tr, and its perplexity against its Table 1 model's at the longest length
    both measured (the paired ratio). Then whether each outcome is what the paper expects
    (claim 7: a retrained model stays flat) and what the receptive field predicts (flat when
    the ERF is within the new L_tr)."""
    from rflens.longrun.compare import state

    if pairs is None or pairs.empty:
        return Prose("No retrained model is in this run with its Table 1 model yet.")
    out, paper, lens = [], 0, 0
    for label, d in pairs.groupby("retrained", sort=False):
        curve = em[em["name"] == d["name"].iloc[0]].sort_values("tokens")
        if curve.empty:
            continue
        last = curve.iloc[-1]
        l_tr, kind = int(last["l_tr"]), state(last)
        within = int(last["erf"]) <= l_tr and not bool(last["erf_capped"])
        paper += kind == "extrapolates"
        lens += (kind == "extrapolates") == within
        both = d.dropna(subset=["retrained / Table 1"]).sort_values("L")
        ratio = "" if both.empty else (
            f"; at $L$ = {int(both['L'].iloc[-1])} its perplexity is {both['retrained / Table 1'].iloc[-1]:.3f} "
            f"[{both['low'].iloc[-1]:.3f}, {both['high'].iloc[-1]:.3f}] times its Table 1 model's on the same tokens")
        out.append(f"{tex(label)}, the retrained {tex(str(d['Table 1 model'].iloc[0]))}: at {_tokens(last['tokens'])} "
                   f"tokens it {_STATES[kind]} (r({HORIZON} $L_{{tr}}$) = {last['r_horizon']:.3f} "
                   f"[{last['r_horizon_lo']:.3f}, {last['r_horizon_hi']:.3f}]), with an ERF of {_erf(last)}, "
                   f"{'within' if within else 'beyond'} its $L_{{tr}}$ = {l_tr}{ratio}.")
    n = len(out)
    if not n:
        return Prose("No retrained model is in this run with its Table 1 model yet.")
    return Prose("\n".join(f"- {line}" for line in out) + "\n\n" + (
        f"The paper expects every retrained model to stay flat (claim 7): {paper} of these {n} do. The receptive "
        f"field predicts a flat model where the ERF is within the new $L_{{tr}}$ and a rising one where it is "
        f"beyond: it is right for {lens} of {n}."))


def early_warning(counts: pd.DataFrame) -> Prose:
    """How well an ERF beyond L_tr at the first measured size foretold a break by the last
    (rows of :func:`rflens.longrun.compare.warning_counts`), per run."""
    if counts is None or counts.empty:
        return Prose("No finished long-run model to test the early warning on.")
    out, missed, false = [], 0, 0
    for run in dict.fromkeys(counts.index.get_level_values("run")):
        c = counts.loc[run]

        def get(flagged, col, c=c):
            return int(c.loc[flagged, col]) if flagged in c.index and col in c.columns else 0

        tp, fp, fn, tn = get(True, "broke"), get(True, "did not break"), get(False, "broke"), get(False, "did not break")
        broke, missed, false = tp + fn, missed + fn, false + fp
        out.append(f"- `{run}`: of the {broke} models that broke, {tp} had an ERF beyond $L_{{tr}}$ at the first size; "
                   f"of the {fp + tn} that did not, {fp} had one too. The warning "
                   + ("missed no break" if fn == 0 else f"missed {fn} break{'s' * (fn != 1)}")
                   + f", and {fp / max(fp + tp, 1):.0%} of the models it flagged did not break.")
    verdict = ("No model whose early ERF stayed inside $L_{tr}$ broke" if not missed else
               f"{missed} model{'s' * (missed != 1)} broke with an early ERF inside $L_{{tr}}$")
    verdict += (", but a wide early ERF does not mean a break: the warning is a screen, not a forecast."
                if false else ", and every flagged model broke.")
    return Prose("An ERF beyond $L_{tr}$ at the first measured size (0.5M tokens), read as a warning that the model "
                 "will break by its last size:\n\n" + "\n".join(out) + "\n\n" + verdict)


def schedule_check(sc: pd.DataFrame | None, scale: str | None = None) -> Prose:
    """Whether a cooled-down point of the long run agrees with a cosine run of its size, at
    the longest length: the paired interval of the ratio of their r(L); ``scale``: the run
    that carries the check, named in the reading."""
    if sc is None or sc.empty:
        return Prose("No long run carries the schedule check.")
    row = sc.reset_index().iloc[-1]  # rows of rflens.longrun.compare.schedule, indexed by (model, L)
    low, high = row["wsd / cosine low"], row["wsd / cosine high"]
    agree = low <= 1 <= high
    where = f" (measured on the `{scale}` run, whose model and schedule the other long run shares)" if scale else ""
    return Prose(
        f"At {_tokens(row['tokens'])} tokens{where}, r({int(row['L'])}) of the cooled-down point is "
        f"{row['r wsd']:.3f} [{row['r wsd low']:.3f}, {row['r wsd high']:.3f}] and that of a cosine run of the same "
        f"size {row['r cosine']:.3f} [{row['r cosine low']:.3f}, {row['r cosine high']:.3f}]; their ratio over the same "
        f"segments is {row['wsd / cosine']:.4f} [{low:.4f}, {high:.4f}], "
        + ("an interval that holds 1: the two schedules agree at this size." if agree else
           "an interval that excludes 1: the schedules differ at this size, and the curves are read as the "
           "warmup-stable-decay runs they are."))


def forecast_outcome(out: pd.DataFrame) -> Prose:
    """The forecast sealed before the long run's rising models were trained further, against
    what they measured: how many are trained, how many fell inside each curve model's range,
    which broke (the lower end of the interval at 2 or above) and which did not."""
    if out is None or out.empty:
        return Prose("The long run carries no forecast.")
    out = named_by_paper(out)
    done = out[out["r"].notna()]
    n, tokens = len(out), out["tokens"].iloc[0]
    if done.empty:
        return Prose(f"None of the {n} models the forecast named is trained to {tokens} yet: the test is still to come.")
    k = len(done)
    power, decel = int(done["inside (power)"].sum()), int(done["inside (decelerating)"].sum())
    text = [f"All {n} models the forecast named are trained to {tokens}." if k == n else
            f"{k} of the {n} models the forecast named {'are' if k > 1 else 'is'} trained to {tokens} so far."]
    text.append(f"Their measured r(16 $L_{{tr}}$) fell inside the power law's range for {power} of {k} and inside the "
                f"decelerating model's for {decel} of {k}.")
    if "inside (line)" in done:
        past, line = out["doublings past the fit"].max(), int(done["inside (line)"].sum())
        text.append(f"The test reached {past:.2f} of a doubling of tokens past the last size the forecast fitted. "
                    f"Two forecasts that model nothing, scored by whether they fall inside the measured interval: "
                    f"r unchanged from the last shipped size, {int(done['inside (no change)'].sum())} of {k}; r on the "
                    f"straight line in log tokens through the last two sizes, {line} of {k}.")
        if line >= max(power, decel):
            text.append("The line did as well as either curve model: a step this short past the fit cannot tell a "
                        "curve's shape from a straight line, and the forecast's success is no evidence for its model.")
    outside = [f"{tex(m)} ({v})" for m, v, a, b in done[["model", "measured", "inside (power)",
                                                          "inside (decelerating)"]].itertuples(index=False)
               if not (a and b)]
    if outside:
        text.append(f"Outside at least one range: {_join(outside)}.")
    broke, rising, below = forecast_groups(done)
    if len(broke):
        text.append(f"Broken by {tokens} (the interval's lower end at {BREAKS:g} or above): "
                    f"{_join([tex(m) for m in broke['model']])}.")
    if len(rising):
        text.append(f"At or above {BREAKS:g} but with an interval that still reaches below it (not yet decided): "
                    f"{_join([f'{tex(m)} ({v})' for m, v in rising[['model', 'measured']].itertuples(index=False)])}.")
    if len(below):
        text.append(f"Still below {BREAKS:g}: {_join([f'{tex(m)} ({v})' for m, v in below[['model', 'measured']].itertuples(index=False)])}.")
    text += _growth(done)
    return Prose(" ".join(text))


def named_by_paper(out: pd.DataFrame) -> pd.DataFrame:
    """Rows of :func:`rflens.longrun.forecast.outcome` with each model named by the paper's setting."""
    return out.assign(model=out["the paper's"]) if "the paper's" in out else out


def forecast_groups(done: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The trained rows of :func:`rflens.longrun.forecast.outcome` in three: broken (the
    interval's lower end at :data:`BREAKS` or above), at or above it with an interval that
    still reaches below, and below it."""
    return (done[done["r low"] >= BREAKS], done[(done["r low"] < BREAKS) & (done["r"] >= BREAKS)],
            done[done["r"] < BREAKS])


def slowed(done: pd.DataFrame) -> tuple[int, int]:
    """(how many of the trained rows grew more slowly per doubling in the test than before it,
    how many both growths are known for)."""
    g = _with_growth(done)
    return int((g["growth in the test"] < g["growth before"]).sum()), len(g)


def _with_growth(done: pd.DataFrame) -> pd.DataFrame:
    return done.dropna(subset=["growth before", "growth in the test"])


def _growth(done: pd.DataFrame) -> list[str]:
    """What the curves say of when failure comes: r - 1's growth per doubling of tokens in the
    test's step against the sizes the forecast fitted (:func:`rflens.longrun.forecast.outcome`)."""
    g = _with_growth(done)
    if g.empty:
        return []
    slower, k = slowed(g)
    said = [f"Per doubling of tokens, $r - 1$ grew by a median ×{g['growth in the test'].median():.2f} in the test's "
            f"last step, against ×{g['growth before'].median():.2f} over the sizes the forecast fitted; slower for "
            f"{slower} of the {k} models."]
    if 2 * slower > k:
        said.append("The rise is slowing: where these models break, they break later than a constant growth "
                    "per doubling would put it, which is the decelerating curve's premise.")
    elif 2 * slower < k:
        said.append("The rise is not slowing: a constant growth per doubling, the power law's premise, "
                    "is the nearer description.")
    return said


def pilot_and_runs(pilot: pd.DataFrame | None, runs: tuple[str, ...] = ("long-repeated", "long"),
                   model: str = "alibi_slope_shift=4") -> pd.DataFrame:
    """The paper's Δ = 8 as the pilot of chapter 11 and each long run measured it, one row a
    size: where it was trained (width, text, schedule) and r(16 L_tr). The pilot's rows are
    its flattest ALiBi at L_tr = 32, R = 4; the runs' their ``model``."""
    from rflens.longrun.forecast import curve
    from rflens.store import bundle

    rows = []
    if pilot is not None and not pilot.empty:
        sub = pilot[(pilot["model"] == "alibi_max") & (pilot["R"] == 4) & (pilot["l_tr"] == 32)]
        for _, r in sub.iterrows():
            rows.append({"source": "pilot (chapter 11)", "d": int(r["d"]), "text": "prose (repeated)",
                         "schedule": "cosine, one run a size", "tokens": float(str(r["tokens"]).rstrip("M")) * 1e6,
                         "r(16 L_tr)": float(r["r(16 L_tr)"])})
    for scale in runs:
        if model not in bundle.complete(scale):
            continue
        res = bundle.load(model, scale)
        text = f"{res['data']['corpus']} ({'repeated' if scale == 'long-repeated' else 'new'})"
        for t, r, _ in zip(*curve(res)):
            rows.append({"source": scale, "d": int(res["model"]["d_model"]), "text": text,
                         "schedule": "warmup-stable-decay", "tokens": float(t), "r(16 L_tr)": float(r)})
    out = pd.DataFrame(rows)
    if not out.empty:
        out["tokens"] = out["tokens"].map(lambda t: f"{t / 1e6:.1f}M")
    return out


def _crossing(sub: pd.DataFrame) -> str:
    """Between which two sizes r(16 L_tr) first reaches 2, or the last value when it does not."""
    vals = [(t, r) for t, r in sub[["tokens", "r(16 L_tr)"]].itertuples(index=False)]
    for (t0, r0), (t1, r1) in zip(vals, vals[1:]):
        if r0 < BREAKS <= r1:
            return f"reaches {BREAKS:g} between {t0} ({r0:.2f}) and {t1} ({r1:.2f})"
    t, r = vals[-1]
    return f"reads {r:.2f} at {t}, still below {BREAKS:g}" if r < BREAKS else f"reads {r:.2f} at {t}"


def pilot_reconciled(table: pd.DataFrame) -> Prose:
    """Why the pilot's trend crossed 2 near 10M tokens and the long run's Δ = 8 had not at
    33.6M: the rows of :func:`pilot_and_runs` that differ in one knob at a time."""
    if table is None or table.empty:
        return Prose("The pilot's measurements or the long runs are not in this checkout.")
    by = {s: g for s, g in table.groupby("source", sort=False)}
    out = []
    pilot = by.get("pilot (chapter 11)")
    if pilot is not None:
        for d, g in pilot.groupby("d"):
            out.append(f"the pilot at d = {d} (repeated prose, a cosine run a size) {_crossing(g)}")
    for scale in ("long-repeated", "long"):
        if scale in by:
            g = by[scale]
            out.append(f"`{scale}` at d = {g['d'].iloc[0]} ({g['text'].iloc[0]}, warmup-stable-decay) {_crossing(g)}")
    text = "Δ = 8 (the book's Δ = 4 at $L_{tr}$ = 32): " + "; ".join(out) + "."
    same = []  # one knob at a time, at the sizes both measured
    if pilot is not None and pilot["d"].nunique() > 1:
        w = pilot.pivot_table(index="tokens", columns="d", values="r(16 L_tr)").dropna()
        if len(w):
            t = w.index[-1]
            same.append(f"width (d = {w.columns[0]} against {w.columns[-1]} at {t}: {w.iloc[-1, 0]:.2f} against "
                        f"{w.iloc[-1, -1]:.2f})")
    if pilot is not None and "long-repeated" in by and "long" in by:
        near = lambda g, t: g.iloc[(g["tokens"].map(lambda v: float(v.rstrip("M"))) - t).abs().argmin()]  # noqa: E731
        p, c, n = near(pilot[pilot["d"] == pilot["d"].max()], 8.0), near(by["long-repeated"], 8.0), near(by["long"], 8.0)
        same.append(f"schedule and width together (the pilot's {p['r(16 L_tr)']:.2f} at {p['tokens']} against "
                    f"`long-repeated`'s {c['r(16 L_tr)']:.2f} at {c['tokens']})")
        same.append(f"the text (`long-repeated`'s {c['r(16 L_tr)']:.2f} against `long`'s {n['r(16 L_tr)']:.2f} at "
                    f"{n['tokens']}, same width and schedule)")
    if same:
        text += " One knob at a time: " + "; ".join(same) + "."
    return Prose(text)


def by_depth(boards: dict[str, list[dict]], shallow: str = "long", deep: str = "deep") -> dict[int, tuple[str, str]]:
    """Every claim read at both depths (not "not run" at either; ``boards``: {run: its board}),
    in the shallow board's order, with its verdict at the shallow depth and at the deep one."""
    a, b = ({int(c["id"]): c["result"] for c in boards.get(run, [])} for run in (shallow, deep))
    return {i: (a[i], b[i]) for i in a if a[i] != "not run" and b.get(i, "not run") != "not run"}


def two_depths(dp: pd.DataFrame, boards: dict[str, list[dict]], shallow: str = "long", deep: str = "deep",
               peaks: pd.DataFrame | None = None) -> Prose:
    """Chapter 10: the long run at four layers against the paper's depth (``dp``: rows of
    :func:`rflens.longrun.compare.depths`; ``boards``: {run: its board}): ERF / w of the
    windows at each depth beside the paper's, each paper's setting trained at both depths
    with its state, where Sinusoidal's gradient peaks at each depth and L_tr (``peaks``: rows
    of :func:`rflens.longrun.compare.sinusoidal_peaks`), and the claims whose verdict changes
    with depth or is decided at one depth only (one sentence each, with what each depth
    measured), stays, is decided at neither, or waits for the deep run's models."""
    from rflens import paper

    theirs = [e / w for w, e in paper.WINDOW_ERF.items()]
    said = []
    if not dp.empty:
        ratios = []
        for layers, d in dp.groupby("layers", sort=False):
            w = d["ERF / w"].dropna()
            if len(w):
                unfinished = int((~d.loc[w.index, "finished"]).sum())
                ratios.append(f"{w.min():.1f} to {w.max():.1f} at {layers} layers"
                              + (f" ({unfinished} of its {len(w)} windows still training)" if unfinished else ""))
        if ratios:
            said.append(f"A window's receptive field over its width, ERF / w, at the last measured size: "
                        f"{_join(ratios)}; the paper's is {min(theirs):.1f} to {max(theirs):.1f} at "
                        f"{paper.N_LAYER} layers.")
        same = dp["ERF / w, same tokens"].dropna() if "ERF / w, same tokens" in dp else pd.Series(dtype=float)
        if len(same) and not dp["finished"].all():  # once every model is finished it is the sentence above
            said.append(f"At the sizes the {paper.N_LAYER}-layer windows have reached, the same settings at "
                        f"{int(dp.loc[same.index, 'layers'].iloc[0])} layers read {same.min():.1f} to {same.max():.1f}.")
        both = [key for key, d in dp.groupby("the paper's", sort=False) if d["layers"].nunique() == 2]
        rows = []
        for key in both:
            d = dp[dp["the paper's"] == key]
            parts = [f"{r['state']} at {r['layers']} layers ({r['r(16 L_tr)']:.2f} [{r['low']:.2f}, {r['high']:.2f}], "
                     f"ERF {r['ERF']} against L_tr = {r['L_tr']}, {_tokens(r['tokens'])} tokens"
                     + ("" if r["finished"] else ", still training") + ")" for _, r in d.iterrows()]
            rows.append(f"{key}: {_join(parts)}")
        if rows:
            said.append("Trained at both depths: " + "; ".join(rows) + ".")
    if peaks is not None and not peaks.empty:
        where = [f"{int(r['peak at'])} at {r['layers']} layers with L_tr = {r['L_tr']} ({int(r['peak - L_tr']):+d}"
                 + (", embeddings unscaled" if r.get("embeddings") == "unscaled" else "") + ")"
                 for _, r in peaks.iterrows()]
        said.append(f"Sinusoidal's largest gradient outside the most recent tokens sits at absolute position "
                    f"{_join(where)}; the paper finds it at L_tr.")
    a, b = ({int(c["id"]): c["result"] for c in boards.get(run, [])} for run in (shallow, deep))
    measured = {run: {int(c["id"]): c.get("measured") for c in boards.get(run, [])} for run in (shallow, deep)}
    decided = ("pass", "fail")

    def reading(run: str, i: int, result: str) -> str:
        m = measured[run].get(i)
        return f"{result} at `{run}`" + (f" ({m})" if m else "")

    pairs = by_depth(boards, shallow, deep)
    moved = [f"Claim {i} changes with depth: {reading(shallow, i, x)}; {reading(deep, i, y)}."
             for i, (x, y) in pairs.items() if x in decided and y in decided and x != y]
    same = [str(i) for i, (x, y) in pairs.items() if x in decided and x == y]
    one_side = [f"Claim {i} is decided at one depth only: {reading(shallow, i, x)}; {reading(deep, i, y)}."
                for i, (x, y) in pairs.items() if (x in decided) != (y in decided)]
    neither = [str(i) for i, (x, y) in pairs.items() if x not in decided and y not in decided]
    from rflens.setup.presets import get

    planned = set(get(deep).decides) or set(a)
    waiting = [str(i) for i in a if b.get(i) == "not run" and i in planned]
    outside = [str(i) for i in a if b.get(i) == "not run" and i not in planned]
    said += moved + one_side
    if same:
        said.append(f"The same verdict at both depths: claim{'s' * (len(same) > 1)} {_join(same)}.")
    if neither:
        said.append(f"Not decided at either depth: claim{'s' * (len(neither) > 1)} {_join(neither)}.")
    if waiting:
        said.append(f"Not yet checked at {paper.N_LAYER} layers (their models are still to be trained): "
                    f"claim{'s' * (len(waiting) > 1)} {_join(waiting)}.")
    if outside:
        said.append(f"Outside the `{deep}` run's plan (read at four layers only): "
                    f"claim{'s' * (len(outside) > 1)} {_join(outside)}.")
    return Prose(tex(" ".join(said)) if said else f"The `{deep}` run has no model shipped yet.")


def clock_outcome(ladders: pd.DataFrame, verdicts: dict[str, dict], diversity: dict[str, dict] | None = None) -> Prose:
    """Each ladder's standing under the rule sealed with its predictions: its models
    measured, the measured cells that decide between its clocks and which clock each agrees
    with, and the verdict (``ladders``: :func:`rflens.longrun.clock.ladders`; ``verdicts``:
    {ladder: :func:`rflens.longrun.clock.verdict`} for the sealed ones); for a one-source
    ladder (``diversity``: {ladder: :func:`rflens.longrun.clock.diversity`}), whether it
    differs from the stratified run of its size, model by model."""
    text = []
    diversity = diversity or {}
    for name, row in ladders.iterrows():
        if name not in verdicts:
            text.append(f"`{name}` has no sealed predictions: nothing of it is read.")
            continue
        v = verdicts[name]
        clocks = row["clocks"].split(" against ")
        head = (f"`{name}` (beside `{row['set beside']}`): {row['measured']} of its {row['models']} models measured "
                f"({row['finished']} finished)")
        if not v["deciding"]:
            text.append(f"{head}; no measured size decides between {_join(clocks)} yet.")
        else:
            agree = _join([f"{v['agree'][c]} with {c}" for c in clocks])
            verdict = (f"by the sealed rule, **{v['holds']}** holds" if v["holds"] else
                       f"the sealed rule does not decide yet (it needs at least {v['min_deciding']} deciding cells, "
                       f"{v['win_share']:.0%} of them agreeing with one clock)")
            text.append(f"{head}; of the {_count(v['deciding'], 'measured cell')} that decide between the clocks, "
                        f"{agree} agree: {verdict}.")
        if diversity.get(name):
            text.append(_diversity(diversity[name]))
    return Prose(" ".join(text))


def _diversity(d: dict) -> str:
    """One sentence: a one-source ladder against the stratified run of its size (``d``:
    :func:`rflens.longrun.clock.diversity`), by the rule sealed with its predictions."""
    if not d["compared"]:
        return f"Set beside `{d['stratified']}`, the stratified run of its size, no measured cell rises yet."
    per = {}
    for c in d["cells"]:
        n, k = per.get(c["label"], (0, 0))
        per[c["label"]] = (n + 1, k + c["differs"])
    models = _join([f"{tex(label)}: {k} of {n}" for label, (n, k) in per.items()])
    verdict = {True: "by the sealed rule, diversity **matters** at this size",
               False: "by the sealed rule, diversity **does not matter** at this size",
               None: "the sealed rule does not decide whether diversity matters"}[d["matters"]]
    return (f"Against `{d['stratified']}`, the stratified run of its size (the same tokens, every source in proportion), "
            f"{d['differ']} of the {_count(d['compared'], 'cell')} (model, size) where either rises have 95% ranges "
            f"apart ({models}): {verdict}.")


def share_and_r(sr: pd.DataFrame) -> Prose:
    """Claim 6 as a continuous relation (:func:`rflens.longrun.compare.share_against_r`): at each
    depth, how strongly the share of the gradient within L_tr ranks against r(16 L_tr), with
    its interval, and the flat model that keeps the least of its gradient within L_tr."""
    if sr is None or sr.empty:
        return Prose("No run ships enough Table 1 models for the relation between the gradient within $L_{tr}$ and "
                     "r(16 $L_{tr}$) to be read.")
    parts = [f"{int(row['layers'])} layers: ρ = {row['rank correlation']:.2f} [{row['low']:.2f}, {row['high']:.2f}] "
             f"over {int(row['models'])} models and {int(row['cells'])} (model, size) cells" for _, row in sr.iterrows()]
    text = ["Without the cut at $L_{tr}$, claim 6 is a relation: the more of its gradient a model keeps within the last "
            "$L_{tr}$ tokens (on a 16 $L_{tr}$ input), the flatter it should stay. The rank correlation between that "
            f"share and r(16 $L_{{tr}}$), over every Table 1 model and size, with a 95% interval that resamples models: "
            f"{_join(parts)}."]
    negative = sr[sr["high"] < 0]
    if len(negative) == len(sr):
        text.append("At every depth the interval lies below zero: the relation holds as a trend, not only at the cut.")
    elif len(negative):
        text.append(f"The interval lies below zero at {_join([f'{int(v)} layers' for v in negative['layers']])} only.")
    else:
        text.append("No interval lies below zero: the relation is not shown as a trend.")
    named = sr.dropna(subset=["its share"])
    if len(named):
        text.append("The flat model that keeps the least of its gradient within $L_{tr}$: " + _join(
            [f"{tex(row['flat with the least share'])} at {int(row['layers'])} layers ({row['its share']:.1%})"
             for _, row in named.iterrows()]) + ".")
        near = named[named["its share"] >= 0.95]
        if len(near):
            text.append(f"{_join([tex(v) for v in near['flat with the least share']])} sits on claim 6's cut: nearly all "
                        "of its gradient lies within $L_{tr}$, but its ERF (the span holding 99%) passes $L_{tr}$, so the "
                        "cut reads it as a model that should fail.")
    return Prose(" ".join(text))


def agreement_by_size(ag: pd.DataFrame) -> Prose:
    """Claim 6 at every size (:func:`rflens.longrun.compare.erf_agreement_by_size`): at each
    depth, the count at the first and the last size, and from which size on the paper's 80%
    holds at every later size."""
    if ag is None or ag.empty:
        return Prose("No run ships Table 1 models measured at several sizes.")
    parts = []
    for layers, d in ag.groupby("layers", sort=True):
        d = d.sort_values("tokens")
        first, last = d.iloc[0], d.iloc[-1]
        held = d["meets 80%"].to_numpy(bool)
        since = next((i for i in range(len(d)) if held[i:].all()), None)
        parts.append(f"at {layers} layers the cut agrees with {first['agree']} of {first['models']} models at "
                     f"{_tokens(first['tokens'])} tokens and {last['agree']} of {last['models']} at "
                     f"{_tokens(last['tokens'])}, " + (f"meeting the paper's 80% from {_tokens(d.iloc[since]['tokens'])} "
                                                       f"tokens on" if since is not None else "short of 80% at the last size"))
    return Prose("Read at each size the models were measured, claim 6's count: " + "; ".join(parts) + ". One verdict per "
                 "size and depth; the board decides on the last.")


def erf_spread(ei: pd.DataFrame, run: str) -> Prose:
    """The ERF's interval over segments (:func:`rflens.longrun.compare.erf_intervals`) of the
    models of ``run`` that ship each segment's gradient."""
    if ei is None or ei.empty:
        return Prose(f"No model of `{run}` ships each segment's gradient yet, so its ERFs have no interval here.")
    last = ei.sort_values("tokens").groupby("model").tail(1)
    parts = [f"{tex(r['label'])}: ERF {r['erf']} [{r['erf_low']:.0f}, {r['erf_high']:.0f}], "
             f"{r['share']:.1%} [{r['share_low']:.1%}, {r['share_high']:.1%}] of its gradient within $L_{{tr}}$"
             for _, r in last.iterrows()]
    return Prose(f"At its last size, with 95% intervals over the measured segments: {_join(parts)}.")


def paper_embeddings(peaks: pd.DataFrame) -> Prose:
    """Claim 8 with the book's Sinusoidal (embeddings scaled by sqrt(d)) and the paper's
    (unscaled), from :func:`rflens.longrun.compare.sinusoidal_peaks`: at each depth and L_tr
    both ship, where the gradient peaks and whether it jumps at L_tr on each input, and what
    that says about the deviation; where ``peaks`` holds several seeds (its ``seed`` column),
    how many of each model's seeds jump at L_tr and where they peak."""
    if peaks is None or peaks.empty or "embeddings" not in peaks.columns:
        return Prose("No Sinusoidal model is shipped.")
    seeds = ""
    if "seed" in peaks.columns:
        seeds = _seeds_jump(peaks)
        peaks = peaks[peaks["seed"] == 0]
    if not (peaks["embeddings"] == "unscaled").any():
        return Prose("Sinusoidal trained as the paper's code trains it (embeddings unscaled) is not shipped yet: "
                     "claim 8, which reads it, waits for it; the table shows the book's scaled Sinusoidal alone.")

    def jumps(r) -> str:
        on = [f"{'jumps' if r[c] else 'does not jump'} at $L_{{tr}}$ on the {k} $L_{{tr}}$ input"
              for k, c in ((16, "jumps at L_tr (16 L_tr input)"), (4, "jumps at L_tr (4 L_tr input)")) if r[c] is not None]
        at = ", at $L_{tr}$ as in the paper's Figure 7," if r.get("peak at L_tr") else ""
        return f"peaks at position {int(r['peak at'])} ({int(r['peak - L_tr']):+d}){at} and " + " and ".join(on)

    said, only_unscaled, neither, peak_only_unscaled = [], [], [], []
    for (layers, l_tr), d in peaks.groupby(["layers", "L_tr"], sort=True):
        by = {r["embeddings"]: r for _, r in d.iterrows()}
        if "unscaled" not in by:
            continue
        u, where = by["unscaled"], (int(layers), int(l_tr))
        text = (f"At {layers} layers, $L_{{tr}}$ = {l_tr}: unscaled, Sinusoidal {jumps(u)}, and r(4 $L_{{tr}}$) = "
                f"{u['r(4 L_tr)']:.3g} [{u['low']:.3g}, {u['high']:.3g}]")
        if "scaled" in by:
            s = by["scaled"]
            text += f"; scaled, it {jumps(s)}, and r(4 $L_{{tr}}$) = {s['r(4 L_tr)']:.3g} [{s['low']:.3g}, {s['high']:.3g}]"
            u_jump = any(u[c] for c in ("jumps at L_tr (16 L_tr input)", "jumps at L_tr (4 L_tr input)") if u[c] is not None)
            s_jump = bool(s["jumps at L_tr (16 L_tr input)"])
            if u_jump and not s_jump:
                only_unscaled.append(where)
            elif not u_jump and not s_jump:
                neither.append((where, u["low"] > s["high"]))
            if u.get("peak at L_tr") and not s.get("peak at L_tr"):
                peak_only_unscaled.append(where)
        said.append(text + ".")
    if only_unscaled:
        said.append(f"At {_places(only_unscaled)} the jump appears only without the scaling: the book's deviation, "
                    "not the models, kept claim 8 from replicating there.")
    if neither:
        harder = [where for where, apart in neither if apart]
        said.append(f"At {_places([where for where, _ in neither])} neither embedding gives the jump: the scaling is "
                    "not what keeps it from appearing there" + (
                        f"; without it, Sinusoidal breaks harder beyond $L_{{tr}}$ (the intervals apart at "
                        f"{_places(harder)})." if harder else "."))
    if peak_only_unscaled:
        said.append(f"At {_places(peak_only_unscaled)} only the unscaled model's gradient peaks at $L_{{tr}}$, as the "
                    "paper's Figure 7 shows: the scaling moves the peak. Claim 8's rule asks for more than a peak, a "
                    "step at $L_{tr}$ larger than every step around it.")
    return Prose("Each model from its first seed. " + " ".join(said) + seeds)


def _seeds_jump(peaks: pd.DataFrame) -> str:
    """" Over its seeds: ..." for every model of ``peaks`` (rows of
    :func:`rflens.longrun.compare.sinusoidal_peaks` with ``seeds``) shipped at more than one
    seed: how many jump at L_tr on either input, and where each peaks."""
    inputs = ("jumps at L_tr (16 L_tr input)", "jumps at L_tr (4 L_tr input)")
    parts = []
    for (layers, l_tr, kind), d in peaks.groupby(["layers", "L_tr", "embeddings"], sort=True):
        if len(d) < 2:
            continue
        d = d.sort_values("seed")
        jumped = sum(any(bool(r[c]) for c in inputs if c in r and r[c] is not None) for _, r in d.iterrows())
        at = _join([str(int(p)) for p in d["peak at"]])
        parts.append(f"{kind} at {layers} layers, $L_{{tr}}$ = {l_tr}, {jumped} of its {len(d)} seeds "
                     f"{'jumps' if jumped == 1 else 'jump'} at "
                     f"$L_{{tr}}$ (peaks at positions {at})")
    return " Over the seeds shipped: " + "; ".join(parts) + "." if parts else ""


def _places(where: list[tuple[int, int]]) -> str:
    """[(4, 32), (4, 64), (12, 64)] as "4 layers ($L_{tr}$ = 32 and 64) and 12 layers ($L_{tr}$ = 64)"."""
    by: dict[int, list[str]] = {}
    for layers, l_tr in where:
        by.setdefault(layers, []).append(str(l_tr))
    return _join([f"{layers} layers ($L_{{tr}}$ = {_join(l_trs)})" for layers, l_trs in sorted(by.items())])


def at_paper_ratio(pr: pd.DataFrame) -> Prose:
    """One sentence a run: which of the claims it decides hold at about the paper's training
    tokens per parameter and which at its full budget (``pr``: rows of
    :func:`rflens.claims.scoreboard.at_paper_ratio`); said so where a run decides none there yet."""
    out = []
    for run, d in pr.groupby("run", sort=False):
        def held(col, d=d):
            said = {word: [str(c) for c, r in zip(d["claim"], d[col]) if r == word]
                    for word in ("pass", "fail", "not decided")}
            parts = [f"{'holds' if w == 'pass' else 'fails' if w == 'fail' else 'does not decide'} "
                     f"{'claim' if len(ids) == 1 else 'claims'} {_join(ids)}" for w, ids in said.items() if ids]
            return "; ".join(parts) if parts else "decides none of them"
        first, there, full = d.iloc[0], held("at the paper's ratio"), held("at the full budget")
        out.append(f"- `{run}` ({int(first['layers'])} layers, d = {int(first['d'])}) at "
                   f"{_tokens(int(first['tokens there']))} tokens ({first['tokens per parameter there']:g} a parameter): "
                   f"{there}. At its full budget ({first['tokens per parameter at the budget']:g} a parameter): {full}.")
    if not out:
        return Prose("No shipped run has a board to read at the paper's tokens per parameter.")
    return Prose("\n".join(out))


def table2_protocols(tp: pd.DataFrame) -> Prose:
    """A sentence a retrained model of Table 2 (rows of
    :func:`rflens.longrun.compare.table2_protocols`): the field that set its L_tr on each input
    measured, and r at Table 1's horizon on the uniform draw and on every test document."""
    if tp.empty:
        return Prose("No retrained model of Table 2 is finished beside its Table 1 model yet.")
    out = []
    for _, row in tp.iterrows():
        paper_input = row["Table 1 ERF (4 L_tr input)"]
        field = (f"its Table 1 model's ERF is {row['Table 1 ERF (16 L_tr input)']} on the book's input of 16 L_tr "
                 + (f"and {paper_input} on the paper's input of 4 L_tr" if paper_input != "–" else
                    "(on the paper's input of 4 L_tr it was not measured: that model ships no weights and was "
                    "trained before its bundle kept the gradient on that input)"))
        if str(paper_input).startswith("≥"):  # the paper's rule, in the paper's protocol: train on that input's length
            old_l_tr, l_tr = int(row["Table 1 L_tr"]), int(row["L_tr"])
            field += (f" (it fills the paper's input, as Δ = 6's did in the paper, which then trained at that input's "
                      f"length, 4 L_tr = {4 * old_l_tr}: "
                      + ("the L_tr of this retraining)" if l_tr == 4 * old_l_tr else f"this retraining used {l_tr})"))
        text = (f"- {tex(row['retrained'])} (Table 1 at L_tr = {int(row['Table 1 L_tr'])}): {field}; its own ERF is "
                f"{row['ERF (16 L_tr input)']} on 16 L_tr" + (f" and {row['ERF (4 L_tr input)']} on 4 L_tr"
                                                               if row["ERF (4 L_tr input)"] != "–" else ""))
        if str(row["ERF (4 L_tr input)"]).startswith("≥"):
            text += (" (its field reaches the start of the paper's input: by the paper's rule, the L_tr that covers it "
                     "is longer still)")
        if not pd.isna(row.get("r", float("nan"))):
            text += (f". At L = {int(row['L'])}, r = {row['r']:.3f} [{row['r low']:.3f}, {row['r high']:.3f}] on the "
                     f"uniform draw ({int(row['documents'])} test documents scored)")
        if not pd.isna(row.get("r, every document", float("nan"))):
            text += (f"; on every one of its {int(row['documents, every'])} test documents, r = "
                     f"{row['r, every document']:.3f} [{row['low, every document']:.3f}, "
                     f"{row['high, every document']:.3f}]")
        out.append(tex(text + "."))
    return Prose("\n".join(out))
