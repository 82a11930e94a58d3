"""The paper's experiments as functions of a scale, each returning a pandas DataFrame.

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

Every model comes from the run store (:func:`rflens.runs.get_run`: trained once, then
loaded) and every measurement is cached there (``run.cached``), so a second call of any
function here only reads JSON. Two experiments that need the same configuration share the
model: ALiBi with Delta = 0 on prose is the Table 1 row, the Table 3 entry and the
protocol-comparison model at once.

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

from . import scales
from .config import PROTOCOLS
from .errors import UserError
from .results import (BREAKS, EXTRAPOLATION_HORIZON, EXTRAPOLATION_TOLERANCE, add_erf_columns, add_ppl_columns, display_table,  # noqa: F401
                      extrapolates, lengths_of, long_form, row_ppl)
from .scales import FAMILIES
from .storage import package_repo
from . import schemes
from .schemes import title

# The schemes of two figures of the paper: Figure 11 (Section 6) compares the receptive
# fields of Sandwich and the learnable log-like biases; the protocol comparison (footnote 2,
# Figure 3) uses an RPE, Sandwich and an APE.
FIGURE11_POS = ("sandwich", "kerple_log", "t5")
PROTOCOL_POS = ("alibi", "sandwich", "sinusoidal")
# Section 7: Sandwich, its smoothed log curve and the learnable biases of the same family
LOG_LIKE_POS = ("sandwich", "smoothed", "kerple_log", "t5")
FAMILY_TITLES = {name: fam.title for name, fam in FAMILIES.items()}
# Figure 7: a gradient peak counts as "at the absolute position L_tr" within 5% of L_tr
JUMP_TOLERANCE = 0.05


def _num(v) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def family_label(family: str, value, l_tr: int | None = None) -> str:
    """The row label of a Table 1 model, e.g. "w=32" or "Δ=-3". ALiBi exponents at an
    L_tr other than the paper's 512 also name the paper's value they map to
    (rflens.scales.mapped_exponents): "Δ=-6 (paper's -3)"."""
    label = f"{FAMILIES[family].symbol}={_num(value)}"
    if family in ("slope_shift", "same_slope") and l_tr is not None and l_tr != scales.PAPER_L_TR:
        label += f" (paper's {_num(value - scales.mapped_exponents((0,), l_tr)[0])})"  # the mapping undone
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


_RUNS: dict = {}  # (scale, pos, corpus, overrides, train) -> Run, so one process asks the store once


def get_scale(scale) -> scales.Scale:
    """The preset object for a scale name (or the object itself)."""
    return scales.get(scale) if isinstance(scale, str) else scale


def _run(scale: str, spec: Spec, *, train: bool = True, progress: bool = False):
    """The run of ``spec`` at ``scale`` (rflens.runs.get_run), asked of the store once per process.
    With ``progress``: the training bar of a model the store lacks, and a line (on stderr)
    naming the model and whether it was trained now or came from the store."""
    import sys

    from .progress import model_label
    from .runs import NotStored, get_run

    sc = get_scale(scale)
    train = train and not sc.shipped  # a shipped preset's models come from its bundle
    key = (scale, spec.pos, spec.corpus, spec.overrides, train)
    if key not in _RUNS:
        try:
            run = get_run(scale, spec.pos, spec.corpus, spec.settings, train=train, progress=progress)
        except NotStored:
            if not sc.shipped:
                raise
            from .emergence import command_for
            from .runs import resolve

            command = command_for(sc.name, *resolve(sc.name, spec.pos, spec.corpus, spec.settings)[1:])
            raise NotStored(f"the {sc.name} bundle has no finished {model_label(spec.pos, spec.corpus, spec.settings)}: "
                            f"train it with `{command}`") from None
        if progress:
            source = "shipped" if getattr(run, "shipped", False) else "from the run store" if run.reused else "trained now"
            tqdm.write(f"{spec.label} ({model_label(spec.pos, spec.corpus, spec.settings)}): {source}", file=sys.stderr)
        _RUNS[key] = run
    return _RUNS[key]


def _bar(items, desc: str, progress: bool):
    items = list(items)
    return tqdm(items, desc=desc, disable=not progress or not items, leave=False, unit="model")


def _l_tr(run) -> int:
    return int(run.train_cfg.l_tr)


# --------------------------------------------------------------------------------------
# measurements (cached in the run store by rflens.evaluate / rflens.receptive)
# --------------------------------------------------------------------------------------
def measure_ppl(run, *, lengths=None, protocol: str = "last_token", n=None) -> dict:
    from .evaluate import perplexity

    return perplexity(run, protocol=protocol, lengths=lengths, n=n, progress=False)


def measure_erf(run, *, length=None, threshold=None) -> dict:
    from .receptive import receptive_field

    return receptive_field(run, length=length, threshold=threshold, progress=False)


# --------------------------------------------------------------------------------------
# Table 1 (Section 3) with the receptive-field numbers of Section 4
# --------------------------------------------------------------------------------------
def table1_models(scale, corpus: str = "prose") -> list[Spec]:
    sc = get_scale(scale)
    return [make_spec(family_label(family, v, sc.train.l_tr), fam.pos, corpus, family=family, value=v,
                      **{fam.setting: v})
            for family, fam in FAMILIES.items() for v in getattr(sc.sweeps, family)]


def table1(scale: str = scales.DEFAULT_SCALE, corpus: str = "prose", *, progress: bool = True, train: bool = True) -> pd.DataFrame:
    """Table 1: one row per model (family, value, label, ppl@L, r@L, extrapolates, erf,
    share_in_ltr, theoretical), last-token perplexity at L_ex = L_tr x length_mults."""
    rows = []
    for spec in _bar(table1_models(scale, corpus), "Table 1", progress):
        run = _run(scale, spec, train=train, progress=progress)
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


def _table2_plan(sc, t1: pd.DataFrame) -> list[tuple[dict, dict]]:
    """Pairs (failing Table 1 row, training settings of the retrained model) from the
    scale's ``sweeps.table2``.

    Each entry names one Table 1 model (its family and value) and the longer training
    length, as the paper does for w = 160 and Delta = 6. Only models that fail in Table 1
    at this scale are retrained: a model that already extrapolates has nothing to fix, and
    one the scale's Table 1 does not have is left out.
    """
    plan = []
    for entry in sc.sweeps.table2:
        row = _table1_row(t1, entry.family, entry.value)
        if row is None:
            continue  # not in this scale's Table 1 sweep
        ext = row["extrapolates"]
        if ext is None or (isinstance(ext, float) and math.isnan(ext)) or bool(ext):
            continue  # extrapolates already (or was not measured): nothing to fix
        plan.append((row, entry.training(int(row["l_tr"]), sc.train.batch_size, int(row["erf"]))))
    return plan


def _table2_pairs(sc, t1: pd.DataFrame, corpus: str) -> list[tuple[dict, Spec]]:
    """(failing Table 1 row, the spec of its retrained model) for every entry of the plan."""
    pairs = []
    for old, over in _table2_plan(sc, t1):
        fam = FAMILIES[old["family"]]
        pairs.append((old, make_spec(f'{old["label"]}, L_tr={over["l_tr"]}', fam.pos, corpus, family=old["family"],
                                     value=old["value"], **{fam.setting: old["value"]}, **over)))
    return pairs


def table2_specs(scale, t1: pd.DataFrame, corpus: str = "prose") -> list[Spec]:
    """The models Table 2 trains, given Table 1's results: one per failing model that
    ``sweeps.table2`` lists, with the training length that covers its measured ERF."""
    return [spec for _, spec in _table2_pairs(get_scale(scale), t1, corpus)]


def table2_skipped(scale, t1: pd.DataFrame) -> list[str]:
    """Labels of the Table 1 models of ``sweeps.table2`` that were not retrained because
    they already extrapolate."""
    sc = get_scale(scale)
    planned = {row["label"] for row, _ in _table2_plan(sc, t1)}
    listed = [_table1_row(t1, e.family, e.value) for e in sc.sweeps.table2]
    return [row["label"] for row in listed if row is not None and row["label"] not in planned]


def table2(scale: str = scales.DEFAULT_SCALE, corpus: str = "prose", *, t1: pd.DataFrame | None = None,
           progress: bool = True, train: bool = True) -> pd.DataFrame:
    """Table 2: the failing Table 1 models retrained with a longer L_tr (``sweeps.table2``),
    measured at the same absolute L_ex as Table 1. r(L) is taken against ppl at the new
    L_tr; "extrapolates" looks at new L_tr < L <= 16 x (Table 1's L_tr), the same absolute
    horizon as Table 1. Empty when no Table 1 model fails."""
    sc = get_scale(scale)
    t1 = table1(scale, corpus, progress=progress, train=train) if t1 is None else t1
    cols = ["family", "value", "label", "pos", "corpus", "old_l_tr", "old_erf", "l_tr", "covers_erf", "run_key"]
    rows = []
    for old, spec in _bar(_table2_pairs(sc, t1, corpus), "Table 2", progress):
        fam_pos = FAMILIES[old["family"]].pos
        run = _run(scale, spec, train=train, progress=progress)
        l_tr, old_l_tr = _l_tr(run), int(old["l_tr"])
        lengths = sorted(set(lengths_of(t1)) | {l_tr})  # same absolute L_ex, plus the new L_tr
        row = {"family": old["family"], "value": old["value"], "label": spec.label, "pos": fam_pos,
               "corpus": corpus, "old_l_tr": old_l_tr, "old_erf": int(old["erf"]), "l_tr": l_tr,
               "covers_erf": bool(l_tr >= int(old["erf"])), "run_key": run.key}
        res = measure_ppl(run, lengths=lengths)
        # the same absolute horizon as Table 1: 16 x the old L_tr, i.e. a smaller multiple of the new one
        add_ppl_columns(row, res, l_tr, horizon=max(1, EXTRAPOLATION_HORIZON * old_l_tr // l_tr))
        add_erf_columns(row, measure_erf(run))
        rows.append(row)
    return pd.DataFrame(rows, columns=None if rows else cols)


# --------------------------------------------------------------------------------------
# Figure 7 (Section 5): Sinusoidal at two L_tr, and Rotary
# --------------------------------------------------------------------------------------
def figure7_models(scale, corpus: str = "prose") -> list[Spec]:
    sc = get_scale(scale)
    base = sc.train.l_tr
    specs = []
    for l_tr in sc.sweeps.sinusoidal_l_tr:
        # the default L_tr gets no override, so it is the very run of Table 3
        over = {} if int(l_tr) == base else {"l_tr": int(l_tr)}
        specs.append(make_spec(f"Sinusoidal, L_tr={int(l_tr)}", "sinusoidal", corpus, family="sinusoidal",
                               value=int(l_tr), **over))
    specs.append(make_spec(f"Rotary, L_tr={base}", "rotary", corpus, family="rotary", value=base))
    return specs


def few_recent(length: int) -> int:
    """How many of the most recent tokens to skip when looking for the gradient jump.

    The last few tokens always carry most of the gradient (local context); the jump of
    Figure 7 is a second peak far from them. "Few" = 2% of the segment, at least 4 tokens.
    """
    return max(4, math.ceil(0.02 * length))


def gradient_jump(normalized, l_tr: int) -> dict:
    """Where the normalised gradient peaks outside the most recent few tokens (Figure 7).

    ``normalized[i]`` belongs to the token i positions before the last one, so in a segment
    of length L its absolute (0-based) position is ``abs_pos = L - 1 - i``. The paper reads
    the peak as "the L_tr-th token"; we call it close when ``|abs_pos - L_tr| <= 5% of
    L_tr``, with at least one position of slack so that the 1-based reading (0-based
    L_tr - 1) is also inside the window at small L_tr.
    """
    g = np.asarray(normalized, dtype=float)
    L = len(g)
    skip = few_recent(L)
    if L <= skip:
        return {"jump_index": None, "jump_abs_pos": None, "jump_ok": None, "jump_tolerance": None, "few": skip}
    i = int(skip + np.argmax(g[skip:]))
    abs_pos = L - 1 - i
    tol = max(1.0, JUMP_TOLERANCE * l_tr)
    return {"jump_index": i, "jump_abs_pos": abs_pos, "jump_ok": bool(abs(abs_pos - l_tr) <= tol),
            "jump_tolerance": tol, "few": skip, "jump_share": float(g[i])}


def figure7(scale: str = scales.DEFAULT_SCALE, corpus: str = "prose", *, progress: bool = True, train: bool = True) -> pd.DataFrame:
    """Figure 7: one row per model (Sinusoidal at each L_tr of the sweep, Rotary): perplexity
    at its own L_tr x length_mults, ERF numbers on segments of 4 x (the scale's L_tr) for
    every model (the same last token, as in the paper), and the gradient jump."""
    sc = get_scale(scale)
    length = sc.train.l_tr * sc.eval.erf_length_mult
    rows = []
    for spec in _bar(figure7_models(scale, corpus), "Figure 7", progress):
        run = _run(scale, spec, train=train, progress=progress)
        l_tr = _l_tr(run)
        row = {"label": spec.label, "pos": spec.pos, "corpus": corpus, "l_tr": l_tr,
               "default_l_tr": l_tr == sc.train.l_tr, "run_key": run.key}
        add_ppl_columns(row, measure_ppl(run), l_tr)
        rf = measure_erf(run, length=length)
        add_erf_columns(row, rf)
        row.update(gradient_jump(rf["normalized"], l_tr))
        rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------
# Table 3 and Figure 11 (Section 6)
# --------------------------------------------------------------------------------------
def corpora_of(scale, corpora=None) -> list[str]:
    sc = get_scale(scale)
    if corpora is None:
        return list(sc.sweeps.corpora)
    return [corpora] if isinstance(corpora, str) else list(corpora)


def table3_models(scale, corpora=None, seed: int | None = None, positions=None) -> list[Spec]:
    """Table 3's models; ``seed``: the same models from another training seed;
    ``positions``: other schemes than the preset's Table 3 ones, in the same format."""
    sc = get_scale(scale)
    over = {} if seed is None or seed == sc.train.seed else {"seed": int(seed)}
    positions = sc.sweeps.table3_pos if positions is None else positions
    settings = {p: scheme_settings(sc, p) for p in positions}  # loads a scheme of one's own: its title too
    return [make_spec(title(p), p, c, family="table3", value=p, **over, **settings[p])
            for c in corpora_of(sc, corpora) for p in positions]


SPEED_ROUNDS = 12  # interleaved rounds of training_speed: enough for an interval of a speed ratio
SPEED_STEPS = 3  # timed training steps per scheme and round


def training_speed(scale, positions=None, *, rounds: int = SPEED_ROUNDS, steps: int = SPEED_STEPS,
                   progress: bool = True, refresh: bool = False) -> dict[str, list[float]]:
    """Training tokens/s of each scheme at this scale's model size, one value per round of
    steps timed side by side (:func:`rflens.speed.time_steps`), so that two schemes can be
    compared round by round. ``positions`` default to the scale's Table 3 schemes. Cached
    in the run store (``speed/``) by scale, schemes, code version and thread count.
    """
    import hashlib
    import json

    import torch

    from . import runs, storage
    from .speed import time_steps

    sc = get_scale(scale)
    positions = [str(p) for p in (sc.sweeps.table3_pos if positions is None else positions)]
    params = {"scale": sc.name, "positions": positions, "rounds": rounds, "steps": steps,
              "code": runs.code_version(), "threads": torch.get_num_threads()}
    key = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]
    path = storage.runs_dir() / "speed" / f"{sc.name}-{key}.json"
    if path.is_file() and not refresh:
        return storage.read_json(path)["tokens_per_s"]
    seconds = time_steps({p: sc.model.replace(pos=p) for p in positions}, sc.train, rounds=rounds, steps=steps,
                         progress=progress)
    tokens = sc.train.batch_size * sc.train.l_tr
    result = {p: [tokens / t for t in s] for p, s in seconds.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    storage.write_json(path, {"params": params, "tokens_per_s": result})
    return result


def speed_ratio(a: list[float], b: list[float], level: float = 0.95, n_boot: int = 2000) -> tuple[float, float, float]:
    """The speed of a over b from paired rounds: the geometric mean of the per-round ratios
    a_k / b_k and its percentile-bootstrap interval over rounds. Returns (ratio, low, high)."""
    logs = np.log(np.asarray(a, dtype=float) / np.asarray(b, dtype=float))
    idx = np.random.default_rng(0).integers(0, len(logs), size=(n_boot, len(logs)))
    lo, hi = np.quantile(logs[idx].mean(1), [(1 - level) / 2, (1 + level) / 2])
    return float(np.exp(logs.mean())), float(np.exp(lo)), float(np.exp(hi))


def table3(scale: str = scales.DEFAULT_SCALE, corpora=None, *, progress: bool = True, train: bool = True,
           seed: int | None = None, positions=None) -> pd.DataFrame:
    """Table 3: one row per (corpus, scheme): perplexity at L_tr x length_mults, r(L),
    extrapolates, learnable or not, and training tokens/s (:func:`training_speed`).
    ``seed``: the models trained from another seed (the preset's by default);
    ``positions``: the schemes (default: the preset's Table 3 ones)."""
    rows = []
    specs = table3_models(scale, corpora, seed, positions)
    speed = training_speed(scale, list(dict.fromkeys(s.pos for s in specs)), progress=progress)
    for spec in _bar(specs, "Table 3", progress):
        run = _run(scale, spec, train=train, progress=progress)
        row = {"corpus": spec.corpus, "pos": spec.pos, "label": spec.label,
               "learnable": schemes.learnable(spec.pos), "l_tr": _l_tr(run), "run_key": run.key}
        add_ppl_columns(row, measure_ppl(run), _l_tr(run))
        row["tokens_per_s"] = float(np.median(speed[spec.pos]))  # measured side by side (training_speed)
        row["tokens_per_s_rounds"] = list(speed[spec.pos])
        rows.append(row)
    return pd.DataFrame(rows)


def figure11(scale: str = scales.DEFAULT_SCALE, corpus: str = "prose", *, progress: bool = True, train: bool = True) -> pd.DataFrame:
    """Figure 11: ERF, share of the gradient in the last L_tr tokens for Sandwich, KERPLE, T5."""
    rows = []
    for spec in _bar(models_of(scale, "figure11", corpus), "Figure 11", progress):
        run = _run(scale, spec, train=train, progress=progress)
        row = {"label": spec.label, "pos": spec.pos, "corpus": corpus, "l_tr": _l_tr(run), "run_key": run.key}
        add_erf_columns(row, measure_erf(run))
        rows.append(row)
    return pd.DataFrame(rows)


def d_bar_values(scale) -> list[int]:
    return list(get_scale(scale).sweeps.d_bar)


# --------------------------------------------------------------------------------------
# Evaluation protocols (footnote 2, Figure 3)
# --------------------------------------------------------------------------------------
def protocols(scale: str = scales.DEFAULT_SCALE, corpus: str = "prose", positions: Iterable[str] = PROTOCOL_POS, *,
              progress: bool = True, train: bool = True) -> pd.DataFrame:
    """Perplexity of the same models under the three protocols at L_tr x length_mults:
    one row per (model, protocol, L_ex)."""
    rows = []
    for spec in _bar(_scheme_specs(positions, corpus, "protocols"), "protocols", progress):
        run = _run(scale, spec, train=train, progress=progress)
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
    return [make_spec(title(p), p, corpus, family=family, value=p) for p in positions]


def models_of(scale, experiment: str, corpus: str = "prose") -> list[Spec]:
    if experiment == "table1":
        return table1_models(scale, corpus)
    if experiment == "figure7":
        return figure7_models(scale, corpus)
    if experiment == "figure11":
        return _scheme_specs(FIGURE11_POS, corpus, "figure11")
    if experiment == "table3":
        return table3_models(scale, corpus)
    if experiment == "protocols":
        return _scheme_specs(PROTOCOL_POS, corpus, "protocols")
    raise UserError(f"unknown experiment {experiment!r}: use table1, figure7, figure11, table3 or protocols")


def erf_curves(scale: str, models, corpus: str = "prose", *, length: int | None = None,
               progress: bool = False, train: bool = True) -> dict[str, dict]:
    """{label: receptive-field result} (normalized, cumulative, erf, share_in_ltr, l_tr, ...)
    for an experiment's models (``models`` = "table1", "figure7", ... or a list of Spec).
    Cached in the run store, so this is fast once the experiment has run."""
    sc = get_scale(scale)
    specs = models_of(scale, models, corpus) if isinstance(models, str) else list(models)
    if length is None and isinstance(models, str) and models == "figure7":
        length = sc.train.l_tr * sc.eval.erf_length_mult
    out = {}
    for spec in _bar(specs, "receptive fields", progress):
        run = _run(scale, spec, train=train, progress=progress)
        rf = dict(measure_erf(run, length=length))
        rf.setdefault("l_tr", _l_tr(run))
        rf["label"] = spec.label
        out[spec.label] = rf
    return out


def table2_curves(scale: str, t2: pd.DataFrame, corpus: str = "prose") -> dict[str, dict]:
    """Receptive-field curves of the retrained Table 2 models."""
    specs = []
    for _, row in t2.iterrows():
        fam = FAMILIES[row["family"]]
        specs.append(make_spec(row["label"], fam.pos, corpus, family=row["family"], value=row["value"],
                               **{fam.setting: row["value"], "l_tr": int(row["l_tr"])}))
    return erf_curves(scale, specs, corpus)


# --------------------------------------------------------------------------------------
# every model of the book, and what training it costs (Chapter 10)
# --------------------------------------------------------------------------------------
def table2_models(scale, corpus: str = "prose") -> list[Spec]:
    """Every retraining ``sweeps.table2`` lists, whether or not its Table 1 model fails."""
    sc = get_scale(scale)
    specs = []
    for entry in sc.sweeps.table2:
        fam = FAMILIES[entry.family]
        # the ERF is measured on segments of erf_length_mult x L_tr: at most that long
        over = entry.training(sc.train.l_tr, sc.train.batch_size, sc.eval.erf_length_mult * sc.train.l_tr)
        specs.append(make_spec(f"{family_label(entry.family, entry.value, sc.train.l_tr)}, L_tr={over['l_tr']}",
                               fam.pos, corpus,
                               family=entry.family, value=entry.value, **{fam.setting: entry.value}, **over))
    return specs


# --------------------------------------------------------------------------------------
# Beyond the paper (Chapter 11): rotary stretched at inference; FIRE, a scheme of one's own
# --------------------------------------------------------------------------------------
FIRE_FILE = package_repo() / "book" / "schemes" / "fire.py"  # registers "fire" (rflens.register_scheme)
BEYOND_POS = ("fire", "sandwich", "kerple_log", "t5")  # FIRE beside the learnable log-like biases
ROPE_METHODS = ("plain", "pi", "ntk", "yarn")  # rflens.positional.rope_frequencies


def scheme_settings(sc, pos: str) -> dict:
    """Settings a scheme gets beside the preset's: FIRE's threshold L starts at L_tr (its
    ``max_distance``), so that its progressive normalisation starts where training ended."""
    if pos != "fire":
        return {}
    schemes.load_files(FIRE_FILE)
    return {"max_distance": int(sc.train.l_tr)}


def beyond_models(scale, corpora=None) -> list[Spec]:
    """The models Chapter 11 trains that no other chapter does: FIRE on every corpus (the
    stretched rotary model is Figure 7's, the other schemes Table 3's)."""
    return table3_models(scale, corpora, positions=("fire",))


def fire_table(scale: str = scales.DEFAULT_SCALE, corpora=None, *, progress: bool = True,
               train: bool = True) -> pd.DataFrame:
    """FIRE next to Sandwich, KERPLE and T5, in Table 3's format (:func:`table3`), with each
    model's receptive-field numbers beside it (ERF, share in L_tr, ``erf_within_ltr``)."""
    df = table3(scale, corpora, progress=progress, train=train, positions=BEYOND_POS)
    for i, spec in enumerate(table3_models(scale, corpora, positions=BEYOND_POS)):
        row = add_erf_columns({}, measure_erf(_run(scale, spec, train=train, progress=progress)))
        for k, v in row.items():
            df.loc[i, k] = v
    df["erf_within_ltr"] = df["erf"] <= df["l_tr"]
    return df


def rope_stretching(scale: str = scales.DEFAULT_SCALE, corpus: str = "prose", *, progress: bool = True,
                    train: bool = True) -> pd.DataFrame:
    """Figure 7's rotary model evaluated plain and with each stretching method, no retraining:
    one row per method with Table 1's columns (ppl, paired r and its interval, extrapolates,
    ERF on segments of erf_length_mult x L_tr, share in L_tr), the ratio of each method's
    perplexity to plain rotary's on the same tokens at the longest length (``vs_plain``,
    paired interval ``vs_plain_lo`` / ``vs_plain_hi``), and whether the ERF fits in L_tr.
    The factor of a method at length L_ex is L_ex / L_tr (rflens.config.EvalConfig.rope_for)."""
    from .evaluate import eval_config, perplexity
    from .receptive import receptive_field
    from .results import paired_ratio

    sc = get_scale(scale)
    spec = next(s for s in figure7_models(sc, corpus) if s.pos == "rotary")
    run = _run(scale, spec, train=train, progress=progress)
    l_tr, ev = _l_tr(run), eval_config(run)
    rows, plain = [], None
    for method in _bar(ROPE_METHODS, "rotary stretching", progress):
        e = ev.replace(rope_scaling=None if method == "plain" else method)
        res = perplexity(run, progress=False, eval_cfg=e)
        nll = np.asarray(res["nll_per_segment"])
        plain = nll if plain is None else plain
        row = {"label": "Rotary" if method == "plain" else f"Rotary + {ROPE_TITLES[method]}", "method": method,
               "corpus": corpus, "l_tr": l_tr, "run_key": run.key}
        add_ppl_columns(row, res, l_tr)
        add_erf_columns(row, receptive_field(run, progress=False, eval_cfg=e))
        r, lo, hi = paired_ratio(np.stack([plain[-1], nll[-1]]), seed=ev.seed)
        row.update(vs_plain=float(r[1]), vs_plain_lo=float(lo[1]), vs_plain_hi=float(hi[1]),
                   erf_within_ltr=row["erf"] <= l_tr)
        rows.append(row)
    return pd.DataFrame(rows)


def rope_curves(scale: str = scales.DEFAULT_SCALE, corpus: str = "prose", *, train: bool = True) -> dict[str, dict]:
    """{label: receptive-field result} of the rotary model under each stretching method
    (for :func:`rflens.figures.results.erf_figure`; cached, so fast after :func:`rope_stretching`)."""
    from .evaluate import eval_config
    from .receptive import receptive_field

    spec = next(s for s in figure7_models(get_scale(scale), corpus) if s.pos == "rotary")
    run = _run(scale, spec, train=train)
    out = {}
    for method in ROPE_METHODS:
        label = "Rotary" if method == "plain" else f"Rotary + {ROPE_TITLES[method]}"
        e = eval_config(run).replace(rope_scaling=None if method == "plain" else method)
        out[label] = {**receptive_field(run, progress=False, eval_cfg=e), "label": label}
    return out


ROPE_TITLES = {"plain": "plain", "pi": "position interpolation", "ntk": "NTK-aware base", "yarn": "YaRN"}


def thesis_verdict(df: pd.DataFrame) -> str:
    """Computed sentences (Markdown) on rows with Table 1's columns and an ERF: whether each
    model stays flat up to the longest length (the paired interval of r within 1.10), its
    ERF against L_tr, and for how many rows the paper's thesis holds (flat exactly when the
    ERF fits in L_tr)."""
    if df is None or df.empty:
        return "Nothing was measured."
    longest = max(lengths_of(df))
    parts, agree = [], 0
    for _, row in df.iterrows():
        l_tr = int(row["l_tr"])
        flat, fits = bool(row["extrapolates"]), int(row["erf"]) <= l_tr
        agree += flat == fits
        where = f" ({row['corpus']})" if df["corpus"].nunique() > 1 else ""
        parts.append(f"- **{row['label']}**{where}: r({longest // l_tr} L<sub>tr</sub>) = {row[f'r@{longest}']:.2f} "
                     f"[{row[f'r_lo@{longest}']:.2f}, {row[f'r_hi@{longest}']:.2f}], "
                     f"{'flat' if flat else 'not flat'}; ERF {int(row['erf'])} tokens, "
                     f"{'inside' if fits else 'beyond'} L<sub>tr</sub> = {l_tr}.")
    return "\n".join(parts) + (f"\n\nThe thesis (flat exactly when the ERF fits in L<sub>tr</sub>) describes "
                               f"{agree} of these {len(df)} models.")


# the experiments of model_plan each chapter reads (chapter 9 reads the claims of them all)
CHAPTER_EXPERIMENTS = {"03": ("Table 1",), "04": ("Table 1", "Table 2"), "05": ("Figure 7",),
                       "06": ("Table 3", "Figure 11"), "07": ("Table 3",), "08": ("Protocols",),
                       "09": ("Table 1", "Table 2", "Figure 7", "Table 3", "Figure 11", "Protocols"),
                       "11": ("Figure 7", "Table 3", "Beyond the paper")}


def chapter_experiments(chapters) -> set[str] | None:
    """The experiments of :func:`model_plan` the given chapters read (None: all of them)."""
    return None if chapters is None else {e for c in chapters for e in CHAPTER_EXPERIMENTS.get(c, ())}


def model_plan(scale) -> list[dict]:
    """Every model the book trains at ``scale``, once each: [{"experiment", "pos", "corpus",
    "overrides"}], where ``overrides`` are the settings that differ from the preset.

    From the experiments' own model lists: Table 1, Table 2 (every listed retraining),
    Figure 7, Table 3 on every corpus, Figure 11 and the protocol comparison. A model two
    experiments share is listed once, under the first.
    """
    from .runs import describe, resolve

    sc = get_scale(scale)
    groups = [("Table 1", table1_models(sc)), ("Table 2", table2_models(sc)), ("Figure 7", figure7_models(sc)),
              ("Table 3", table3_models(sc)), ("Figure 11", models_of(sc, "figure11")),
              ("Protocols", models_of(sc, "protocols")), ("Beyond the paper", beyond_models(sc))]
    plan, seen = [], set()
    for experiment, specs in groups:
        for spec in specs:
            _, m, d, t = resolve(sc.name, spec.pos, spec.corpus, spec.settings)
            changed = describe(m, d, t, sc.name)
            key = (spec.pos, spec.corpus, tuple(sorted(changed.items())))
            if key not in seen:
                seen.add(key)
                plan.append({"experiment": experiment, "pos": spec.pos, "corpus": spec.corpus, "overrides": changed})
    return plan


def training_cost(scale, *, gpu_tflops: float = 312.0, mfu: float = 0.4) -> list[dict]:
    """FLOPs and GPU-hours of each model of :func:`model_plan`: training (steps x batch x
    L_tr tokens at ``flops_per_token``) plus last-token evaluation (N segments at each
    L_ex, forward only: a third of the training FLOPs per token). GPU-hours assume
    ``gpu_tflops`` peak (312: an A100 in bf16) at ``mfu`` utilisation."""
    import torch

    from .model import TransformerLM
    from .runs import resolve

    sc = get_scale(scale)
    rows = []
    for item in model_plan(sc):
        _, mcfg, _, tcfg = resolve(sc.name, item["pos"], item["corpus"], item["overrides"])
        with torch.device("meta"):  # sizes only: no memory, no initialisation
            model = TransformerLM(mcfg)
        tokens = tcfg.steps * tcfg.batch_size * tcfg.l_tr
        train_flops = model.flops_per_token(tcfg.l_tr) * tokens
        lengths = [tcfg.l_tr * m for m in sc.eval.length_mults]
        eval_flops = sum(model.flops_per_token(L) / 3.0 * L * sc.eval.n_segments for L in lengths)
        flops = train_flops + eval_flops
        rows.append({**item, "params": model.num_params(non_embedding=False), "l_tr": tcfg.l_tr,
                     "tokens": tokens, "train_flops": train_flops, "eval_flops": eval_flops,
                     "gpu_hours": flops / (gpu_tflops * 1e12 * mfu) / 3600.0})
    return rows



# --------------------------------------------------------------------------------------
# the phenomena pilot (bench/phenomena.py): which CPU-sized models can show Table 1's failures
# --------------------------------------------------------------------------------------
def pilot_table(path=None) -> pd.DataFrame:
    """The measured pilot sweep, one row per model: depth R, width d, L_tr, training tokens,
    the model (``spec``), ppl(L_tr), r at 2..16 L_tr with the paired interval at 16 L_tr,
    the ERF and the training minutes. ``path`` defaults to ``bench/phenomena.json`` of the
    repository; an empty table when it is missing."""
    from .storage import package_repo, read_json

    path = package_repo() / "bench" / "phenomena.json" if path is None else path
    try:
        models = list(read_json(path)["models"].values())
    except (OSError, ValueError, KeyError):
        return pd.DataFrame()
    rows = []
    for m in models:
        row = {"stage": m.get("stage"), "R": m["R"], "d": m["d"], "l_tr": m["l_tr"], "tokens": m.get("tokens_label"),
               "model": m["spec"], "pos": m["pos"], "ppl(L_tr)": m["ppl"][0]}
        for L, r in zip(m["lengths"][1:], m["r"][1:]):
            row[f"r({L // m['l_tr']} L_tr)"] = r
        row["r(16 L_tr) low"], row["r(16 L_tr) high"] = m["r_lo"][-1], m["r_hi"][-1]
        row["max r high"] = max(m["r_hi"][1:])
        row.update({"ERF": m.get("erf"), "minutes": m.get("train_minutes")})
        rows.append(row)
    return pd.DataFrame(rows)


# The pilot's selection rule, fixed before its first result: at one configuration, every
# failing-side model breaks (r(16 L_tr) >= 2, lower bound of the paired interval) while every
# stable-side model stays flat (upper bound of r(L) <= 1.10 at every length).
PILOT_FAILING = ("alibi_max", "win3", "win45")  # the paper's Delta = 8; R*w/L_tr = 3 and 4.5
PILOT_STABLE = ("win1", "alibi_min")  # R*w/L_tr = 1; the paper's Delta = -3


def pilot_summary(df: pd.DataFrame) -> pd.DataFrame:
    """One row per pilot configuration (R, d, L_tr, tokens): the weakest failure on the failing
    side (lowest lower bound of r(16 L_tr)), the strongest rise on the stable side (highest upper
    bound of r), the models missing for the rule, and whether the configuration qualifies."""
    if df.empty:
        return df
    rows = []
    for (R, d, l_tr, tokens), g in df[~df["model"].str.endswith("_bos")].groupby(["R", "d", "l_tr", "tokens"],
                                                                                 sort=False):
        fail, stable = g[g["model"].isin(PILOT_FAILING)], g[g["model"].isin(PILOT_STABLE)]
        missing = sorted(set(PILOT_FAILING + PILOT_STABLE) - set(g["model"]))
        weakest = float(fail["r(16 L_tr) low"].min()) if not fail.empty else math.nan
        rise = float(stable["max r high"].max()) if not stable.empty else math.nan
        fails = not fail.empty and weakest >= BREAKS
        flat = stable.empty or rise <= EXTRAPOLATION_TOLERANCE
        rows.append({"R": R, "d": d, "l_tr": l_tr, "tokens": tokens, "minutes per model": g["minutes"].mean(),
                     "failing side: lowest r(16 L_tr) low": weakest, "stable side: highest r high": rise,
                     "missing": ", ".join(missing) or "-",
                     "qualifies": bool(fails and flat and not missing)})
    return pd.DataFrame(rows)


def seed_spread(path=None) -> dict[str, pd.DataFrame]:
    """The second-seed check (``bench/seeds.py``): {"claims": claims 14 and 15 at each seed,
    "table1": r(16 L_tr) of Table 1's failing side at each seed, "table3": ppl(L_tr) and
    ppl(16 L_tr) of every Table 3 model at each seed}. Empty tables when it has not run."""
    from .storage import package_repo, read_json

    path = package_repo() / "bench" / "seeds.json" if path is None else path
    try:
        res = read_json(path)
    except (OSError, ValueError):
        return {"claims": pd.DataFrame(), "table1": pd.DataFrame(), "table3": pd.DataFrame()}
    claims_rows = [{"claim": int(cid), "seed": int(seed), "result": v["result"], "measured": v["measured"]}
                   for cid, by_seed in res["claims"].items() for seed, v in by_seed.items()]
    t3 = pd.DataFrame(res["table3"]).pivot_table(index=["corpus", "label"], columns="seed",
                                                 values=["ppl_l_tr", "ppl_top"])
    return {"claims": pd.DataFrame(claims_rows).set_index(["claim", "seed"]),
            "table1": pd.DataFrame(res["table1"]).set_index(["label", "seed"]), "table3": t3}
