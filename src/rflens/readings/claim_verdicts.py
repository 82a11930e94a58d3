"""The claims' verdicts as the book states them.

Every chapter with claims shows their computed verdicts (:func:`verdicts`) and lists in
its summary those that held or did not (:func:`held`); chapter 9 counts the board at one
scale (:func:`board`) and across scales (:func:`by_scale`); chapter 10 reads the long
run's verdicts from its bundle (:func:`long_run`). The rows come from
:func:`rflens.claims.verdicts.check`.
"""

from __future__ import annotations

from rflens.claims.statements import BY_ID, CONSTRUCTION, TRAINED
from rflens.claims.verdicts import RESULTS
from rflens.readings.notation import _bullets, _join, _tokens, Prose, tex
from rflens.setup.presets import BOOK_LONG


_WORD = {"pass": "holds", "fail": "does not hold", "not decided": "is not decided at this scale",
         "not run": "was not run"}  # the board's own words: one word a result


def verdicts(rows: list[dict], scale: str) -> Prose:
    """The computed verdict of each claim in ``rows`` (from :func:`rflens.claims.verdicts.check`):
    what the paper says, the fixed criterion, and what this build measured."""
    out = [f"Computed at the `{scale}` scale:", ""]
    for c in rows:
        claim = BY_ID[int(c["id"])]
        rests = (" Its verdict rests on a closed form, not on training: the same at every scale."
                 if claim.evidence == CONSTRUCTION else "")
        n = c.get("comparisons")
        mark = (f" (each interval widened so that all {n} the verdict reads hold together at 95%: wider than "
                "the same interval shown alone)" if isinstance(n, int) and n > 1 else "")
        out.append(f"- **Claim {c['id']} {_WORD[c['result']]}.** {tex(c['statement'])} "
                   f"*Criterion:* {tex(c['criterion'])}. *Measured{mark}:* {tex(c['measured'])}. "
                   f"*The paper reports:* {tex(claim.paper)}.{rests}")
    return Prose("\n".join(out))


_HELD = {"pass": "held", "fail": "not held", "not decided": "not decided"}  # a verdict in a clause


def _training(run: str) -> bool:
    """Whether a model of the long run ``run``'s plan is not yet shipped finished."""
    from rflens.longrun import plan
    from rflens.setup import presets
    from rflens.store import bundle

    return bool({m.name for m in plan.models(presets.get(run))} - set(bundle.complete(run)))


def at_each_scale(rows: list[dict], scale: str, runs: dict[str, list[dict]]) -> Prose:
    """A chapter's opening summary (MyST): each of its claims with its verdict at this build's
    ``scale`` and in every shipped long run (``runs``: {run: its board or the same claims read
    from its bundle}) beside what the paper reports; then how the verdicts move from this
    scale to the long runs, and for each claim a long run fails or leaves undecided, one line
    of what was measured to cause it (:func:`rflens.claims.causes.causes`)."""
    from rflens.claims.causes import causes
    from rflens.readings.index_box import _tokens_a_model

    ids = [int(c["id"]) for c in rows]
    runs = {run: [c for c in board if int(c["id"]) in ids] for run, board in runs.items() if run != scale}
    by = {run: {int(c["id"]): c for c in board} for run, board in runs.items()}
    head = f"| claim | `{scale}` ({_tokens(_tokens_a_model(scale))} tokens a model) |"
    rule = "|---|---|"
    for run in runs:
        head += f" `{run}` ({_tokens(_tokens_a_model(run))}) |"
        rule += "---|"
    lines = [head + " the paper |", rule + "---|"]
    for c in rows:
        cid = int(c["id"])
        cells = [f"{cid}: {tex(c['statement'])}", c["result"]]
        cells += [by[run][cid]["result"] if cid in by[run] else "not run" for run in runs]
        cells.append(tex(BY_ID[cid].paper))
        lines.append("| " + " | ".join(cell.replace("|", "/") for cell in cells) + " |")
    said = []
    here = {int(c["id"]): c["result"] for c in rows}
    for run, there in ((run, {cid: c["result"] for cid, c in b.items()}) for run, b in by.items()):
        trained = [i for i in ids if BY_ID[i].evidence == TRAINED]
        moves = [(a, "pass") for a in ("fail", "not decided")] + [("pass", b) for b in ("fail", "not decided")]
        groups = {(a, b): [i for i in trained if here[i] == a and there.get(i) == b] for a, b in moves + [("fail", "fail")]}
        words = {(a, b): f"{_HELD[a]} at `{scale}`, {_HELD[b]} in `{run}`" + (", as the paper reports" if b == "pass" else "")
                 for a, b in moves} | {("fail", "fail"): f"not held at `{scale}` and still not held in `{run}`"}
        said += [f"Claim{'s' * (len(v) > 1)} {_join([str(i) for i in v])}: {words[k]}." for k, v in groups.items() if v]
    built = [str(i) for i in ids if BY_ID[i].evidence == CONSTRUCTION]
    if built:
        said.append(f"Claim{'s' * (len(built) > 1)} {_join(built)} rest{'s' * (len(built) == 1)} on a closed form, "
                    "not on training: the same verdict at every scale.")
    why = []
    for run, board in runs.items():
        read = [c for c in board if BY_ID[int(c["id"])].evidence == TRAINED]
        if all(c["result"] == "not run" for c in read):
            # "trains no": the board's own reason that the run's plan holds none of the models a claim reads
            waits = _training(run) and not all("trains no" in str(c.get("measured", "")) for c in read)
            said.append(f"`{run}` reads none of these claims yet: its models are still training "
                        "([chapter 10](10_long_runs.ipynb))." if waits else
                        f"`{run}` reads none of these claims: it trains none of the models they read.")
            continue
        for cid, (kind, line) in causes(board, run).items():
            why.append(f"Claim {cid} in `{run}` ({kind}): {tex(line)}.")
    text = "\n".join(lines)
    if said:
        text += "\n\n" + " ".join(said)
    if why:
        text += "\n\nWhat the long runs measured where a claim does not hold:\n\n" + "\n".join(f"- {w}" for w in why)
    return Prose(text)


def long_failures(board: list[dict], overfit, run: str = BOOK_LONG, *, rise: float = 0.1,
                  lean: dict | None = None) -> Prose:
    """Chapter 9: the claims resting on trained models that the long run ``run`` still fails or
    leaves undecided, each with its measurement; what sets the run apart from the paper's
    models (its size and tokens, from the presets); and, from ``overfit``
    (:func:`rflens.longrun.compare.overfitting`), every corpus on which all its models' validation
    loss rose by more than ``rise`` nats from its lowest, with the claims that read that corpus.
    Each claim gets one line of what was measured to cause it (:func:`rflens.claims.causes.causes`;
    ``lean``, the levels' sensitivity of chapter 9, lets it name a level that decides one)."""
    from rflens.claims.causes import causes
    from rflens.readings.index_box import _tokens_a_model, PAPER
    from rflens.setup.presets import get

    open_ = [c for c in board if c["result"] in ("fail", "not decided") and BY_ID[int(c["id"])].evidence == TRAINED]
    if not open_:
        return Prose(f"In the long run (`{run}`) every claim that rests on trained models was decided as the paper reports.")
    m, paper = get(run).model, get(PAPER).model
    out = [f"In the long run (`{run}`), {len(open_)} claims that rest on trained models fail or are not decided:", ""]
    why = causes(open_, run, lean)
    out += [f"- Claim {c['id']} ({c['result']}): {tex(c['measured'])}." + (f" {to_decide(c)}" if c["result"] == "not decided"
                                                                           else "")
            + f" *Cause ({why[int(c['id'])][0]}):* {tex(why[int(c['id'])][1])}." for c in open_]
    out += ["", f"What sets this run apart from the paper's models is measured, not a choice of criterion: its models "
            f"have {m.n_layer} layers and d = {m.d_model} against the paper's {paper.n_layer} and {paper.d_model}, and each "
            f"sees {_tokens(_tokens_a_model(run))} training tokens against {_tokens(_tokens_a_model(PAPER))}."]
    if overfit is not None and not overfit.empty:
        for corpus, d in overfit.groupby("corpus"):
            if (d["rise"] > rise).all():
                read = [str(c["id"]) for c in open_ if f"{corpus}:" in c["measured"]]
                out[-1] += (f" And it repeats its {corpus} text: every one of its {len(d)} {corpus} models ended with a "
                            f"validation loss {d['rise'].min():.2f} to {d['rise'].max():.2f} nats above its lowest, so they "
                            "had memorised their training text")
                out[-1] += (f"; claim{'s' if len(read) > 1 else ''} {_join(read)} read{'' if len(read) > 1 else 's'} "
                            f"those models." if read else ".")
        if get(run).read_only:  # the control: the run on text it does not repeat answers it
            out[-1] += (" The second long run (chapter 10), on corpora it repeats at most 4 times, shows which "
                        "verdicts repetition changes.")
    return Prose("\n".join(out))


def to_decide(row: dict) -> str:
    """What would decide a claim that is not decided (a row of :func:`rflens.claims.verdicts.check`):
    for seeds that disagree, that its verdict depends on the seed; for intervals that
    straddle their thresholds, how many times the independent units they resample
    (:func:`rflens.claims.verdicts.cost_to_decide`) would settle the widest, if its estimate held."""
    from rflens.claims.verdicts import cost_to_decide

    if str(row.get("measured", "")).startswith("the seeds disagree"):
        said = ", ".join(f"seed {s} {r}" for s, r in row["seeds"].items())
        return (f"Its seeds disagree ({said}): at this scale the verdict depends on the training seed, and no "
                "number of test documents changes that; more seeds would say how often each verdict comes.")
    cost = cost_to_decide(row)
    if cost is None:
        return ""
    x = cost["interval"]
    units = "rounds" if int(row["id"]) == 16 else "test documents"
    where = f"{x['estimate']:.3g} [{x['low']:.3g}, {x['high']:.3g}] against {x['threshold']:.3g}"
    if cost["factor"] == float("inf"):
        return f"Its interval {where} has its estimate on the threshold: more {units} would not decide it."
    factor = f"{cost['factor']:.1f}" if cost["factor"] < 10 else f"{cost['factor']:,.0f}"
    verdict = "hold" if cost["result"] == "pass" else "fail"
    return (f"If its estimates stayed where they are, it would {verdict} with about {factor} times as many {units}: "
            f"that many clear the interval {where}.")


def held(rows: list[dict], scale: str, runs: dict[str, list[dict]] | None = None) -> Prose:
    """A chapter summary's list of its claims, by number, that held, did not hold, were not
    decided or not run, at this build's ``scale`` and in each long run of ``runs``
    ({run: its board}, read for the same claims); each claim is stated once, with its verdict
    above."""
    heads = {"pass": "held", "fail": "did not hold", "not decided": "not decided", "not run": "not run"}
    ids = [int(c["id"]) for c in rows]
    boards = {scale: rows, **{run: [c for c in board if int(c["id"]) in ids]
                              for run, board in (runs or {}).items() if run != scale}}
    out = []
    for name, board in boards.items():
        parts = []
        for key in RESULTS:
            got = [str(c["id"]) for c in board if c["result"] == key]
            if got:
                parts.append(f"{heads[key]}: claim{'s' if len(got) > 1 else ''} {_join(got)}")
        out.append(f"- At the `{name}` scale, " + "; ".join(parts) + ".")
    return Prose("\n".join(out))


def board(rows: list[dict], scale: str) -> Prose:
    """Chapter 9's count of the board, the claims of each result by number, and the count of
    the claims that rest on trained models."""
    groups = {k: [str(c["id"]) for c in rows if c["result"] == k] for k in RESULTS}
    parts = [f"{len(v)} {w}" + (f" (claim{'s' if len(v) > 1 else ''} {_join(v)})" if v else "")
             for v, w in ((groups["pass"], "pass"), (groups["fail"], "fail"),
                          (groups["not decided"], "not decided"),
                          (groups["not run"], "were not run"))]
    text = f"At the `{scale}` scale, of {len(rows)} claims: {'; '.join(parts)}."
    built = [str(c["id"]) for c in rows if BY_ID[int(c["id"])].evidence == CONSTRUCTION]
    if built:
        trained = [c for c in rows if BY_ID[int(c["id"])].evidence == TRAINED]
        n = {k: sum(c["result"] == k for c in trained) for k in RESULTS}
        text += (f" Claim{'s' if len(built) > 1 else ''} {_join(built)} rest{'' if len(built) > 1 else 's'} on a "
                 f"closed form, the same verdict at every scale; of the {len(trained)} that rest on trained models, "
                 f"{n['pass']} pass, {n['fail']} fail, "
                 f"{n['not decided']} are not decided and {n['not run']} were not run.")
    return Prose(text)


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


def long_run(experiment: str, rows: list[dict], lacking: list[str], scale: str | None = None,
             run: str = BOOK_LONG) -> Prose:
    """The verdicts of the long run ``run`` on an experiment read from its bundle, or what
    the bundle still lacks for it (:func:`rflens.experiments.from_bundle.experiment`); in a chapter built at
    that scale itself (``scale``), a pointer to its verdicts above instead of a second copy."""
    if scale == run:
        return Prose(f"This chapter is built at the `{run}` scale: its {experiment} and verdicts above are the long "
                     f"run's.")
    if lacking:
        more = f" and {len(lacking) - 1} more" if len(lacking) > 1 else ""
        note = f"The long run's {experiment} is not complete yet: the bundle lacks {tex(lacking[0])}{more}. "
        ran = [c for c in rows if c["result"] != "not run"]
        if not ran:
            return Prose(note + "Its verdicts appear here once it holds them; chapter 10 lists the shipped models and "
                                "how far each has trained.")
        waiting = [str(c["id"]) for c in rows if c["result"] == "not run"]
        wait = f"Claim{'s' if len(waiting) > 1 else ''} {_join(waiting)} wait{'' if len(waiting) > 1 else 's'} for it; " \
            if waiting else ""
        return Prose(note + wait + "what it holds already decides the rest.\n\n" + verdicts(ran, run))
    return verdicts(rows, run)


def sensitivity(lean: dict) -> Prose:
    """How the verdicts move with the levels this book chose: ``lean`` is {level: a table of
    :func:`rflens.claims.verdicts.sensitivity` per scale, indexed (scale, claim)}. Per scale,
    the claims whose verdict flips inside the range and where; the others hold over it."""
    from rflens.claims.verdicts import SENSITIVITY, STATED

    words = {"breaks": "breaks (r ≥ {:g})", "tol": "stays flat (r ≤ {:g})"}
    out = []
    for level, table in lean.items():
        grid = SENSITIVITY[level][0]
        what = words[level].format(STATED[level])
        for scale in dict.fromkeys(table.index.get_level_values("scale")):
            sub = table.xs(scale, level="scale")
            flips = sub[sub["flips at"] != ""]
            steady = [str(c) for c in sub.index if c not in flips.index]
            parts = [f"claim {c} flips at {f}" for c, f in flips["flips at"].items()]
            if steady:
                parts.append(f"claim{'s' * (len(steady) > 1)} {_join(steady)} "
                             f"hold{'s' * (len(steady) == 1)} {'its' if len(steady) == 1 else 'their'} verdict from "
                             f"{min(grid):g} to {max(grid):g}")
            out.append(f"`{scale}`, {what}: {'; '.join(parts)}.")
    return _bullets(out)
