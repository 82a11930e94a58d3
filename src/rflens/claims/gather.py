"""The results the claims read: every experiment table, run or read from the run store.

:func:`gather` builds the dict of tables the checks of :mod:`rflens.claims.statements` read
(Table 1, Table 2, Figure 7 with its gradient curves, Table 3, Figure 11, the log-curve fit,
the d_bar curves and the recorded training speed). With ``compute=False`` nothing is trained:
a model missing from the run store leaves its experiment "not run".
"""

from __future__ import annotations

import sys

import pandas as pd

from rflens import paper
from rflens.claims.outcomes import Missing
from rflens.errors import UserError
from rflens.experiments import tables as ex
from rflens.experiments.speed import load_speed_record
from rflens.measure.criterion import EXTRAPOLATION_HORIZON as HORIZON
from rflens.setup import presets
from rflens.store.runs import OtherData


def log_fit() -> dict:
    """The least-squares log-curve fit of the Sandwich bias (Section 7): d_bar = 128, one
    head with h_c = 8, distances 0..8191 (rflens.model.analysis); under ``recent`` the same fit over
    the most recent paper.LOG_FIT_RECENT distances, as the paper's footnote 7 describes it."""
    from rflens.model.analysis import sandwich_log_fit

    return {**sandwich_log_fit(), "recent": sandwich_log_fit(nearest=paper.LOG_FIT_RECENT)}


def figure7_curves(scale, corpus: str, f7: pd.DataFrame) -> pd.DataFrame:
    """``f7`` with each model's normalised gradient curve (``normalized``), read from the
    cached receptive field that Figure 7 measured (the same segments, nothing trained)."""
    if not isinstance(f7, pd.DataFrame) or f7.empty or "label" not in f7.columns:
        return f7
    sc = presets.get(scale)
    length = sc.train.l_tr * sc.eval.erf_length_mult
    curves = {}
    for spec in ex.figure7_models(presets.get(scale), corpus):
        if spec.label not in set(f7["label"]):  # a model the table does not hold
            continue
        run = ex.run_of(presets.get(scale), spec, train=False)
        curves[spec.label] = ex.measure_erf(run, length=run.erf_segment(length))["normalized"]
    out = f7.copy()
    out["normalized"] = [curves.get(label) for label in out["label"]]
    return out


def d_bar_curves(scale) -> dict:
    """{d_bar: Sandwich bias of one head (h_c = 8) at distances 0 .. 16 L_tr - 1} for the
    d_bar sweep of the scale (Figure 10). A positive compression ratio only rescales the
    bias, so one head decides the sign of every difference."""
    from rflens.model.analysis import sandwich_by_d_bar

    sc = presets.get(scale)
    return sandwich_by_d_bar(ex.d_bar_values(sc), compression=paper.SANDWICH_COMPRESSION, length=HORIZON * sc.train.l_tr)


def gather(scale: str, corpus: str = "prose", *, compute: bool = True, progress: bool = True) -> dict:
    """Every experiment table the claims read. With compute=False nothing is trained: a
    model missing from the run store leaves its experiment "not run". An experiment that
    fails is kept as its exception, so the claims that need it say why."""
    res: dict = {"corpus": corpus, "scale": scale}
    steps = {
        "table1": lambda: ex.table1(presets.get(scale), corpus, progress=progress, train=compute),
        "table2": lambda: ex.table2(presets.get(scale), corpus, t1=res["table1"], progress=progress, train=compute),
        "figure7": lambda: figure7_curves(scale, corpus, ex.figure7(presets.get(scale), corpus, progress=progress, train=compute)),
        # a shipped preset trains nothing: its Table 3 is read over the corpora it holds
        "table3": lambda: (ex.table3(presets.get(scale), progress=progress) if compute and not presets.get(scale).shipped
                           else ex.table3_stored(presets.get(scale), progress=progress)),
        "figure11": lambda: ex.figure11(presets.get(scale), corpus, progress=progress, train=compute),
        "log_fit": log_fit,
        "d_bar": lambda: d_bar_curves(scale),
        "speed_record": lambda: load_speed_record(presets.get(scale)),  # recorded once, never timed here
    }
    for key, fn in steps.items():
        if key == "table2" and not isinstance(res.get("table1"), pd.DataFrame):
            res[key] = None
            continue
        try:
            res[key] = fn()
        except Missing:
            res[key] = None
        except OtherData:  # the corpus built here is not the bundle's: no experiment reads it, said once
            if compute:
                raise
            res[key] = None
        except (UserError, ImportError, FileNotFoundError) as err:  # not run: missing model, module or data
            res[key] = None if not compute else err
            print(f"claims: {key} not run: {err}", file=sys.stderr)
    return res
