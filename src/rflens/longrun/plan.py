"""The long run's plan: which models it trains, in which order, at which sizes they are
measured, and the names they are shipped under.

Each model of a long-run preset (:func:`models`) is trained once to its full budget by
:mod:`rflens.longrun.emergence` and measured at the sizes of :func:`measured_steps`; the
plan is read from the preset's sweeps (:mod:`rflens.setup.presets`), and a run that extends
another (``long-extended``) trains the named models of that run further.
"""

from __future__ import annotations

from pathlib import Path

from rflens.errors import UserError
from rflens.setup import presets
from rflens.setup.config import DataConfig, ModelConfig, TrainConfig
from rflens.setup.presets import LongRun
from rflens.setup.settings import resolve
from rflens.store import bundle
from rflens.store.planned import check_model, check_shipped, LongModel, measured_steps, spec_of  # noqa: F401 (the plan's)
from rflens.store.shipped import at_seed, served_seed


# ----------------------------------------------------------------------------- what is trained

def by_experiment(run: LongRun) -> dict[str, list[LongModel]]:
    """The long run's models by the experiment they answer, failing and stable sides
    together: Table 1's three sweeps (of :data:`rflens.setup.presets.FAMILIES`), Table 2's
    retrainings, NoPE with Figure 7's absolute positions, Table 3 on each corpus, and the
    further seeds of the models that decide claims (:func:`seeded`). A model may answer
    two (Figure 7's Sinusoidal is also Table 3's on prose).

    A Table 2 entry with its training length fixed (``l_tr`` or ``l_tr_mult``) is trained
    whatever its Table 1 model does, as the paper designed Table 2; one whose length covers
    the Table 1 model's ERF waits for that model to be shipped and to fail."""
    sw, l_tr = run.sweeps, run.train.l_tr
    out = {f"Table 1: {f.title}": specs for f, specs in _table1(run).items() if specs}
    table2 = []
    for entry in sw.table2:
        setting = ((presets.FAMILIES[entry.family].setting, entry.value),)
        if (entry.l_tr is not None or entry.l_tr_mult is not None) and not entry.if_fails:
            table2.append(LongModel(entry.pos, (*setting, *sorted(entry.training(l_tr).items()))))
            continue
        failing = _failing(LongModel(entry.pos, setting), run)
        if failing is not None:
            over = entry.training(l_tr, None if entry.l_tr_mult else run.train.batch_size, failing)
            table2.append(LongModel(entry.pos, (*setting, *sorted(over.items()))))
    if table2:  # an L_tr that covers the ERF may be the paper's ratio too: one model
        out["Table 2: the failures retrained on a longer L_tr"] = list(dict.fromkeys(table2))
    beside = sw.beside_figure7
    out["NoPE and Figure 7: no bias, absolute positions"] = (
        [LongModel(p) for p in beside if p == "nope"]
        + [LongModel("sinusoidal", tuple(sorted(over.items()))) for _, over in run.sinusoidal_runs()]
        + [LongModel("sinusoidal", tuple(sorted(over.items()))) for _, over in run.paper_embedding_runs()]
        + [LongModel(p) for p in beside if p != "nope"])
    for c in sw.corpora if sw.table3_pos else ():
        out[f"Table 3 on {c}"] = [LongModel(p, (), c) for p in sw.table3_pos]
    if sw.seeds:
        title = f"Seeds {', '.join(map(str, sw.seeds))}: the models that decide claims " + (
            _join(sorted({why.split(":")[0].split()[1] for _, why in sw.seeded}, key=int)) if sw.seeded
            else "2, 4, 5, 7, 8 and 9")
        every = {spec.name: spec for specs in out.values() for spec in specs}
        chosen = [every[name] for name, _ in sw.seeded if name in every] if sw.seeded else _deciding(out)
        out[title] = [seeds for spec in chosen for seeds in with_seeds(spec, sw.seeds)]
    return out


def keeps_weights(run: LongRun, spec: LongModel) -> bool:
    """Whether ``spec`` is shipped with its weights: the drift test's models, Sinusoidal
    with the paper's embeddings, whose gradient claim 8 reads again on other inputs
    (Figure 7's 4 L_tr beside the bundle's 16 L_tr), Table 2's models, which claim 7
    decides (:func:`every_document_lengths`), and the Table 1 models they retrain, whose
    field on the paper's input is claim 7's premise (:func:`table2_partners`)."""
    return (spec.name in run.drift_models or (spec.pos == "sinusoidal" and spec.settings().get("scale_embeddings") is False)
            or every_document_lengths(run, spec) is not None or spec.name in table2_partners(run))


def table2_retrainings(run: LongRun) -> list[tuple[LongModel, LongModel]]:
    """(retrained model, its Table 1 model) for each model of Table 2: the Table 1 model is the
    retrained one's first setting alone (its own L_tr and batch), seed 0."""
    return [(spec, LongModel(spec.pos, spec.overrides[:1], spec.corpus))
            for family, specs in by_experiment(run).items() if family.startswith("Table 2") for spec in specs]


def table2_partners(run: LongRun) -> set[str]:
    """The names of the Table 1 models that Table 2 trains again at a longer L_tr."""
    return {partner.name for _, partner in table2_retrainings(run)}


def every_document_lengths(run: LongRun, spec: LongModel) -> list[int] | None:
    """The lengths at which the finished ``spec`` is also measured on segments that score
    every test document (:meth:`rflens.data.Corpus.document_segments`): a Table 2 model's,
    from its own L_tr to Table 1's horizon (16 x the run's L_tr, the same absolute lengths
    claim 7 reads); None for every other model."""
    from rflens.measure.criterion import EXTRAPOLATION_HORIZON

    base = spec.name.partition("_seed=")[0]
    if base not in {retrained.name for retrained, _ in table2_retrainings(run)}:
        return None
    l_tr = int(spec.settings().get("l_tr", run.train.l_tr))
    return [l_tr * m for m in run.eval.length_mults if l_tr * m <= EXTRAPOLATION_HORIZON * run.train.l_tr] or None


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def listing(run: LongRun):
    """The plan as a table (``emergence --list`` as data): one row a model, in the order it is
    trained, indexed by the name ``--only`` takes, with its state (shipped, training: measured
    at some sizes, or to train), the sizes measured so far and why the plan trains it
    (:func:`reasons`); :func:`rflens.longrun.compare.listing` adds the book's name of each."""
    import pandas as pd

    done, started, why = bundle.complete(run.name), set(bundle.entries(run.name)), reasons(run)
    rows = []
    for spec in models(run):
        measured = len(bundle.load(spec.name, run.name)["points"]) if spec.name in started else 0
        state = "shipped" if spec.name in done else "training" if measured else "to train"
        planned = len(measured_steps(run, resolve(run, spec.pos, spec.corpus, spec.settings()).train))
        rows.append({"name (--only)": spec.name, "state": state, "sizes measured": f"{measured} of {planned}",
                     "why": why.get(spec.name, "")})
    columns = ["state", "sizes measured", "why"]
    return pd.DataFrame(rows).set_index("name (--only)") if rows else pd.DataFrame(columns=columns)


def reasons(run: LongRun) -> dict[str, str]:
    """{model: why the plan trains it}: the experiments it answers (:func:`by_experiment`'s
    groups), and for a further seed, what it decides (the preset's ``sweeps.seeded``)."""
    why = dict(run.sweeps.seeded)
    out: dict[str, list[str]] = {}
    for family, specs in by_experiment(run).items():
        for spec in specs:
            base = spec.name.rsplit("_seed=", 1)[0]
            out.setdefault(spec.name, []).append(f"{family.split(':')[0]}: {why[base]}" if base in why and
                                                 family.startswith("Seeds") else family)
    return {name: "; ".join(groups) for name, groups in out.items()}


def _deciding(groups: dict[str, list[LongModel]]) -> list[LongModel]:
    """The models whose verdicts decide claims 2, 4, 5, 7, 8 and 9: the two ends of each
    Table 1 sweep, Table 2's retrained models, Sinusoidal at both L_tr and Rotary."""
    out = []
    for family, specs in groups.items():
        if family.startswith("Table 1"):
            out += [specs[0], specs[-1]]
        elif family.startswith("Table 2"):
            out += specs
        elif family.startswith("NoPE"):
            out += [s for s in specs if s.pos in ("sinusoidal", "rotary")]
    return list(dict.fromkeys(out))


def with_seeds(spec: LongModel, seeds) -> list[LongModel]:
    """``spec`` trained from each of ``seeds`` (the training seed: initialisation and the
    order of the batches)."""
    return [LongModel(spec.pos, (*spec.overrides, ("seed", int(s))), spec.corpus) for s in seeds]


def seeded(name: str, run: LongRun) -> list[str]:
    """The names of ``name``'s model trained from every seed the preset has (its own first)."""
    spec = named(name, run)
    return [name] + [s.name for s in with_seeds(spec, run.sweeps.seeds)]


def further_seeds(run: LongRun) -> list[LongModel]:
    """The plan's models trained from a further seed (the group of :func:`by_experiment`
    that holds them; empty for a preset without further seeds)."""
    if not run.sweeps.seeds:
        return []
    return next((specs for group, specs in by_experiment(run).items() if group.startswith("Seeds")), [])


_SEEDED: dict[str, tuple] = {}


def _seeded(run: LongRun) -> frozenset:
    """The (model, data, train) settings of every model the preset's plan trains from a
    further seed (:func:`by_experiment`)."""
    stamp = bundle.stamp(run.name)  # a plan's Table 2 may follow from the shipped Table 1
    if _SEEDED.get(run.name, (None,))[0] != stamp:
        out = set()
        with at_seed(0):  # the plan itself is read at the first seed
            for spec in further_seeds(run):
                r = resolve(run, spec.pos, spec.corpus, spec.settings())
                out.add((r.model, r.data, r.train))
        _SEEDED[run.name] = (stamp, frozenset(out))
    return _SEEDED[run.name][1]


def served_settings(run: LongRun, pos: str, corpus: str, settings: dict) -> dict:
    """``settings`` with the seed of :func:`rflens.store.shipped.at_seed` when the preset
    trains this model from that seed too, else as they are."""
    seed = served_seed()
    if not seed or settings.get("seed", 0):
        return settings
    seeded = {**settings, "seed": seed}
    r = resolve(run, pos, corpus, seeded)
    return seeded if (r.model, r.data, r.train) in _seeded(run) else settings


def _table1(run: LongRun) -> dict:
    """{family: its sweep's models}, Table 1's three sweeps in their order."""
    sw = run.sweeps
    return {f: [LongModel(f.pos, ((f.setting, v),)) for v in getattr(sw, f.setting)] for f in presets.FAMILIES.values()}


_FIRST = (presets.FAMILIES["slope_shift"], presets.FAMILIES["window"], presets.FAMILIES["same_slope"])


def models(run: LongRun) -> list[LongModel]:
    """The models of the long run, in the order they are trained: the failing side of
    Table 1 and NoPE first (the thesis), then Table 2's retrainings and the Table 1 models
    they are compared with, the rest of Table 1, Figure 7's Sinusoidal and Rotary, Table 3
    on every corpus, and the further seeds (:func:`by_experiment`)."""
    if run.extends:  # models of another run trained further
        return [named(name, presets.long_run(run.extends)) for name in run.models]
    sw = run.sweeps
    # each Table 1 sweep's failing end (of the sweeps the run has), then NoPE
    first = [LongModel(f.pos, ((f.setting, max(getattr(sw, f.setting))),)) for f in _FIRST if getattr(sw, f.setting)]
    first += [LongModel(p) for p in sw.beside_figure7 if p == "nope"]
    rest = [spec for specs in by_experiment(run).values() for spec in specs]
    return list(dict.fromkeys(first + [s for pair in table2_retrainings(run) for s in pair] + rest))


def sizes(run: LongRun) -> list[int]:
    """The training tokens of the measured sizes of the preset's models (:func:`measured_steps`)."""
    t = run.train
    return [steps * t.batch_size * t.l_tr for steps in measured_steps(run, t)]


LAST_SIZE_COLUMNS = ["l_tr", "tokens", "ppl_l_tr", "r_horizon", "r_horizon_lo", "r_horizon_hi", "erf", "erf_capped",
                     "erf_length", "val_loss"]


def last_sizes(em, run: LongRun):
    """One row per shipped model at its largest measured size, indexed by (family, label) in
    the order of :func:`by_experiment` (a model two experiments read, such as Sinusoidal in
    Figure 7 and Table 3, once, under both). ``em``: rows of :func:`rflens.store.bundle.table`."""
    import pandas as pd

    groups: dict[str, list[str]] = {}  # a model answering two experiments is one row, under both names
    for family, specs in by_experiment(run).items():
        for spec in specs:
            if (em["name"] == spec.name).any():
                groups.setdefault(spec.name, []).append(family)
    rows = [em[em["name"] == name].sort_values("tokens").iloc[-1].to_dict() | {"family": " and ".join(families)}
            for name, families in groups.items()]
    out = (pd.DataFrame(rows) if rows else pd.DataFrame(columns=["family", "label", *LAST_SIZE_COLUMNS]))
    out = out.set_index(["family", "label"])[LAST_SIZE_COLUMNS]
    out.attrs["run"] = run.name  # the run the rows come from, for a CSV of them
    return out


def _failing(spec: LongModel, run: LongRun) -> int | None:
    """The ERF of a shipped, complete model that does not extrapolate at its last point;
    None otherwise (not shipped, unfinished, or it extrapolates)."""
    from rflens.measure.criterion import extrapolates  # pandas: not on the command line's startup path

    if spec.name not in bundle.complete(run.name):
        return None
    result = bundle.load(spec.name, run.name)
    last, l_tr = result["points"][-1], result["train"]["l_tr"]
    lengths = last["lengths"]
    ok = extrapolates(dict(zip(lengths, last["ppl"])), l_tr, upper=dict(zip(lengths, last["r_high"])))
    return None if ok else int(last["erf"])


def named(name: str, run: LongRun) -> LongModel:
    """The model of the long run called ``name``; UserError listing the names otherwise."""
    for spec in models(run):
        if spec.name == name:
            return spec
    raise UserError(f"no model named {name!r} in the {run.name} run: choose from {', '.join(s.name for s in models(run))}")


def check_planned(result: dict, run: LongRun, where: Path, spec: LongModel | None = None,
                  fix: str | None = None) -> None:
    """UserError unless ``result`` (a model's result.json, read from ``where``) is the model
    its name stands for in the ``run``'s plan (:func:`rflens.store.planned.check_model`): a
    worker's folder joins the bundle only as what it is. ``spec``: the model its name stands
    for (default: looked up in the plan); ``fix``: what the line advises."""
    if spec is None:
        spec = named(str(result.get("name")), run)  # a name outside the plan: the names to choose from
    check_model(result, run, where, spec, fix)


def command_for(run: LongRun, model_cfg: ModelConfig, data_cfg: DataConfig, train_cfg: TrainConfig) -> str:
    """The command that trains the model of these settings: for a model of the run's plan,
    the long run's, with its emergence points; otherwise (or at a read-only control, whose
    bundle nothing trains into) ``train``, into the run store, where it is read first."""
    from rflens.setup.settings import describe, train_command

    if not run.read_only:
        for spec in models(run):
            r = resolve(run, spec.pos, spec.corpus, spec.settings())
            if (r.model, r.data, r.train) == (model_cfg, data_cfg, train_cfg):
                return f"python -m rflens emergence --scale {run.name} --only {spec.name}"
    return train_command(run, model_cfg.pos, data_cfg.corpus, describe(model_cfg, data_cfg, train_cfg, run))


def sweep(run: LongRun, family: str = "slope_shift") -> tuple[str, list[str]]:
    """One of Table 1's sweeps in the long run ``run``: the experiment's title and its
    models' names (ALiBi's Δ sweep, the book's key figure, by default)."""
    title = f"Table 1: {presets.FAMILIES[family].title}"
    return title, [spec.name for spec in by_experiment(run)[title]]


def table1_names(run: LongRun) -> list[str]:
    """The shipped models that belong to Table 1's three sweeps, in the sweeps' order."""
    names = [spec.name for specs in _table1(run).values() for spec in specs]
    have = bundle.entries(run.name)
    return [n for n in names if n in have]
