"""The verdicts: each claim's check run on the results, one row a claim, read at every seed.

:func:`check` runs the checks of :mod:`rflens.claims.statements` (and, for a claim whose
criterion was reworded, its earlier check of :mod:`rflens.claims.legacy`) and gives one row a
claim, its verdict once, as ``result``: one of :data:`RESULTS`. A missing experiment is "not
run", never "pass". :func:`check_seeds` reads a preset at every training seed and
:func:`agree` combines the seeds' rows; :func:`sensitivity` checks the claims again at each
level a reader is shown; :func:`cost_to_decide` says how many more test units would decide a
claim whose intervals straddle their thresholds.
"""

from __future__ import annotations

import contextlib
import io
import math
from typing import Callable

import pandas as pd

from rflens.claims.gather import gather
from rflens.claims.legacy import LEGACY
from rflens.claims.outcomes import STRADDLING, UNDECIDED, Missing
from rflens.claims.statements import BY_ID, CLAIMS
from rflens.errors import UserError
from rflens.measure.criterion import BREAKS, EXTRAPOLATION_TOLERANCE as TOL, levels
from rflens.setup import presets

# the results a claim can have on the board, in the order they are counted and shown
RESULTS = ("pass", "fail", "not decided", "not run")


def check(results: dict, ids=None) -> list[dict]:
    """Evaluate claims ``ids`` (default: all) on ``results`` (a dict of experiment tables:
    table1, table2, figure7, table3, figure11, log_fit, d_bar, speed_record; plus ``corpus``).

    Each row: the claim, the paper's sentence, the criterion, what was measured, the verdict
    (``result``, one of :data:`RESULTS`), ``comparisons`` (how many intervals the verdict
    reads, each widened so that all hold together: :data:`rflens.claims.outcomes.LEVEL`),
    ``straddling`` (a claim not decided: the intervals that straddle their thresholds,
    :func:`cost_to_decide`) and, for a claim whose criterion was reworded, ``legacy``: the
    criterion, measurement and result under the earlier criterion (:mod:`rflens.claims.legacy`),
    else None."""
    rows = []
    for cid in ids or [c.id for c in CLAIMS]:
        claim = BY_ID[int(cid)]
        measured, outcome, k, straddling = _decide(claim.check, results)
        legacy = None
        if claim.id in LEGACY:
            old_measured, old_outcome, _, _ = _decide(LEGACY[claim.id][1], results)
            legacy = {"criterion": claim.legacy_criterion, "measured": old_measured, "result": _result(old_outcome)}
        rows.append({"id": claim.id, "statement": claim.statement, "sentence": claim.sentence,
                     "criterion": claim.criterion, "measured": measured, "paper": claim.paper,
                     "evidence": claim.evidence, "result": _result(outcome), "comparisons": k,
                     "straddling": straddling, "legacy": legacy})
    return rows


def check_seeds(scale: str, build: Callable[[], dict], ids=None) -> list[dict]:
    """Claims ``ids`` checked on ``build()`` (the results :func:`check` reads, built from the
    preset ``scale``) once for each training seed the preset has (its ``sweeps.seeds``, each
    read inside :func:`rflens.store.shipped.at_seed`): the rule fixed with the seeds, a verdict
    holds when every seed gives it (:func:`agree`). Without further seeds, :func:`check`."""
    from rflens.store.shipped import at_seed

    rows = check(build(), ids)
    seeds = presets.get(scale).sweeps.seeds
    if not seeds:
        return rows
    by_seed = {0: rows}
    for seed in seeds:  # what is not run is said once, by the first seed
        with at_seed(seed), contextlib.redirect_stderr(io.StringIO()):
            by_seed[seed] = check(build(), ids)
    return [agree({seed: by_seed[seed][i] for seed in by_seed}) for i in range(len(rows))]


def check_shipped(scale: str, corpus: str = "prose") -> list[dict]:
    """Every claim checked on what the bundle of the shipped preset ``scale`` holds, nothing
    trained (a claim whose models are not shipped is "not run"), at every seed
    (:func:`check_seeds`)."""
    return check_seeds(scale, lambda: gather(scale, corpus, compute=False, progress=False))


# The levels this book chose for the paper's words, the claims that read each, and the range a
# reader is shown (the stated level inside it): "breaks" (r >= 2) and "stays flat" (r <= 1.10).
SENSITIVITY = {"breaks": ((1.5, 1.75, 2.0, 2.5, 3.0), (2, 4, 5, 8, 9)),
               "tol": ((1.05, 1.075, 1.10, 1.15, 1.20), (1, 4, 5, 6, 7))}
STATED = {"breaks": BREAKS, "tol": TOL}


def sensitivity(scale: str, level: str, corpus: str = "prose", values=None) -> pd.DataFrame:
    """The claims that read ``level`` ("breaks" or "tol", :data:`SENSITIVITY`) checked with it
    set to each of ``values`` (:func:`rflens.measure.criterion.levels`), on what the run
    store or the shipped bundle holds (nothing trained), every seed as the board reads them.
    One row a claim; one column a level, the result in each cell; ``flips at``: the levels
    nearest the stated one, below and above it, at which the result differs from the stated
    level's (blank: it holds over the range)."""
    from rflens.store.shipped import served_seed

    if level not in SENSITIVITY:
        raise UserError(f"unknown level {level!r}: choose one of {', '.join(SENSITIVITY)}")
    grid, ids = SENSITIVITY[level]
    grid = tuple(values or grid)
    built: dict[int, dict] = {}

    def build() -> dict:  # the tables, at the stated levels, once a seed (claim 6 rereads its column)
        seed = served_seed()
        if seed not in built:
            with levels():
                built[seed] = gather(scale, corpus, compute=False, progress=False)
        return built[seed]

    results = {}
    for v in grid:
        with levels(**{level: v}):
            results[v] = {row["id"]: row["result"] for row in check_seeds(scale, build, ids)}
    stated = STATED[level]
    rows = []
    for cid in ids:
        row = {"claim": cid, "statement": BY_ID[cid].statement}
        row |= {f"{'r ≥' if level == 'breaks' else 'r ≤'} {v:g}": results[v][cid] for v in grid}
        base = results[min(grid, key=lambda v: abs(v - stated))][cid]
        below = [v for v in sorted((v for v in grid if v < stated), reverse=True) if results[v][cid] != base][:1]
        above = [v for v in sorted(v for v in grid if v > stated) if results[v][cid] != base][:1]
        row["flips at"] = ", ".join(f"{v:g} ({results[v][cid]})" for v in below + above)
        rows.append(row)
    return pd.DataFrame(rows).set_index("claim")


def _by_seed(readings: dict[int, tuple[str, str]]) -> str:
    """Each seed's result and measurement, the parts every seed measured alike said once,
    first ("the same at every seed: code: ...; seed 0 fail: prose: ...; seed 1 pass: prose: ...")."""
    parts = {seed: text.split("; ") for seed, (_, text) in readings.items()}
    common = [p for p in next(iter(parts.values())) if all(p in ps for ps in parts.values())]
    each = "; ".join(f"seed {seed} {result}: " + ("; ".join(p for p in parts[seed] if p not in common) or "as above")
                     for seed, (result, _) in readings.items())
    return f"the same at every seed: {'; '.join(common)}; {each}" if common else each


def agree(rows: dict[int, dict]) -> dict:
    """One claim's row from its rows at each training seed ({seed: row}, the first seed 0). A
    claim whose reading is the same at every seed (it reads no model trained from several) is
    the first seed's row. Otherwise it holds or fails when every seed says so, is not decided
    when the seeds disagree, and not run while a seed's models are not shipped; ``measured``
    gives every seed's reading, ``comparisons`` the intervals of all seeds together and
    ``seeds`` {seed: result}."""
    first = rows[0]
    results = {seed: r["result"] for seed, r in rows.items()}
    if len({r["measured"] for r in rows.values()}) == 1 or set(results.values()) == {"not run"}:
        return first
    each = _by_seed({seed: (r["result"], r["measured"].removeprefix("not run: ")) for seed, r in rows.items()})
    waiting = [str(seed) for seed, result in results.items() if result == "not run"]
    if len(set(results.values()) - {"not run"}) > 1:
        result, measured = "not decided", f"the seeds disagree: {each}"
    elif waiting:
        result, measured = "not run", f"not run: seed{'s' if len(waiting) > 1 else ''} {', '.join(waiting)} not shipped yet; {each}"
    else:
        result, measured = first["result"], f"every seed agrees: {each}"
    legacy = None
    if first.get("legacy") is not None:  # the earlier criterion under the same rule
        old = agree({seed: {**r["legacy"], "legacy": None, "comparisons": None} for seed, r in rows.items()})
        legacy = {key: old[key] for key in first["legacy"]}
    counts = [r["comparisons"] for r in rows.values() if r.get("comparisons") is not None]
    straddling = [] if result != "not decided" or measured.startswith("the seeds disagree") else \
        [x for r in rows.values() for x in r.get("straddling") or []]
    return {**first, "measured": measured, "result": result,
            "comparisons": sum(counts) if counts else None, "straddling": straddling, "legacy": legacy,
            "seeds": results}


def cost_to_decide(row: dict) -> dict | None:
    """For a claim not decided because intervals straddle their thresholds (``row`` from
    :func:`check`): how many times the independent units its intervals resample (test
    documents, or rounds for a speed) would decide it, if every estimate stayed where it is.
    An interval's reach toward its threshold shrinks as one over the root of that number, so
    it needs (reach / distance)^2 times as many, on the log scale of its ratio. The claim
    reads its intervals together: it fails as soon as one whose estimate lies on the failing
    side clears (the cheapest of those), and holds once all of them clear (the dearest).
    Returns {"factor", "result" it would then have, "interval" that sets the factor}
    (factor inf when an estimate sits on its threshold), or None for a row not undecided
    that way."""
    found = []
    for x in row.get("straddling") or []:
        lo, hi, t = x["low"], x["high"], x["threshold"]
        if min(lo, hi, t) <= 0:
            continue
        est = x["estimate"] if x["estimate"] is not None and x["estimate"] > 0 else math.sqrt(lo * hi)
        gap = abs(math.log(est) - math.log(t))
        reach = math.log(hi) - math.log(est) if t > est else math.log(est) - math.log(lo)
        holds = (est > t) == x.get("above", True) and est != t
        found.append({"factor": math.inf if gap == 0 else (reach / gap) ** 2, "result": "pass" if holds else "fail",
                      "interval": {**x, "estimate": est}})
    failing = [f for f in found if f["result"] == "fail"]
    if failing:
        return min(failing, key=lambda f: f["factor"])
    return max(found, key=lambda f: f["factor"]) if found else None


def _decide(check_fn, results: dict) -> tuple[str, bool | str | None, int | None, list[dict]]:
    """(measured, outcome, number of intervals read, the intervals that straddled their
    thresholds when the outcome is UNDECIDED) of one check; Missing reads as not run."""
    token = STRADDLING.set([])
    try:
        out = check_fn(results)
    except Missing as why:
        return f"not run: {why}", None, None, []
    finally:
        straddling = STRADDLING.get()
        STRADDLING.reset(token)
    measured, outcome = out[0], out[1]
    if outcome == UNDECIDED:
        return measured, outcome, (out[2] if len(out) > 2 else 1), straddling
    return measured, bool(outcome), (out[2] if len(out) > 2 else 1), []


def _result(outcome) -> str:
    """A check's outcome (None: not run) as the row's ``result``."""
    if outcome is None:
        return "not run"
    return "not decided" if outcome == UNDECIDED else ("pass" if outcome else "fail")
