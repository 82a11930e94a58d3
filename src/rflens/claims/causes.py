"""Why a claim fails or is not decided at one scale: one measured line a claim.

A verdict that differs from the paper's has one of a few kinds of cause, each read from the
measurements, never typed in:

* ``seeds``: the training seeds disagree (the verdict depends on the seed);
* ``straddles``: an interval straddles its threshold (more test documents would decide it);
* ``construction``: the scheme's closed form gives another number than the paper states;
* ``mapping``: a window the paper counts as stable has, at this depth, a measured receptive
  field beyond L_tr (the window map keeps R w / L_tr, the field does not grow with R);
* ``premise``: a Table 2 model is retrained at an L_tr below its Table 1 model's measured ERF;
* ``rising``: the model that decides it still rises between its last two sizes;
* ``level``: the verdict flips inside the range of a level this book chose
  (:data:`rflens.claims.verdicts.SENSITIVITY`);
* ``scale``: none of the above was measured, so what is left is the difference of size and
  tokens from the paper's models.

The shipped long runs carry their models' curves (:func:`rflens.store.bundle.table`), so
``mapping``, ``premise`` and ``rising`` are read there; a build's own scale gets the others.
"""

from __future__ import annotations

from rflens import paper
from rflens.claims.statements import BY_ID, CONSTRUCTION
from rflens.claims.verdicts import cost_to_decide
from rflens.measure.columns import token_count as _tokens
from rflens.measure.criterion import BREAKS, EXTRAPOLATION_HORIZON, EXTRAPOLATION_TOLERANCE as TOL
from rflens.setup import presets

KINDS = ("not run", "seeds", "straddles", "construction", "mapping", "premise", "rising", "level", "scale")
# the claims whose deciding model must break, and where its name is found (the last value of a
# Table 1 sweep, or a scheme)
_BREAKING = {2: ("window", -1), 4: ("slope_shift", -1), 5: ("same_slope", -1), 8: ("sinusoidal", None),
             9: ("rotary", None)}


def causes(board: list[dict], scale: str, lean: dict | None = None) -> dict[int, tuple[str, str]]:
    """{claim: (kind, one line)} for every claim of ``board`` (rows of
    :func:`rflens.claims.verdicts.check` at ``scale``) that fails, is not decided or was not
    run. ``lean``: {level: :func:`rflens.claims.verdicts.sensitivity` of this scale} when it was
    computed (the ``level`` kind needs it)."""
    out = {}
    table = _table(scale)
    for row in board:
        if row["result"] == "pass":
            continue
        found = _cause(row, scale, table, lean or {})
        out[int(row["id"])] = found
    return out


def _table(scale: str):
    """The shipped run's curves (None for a scale whose models are not shipped)."""
    if not presets.get(scale).shipped:
        return None
    from rflens.store import bundle

    t = bundle.table(scale)
    return None if t.empty else t


def _cause(row: dict, scale: str, table, lean: dict) -> tuple[str, str]:
    cid, measured = int(row["id"]), str(row.get("measured", ""))
    if row["result"] == "not run":
        return "not run", measured.removeprefix("not run: ").rstrip(".")
    if measured.startswith("the seeds disagree"):
        said = ", ".join(f"seed {s} {r}" for s, r in (row.get("seeds") or {}).items())
        return "seeds", f"the training seeds disagree ({said})"
    if row["result"] == "not decided":
        cost = cost_to_decide(row)
        if cost is not None:
            x = cost["interval"]
            return "straddles", (f"an interval straddles its threshold: {x['estimate']:.3g} [{x['low']:.3g}, "
                                 f"{x['high']:.3g}] against {x['threshold']:.3g}")
        return "straddles", "an interval straddles its threshold"
    if BY_ID[cid].evidence == CONSTRUCTION:
        return "construction", f"the scheme's closed form gives another number than the paper: {measured}"
    if table is not None:
        for read in (_mapping, _premise, _rising):
            found = read(cid, scale, table)
            if found:
                return found
    flips = _flips(cid, scale, lean)
    if flips:
        return "level", flips
    sc, full = presets.get(scale), presets.get("full")
    return "scale", (f"no cause measured beyond size: {sc.model.n_layer} layers, d = {sc.model.d_model} and "
                     f"{_tokens(sc.train.steps * sc.train.batch_size * sc.train.l_tr)} tokens a model against the "
                     f"paper's {full.model.n_layer}, {full.model.d_model} and "
                     f"{_tokens(full.train.steps * full.train.batch_size * full.train.l_tr)}")


def _last(table, name: str):
    d = table[table["name"] == name].sort_values("tokens")
    return d if len(d) else None


def _mapping(cid: int, scale: str, table):
    """Claims 1 and 6: the windows the paper counts as stable whose measured ERF passes L_tr."""
    if cid not in (1, 6):
        return None
    sc = presets.get(scale)
    windows = sc.sweeps.window
    stable = presets.mapped_windows([w for w in paper.WINDOW if w <= paper.WINDOW_STABLE], sc.model.n_layer,
                                   sc.train.l_tr)
    over = []
    for w in windows:
        d = _last(table, f"window_window={w}")
        if w in stable and d is not None and d["erf"].iloc[-1] > d["l_tr"].iloc[-1]:
            over.append((w, int(d["erf"].iloc[-1]), int(d["l_tr"].iloc[-1])))
    if not over:
        return None
    ratios = [e / w for w, e, _ in over]
    theirs = [e / w for w, e in paper.WINDOW_ERF.items()]
    depth = ("the window map keeps R w / L_tr, as if the field grew in proportion to depth"
             if sc.model.n_layer != paper.N_LAYER else "the windows are the paper's, mapped by L_tr alone")
    return "mapping", (f"windows the paper counts as stable have measured receptive fields beyond L_tr = {over[0][2]}: "
                       + ", ".join(f"w = {w}: ERF {e}" for w, e, _ in over)
                       + f" (ERF / w = {min(ratios):.1f}-{max(ratios):.1f} at R = {sc.model.n_layer}, the paper's "
                         f"{min(theirs):.1f}-{max(theirs):.1f} at R = {paper.N_LAYER}); {depth}")


def _premise(cid: int, scale: str, table):
    """Claim 7: a Table 2 model retrained at an L_tr below its Table 1 model's measured ERF."""
    if cid != 7:
        return None
    from rflens.longrun.plan import by_experiment

    short = []
    for family, specs in by_experiment(presets.get(scale)).items():
        if not family.startswith("Table 2"):
            continue
        for spec in specs:
            d, base = _last(table, spec.name), _last(table, f"{spec.pos}_{spec.overrides[0][0]}={spec.overrides[0][1]}")
            if d is None or base is None:
                continue
            l_tr, erf = int(d["l_tr"].iloc[-1]), int(base["erf"].iloc[-1])
            if l_tr < erf:
                short.append(f"{d['label'].iloc[-1]} against an ERF of {erf} at L_tr = {int(base['l_tr'].iloc[-1])}")
    if not short:
        return None
    return "premise", ("Table 2's retrained L_tr does not cover the measured receptive field (the premise of the "
                       "paper's fix): " + "; ".join(short))


def _rising(cid: int, scale: str, table):
    """Claims that need a model to break: its r(16 L_tr) still rising between its last two
    sizes (the lower end of the last interval above the upper end of the one before)."""
    if cid not in _BREAKING:
        return None
    setting, end = _BREAKING[cid]
    sw = presets.get(scale).sweeps
    if end is None:
        names = [setting]
    else:
        values = getattr(sw, setting)
        pos = presets.FAMILIES[setting].pos
        names = [f"{pos}_{setting}={values[end]}"] if values else []
    said = []
    for name in names:
        d = _last(table, name)
        if d is None or len(d) < 2:
            continue
        a, b = d.iloc[-2], d.iloc[-1]
        if b["r_horizon_lo"] < BREAKS and b["r_horizon_lo"] > a["r_horizon_hi"]:
            said.append(f"{b['label']} reads r({EXTRAPOLATION_HORIZON} L_tr) = {b['r_horizon']:.2f} "
                        f"[{b['r_horizon_lo']:.2f}, {b['r_horizon_hi']:.2f}] at {_tokens(b['tokens'])} tokens, up from "
                        f"{a['r_horizon']:.2f} [{a['r_horizon_lo']:.2f}, {a['r_horizon_hi']:.2f}] at {_tokens(a['tokens'])}")
    if not said:
        return None
    return "rising", "still rising when training stops, below the break level: " + "; ".join(said)


def _flips(cid: int, scale: str, lean: dict) -> str | None:
    """The nearest level, of those a reader is shown, at which the verdict changes."""
    for level, table in lean.items():
        try:
            row = table.loc[cid] if "scale" not in (table.index.names or []) else table.loc[(scale, cid)]
        except KeyError:
            continue
        flips = str(row.get("flips at", "") or "")
        if flips:
            word = {"breaks": f"break level r >= {BREAKS:g}", "tol": f"flat level r <= {TOL:.2f}"}[level]
            return f"set by the {word} this book chose: the verdict changes at {flips}"
    return None
