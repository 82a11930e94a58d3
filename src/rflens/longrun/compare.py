"""The two long runs read side by side: what each model does as it trains on text that is
repeated (the control, ``long-repeated``) and on text that is not (``long``), how far the
seeds of one model agree, and whether a model's receptive field early in training already
says that it will break later.

Everything here is computed from the shipped bundles (:func:`rflens.store.bundle.table`) and the
corpora record the second run ships beside its models (:func:`record_corpora`); nothing is
trained. A model's state at a size is read as chapter 10 reads it: it *breaks* when the
lower end of the paired interval of r(16 L_tr) reaches :data:`rflens.measure.criterion.BREAKS`, it
*extrapolates* when the upper end stays within :data:`rflens.measure.criterion.EXTRAPOLATION_TOLERANCE`,
and otherwise it *rises* without breaking.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from rflens.longrun.plan import (by_experiment, further_seeds, LongModel, models, named as emergence_named, seeded,
                                 table2_retrainings)
from rflens.measure.criterion import BREAKS, EXTRAPOLATION_TOLERANCE
from rflens.setup import presets
from rflens.setup.config import DataConfig
from rflens.store import bundle

CONTROL = "long-repeated"
SECOND = "long"

# ----------------------------------------------------------------------------- the corpora


def record_corpora(scale: str = SECOND) -> dict:
    """Write, beside the bundle's models, what the preset's corpora hold: for each of the
    book's corpora the data it trains on, its documents and tokens per split, how often the
    budget repeats its training text, and how many test documents the scored segments fall
    in. Needs the corpora built (``python -m rflens data --corpus wide --scale long``)."""
    from rflens import data

    sc = presets.get(scale)
    tokens = sc.train.steps * sc.train.batch_size * sc.train.l_tr
    out = {}
    for role in sc.sweeps.corpora:
        cfg = DataConfig(corpus=sc.text(role), vocab_size=sc.data.vocab_size)
        corpus = data.prepare(cfg, progress=False)
        m = corpus.manifest
        length = sc.train.l_tr * max(sc.eval.length_mults) + 1
        docs = corpus.segment_docs(sc.eval.n_segments, length, sc.eval.seed)
        out[role] = {"corpus": cfg.corpus, "fingerprint": corpus.fingerprint, "documents": m["documents"],
                     "tokens": m["tokens"], "bytes": m["bytes"], "epochs": round(tokens / m["tokens"]["train"], 2),
                     "segments": sc.eval.n_segments, "test_documents_scored": int(np.unique(docs).size)}
    record = {"scale": scale, "budget_tokens": tokens, "corpora": out}
    bundle.write_file(scale, bundle.CORPORA, record)
    return record


def corpora_table(scale: str = SECOND) -> pd.DataFrame | None:
    """The shipped corpora record as a table (one row a corpus), or None without one."""
    record = bundle.read_file(scale, bundle.CORPORA)
    if record is None:
        return None
    rows = [{"the paper's": {"prose": "OpenWebText2", "code": "GitHub", "math": "ArXiv"}.get(role, role),
             "corpus": c["corpus"], "train documents": c["documents"]["train"],
             "train tokens": c["tokens"]["train"], "epochs at the budget": c["epochs"],
             "test documents": c["documents"]["test"], "test documents scored": c["test_documents_scored"]}
            for role, c in sorted(record["corpora"].items(), key=lambda kv: presets.get(scale).sweeps.corpora.index(kv[0]))]
    return pd.DataFrame(rows).set_index("the paper's")


def overfitting(scale: str = CONTROL) -> pd.DataFrame:
    """Each model's validation loss at its lowest and at its last measured size, one row a
    model (index: its label), with the rise between them: a rise says the model was
    memorising its repeated training text by the end."""
    t = bundle.table(scale)
    if t.empty:
        return pd.DataFrame(columns=["corpus", "lowest", "at tokens", "last", "rise"])
    rows = []
    for name, d in t.sort_values("tokens").groupby("name", sort=False):
        low = d.loc[d["val_loss"].idxmin()]
        result = bundle.load(name, scale)
        rows.append({"model": d["label"].iloc[0], "corpus": result.get("corpus", "prose"),
                     "lowest": float(low["val_loss"]), "at tokens": int(low["tokens"]),
                     "last": float(d["val_loss"].iloc[-1]), "rise": float(d["val_loss"].iloc[-1] - low["val_loss"])})
    return pd.DataFrame(rows).set_index("model")


# ----------------------------------------------------------------------------- states


def state(row) -> str:
    """"breaks", "extrapolates" or "rises" for one row of :func:`rflens.store.bundle.table`."""
    if row["r_horizon_lo"] >= BREAKS:
        return "breaks"
    if row["r_horizon_hi"] <= EXTRAPOLATION_TOLERANCE:
        return "extrapolates"
    return "rises"


def _summary(d: pd.DataFrame) -> dict:
    """One model's curve (rows of one name) in a few numbers."""
    d = d.sort_values("tokens")
    last = d.iloc[-1]
    broke = d[d["r_horizon_lo"] >= BREAKS]
    return {"tokens": int(last["tokens"]), "state": state(last), "r(16 L_tr)": float(last["r_horizon"]),
            "low": float(last["r_horizon_lo"]), "high": float(last["r_horizon_hi"]),
            "breaks from": int(broke["tokens"].min()) if not broke.empty else None,
            "ERF / L_tr": float(last["erf"] / last["l_tr"]), "ppl(L_tr)": float(last["ppl_l_tr"])}


THESIS = ("Table 1", "Table 2", "NoPE")  # the experiments whose models show the failing side


def thesis_names(scale: str = SECOND) -> list[str]:
    """The models of Table 1, Table 2 and NoPE with Figure 7, in the plan's order (seeds apart)."""
    return [spec.name for family, specs in by_experiment(presets.get(scale)).items() if family.startswith(THESIS)
            for spec in specs]


def side_by_side(names: list[str] | None = None, new: str = SECOND, old: str = CONTROL) -> pd.DataFrame:
    """One row per model shipped in either run, by name: its last measured size, state,
    r(16 L_tr) with its interval, the size from which it breaks and its ERF, in each run
    (columns under ``new`` and ``old``). ``names``: the models (default: the thesis models
    of both runs, :func:`thesis_names`; Table 2's and Figure 7's second L_tr differ by name
    between the runs, as they differ by design)."""
    names = list(dict.fromkeys(thesis_names(new) + thesis_names(old))) if names is None else names
    runs = {run: bundle.table(run, names=[n for n in names if n in bundle.complete(run)]) for run in (new, old)}
    rows = {}
    for run, em in runs.items():
        if em.empty:
            continue
        for name, d in em.groupby("name", sort=False):
            rows.setdefault(name, {("", "model"): _named(name, run, d["label"].iloc[0])})
            rows[name].update({(run, k): v for k, v in _summary(d).items()})
    if not rows:
        return pd.DataFrame()
    order = [n for n in names if n in rows]
    df = pd.DataFrame([rows[n] for n in order], index=pd.Index(order, name="name"))
    df.columns = pd.MultiIndex.from_tuples(df.columns)
    return df


# ----------------------------------------------------------------------------- seeds


def seed_spread(scale: str = SECOND) -> pd.DataFrame:
    """For every model the preset trains from several seeds: each shipped seed's state,
    r(16 L_tr) with its interval and ERF at its last size, and whether the shipped seeds end
    in the same state (``same state``; None while fewer than two are shipped). A claim may
    still split its seeds where they share a state: it reads its own interval against its own
    level. One row a model."""
    run = presets.long_run(scale)
    sw = run.sweeps
    if not sw.seeds:
        return pd.DataFrame()
    done = bundle.complete(scale)
    rows = []
    for name in _seeded_models(run):
        names = [n for n in seeded(name, run) if n in done]
        spec = emergence_named(name, run)
        row = {"name": name, "model": _named(name, scale, bundle.label({"pos": spec.pos, "settings": spec.settings(),
                                                                         "corpus": spec.corpus})),
               "seeds shipped": len(names), "of": 1 + len(sw.seeds)}
        states = []
        if names:
            em = bundle.table(scale, names=names)
            for seed, n in zip((0, *sw.seeds), seeded(name, run)):
                if n not in names:
                    continue
                s = _summary(em[em["name"] == n])
                states.append(s["state"])
                row[f"seed {seed}"] = f"{s['r(16 L_tr)']:.2f} [{s['low']:.2f}, {s['high']:.2f}] {s['state']}"
        # the state (extrapolates, rises, breaks) each seed ends in, not a claim's verdict, which reads intervals its own way
        row["same state"] = None if len(states) < 2 else len(set(states)) == 1
        rows.append(row)
    return pd.DataFrame(rows).set_index("name")


def _seeded_models(run) -> list[str]:
    """The names of the models trained from several seeds (their seed-0 names)."""
    out = [LongModel(s.pos, tuple(kv for kv in s.overrides if kv[0] != "seed"), s.corpus).name
           for s in further_seeds(run)]
    return list(dict.fromkeys(out))


# ----------------------------------------------------------------------------- the schedule check


def schedule(scale: str = CONTROL) -> pd.DataFrame | None:
    """The shipped schedule check (:func:`rflens.store.bundle.schedule_table`) as chapter 10 shows
    it: one row a length, named by the model's label and L; the ratio's bounds named as the
    ratio's. None when the bundle holds no check."""
    sc = bundle.schedule_table(scale)
    if sc is None:
        return None
    names = {name: bundle.label(bundle.load(name, scale)) for name in dict.fromkeys(sc["name"])}
    sc = sc.rename(columns={"low": "wsd / cosine low", "high": "wsd / cosine high"})
    return sc.assign(model=sc["name"].map(names)).drop(columns="name").set_index(["model", "L"])


# ----------------------------------------------------------------------------- early warning


def early_warning(runs: tuple[str, ...] = (SECOND, CONTROL)) -> pd.DataFrame:
    """Every finished model of ``runs``: its ERF (in units of its L_tr) at its first
    measured size (budget / 64: 0.5M tokens) and at the next, whether the segment capped
    it, and what the model does at its last size (state, r(16 L_tr)). The rule it tests:
    an ERF at the first size beyond L_tr warns that the model may break later (``flagged``)."""
    rows = []
    for run in runs:
        em = paper_labels(bundle.table(run, names=sorted(bundle.complete(run))), run)  # one name a model
        if em.empty:
            continue
        for name, d in em.groupby("name"):
            d = d.sort_values("tokens")
            first, last = d.iloc[0], d.iloc[-1]
            rows.append({"run": run, "name": name, "model": first["label"], "first tokens": int(first["tokens"]),
                         "ERF / L_tr first": float(first["erf"] / first["l_tr"]),
                         "capped first": bool(first["erf_capped"]),
                         "ERF / L_tr second": float(d.iloc[1]["erf"] / d.iloc[1]["l_tr"]) if len(d) > 1 else np.nan,
                         "last tokens": int(last["tokens"]), "r(16 L_tr) last": float(last["r_horizon"]),
                         "state last": state(last), "breaks": bool((d["r_horizon_lo"] >= BREAKS).any())})
    df = pd.DataFrame(rows)
    if not df.empty:
        df["flagged"] = df["ERF / L_tr first"] > 1.0
    return df


def warning_counts(ew: pd.DataFrame) -> pd.DataFrame:
    """The early-warning rule against what happened, per run: models flagged or not by
    whether they broke by their last size."""
    if ew.empty:
        return pd.DataFrame()
    return (ew.groupby(["run", "flagged", "breaks"]).size().unstack("breaks", fill_value=0)
            .rename(columns={True: "broke", False: "did not break"}))


# ----------------------------------------------------------------------------- Table 2, as designed


def _finished_table2(scale: str) -> list[tuple[LongModel, LongModel]]:
    """(retrained model, its Table 1 model) for each model of Table 2 that ``scale``'s bundle
    holds finished beside its finished Table 1 model."""
    done = bundle.complete(scale)
    return [(spec, partner) for spec, partner in table2_retrainings(presets.get(scale)) if spec.name in done and partner.name in done]


def table2_pairs(scale: str = SECOND) -> pd.DataFrame:
    """Table 2 as the paper designed it: each retrained model against its Table 1 model at
    the same absolute lengths, both at their last shipped size. At every length both
    measured (the retrained model's L_tr up to Table 1's horizon) they scored the same
    tokens, so the ratio of their perplexities has a paired interval (over documents where
    the bundle records them); beyond Table 1's horizon only the retrained model is measured,
    with its own r(L) against its own L_tr. One row a (retrained model, length)."""
    from rflens.measure.intervals import paired_interval

    rows = []
    for spec, partner in _finished_table2(scale):
        new, old = bundle.load(spec.name, scale), bundle.load(partner.name, scale)
        p, q = new["points"][-1], old["points"][-1]
        docs = new.get("segment_docs") if new.get("segment_docs") == old.get("segment_docs") else None
        for i, L in enumerate(p["lengths"]):
            row = {"name": spec.name, "retrained": _named(spec.name, scale, bundle.label(new)),
                   "Table 1 model": _named(partner.name, scale, bundle.label(old)), "L": L,
                   "L / retrained L_tr": L // new["train"]["l_tr"], "ppl retrained": p["ppl"][i],
                   "r retrained": p["r"][i], "r low": p["r_low"][i], "r high": p["r_high"][i]}
            if L in q["lengths"]:
                j = q["lengths"].index(L)
                both = np.stack([q["nll"][j], p["nll"][i]])  # r of the pair = ppl retrained / ppl Table 1
                ratio, lo, hi = paired_interval(both, docs=docs)
                row.update({"ppl Table 1": q["ppl"][j], "r Table 1": q["r"][j], "retrained / Table 1": ratio[1],
                            "low": lo[1], "high": hi[1]})
            rows.append(row)
    return pd.DataFrame(rows)


def table2_protocols(scale: str = SECOND) -> pd.DataFrame:
    """Claim 7 in two protocols, one row a retrained model of Table 2 (finished, beside its
    finished Table 1 model): the receptive field that sets the new L_tr, on the book's input
    (16 L_tr) and on the paper's (4 L_tr: Figure 5 measures the field on 2048-token inputs at
    L_tr = 512, and Table 2 retrains Δ = 6 at L_tr = 2048 because its field reached that
    input's end), for the Table 1 model and for the retrained one, where each was measured; and
    r at Table 1's horizon (16 x its L_tr) on the uniform draw and, where the bundle holds it,
    on segments that score every test document. An ERF capped by its input is a lower bound
    (``≥``); "–" where a model was trained before its bundle kept that input's gradient."""
    from rflens.measure.criterion import EXTRAPOLATION_HORIZON
    from rflens.measure.criterion import erf_text
    from rflens.measure.receptive import summarize

    def field(point, l_tr, threshold, key=None):
        curve = point.get(key, {}).get("normalized") if key else point.get("normalized")
        if curve is None:
            return "–"
        rf = summarize(curve, threshold, l_tr)
        return erf_text(rf["erf"], rf["capped"])

    rows = []
    for spec, partner in _finished_table2(scale):
        new, old = bundle.read_result(bundle.entries(scale)[spec.name]), bundle.read_result(bundle.entries(scale)[partner.name])
        p, q = new["points"][-1], old["points"][-1]
        threshold, old_l_tr, l_tr = new["eval"]["erf_threshold"], old["train"]["l_tr"], new["train"]["l_tr"]
        horizon = EXTRAPOLATION_HORIZON * old_l_tr
        row = {"retrained": _named(spec.name, scale, bundle.label(new)), "L_tr": l_tr, "Table 1 L_tr": old_l_tr,
               "Table 1 ERF (16 L_tr input)": field(q, old_l_tr, threshold),
               "Table 1 ERF (4 L_tr input)": field(q, old_l_tr, threshold, "paper_input"),
               "ERF (16 L_tr input)": field(p, l_tr, threshold),
               "ERF (4 L_tr input)": field(p, l_tr, threshold, "paper_input"), "L": horizon}
        if horizon in p["lengths"]:
            i = p["lengths"].index(horizon)
            row.update({"r": p["r"][i], "r low": p["r_low"][i], "r high": p["r_high"][i],
                        "documents": len(set(new.get("segment_docs") or [])) or None})
        every = p.get("every_document")
        if every and horizon in every["lengths"]:
            i = every["lengths"].index(horizon)
            row.update({"r, every document": every["r"][i], "low, every document": every["r_low"][i],
                        "high, every document": every["r_high"][i], "documents, every": every["documents"]})
        rows.append(row)
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- two depths

DEEP = "deep"  # the paper's depth, beside the long run's four layers


def _paper_names(scale: str) -> list[tuple[str, str, str]]:
    """(model, "window=100", "w = 100") for every Table 1 model of the preset that maps to a
    setting of the paper's (:func:`rflens.setup.presets.paper_value`)."""
    sc = presets.get(scale)
    rows = []
    for family in presets.FAMILIES.values():
        for value in getattr(sc.sweeps, family.setting):
            theirs = presets.paper_value(family.setting, value, sc.model.n_layer, sc.train.l_tr)
            if theirs is not None:
                shared = " (one slope for every head)" if family.setting == "same_slope" else ""
                rows.append((f"{family.pos}_{family.setting}={value}", f"{family.setting}={theirs}",
                             f"{family.symbol} = {theirs}{shared}"))
    return rows


def paper_label(name: str, scale: str) -> str:
    """A model of ``scale`` named by the paper's setting it maps to, and its seed where not the
    first ("ALiBi Δ = 8, seed 2" for the long run's ``alibi_slope_shift=4_seed=2``); a model
    that maps to none is named by its scheme's title, or keeps its name."""
    from rflens.setup.schemes import title

    model, _, seed = name.partition("_seed=")
    return _labels(scale).get(model, title(model)) + (f", seed {seed}" if seed else "")


@functools.lru_cache(maxsize=None)  # presets are frozen: one map a preset
def _labels(scale: str) -> dict[str, str]:
    """{model: "ALiBi Δ = 8"} for every Table 1 model of the preset that maps to a setting of the paper's."""
    return {n: f"{'window' if lab.startswith('w') else 'ALiBi'} {lab}" for n, _, lab in _paper_names(scale)}


def _named(name: str, scale: str, label: str) -> str:
    """A model's name in the book's tables: the paper's setting where it maps to one
    (:func:`paper_label`), a Table 2 model as its Table 1 model's at its own L_tr ("ALiBi Δ = 6,
    L_tr = 128"), else ``label``."""
    from rflens.errors import UserError

    model, _, seed = name.partition("_seed=")
    if model in _labels(scale):
        return paper_label(name, scale)
    try:
        spec = emergence_named(model, presets.long_run(scale))
    except UserError:  # not a model of the run's plan
        return label
    base, settings = LongModel(spec.pos, spec.overrides[:1], spec.corpus).name, spec.settings()
    if base in _labels(scale) and "l_tr" in settings:
        return f"{_labels(scale)[base]}, L_tr = {settings['l_tr']}" + (f", seed {seed}" if seed else "")
    return label


def plan_label(spec: LongModel, scale: str) -> str:
    """A model of a run's plan named as the book's tables name it (:func:`_named`: "ALiBi Δ = 8,
    seed 1"); one that maps to no setting of the paper's by its scheme and what differs
    (:func:`rflens.store.bundle.label`: "Sinusoidal embeddings unscaled, seed 1")."""
    seed = spec.settings().get("seed")
    settings = {k: v for k, v in spec.settings().items() if k != "seed"}
    plain = bundle.label({"settings": settings, "pos": spec.pos, "corpus": spec.corpus})
    return _named(spec.name, scale, plain + (f", seed {seed}" if seed else ""))


def listing(run) -> pd.DataFrame:
    """The plan's table of ``run`` (:func:`rflens.longrun.plan.listing`) with each model named as
    the book names it (:func:`plan_label`) before its state: the book's view of ``emergence --list``."""
    from rflens.longrun.plan import listing as plan_listing

    table = plan_listing(run)
    names = {spec.name: plan_label(spec, run.name) for spec in models(run)}
    table.insert(0, "model", [names[n] for n in table.index])
    return table


def paper_labels(em: pd.DataFrame, scale: str) -> pd.DataFrame:
    """Rows of :func:`rflens.store.bundle.table` with each Table 1 model labelled by the paper's
    setting ("ALiBi Δ = 8" for the long run's Δ = 4, "ALiBi Δ = 8, seed 1" for its further
    seed); other models keep their labels."""
    if em.empty:
        return em
    named = {n: _named(n, scale, old) for n, old in dict(zip(em["name"], em["label"])).items()}  # once a model
    return em.assign(label=em["name"].map(named))


def sweep_ends(runs: tuple[str, ...] = (SECOND, DEEP), family: str = "slope_shift") -> pd.DataFrame:
    """The two ends of one of Table 1's sweeps (ALiBi's Δ by default: the paper's -3 and 8) in
    each run, first seed, as rows of :func:`rflens.store.bundle.table` at every measured size,
    named ``run/model`` and labelled by the paper's setting and the depth ("ALiBi Δ = 8, 12
    layers"), so that one figure holds them all (the index page's key figure)."""
    from rflens.longrun.plan import sweep

    out = []
    for run in runs:
        names = sweep(presets.long_run(run), family)[1]
        have = [n for n in (names[0], names[-1]) if n in bundle.entries(run)] if names else []
        em = paper_labels(bundle.table(run, names=have), run) if have else pd.DataFrame()
        if not em.empty:
            layers = presets.get(run).model.n_layer
            out.append(em.assign(name=run + "/" + em["name"], label=em["label"] + f", {layers} layers"))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def by_paper_setting(scale: str) -> pd.DataFrame:
    """The shipped Table 1 models of ``scale`` (rows of :func:`rflens.store.bundle.table`), each
    named by the paper's setting it maps to (:func:`rflens.setup.presets.paper_value`): ``key``
    "window=100", ``label`` "w = 100", so that two presets of other depths or L_tr line up."""
    rows, shipped = _paper_names(scale), bundle.entries(scale)  # finished or still training
    names = [n for n, _, _ in rows if n in shipped]
    em = bundle.table(scale, names=names) if names else pd.DataFrame()
    if em.empty:
        return em
    key, label = ({n: k for n, k, _ in rows}, {n: lab for n, _, lab in rows})
    return em.assign(model=em["name"], name=em["name"].map(key), label=em["name"].map(label))


def depths(shallow: str = SECOND, deep: str = DEEP) -> pd.DataFrame:
    """The Table 1 models of both depths at their last measured size, by the paper's setting:
    the window or exponent each trains, its ERF, ERF / w for a window (the paper's are 4.8 to
    6.4 at R = 12), ERF / L_tr and the state of r(16 L_tr); for the shallow run, also its
    ERF / w at the size the deep run's model has reached (``ERF / w, same tokens``), so that
    a deep model still training is set beside the shallow one at the same size. One row a
    (setting, depth)."""
    ems = {scale: by_paper_setting(scale) for scale in (shallow, deep)}
    reached = ems[deep].groupby("name")["tokens"].max() if not ems[deep].empty else pd.Series(dtype=float)
    out = []
    for scale, em in ems.items():
        if em.empty:
            continue
        sc = presets.get(scale)
        for key, d in em.groupby("name", sort=False):
            d = d.sort_values("tokens")
            last = d.iloc[-1]
            setting, value = str(last["model"]).split("_", 1)[1].split("=")
            window = setting == "window"
            then = d[d["tokens"] <= reached[key]] if scale == shallow and key in reached.index else d.iloc[0:0]
            out.append({"the paper's": last["label"], "layers": sc.model.n_layer, "L_tr": int(last["l_tr"]),
                        "trained as": f"{presets.FAMILIES[setting].symbol} = {value}", "tokens": int(last["tokens"]),
                        "finished": bool(last["complete"]), "ERF": int(last["erf"]),
                        "ERF / w": round(last["erf"] / float(value), 2) if window else None,
                        "ERF / w, same tokens": round(then["erf"].iloc[-1] / float(value), 2)
                        if window and len(then) else None,
                        "ERF / L_tr": round(last["erf"] / last["l_tr"], 2),
                        "r(16 L_tr)": float(last["r_horizon"]), "low": float(last["r_horizon_lo"]),
                        "high": float(last["r_horizon_hi"]), "state": state(last)})
    df = pd.DataFrame(out)
    if df.empty:
        return df
    order = {key: i for i, key in enumerate(dict.fromkeys(df["the paper's"]))}  # each setting's depths together
    return df.sort_values(["the paper's", "layers"], key=lambda col: col.map(order) if col.name == "the paper's"
                          else col, kind="stable").reset_index(drop=True)


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (ties at their mean rank); NaN where a side is constant."""
    rx, ry = pd.Series(x).rank().to_numpy(), pd.Series(y).rank().to_numpy()
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def share_against_r(runs: tuple[str, ...] = (SECOND, DEEP), n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Claim 6 read as a continuous relation, one row a run: over every Table 1 model the run
    ships (:func:`by_paper_setting`) and every size it measured, the rank correlation between
    the share of the gradient within the last L_tr tokens (on a 16 L_tr input) and r(16 L_tr),
    with its 95% interval from resampling the models with their sizes (the sizes of one model
    are one curve, not independent draws; ``n_boot`` replicates). A negative value: the more
    of its gradient a model keeps within L_tr, the flatter it stays. Beside it, the model whose
    last size has the lowest share among those that stay within the tolerance, and the share."""
    out = []
    for run in runs:
        em = by_paper_setting(run)
        if em.empty:
            continue
        cells = em.dropna(subset=["share_in_ltr", "r_horizon"])
        groups = [g[["share_in_ltr", "r_horizon"]].to_numpy(float) for _, g in cells.groupby("model", sort=True)]
        if len(groups) < 3:
            continue
        rng = np.random.default_rng(seed)
        reps = []
        for _ in range(n_boot):
            pick = np.vstack([groups[i] for i in rng.integers(0, len(groups), len(groups))])
            reps.append(_spearman(pick[:, 0], pick[:, 1]))
        low, high = np.nanquantile(reps, [0.025, 0.975])
        last = cells.sort_values("tokens").groupby("model", sort=False).tail(1)
        flat = last[last["r_horizon_hi"] <= EXTRAPOLATION_TOLERANCE]
        lowest = flat.loc[flat["share_in_ltr"].idxmin()] if len(flat) else None
        out.append({"run": run, "layers": presets.get(run).model.n_layer, "models": len(groups), "cells": len(cells),
                    "rank correlation": _spearman(cells["share_in_ltr"].to_numpy(float), cells["r_horizon"].to_numpy(float)),
                    "low": float(low), "high": float(high),
                    "flat with the least share": None if lowest is None else lowest["label"],
                    "its share": None if lowest is None else float(lowest["share_in_ltr"])})
    return pd.DataFrame(out)


def sinusoidal_peaks(runs: tuple[str, ...] = (SECOND, DEEP), seeds: bool = False) -> pd.DataFrame:
    """Where Sinusoidal's gradient peaks at each depth (claim 8, Figure 7): every finished
    Sinusoidal model on prose of ``runs``, from the first seed (with ``seeds``, from every
    seed, each row naming its ``seed``), at its last measured size: its
    embeddings (``scaled`` by sqrt(d) as the book trains Sinusoidal, or ``unscaled`` as the
    paper's code does), the absolute position of its largest normalised gradient outside the
    most recent few tokens (:func:`rflens.measure.receptive.gradient_jump`) against its L_tr
    (the paper finds it at L_tr; ``peak at L_tr``: within 5% of it, at least one position, as
    the earlier criterion of claim 8 read it), whether the gradient jumps at L_tr
    (:func:`rflens.measure.receptive.step_at_l_tr`, claim 8's reading) on the ERF's input
    (16 L_tr) and, where it was measured, on the paper's (4 L_tr), and r(4 L_tr) with its paired
    interval. One row a model."""
    from rflens.measure.receptive import gradient_jump, step_at_l_tr

    rows = []
    for scale in runs:
        done, run = set(bundle.complete(scale)), presets.long_run(scale)
        for spec in models(run):
            seed = int(spec.settings().get("seed", 0))
            if spec.pos != "sinusoidal" or spec.corpus != "prose" or (seed and not seeds) or spec.name not in done:
                continue
            res = bundle.load(spec.name, scale)
            point, l_tr = res["points"][-1], int(res["train"]["l_tr"])
            at = list(point["lengths"]).index(4 * l_tr)
            found = gradient_jump(point["normalized"], l_tr)
            peak = found["jump_abs_pos"]
            on_paper = point.get("paper_input")
            rows.append({"run": scale, "layers": run.model.n_layer, "L_tr": l_tr,
                         "embeddings": "scaled" if res["model"].get("scale_embeddings", True) else "unscaled",
                         **({"seed": seed} if seeds else {}),
                         "tokens": int(point["tokens"]), "peak at": peak, "peak - L_tr": peak - l_tr,
                         "peak at L_tr": found["jump_ok"],
                         "jumps at L_tr (16 L_tr input)": step_at_l_tr(point["normalized"], l_tr)["jump"],
                         "jumps at L_tr (4 L_tr input)": step_at_l_tr(on_paper["normalized"], l_tr)["jump"]
                         if on_paper else None,
                         "r(4 L_tr)": float(point["r"][at]), "low": float(point["r_low"][at]),
                         "high": float(point["r_high"][at])})
    if seeds:  # a model's seeds side by side
        rows.sort(key=lambda r: (runs.index(r["run"]), r["L_tr"], r["embeddings"], r["seed"]))
    return pd.DataFrame(rows)


def erf_agreement_by_size(runs: tuple[str, ...] = (SECOND, DEEP)) -> pd.DataFrame:
    """Claim 6 at every size: over the Table 1 models a run ships (:func:`by_paper_setting`),
    at each size they were measured, how many agree with the prediction "ERF <= L_tr" about
    whether they extrapolate (each read as Table 1 reads it: r(L)'s paired upper bound within the
    tolerance up to 16 L_tr), and whether that meets the paper's criterion (at least
    :data:`rflens.measure.criterion.ERF_AGREEMENT` of them, unchanged). One row a run and size."""
    from rflens.measure.columns import lengths_of, row_ppl
    from rflens.measure.criterion import ERF_AGREEMENT, erf_within_l_tr, extrapolates

    rows = []
    for run in runs:
        em = by_paper_setting(run)
        if em.empty:
            continue
        for tokens, cells in em.groupby("tokens", sort=True):
            flat = cells.apply(lambda row: extrapolates(row_ppl(row), int(row["l_tr"]), upper={
                L: float(row[f"r_hi@{L}"]) for L in lengths_of(pd.DataFrame([row]), "r_hi")
                if not pd.isna(row[f"r_hi@{L}"])} or None), axis=1)
            known = flat.notna()
            agree = int((erf_within_l_tr(cells[known]) == flat[known].astype(bool)).sum())
            n = int(known.sum())
            rows.append({"run": run, "layers": presets.get(run).model.n_layer, "tokens": int(tokens), "models": n,
                         "agree": agree, "share": agree / n if n else float("nan"),
                         "meets 80%": bool(n and agree / n >= ERF_AGREEMENT)})
    return pd.DataFrame(rows)


def erf_intervals(scale: str) -> pd.DataFrame:
    """Each shipped model of ``scale`` that kept its per-segment gradients
    (:func:`rflens.store.bundle.point_gradients`), at each size: its ERF and its share of the
    gradient within L_tr, each with a 95% interval over the measured segments
    (:func:`rflens.measure.receptive.erf_interval`). Models trained before the gradients were
    kept have no row."""
    from rflens.measure.receptive import erf_interval

    threshold, rows = presets.get(scale).eval.erf_threshold, []
    for name, path in bundle.entries(scale).items():
        grads = bundle.point_gradients(path)
        if not grads:
            continue
        res = bundle.read_result(path)
        l_tr = int(res["train"]["l_tr"])
        for point in res["points"]:
            if point["steps"] in grads:
                rows.append({"model": name, "label": bundle.label(res), "tokens": int(point["tokens"]), "L_tr": l_tr,
                             **erf_interval(grads[point["steps"]], threshold, l_tr)})
    return pd.DataFrame(rows)
