"""What a shipped preset can build: which of the book's experiments its bundle holds, and
those experiments read from it (:mod:`rflens.store.shipped` serves the models; nothing is trained)."""

from __future__ import annotations

from rflens.errors import UserError
from rflens.setup.presets import LongRun
from rflens.setup.settings import resolve
from rflens.store import shipped
from rflens.store.runs import NotStored


def shipped_name(run: LongRun, pos: str, corpus: str, settings: dict) -> str | None:
    """The name of the bundle's finished model of these settings, or None (no data needed)."""
    from rflens.longrun.plan import served_settings

    r = resolve(run, pos, corpus, served_settings(run, pos, corpus, settings))  # at the seed served
    return shipped.name_of(run.name, r.model, r.data, r.train)


# the chapter experiments whose measurements a shipped model holds (last-token perplexity
# at the preset's lengths and the receptive field); the others need the weights
SERVED_EXPERIMENTS = ("Table 1", "Table 2", "Figure 7", "Table 3", "Figure 11")


def missing(run: LongRun, experiments) -> list[str]:
    """What the bundle of ``run`` lacks for ``experiments`` (chapter experiment names:
    "Table 1", "Table 2", "Figure 7", ...): model labels, or an experiment whose
    measurements are not shipped at all. Table 2's models follow from Table 1's shipped
    results, so it counts as missing until Table 1 is complete."""
    from rflens.experiments import tables as ex

    models = {"Table 1": ex.table1_models(run), "Figure 7": ex.figure7_models(run), "Table 3": ex.table3_models(run),
              "Figure 11": ex.models_of(run, "figure11")}
    out = []
    for experiment in experiments:
        if experiment not in SERVED_EXPERIMENTS:
            out.append(f"{experiment} (its measurements need the weights, which the bundle does not ship)")
        elif experiment == "Table 2":
            if missing(run, ["Table 1"]):
                out.append("Table 2 (it follows from Table 1's shipped results)")
            else:
                t1 = ex.table1(run, progress=False, train=False)
                out += [s.label for s in ex.table2_specs(run, t1) if shipped_name(run, s.pos, s.corpus, s.settings) is None]
        else:
            out += [f"{s.label} ({s.corpus})" for s in models[experiment]
                    if shipped_name(run, s.pos, s.corpus, s.settings) is None]
    return list(dict.fromkeys(out))


_EXPERIMENTS = {"table1": "Table 1", "table2": "Table 2", "figure7": "Figure 7", "table3": "Table 3",
                "figure11": "Figure 11"}


def experiment(name: str, run: LongRun, corpus: str = "prose"):
    """(the experiment's table at the shipped preset, read from its bundle, or None; what the
    bundle still lacks for it). ``name``: table1, table2, figure7, table3 or figure11. Table 3
    comes over the corpora whose models are all shipped (:func:`rflens.experiments.tables.table3_stored`)."""
    from rflens.experiments import tables as ex

    if name not in _EXPERIMENTS:
        raise UserError(f"unknown shipped experiment {name!r}: choose one of {', '.join(_EXPERIMENTS)}")
    lacking = missing(run, [_EXPERIMENTS[name]])
    if name == "table3":  # over the corpora whose models are all shipped; the rest lacking
        try:
            return _of_run(ex.table3_stored(run, progress=False), run), lacking
        except NotStored:
            return None, lacking
    if lacking:
        return None, lacking
    if name == "table2":
        return _of_run(ex.table2(run, corpus, t1=ex.table1(run, corpus, progress=False, train=False), progress=False,
                                 train=False), run), []
    return _of_run(getattr(ex, name)(run, corpus, progress=False, train=False), run), []


def _of_run(table, run: LongRun):
    """The table, marked as the long run ``run``'s (``attrs["run"]``: a chapter's CSV of it is
    headed with that run, not the chapter's scale)."""
    if table is not None:
        table.attrs["run"] = run.name
    return table
