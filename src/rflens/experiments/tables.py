"""The paper's experiments as functions of a preset, each returning a pandas DataFrame.

Chi, Fan, Rudnicky and Ramadge (ACL 2023), *Dissecting Transformer Length Extrapolation via
the Lens of Receptive Field Analysis*:

- :func:`table1`   Section 3, Table 1: ALiBi with shifted slopes (Delta), one slope for every
  head, and explicit windowed attention (w); last-token perplexity at L_ex = L_tr x (1..16),
  with the receptive-field numbers of Section 4 beside each model.
- :func:`table2`   Section 4, Table 2: the failing Table 1 models retrained with an L_tr
  that covers their ERF, measured at the same absolute L_ex.
- :func:`figure7`  Section 5, Figure 7: Sinusoidal at two L_tr and Rotary; where the
  normalised gradient of Sinusoidal jumps.
- :func:`table3`   Section 6, Table 3: seven positional schemes on the three corpora, with
  the training speed beside them.
- :func:`figure11` Section 6, Figure 11: the receptive fields of Sandwich, KERPLE and T5.
- :func:`protocols` footnote 2 / Figure 3: last-token vs non-overlapping vs sliding window.

Every model comes from the run store (:func:`rflens.store.runs.get_run`: trained once, then
loaded) and every measurement is cached there (``run.cached``), so a second call of any
function here only reads JSON. Two experiments that need the same configuration share the
model: ALiBi with Delta = 0 on prose is the Table 1 row, the Table 3 entry and the
protocol-comparison model at once.

The book's plan and cost are :mod:`rflens.experiments.book_models`, Chapter 12's work :mod:`rflens.experiments.beyond`, the
bench's pilots :mod:`rflens.readings.pilot`; training speed is :mod:`rflens.experiments.speed` and Figure 7's
gradient jump :func:`rflens.measure.receptive.gradient_jump`.

Wide tables: one row per model, with ``ppl@L`` (perplexity), ``ci_low@L`` / ``ci_high@L``
(its confidence interval) and ``r@L`` (= ppl(L) / ppl(L_tr)) columns for every evaluation
length L. :func:`lengths_of` reads the lengths back from the column names and
:func:`long_form` turns a wide table into one row per (model, L).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import pandas as pd
from tqdm import tqdm

from rflens import paper
from rflens.errors import UserError
from rflens.experiments.speed import load_speed_record, training_speed
from rflens.measure.columns import add_erf_columns, add_ppl_columns, lengths_of, segment_nlls
from rflens.measure.criterion import EXTRAPOLATION_HORIZON, flag
from rflens.measure.receptive import gradient_jump
from rflens.setup import presets, schemes
from rflens.setup.config import PROTOCOLS
from rflens.setup.presets import FAMILIES
from rflens.setup.schemes import model_title
from rflens.storage import package_repo

# The schemes of two figures of the paper: Figure 11 (Section 6) compares the receptive
# fields of Sandwich and the learnable log-like biases; the protocol comparison (footnote 2,
# Figure 3) uses an RPE, Sandwich and an APE.
FIGURE11_POS = ("sandwich", "kerple_log", "t5")
PROTOCOL_POS = ("alibi", "sandwich", "sinusoidal")
# Section 7: Sandwich, its smoothed log curve and the learnable biases of the same family
LOG_LIKE_POS = ("sandwich", "smoothed", "kerple_log", "t5")
FAMILY_TITLES = {name: fam.title for name, fam in FAMILIES.items()}


def _num(v) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def family_label(family: str, value, l_tr: int | None = None, n_layer: int | None = None) -> str:
    """The row label of a Table 1 model: the paper's setting that the model of ``n_layer``
    layers trained at ``l_tr`` maps to (:func:`rflens.setup.presets.paper_value`), "Δ = -3"
    for the tiny preset's Δ = -7, "w = 160" for its w = 30, so that one model has one name at
    every scale; its own value is the row's ``value``. A window that no paper's w maps to
    (the smoke preset's) is named by its own value, marked so: "w = 4 (unmapped)"."""
    sym = FAMILIES[family].symbol
    if l_tr is None:
        return f"{sym} = {_num(value)}"
    if family == "window" and n_layer is None:
        raise ValueError("a window's paper setting depends on the depth: give n_layer")
    theirs = presets.paper_value(FAMILIES[family].setting, value, n_layer or paper.N_LAYER, l_tr)
    return f"{sym} = {_num(value)} (unmapped)" if theirs is None else f"{sym} = {_num(theirs)}"


def setting_label(family: str, value, l_tr: int | None = None) -> str:
    """A model's own setting, as its name in the code says it ("Δ=4 (paper's 8)", "w=24"):
    where the mapping is the subject (the pilot's models, which map to no paper setting)."""
    label = f"{FAMILIES[family].symbol}={_num(value)}"
    if family in ("slope_shift", "same_slope") and l_tr is not None and l_tr != paper.L_TR:
        label += f" (paper's {_num(value - presets.mapped_exponents((0,), l_tr)[0])})"  # the mapping undone
    return label


# --------------------------------------------------------------------------------------
# models: what to train, and the run store
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Spec:
    """One model of an experiment: a positional scheme, a corpus and setting overrides."""

    label: str
    pos: str
    corpus: str = "prose"
    overrides: tuple = ()  # sorted (name, value) pairs, hashable
    family: str = ""
    value: Any = None

    @property
    def settings(self) -> dict:
        return dict(self.overrides)


def make_spec(label: str, pos: str, corpus: str = "prose", *, family: str = "", value: Any = None, **overrides) -> Spec:
    clean = {k: _plain(v) for k, v in overrides.items()}
    return Spec(label, pos, corpus, tuple(sorted(clean.items())), family, _plain(value))


def _plain(v):
    """A numpy scalar (e.g. from a DataFrame cell) as a Python number; an integral float
    as an int (the settings classes give each field its canonical type)."""
    if hasattr(v, "item"):
        v = v.item()
    return int(v) if isinstance(v, float) and v.is_integer() else v


_RUNS: dict = {}  # (preset, pos, corpus, overrides, train) -> Run, so one process asks the store once


def run_of(preset: presets.Preset, spec: Spec, *, train: bool = True, progress: bool = False):
    """The run of ``spec`` at ``preset`` (rflens.store.runs.get_run), asked of the store once per process.
    With ``progress``: the training bar of a model the store lacks, and a line (on stderr)
    naming the model and whether it was trained now or came from the store."""
    import sys

    from rflens.terminal import model_label
    from rflens.store.runs import get_run, NotStored
    from rflens.store.shipped import served_seed
    train = train and not preset.shipped  # a shipped preset's models come from its bundle
    key = (preset.name, spec.pos, spec.corpus, spec.overrides, train, served_seed())
    if key not in _RUNS:
        try:
            settings = spec.settings
            if preset.shipped:  # inside shipped.at_seed: a model the long run trains from several seeds, from that one
                from rflens.longrun.plan import served_settings

                settings = served_settings(preset, spec.pos, spec.corpus, settings)
            run = get_run(preset, spec.pos, spec.corpus, settings, train=train, progress=progress)
        except NotStored:
            if not preset.shipped:
                raise
            from rflens.longrun.plan import command_for
            from rflens.setup.settings import resolve

            command = command_for(preset, *resolve(preset, spec.pos, spec.corpus, settings)[1:])
            raise NotStored(f"the {preset.name} bundle has no finished {model_label(spec.pos, spec.corpus, settings)}: "
                            f"train it with `{command}`") from None
        if progress:
            source = "shipped" if getattr(run, "shipped", False) else "from the run store" if run.reused else "trained now"
            tqdm.write(f"{spec.label} ({model_label(spec.pos, spec.corpus, spec.settings)}): {source}", file=sys.stderr)
        _RUNS[key] = run
    return _RUNS[key]


def progress_bar(items, desc: str, progress: bool):
    items = list(items)
    return tqdm(items, desc=desc, disable=not progress or not items, leave=False, unit="model")


def _l_tr(run) -> int:
    return int(run.train_cfg.l_tr)


# --------------------------------------------------------------------------------------
# measurements (cached in the run store by rflens.measure.perplexity / rflens.measure.receptive)
# --------------------------------------------------------------------------------------
def measure_ppl(run, *, lengths=None, protocol: str = "last_token", n=None, draw: str = "uniform") -> dict:
    from rflens.measure.perplexity import perplexity

    return perplexity(run, protocol=protocol, lengths=lengths, n=n, progress=False, draw=draw)


def measure_erf(run, *, length=None, threshold=None) -> dict:
    from rflens.measure.receptive import receptive_field

    return receptive_field(run, length=length, threshold=threshold, progress=False)


# --------------------------------------------------------------------------------------
# Table 1 (Section 3) with the receptive-field numbers of Section 4
# --------------------------------------------------------------------------------------
def table1_models(preset: presets.Preset, corpus: str = "prose") -> list[Spec]:
    return [make_spec(family_label(family, v, preset.train.l_tr, preset.model.n_layer), fam.pos, corpus, family=family, value=v,
                      **{fam.setting: v})
            for family, fam in FAMILIES.items() for v in getattr(preset.sweeps, family)]


def table1(preset: presets.Preset, corpus: str = "prose", *, progress: bool = True, train: bool = True) -> pd.DataFrame:
    """Table 1: one row per model (family, value, label, ppl@L, r@L, extrapolates, erf,
    share_in_ltr, theoretical), last-token perplexity at L_ex = L_tr x length_mults."""
    rows = []
    for spec in progress_bar(table1_models(preset, corpus), "Table 1", progress):
        run = run_of(preset, spec, train=train, progress=progress)
        row = {"family": spec.family, "value": spec.value, "label": spec.label, "pos": spec.pos,
               "corpus": corpus, "l_tr": _l_tr(run), "run_key": run.key}
        add_ppl_columns(row, measure_ppl(run), _l_tr(run))
        add_erf_columns(row, measure_erf(run))
        rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------
# Table 2 (Section 4): retrain the failures with an L_tr that covers their ERF
# --------------------------------------------------------------------------------------
def _table1_row(t1: pd.DataFrame, family: str, value) -> dict | None:
    match = t1[(t1["family"] == family) & (t1["value"].astype(float) == float(value))]
    return None if match.empty else dict(match.iloc[0])


def _table2_plan(preset, t1: pd.DataFrame) -> list[tuple[dict, dict]]:
    """Pairs (failing Table 1 row, training settings of the retrained model) from the
    preset's ``sweeps.table2``.

    Each entry names one Table 1 model (its family and value) and the longer training
    length, as the paper does for w = 160 and Delta = 6. Only models that fail in Table 1
    at this preset are retrained: a model that already extrapolates has nothing to fix, and
    one the preset's Table 1 does not have is left out. Two entries that come to the same
    model (an L_tr that covers the ERF is also the paper's ratio) give one pair: one model
    is one comparison.
    """
    plan, seen = [], set()
    for entry in preset.sweeps.table2:
        row = _table1_row(t1, entry.family, entry.value)
        if row is None:
            continue  # not in this preset's Table 1 sweep
        ext = row["extrapolates"]
        if ext is None or (isinstance(ext, float) and math.isnan(ext)) or bool(ext):
            continue  # extrapolates already (or was not measured): nothing to fix
        over = entry.training(int(row["l_tr"]), preset.train.batch_size, int(row["erf"]))
        key = (entry.family, float(entry.value), tuple(sorted(over.items())))
        if key not in seen:
            seen.add(key)
            plan.append((row, over))
    return plan


def _table2_pairs(preset, t1: pd.DataFrame, corpus: str) -> list[tuple[dict, Spec]]:
    """(failing Table 1 row, the spec of its retrained model) for every entry of the plan."""
    pairs = []
    for old, over in _table2_plan(preset, t1):
        fam = FAMILIES[old["family"]]
        pairs.append((old, make_spec(f'{old["label"]}, L_tr = {over["l_tr"]}', fam.pos, corpus, family=old["family"],
                                     value=old["value"], **{fam.setting: old["value"]}, **over)))
    return pairs


def table2_specs(preset: presets.Preset, t1: pd.DataFrame, corpus: str = "prose") -> list[Spec]:
    """The models Table 2 trains, given Table 1's results: one per failing model that
    ``sweeps.table2`` lists, with the training length that covers its measured ERF."""
    return [spec for _, spec in _table2_pairs(preset, t1, corpus)]


def table2_skipped(preset: presets.Preset, t1: pd.DataFrame) -> list[str]:
    """Labels of the Table 1 models of ``sweeps.table2`` that were not retrained because
    they already extrapolate."""
    planned = {row["label"] for row, _ in _table2_plan(preset, t1)}
    listed = [_table1_row(t1, e.family, e.value) for e in preset.sweeps.table2]
    return [row["label"] for row in listed if row is not None and row["label"] not in planned]


def table2(preset: presets.Preset, corpus: str = "prose", *, t1: pd.DataFrame | None = None,
           progress: bool = True, train: bool = True) -> pd.DataFrame:
    """Table 2: the failing Table 1 models retrained with a longer L_tr (``sweeps.table2``),
    measured at the same absolute L_ex as Table 1. r(L) is taken against ppl at the new
    L_tr; "extrapolates" looks at new L_tr < L <= 16 x (Table 1's L_tr), the same absolute
    horizon as Table 1. Empty when no Table 1 model fails."""
    t1 = table1(preset, corpus, progress=progress, train=train) if t1 is None else t1
    cols = ["family", "value", "label", "pos", "corpus", "old_l_tr", "old_erf", "old_erf_capped", "l_tr", "covers_erf",
            "run_key", "draw"]
    rows = []
    for old, spec in progress_bar(_table2_pairs(preset, t1, corpus), "Table 2", progress):
        fam_pos = FAMILIES[old["family"]].pos
        run = run_of(preset, spec, train=train, progress=progress)
        l_tr, old_l_tr = _l_tr(run), int(old["l_tr"])
        # same absolute L_ex, plus the new L_tr; a shipped model without weights has only the
        # lengths its long run measured (L_tr x length_mults), not the shorter ones. Where the
        # long run measured the model on every test document, those numbers (claim 7's)
        wanted = sorted(set(lengths_of(t1)) | {l_tr})
        every = run.measurable(wanted, "documents")
        draw, lengths = ("documents", every) if l_tr in every and len(every) > 1 else ("uniform", run.measurable(wanted))
        old_erf, capped = int(old["erf"]), flag(old.get("erf_capped"))
        # a capped ERF is a lower bound: an L_tr at or above it may still fall short of the field
        covers = False if l_tr < old_erf else (None if capped else True)
        row = {"family": old["family"], "value": old["value"], "label": spec.label, "pos": fam_pos,
               "corpus": corpus, "old_l_tr": old_l_tr, "old_erf": old_erf, "old_erf_capped": capped, "l_tr": l_tr,
               "covers_erf": covers, "run_key": run.key, "draw": draw}
        res = measure_ppl(run, lengths=lengths, draw=draw)
        # the same absolute horizon as Table 1: 16 x the old L_tr, i.e. a smaller multiple of the new one
        add_ppl_columns(row, res, l_tr, horizon=max(1, EXTRAPOLATION_HORIZON * old_l_tr // l_tr))
        add_erf_columns(row, measure_erf(run))
        rows.append(row)
    return pd.DataFrame(rows, columns=None if rows else cols)


# --------------------------------------------------------------------------------------
# Figure 7 (Section 5): Sinusoidal at two L_tr, and Rotary
# --------------------------------------------------------------------------------------
def figure7_models(preset: presets.Preset, corpus: str = "prose") -> list[Spec]:
    """Figure 7's models: Sinusoidal at each L_tr of the sweep (and, where the preset trains
    it, with the paper's embeddings at each L_tr of ``sweeps.paper_embeddings_l_tr``), and
    Rotary at the preset's L_tr where the preset trains it (``"rotary"`` in its
    ``sweeps.beside_figure7``)."""
    base = preset.train.l_tr
    specs = []
    for l_tr, over in preset.sinusoidal_runs():
        specs.append(make_spec(f"Sinusoidal, L_tr = {int(l_tr)}", "sinusoidal", corpus, family="sinusoidal",
                               value=int(l_tr), **over))
    for l_tr, over in preset.paper_embedding_runs():  # as the paper's code trains it: embeddings unscaled
        specs.append(make_spec(f"Sinusoidal, paper's embeddings, L_tr = {int(l_tr)}", "sinusoidal", corpus,
                               family="sinusoidal", value=int(l_tr), **over))
    if "rotary" in preset.sweeps.beside_figure7:
        specs.append(make_spec(f"Rotary, L_tr = {base}", "rotary", corpus, family="rotary", value=base))
    return specs


def rotary_model(preset: presets.Preset, corpus: str = "prose") -> Spec:
    """Figure 7's Rotary model; a one-line error where the preset trains none."""
    spec = next((s for s in figure7_models(preset, corpus) if s.pos == "rotary"), None)
    if spec is None:
        raise UserError(f"the {preset.name} preset trains no Rotary model (its sweeps.beside_figure7 leaves it out): "
                        f"choose a preset that does, e.g. --scale long")
    return spec


def figure7(preset: presets.Preset, corpus: str = "prose", *, progress: bool = True, train: bool = True) -> pd.DataFrame:
    """Figure 7: one row per model (Sinusoidal at each L_tr of the sweep, Rotary): perplexity
    at its own L_tr x length_mults, ERF numbers on segments of erf_length_mult x (the preset's
    L_tr) for every model (the same last token, as in the paper; a shipped model without
    weights gives the segment it was measured on, in ``erf_length``), and the gradient jump."""
    length = preset.train.l_tr * preset.eval.erf_length_mult
    rows = []
    for spec in progress_bar(figure7_models(preset, corpus), "Figure 7", progress):
        run = run_of(preset, spec, train=train, progress=progress)
        l_tr = _l_tr(run)
        row = {"label": spec.label, "pos": spec.pos, "corpus": corpus, "l_tr": l_tr,
               "default_l_tr": l_tr == preset.train.l_tr, "run_key": run.key,
               "scale_embeddings": run.model_cfg.scale_embeddings}
        add_ppl_columns(row, measure_ppl(run), l_tr)
        rf = measure_erf(run, length=run.erf_segment(length))
        add_erf_columns(row, rf)
        row.update(gradient_jump(rf["normalized"], l_tr))
        rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------
# Table 3 and Figure 11 (Section 6)
# --------------------------------------------------------------------------------------
def corpora_of(preset: presets.Preset, corpora=None) -> list[str]:
    if corpora is None:
        return list(preset.sweeps.corpora)
    return [corpora] if isinstance(corpora, str) else list(corpora)


def table3_models(preset: presets.Preset, corpora=None, seed: int | None = None, positions=None) -> list[Spec]:
    """Table 3's models; ``seed``: the same models from another training seed;
    ``positions``: other schemes than the preset's Table 3 ones, in the same format."""
    over = {} if seed is None or seed == preset.train.seed else {"seed": int(seed)}
    positions = preset.sweeps.table3_pos if positions is None else positions
    settings = {p: scheme_settings(preset, p) for p in positions}  # loads a scheme of one's own: its title too
    return [make_spec(model_title(p), p, c, family="table3", value=p, **over, **settings[p])
            for c in corpora_of(preset, corpora) for p in positions]


def table3(preset: presets.Preset, corpora=None, *, progress: bool = True, train: bool = True,
           seed: int | None = None, positions=None, record: dict | None = None) -> pd.DataFrame:
    """Table 3: one row per (corpus, scheme): perplexity at L_tr x length_mults, r(L),
    extrapolates, learnable or not, and training tokens/s: timed now (:func:`training_speed`),
    or read from ``record`` (:func:`rflens.experiments.speed.record_speed`) when it has every
    scheme; ``speed_source`` says which.
    ``seed``: the models trained from another seed (the preset's by default);
    ``positions``: the schemes (default: the preset's Table 3 ones)."""
    rows = []
    specs = table3_models(preset, corpora, seed, positions)
    if not specs:
        raise UserError(f"the {preset.name} preset trains no Table 3 model (its sweeps name no scheme for it)")
    speed = (record or {}).get("tokens_per_s", {})
    source = f"recorded on {record.get('machine')}, {record.get('recorded')}" if record else None
    if any(s.pos not in speed for s in specs):
        speed = training_speed(preset, list(dict.fromkeys(s.pos for s in specs)), progress=progress)
        source = "timed when the table was made"
    for spec in progress_bar(specs, "Table 3", progress):
        run = run_of(preset, spec, train=train, progress=progress)
        row = {"corpus": spec.corpus, "pos": spec.pos, "label": spec.label,
               "learnable": schemes.learnable(spec.pos), "l_tr": _l_tr(run), "run_key": run.key}
        res = measure_ppl(run)
        add_ppl_columns(row, res, _l_tr(run))
        row["nll"] = segment_nlls(res)  # for the claims' paired comparisons between schemes
        row["segment_docs"] = res.get("segment_docs")  # ... which resample whole documents
        row["tokens_per_s"] = float(np.median(speed[spec.pos]))  # measured side by side (training_speed)
        row["tokens_per_s_rounds"] = list(speed[spec.pos])
        row["speed_source"] = source
        rows.append(row)
    return pd.DataFrame(rows)


def table3_stored(preset: presets.Preset, *, progress: bool = True) -> pd.DataFrame:
    """Table 3 over the corpora whose models are all trained or shipped, training nothing;
    ``attrs["lacking_corpora"]`` names the others, so that a claim over every corpus is not
    decided on part of them. No corpus complete: the first one's NotStored. Its speeds are
    the preset's recorded ones (:func:`rflens.experiments.speed.load_speed_record`: a shipped
    bundle's, measured where its models were) where there is a record, timed now where not."""
    from rflens.store.runs import NotStored

    record = load_speed_record(preset)
    parts, lacking, first = [], [], None
    for corpus in corpora_of(preset):
        try:
            parts.append(table3(preset, corpus, progress=progress, train=False, record=record))
        except NotStored as err:
            lacking.append(corpus)
            first = first or err
    if not parts:
        raise first or UserError(f"the {preset.name} preset names no corpus for Table 3")
    out = pd.concat(parts, ignore_index=True)
    out.attrs["lacking_corpora"] = lacking
    return out


def figure11(preset: presets.Preset, corpus: str = "prose", *, progress: bool = True, train: bool = True) -> pd.DataFrame:
    """Figure 11: ERF, share of the gradient in the last L_tr tokens for Sandwich, KERPLE, T5."""
    rows = []
    for spec in progress_bar(models_of(preset, "figure11", corpus), "Figure 11", progress):
        run = run_of(preset, spec, train=train, progress=progress)
        row = {"label": spec.label, "pos": spec.pos, "corpus": corpus, "l_tr": _l_tr(run), "run_key": run.key}
        add_erf_columns(row, measure_erf(run))
        rows.append(row)
    return pd.DataFrame(rows)


def d_bar_values(preset: presets.Preset) -> list[int]:
    return list(preset.sweeps.d_bar)


# --------------------------------------------------------------------------------------
# Evaluation protocols (footnote 2, Figure 3)
# --------------------------------------------------------------------------------------
def protocols(preset: presets.Preset, corpus: str = "prose", positions: Iterable[str] = PROTOCOL_POS, *,
              progress: bool = True, train: bool = True) -> pd.DataFrame:
    """Perplexity of the same models under the three protocols at L_tr x length_mults:
    one row per (model, protocol, L_ex)."""
    rows = []
    for spec in progress_bar(_scheme_specs(positions, corpus, "protocols"), "protocols", progress):
        run = run_of(preset, spec, train=train, progress=progress)
        for proto in PROTOCOLS:
            res = measure_ppl(run, protocol=proto)
            for i, L in enumerate(res["lengths"]):
                rows.append({"label": spec.label, "pos": spec.pos, "corpus": corpus, "protocol": proto,
                             "l_tr": _l_tr(run), "l_ex": int(L), "ppl": float(res["ppl"][i]),
                             "ci_low": float((res.get("ci_low") or [math.nan] * (i + 1))[i]),
                             "ci_high": float((res.get("ci_high") or [math.nan] * (i + 1))[i])})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------
# receptive-field curves for the explorers
# --------------------------------------------------------------------------------------
def _scheme_specs(positions, corpus: str, family: str) -> list[Spec]:
    """One model per scheme at the preset's settings."""
    return [make_spec(model_title(p), p, corpus, family=family, value=p) for p in positions]


def models_of(preset: presets.Preset, experiment: str, corpus: str = "prose") -> list[Spec]:
    if experiment == "table1":
        return table1_models(preset, corpus)
    if experiment == "figure7":
        return figure7_models(preset, corpus)
    if experiment == "figure11":
        return _scheme_specs(FIGURE11_POS, corpus, "figure11")
    if experiment == "table3":
        return table3_models(preset, corpus)
    if experiment == "protocols":
        return _scheme_specs(PROTOCOL_POS, corpus, "protocols")
    raise UserError(f"unknown experiment {experiment!r}: use table1, figure7, figure11, table3 or protocols")


def erf_curves(preset: presets.Preset, models, corpus: str = "prose", *, length: int | None = None,
               progress: bool = False, train: bool = True) -> dict[str, dict]:
    """{label: receptive-field result} (normalized, cumulative, erf, share_in_ltr, l_tr, ...)
    for an experiment's models (``models`` = "table1", "figure7", ... or a list of Spec).
    Cached in the run store, so this is fast once the experiment has run."""
    specs = models_of(preset, models, corpus) if isinstance(models, str) else list(models)
    if length is None and isinstance(models, str) and models == "figure7":
        length = preset.train.l_tr * preset.eval.erf_length_mult
    out = {}
    for spec in progress_bar(specs, "receptive fields", progress):
        run = run_of(preset, spec, train=train, progress=progress)
        rf = dict(measure_erf(run, length=length))
        rf.setdefault("l_tr", _l_tr(run))
        rf["label"] = spec.label
        rf["family"] = spec.family  # the figures colour and group the models by family
        out[spec.label] = rf
    return out


def table2_curves(preset: presets.Preset, t2: pd.DataFrame, corpus: str = "prose") -> dict[str, dict]:
    """Receptive-field curves of the retrained Table 2 models."""
    specs = []
    for _, row in t2.iterrows():
        fam = FAMILIES[row["family"]]
        specs.append(make_spec(row["label"], fam.pos, corpus, family=row["family"], value=row["value"],
                               **{fam.setting: row["value"], "l_tr": int(row["l_tr"])}))
    return erf_curves(preset, specs, corpus)


# --------------------------------------------------------------------------------------
# every model of the book, and what training it costs (Chapter 11)
# --------------------------------------------------------------------------------------
def table2_models(preset: presets.Preset, corpus: str = "prose") -> list[Spec]:
    """Every retraining ``sweeps.table2`` lists, whether or not its Table 1 model fails."""
    specs = []
    for entry in preset.sweeps.table2:
        fam = FAMILIES[entry.family]
        # the ERF is measured on segments of erf_length_mult x L_tr: at most that long
        over = entry.training(preset.train.l_tr, preset.train.batch_size, preset.eval.erf_length_mult * preset.train.l_tr)
        specs.append(make_spec(f"{family_label(entry.family, entry.value, preset.train.l_tr, preset.model.n_layer)}, "
                               f"L_tr = {over['l_tr']}",
                               fam.pos, corpus,
                               family=entry.family, value=entry.value, **{fam.setting: entry.value}, **over))
    return specs


# --------------------------------------------------------------------------------------
# FIRE (Chapter 12), a scheme of one's own in Table 3's format
# --------------------------------------------------------------------------------------
FIRE_FILE = package_repo() / "book" / "schemes" / "fire.py"  # registers "fire" (rflens.register_scheme)
def scheme_settings(preset, pos: str) -> dict:
    """Settings a scheme gets beside the preset's: FIRE's threshold L starts at L_tr (its
    ``max_distance``), so that its progressive normalisation starts where training ended."""
    if pos != "fire":
        return {}
    schemes.load_files(FIRE_FILE)
    return {"max_distance": int(preset.train.l_tr)}
